"""Full maintenance run (no LLM steps) on a generated vault; prints each step's time.

    .venv/bin/python bench/bench_maintain.py --notes 10000 [--embedder hash|use] [--reuse]

The vault is `generate_vault(root, n)` (knowledge notes with links) plus 2% daily notes (half
of them distilled and 120 days cold, so decay has something to archive) and access-log hits
on 10% of the notes (so step 1 has something to aggregate). Indexing is timed separately:
the target (< 60 s, DESIGN F6) is for `maintain` itself. The first run embeds every
title + description (cached in .reme/maintain.sqlite); the second run shows the steady state.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from generate import generate_vault  # noqa: E402

from reme_agent.config import Settings  # noqa: E402
from reme_agent.maintenance.maintainer import Maintainer  # noqa: E402
from reme_agent.vault import open_vault  # noqa: E402

DAILY = """---
title: Session {i}
description: Work session {i}.
lifecycle: streaming
scope: instance
source: auto
role: observation
status: {status}
originSessionId: s-{i}
created: {day}
updated: {day}
---
# Session {i}

Worked on [[{target}]] and its index latency.
"""


def add_dailies(root: Path, notes: list[str], count: int, seed: int = 11) -> None:
    rng = random.Random(seed)
    day = (datetime.now(UTC) - timedelta(days=120)).date().isoformat()
    for i in range(count):
        rel = f"daily/{day}/session-{i}/session-{i}.md"
        file = root / rel
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(DAILY.format(i=i, day=day, target=rng.choice(notes),
                                     status="distilled" if i % 2 else "active"), encoding="utf-8")
        ts = (datetime.now(UTC) - timedelta(days=120)).timestamp()
        os.utime(file, (ts, ts))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", type=int, default=10_000)
    ap.add_argument("--embedder", default="hash", choices=["hash", "use", "e5"])
    ap.add_argument("--out", default="bench/out")
    ap.add_argument("--reuse", action="store_true", help="Keep the index of an earlier run "
                    "(the notes are regenerated and maintenance output removed, so the first "
                    "maintain run is a real first run).")
    args = ap.parse_args()

    root = Path(args.out) / f"maintain-vault-{args.notes}-{args.embedder}"
    rows: list[tuple[str, str, str]] = []
    if root.exists() and not args.reuse:
        shutil.rmtree(root)
    for derived in ("meta", "audit", "archive"):   # what an earlier maintain run produced
        shutil.rmtree(root / derived, ignore_errors=True)
    (root / ".reme" / "maintain.sqlite").unlink(missing_ok=True)
    t = time.perf_counter()
    notes = generate_vault(root, args.notes)          # deterministic: same bytes every time
    add_dailies(root, notes, max(1, args.notes // 50))
    rows.append(("generate vault", f"{time.perf_counter() - t:.1f} s",
                 f"{args.notes} notes + {max(1, args.notes // 50)} daily notes"))
    settings = Settings(embedder={"name": args.embedder}, index={"progress": True})
    vault = open_vault(root, settings)
    t = time.perf_counter()
    report = vault.index()
    rows.append(("index (not part of maintain)", f"{time.perf_counter() - t:.1f} s",
                 f"{report.files} files, {report.blocks} blocks, {report.embedded} embedded"))
    rng = random.Random(5)
    paths = sorted(vault.state.files())
    vault.access_log.record(rng.sample(paths, len(paths) // 10))

    maintainer = Maintainer(vault, settings.maintain,
                            split_token_threshold=settings.jobs.split_token_threshold,
                            split_block_threshold=settings.jobs.split_block_threshold)
    runs = []
    for label in ("first run", "second run"):
        cpu = time.process_time()
        report = maintainer.run()
        cpu = time.process_time() - cpu
        runs.append(report)
        rows.append((f"maintain, {label}", f"{report.seconds:.1f} s",
                     f"cpu {cpu:.1f} s; " + ("target < 60 s" if label == "first run"
                                              else "steady state")))
        for step in report.steps:
            counts = ", ".join(f"{k}={v}" for k, v in step.found.items()
                               if isinstance(v, int | float) and not isinstance(v, bool))
            rows.append((f"  {step.step}", f"{step.seconds:.2f} s",
                         f"cpu {step.cpu_seconds:.2f} s; " + (step.skipped or counts[:80])))
    vault.close()

    width = max(len(r[0]) for r in rows)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\nbench_maintain: {args.notes} notes, embedder={args.embedder}, no LLM steps, "
          f"{os.cpu_count()} CPUs, load average {load:.1f} (wall time grows with the load)")
    for name, value, note in rows:
        print(f"  {name:<{width}}  {value:>9}  {note}")
    print(json.dumps({"notes": args.notes, "embedder": args.embedder,
                      "steps": [[{s.step: [s.seconds, s.cpu_seconds] for s in r.steps},
                                 round(r.seconds, 2)] for r in runs]}))


if __name__ == "__main__":
    main()
