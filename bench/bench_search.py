"""Recall latency: F1 baseline `search_blocks` vs the signal-fused pipeline (DESIGN §7).

    .venv/bin/python bench/bench_search.py --notes 2000 --embedder hash|use [--fresh]

Builds (or reuses) the F1 benchmark vault (bench/generate.py) plus maintenance signals so
every factor is live: communities.json (25 communities), archived.json (5% of notes),
access_log.json (30% of notes read in the last 100 days), file mtimes spread over a year.
Then times each query through the baseline and the full pipeline, interleaved, and prints
p50 / p95 and the p95 ratio (target ≤ 1.3×). Numbers are printed, not asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from generate import EN_WORDS, ZH_WORDS, generate_vault  # noqa: E402

from reme_agent.config import Settings  # noqa: E402
from reme_agent.recall.search import rank_blocks, search, search_blocks  # noqa: E402
from reme_agent.vault import open_vault  # noqa: E402

MARKER = ".bench-search-ready"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def add_signals(root: Path, paths: list[str], seed: int = 11) -> None:
    """Signals as the maintainer would write them, and mtimes spread over the past year."""
    rng = random.Random(seed)
    now = datetime.now(UTC)
    stamp = now.isoformat().replace("+00:00", "Z")
    for rel in paths:
        ts = (now - timedelta(days=rng.uniform(0, 365))).timestamp()
        os.utime(root / rel, (ts, ts))
    meta = root / "meta"
    meta.mkdir(exist_ok=True)
    communities = {p: i % 25 for i, p in enumerate(paths)}
    entries = {}
    for p in rng.sample(paths, len(paths) * 3 // 10):
        last = now - timedelta(days=rng.uniform(0, 100))
        entries[p] = {"last_read": last.isoformat().replace("+00:00", "Z"),
                      "hit_days": [last.date().isoformat()], "hits_30d": 1}
    files = {
        "communities": {"algorithm": "louvain", "resolution": 1.0, "communities": communities,
                        "stats": {"count": 25}},
        "archived": {"threshold": 1.0, "archived": rng.sample(paths, len(paths) // 20)},
        "access_log": {"entries": entries},
        "recency": {"scores": {p: rng.random() for p in paths}},
    }
    for name, body in files.items():
        (meta / f"{name}.json").write_text(
            json.dumps({"version": 1, "computed_at": stamp, **body}), encoding="utf-8")


def timed(fn, *args, **kwargs) -> float:  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    fn(*args, **kwargs)
    return (time.perf_counter() - t) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", type=int, default=2000)
    ap.add_argument("--embedder", default="hash", choices=["use", "hash", "e5"])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3, help="Passes over the query set.")
    ap.add_argument("--out", default="bench/out")
    ap.add_argument("--fresh", action="store_true", help="Regenerate the vault.")
    args = ap.parse_args()

    root = Path(args.out) / f"search-vault-{args.notes}"
    if args.fresh or not (root / MARKER).exists():
        import shutil

        if root.exists():
            shutil.rmtree(root)
        paths = generate_vault(root, args.notes)
        add_signals(root, paths)
        (root / MARKER).write_text("ok\n", encoding="utf-8")
    vault = open_vault(root, Settings(embedder={"name": args.embedder}, index={"progress": True}))
    t = time.perf_counter()
    report = vault.index()
    print(f"index: {report.files} files, {report.blocks} blocks, embedded {report.embedded} "
          f"in {time.perf_counter() - t:.1f} s", file=sys.stderr)

    rng = random.Random(3)
    queries = [" ".join(rng.choice(EN_WORDS) for _ in range(4)) if i % 2 else
               "".join(rng.choice(ZH_WORDS) for _ in range(3)) for i in range(args.queries)]
    variants = {
        "baseline search_blocks": lambda q: search_blocks(vault, q, 10),
        "rank_blocks (factors)": lambda q: rank_blocks(vault, q, limit=10),
        "search expand_depth=0": lambda q: search(vault, q, limit=10, expand_depth=0),
        "search (default, depth 1)": lambda q: search(vault, q, limit=10),
        "search expand_depth=2": lambda q: search(vault, q, limit=10, expand_depth=2),
    }
    for fn in variants.values():          # warm caches (jieba, embedder, node catalog, signals)
        for q in queries[:20]:
            fn(q)
    lat: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for r in range(args.rounds):
        for i, q in enumerate(queries):
            order = names if (i + r) % 2 == 0 else list(reversed(names))
            for name in order:
                lat[name].append(timed(variants[name], q))
    vault.close()

    base95 = percentile(lat[names[0]], 0.95)
    base50 = statistics.median(lat[names[0]])
    print(f"\nbench_search: {args.notes} notes, {report.blocks} blocks, "
          f"embedder={args.embedder}, {len(lat[names[0]])} timed queries per row")
    width = max(len(n) for n in names)
    rows = []
    for name in names:
        p50, p95 = statistics.median(lat[name]), percentile(lat[name], 0.95)
        rows.append({"variant": name, "p50_ms": round(p50, 2), "p95_ms": round(p95, 2),
                     "p50_ratio": round(p50 / base50, 2), "p95_ratio": round(p95 / base95, 2)})
        print(f"  {name:<{width}}  p50 {p50:7.2f} ms  p95 {p95:7.2f} ms   "
              f"x{p50 / base50:.2f} / x{p95 / base95:.2f}")
    print(json.dumps({"notes": args.notes, "embedder": args.embedder, "rows": rows}))


if __name__ == "__main__":
    main()
