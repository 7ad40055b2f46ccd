"""Old against new code on one indexed vault: bench_scale's search loop, interleaved (issue 19).

    .venv/bin/python bench/bench_scale_ab.py --vault OUT/scale-100000-hash512 --old-ref 62cbb62
    .venv/bin/python bench/bench_scale_ab.py --vault ... --old-ref main --rounds 3 --queries 100

Each round runs one process with the code of `--old-ref` (extracted with `git archive` into a
temporary folder) and one with this tree, in alternating order. A process opens the vault
as `bench_scale.py` does (hash embedder at `--dim`), warms up with one query, then asks
bench_scale's queries, each first through `search_blocks` and then through the full `search`
(bench_scale's order), and reports wall and main-thread CPU p50 / p95. CPU time is what
other processes' load on this 2-core machine inflates least; wall time is what the G6 target
reads. Both codes must give the same answers: every full answer (with `now` fixed, so the
recency factor does not move between processes) is hashed and compared.
Numbers are printed, never asserted.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
NOW = datetime(2026, 12, 1, tzinfo=UTC)


def child(code: str, vault_dir: str, dim: int, queries: int) -> dict[str, Any]:
    sys.path[:0] = [f"{code}/bench", code]
    import bench_scale as bs  # the tree's own copy: its queries and its way of opening

    from reme_agent.recall.search import search, search_blocks

    vault = bs._open(vault_dir, dim, "hash")
    vault.ready()
    search_blocks(vault, "vector index latency", 10)
    search(vault, "vector index latency", limit=10, log_access=False)
    rows: dict[str, list[float]] = {"blocks": [], "blocks_cpu": [], "full": [], "full_cpu": []}
    digest = hashlib.sha1()
    for q in bs._queries(queries):
        t, c = time.perf_counter(), time.thread_time()
        search_blocks(vault, q, 10)
        rows["blocks"].append((time.perf_counter() - t) * 1000)
        rows["blocks_cpu"].append((time.thread_time() - c) * 1000)
        t, c = time.perf_counter(), time.thread_time()
        answer = search(vault, q, limit=10, log_access=False, now=NOW)
        rows["full"].append((time.perf_counter() - t) * 1000)
        rows["full_cpu"].append((time.thread_time() - c) * 1000)
        digest.update(json.dumps(answer.as_dict(), sort_keys=True).encode())
    vault.close()
    return {"ms": {k: bs.pcts(v, 1) for k, v in rows.items()}, "answers": digest.hexdigest()}


def _run(code: Path, args: argparse.Namespace) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(code),
                           args.vault, str(args.dim), str(args.queries)],
                          capture_output=True, text=True, cwd=str(code))
    if proc.returncode != 0:
        raise RuntimeError(f"child ({code}) failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _load() -> str:
    import os
    return "/".join(f"{x:.1f}" for x in os.getloadavg()[:2])


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        print(json.dumps(child(argv[1], argv[2], int(argv[3]), int(argv[4]))))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vault", required=True, help="An indexed bench_scale vault.")
    ap.add_argument("--old-ref", required=True, help="Git ref of the code to compare with.")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--dim", type=int, default=512)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="reme-ab-") as tmp:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.old_ref],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        codes = {"old": Path(tmp), "new": ROOT}
        print(f"old = {args.old_ref}, new = {ROOT}; {args.queries} queries a process")
        print("round  code  load      search_blocks p50/p95 (cpu)      full search p50/p95 "
              "(cpu p50/p95)   answers")
        for r in range(args.rounds):
            for name in (("old", "new") if r % 2 == 0 else ("new", "old")):
                load = _load()
                res = _run(codes[name], args)
                ms = res["ms"]
                b, bc, f, fc = ms["blocks"], ms["blocks_cpu"], ms["full"], ms["full_cpu"]
                print(f"{r + 1:>5}  {name:<4}  {load:<8}  {b['p50']:>6.1f} / {b['p95']:>6.1f} "
                      f"({bc['p50']:.1f} / {bc['p95']:.1f})   {f['p50']:>6.1f} / "
                      f"{f['p95']:>6.1f} ({fc['p50']:.1f} / {fc['p95']:.1f})   "
                      f"{res['answers'][:12]}", flush=True)


if __name__ == "__main__":
    main()
