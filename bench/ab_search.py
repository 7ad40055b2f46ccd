"""Old code against this checkout in ONE process, query by query, answers compared (G6).

    .venv/bin/python bench/ab_search.py --vault V [--vault-old V2] [--old-ref main]
                                        [--queries 620] [--notes 10000]

Why one process: two processes see a machine shared with other work at different moments;
here both searches of a query run back to back. The old code is `git archive <old-ref>
reme_agent` unpacked in a temp folder and imported as the package `reme_old` (its imports
renamed), so both versions live side by side; each opens its own copy of the vault (`cp -a`
it for `--vault-old`: two stores in one process would share chroma's bindings otherwise).

Fairness: the bench's queries come in pairs from the same notes, and a search run right
after the same query finds warm caches; with plain alternation two identical code paths
differed by 1.5 ms p50 (15.5 vs 14.0 ms). So the queries are shuffled and the order is
ABBA (old first in queries 0 and 3 of every 4). `now` is pinned (the recency factor would
otherwise drift between the two runs of a query). Each query's answers (the search tool's
JSON and text) must be equal; differences are counted and the first three shown.

Prints wall, process CPU and main-thread CPU per side, and the median stage times
(`recall/timings.py`; REST = wall minus the timed stages). Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from datetime import UTC, datetime
from io import BytesIO
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_search import make_queries  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NOW = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)


def old_package(ref: str, into: Path) -> None:
    """`reme_agent` at `ref` as the package `reme_old` under `into`."""
    raw = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "reme_agent"],
                         check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(raw)) as tar:
        tar.extractall(into, filter="data")
    (into / "reme_agent").rename(into / "reme_old")
    for py in (into / "reme_old").rglob("*.py"):
        text = py.read_text(encoding="utf-8")
        py.write_text(re.sub(r"\breme_agent\b", "reme_old", text), encoding="utf-8")


def _side(pkg: str, root: Path) -> dict[str, Any]:
    import importlib

    search = importlib.import_module(f"{pkg}.recall.search")
    search.utc_now = lambda: NOW
    config = importlib.import_module(f"{pkg}.config")
    vault = importlib.import_module(f"{pkg}.vault").open_vault(
        root, config.Settings(embedder={"name": "use", "threads": 1},
                              index={"progress": False}))
    vault.index()
    return {"vault": vault,
            "run": importlib.import_module(f"{pkg}.toolkit.retrieve").run_search,
            "collect": importlib.import_module(f"{pkg}.recall.timings").collect,
            "wall": [], "cpu": [], "thread": [], "stages": []}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vault", type=Path, required=True, help="real-text bench vault (new code)")
    ap.add_argument("--vault-old", type=Path, help="a copy of it for the old code")
    ap.add_argument("--old-ref", default="main")
    ap.add_argument("--notes", type=int, default=10000, help="notes the vault was made with")
    ap.add_argument("--queries", type=int, default=620)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old_package(args.old_ref, Path(tmp))
        sys.path.insert(0, tmp)
        sides = {"old": _side("reme_old", args.vault_old or args.vault),
                 "new": _side("reme_agent", args.vault)}
        queries = make_queries(args.vault, args.notes, "real", args.queries)
        for q in queries[:20]:   # warm-up
            for s in sides.values():
                s["run"](s["vault"], q.text, log_access=False)
        rest = queries[20:]
        random.Random(7).shuffle(rest)
        differing = 0
        for i, q in enumerate(rest):
            answers = {}
            for name in (("old", "new") if i % 4 in (0, 3) else ("new", "old")):
                s = sides[name]
                t, c, th = time.perf_counter(), time.process_time(), time.thread_time()
                with s["collect"]() as tm:
                    r = s["run"](s["vault"], q.text, log_access=False)
                wall = time.perf_counter() - t
                s["wall"].append(wall * 1e3)
                s["cpu"].append((time.process_time() - c) * 1e3)
                s["thread"].append((time.thread_time() - th) * 1e3)
                s["stages"].append({**{k: v * 1e3 for k, v in tm.seconds.items()},
                                    **{k: v * 1e3 for k, v in tm.overlapped.items()},
                                    "REST": (wall - sum(tm.seconds.values())) * 1e3})
                answers[name] = json.dumps(dict(r), sort_keys=True) + r.text
            if answers["old"] != answers["new"]:
                differing += 1
                if differing <= 3:
                    print("differs:", q.text[:60])
        print(f"old={args.old_ref}, new=this checkout; {len(rest)} queries, answers "
              f"differing: {differing}")
        for name, s in sides.items():
            w = sorted(s["wall"])
            print(f"{name}: wall p50 {statistics.median(w):.2f} p95 {w[int(len(w) * .95)]:.2f}"
                  f" mean {statistics.mean(w):.2f} ms | process CPU p50 "
                  f"{statistics.median(s['cpu']):.2f} | main-thread CPU p50 "
                  f"{statistics.median(s['thread']):.2f} mean {statistics.mean(s['thread']):.2f}")
        for name, s in sides.items():
            keys = {k for row in s["stages"] for k in row}
            med = {k: statistics.median([row.get(k, 0.0) for row in s["stages"]]) for k in keys}
            print(name, {k: round(v, 2) for k, v in sorted(med.items(), key=lambda x: -x[1])
                         if v >= 0.1})
        for s in sides.values():
            s["vault"].close()


if __name__ == "__main__":
    main()
