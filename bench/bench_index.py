"""Indexing and search benchmark on a generated vault (prints numbers; asserts nothing).

    .venv/bin/python bench/bench_index.py --notes 2000 [--embedder use|hash]

Measures: full index time and blocks/s; re-index after editing one note (seconds, blocks
embedded); no-op re-index; baseline search p50/p95; cold open + first search in a new process.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from generate import EN_WORDS, ZH_WORDS, generate_vault, note_path  # noqa: E402

from reme_agent.config import Settings  # noqa: E402
from reme_agent.recall.search import search_blocks  # noqa: E402
from reme_agent.vault import open_vault  # noqa: E402

COLD_OPEN = """
import sys, time
t0 = time.perf_counter()
from reme_agent.config import Settings
from reme_agent.recall.search import search_blocks
from reme_agent.vault import open_vault
v = open_vault(sys.argv[1], Settings(embedder={"name": sys.argv[2]}))
hits = search_blocks(v, sys.argv[3], 10)
print(time.perf_counter() - t0, len(hits))
"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", type=int, default=2000)
    ap.add_argument("--embedder", default="use", choices=["use", "hash", "e5"])
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--out", default="bench/out")
    args = ap.parse_args()

    root = Path(args.out) / f"vault-{args.notes}"
    if root.exists():
        shutil.rmtree(root)
    t = time.perf_counter()
    generate_vault(root, args.notes)
    gen_s = time.perf_counter() - t
    settings = Settings(embedder={"name": args.embedder}, index={"progress": True})

    vault = open_vault(root, settings)
    full = vault.index()
    rows = [("generate vault", f"{gen_s:.1f} s", f"{args.notes} notes")]
    rows.append(("full index", f"{full.seconds:.1f} s",
                 f"{full.blocks} blocks, {full.blocks / max(full.seconds, 1e-9):.0f} blocks/s"))

    target = root / note_path(args.notes // 2)
    text = target.read_text(encoding="utf-8")
    target.write_text(text.replace("\n\n", "\n\nEdited paragraph about rotation keys.\n\n", 1),
                      encoding="utf-8")
    edit = vault.index()
    rows.append(("re-index after 1 edit", f"{edit.seconds:.2f} s",
                 f"{edit.embedded} blocks embedded, {edit.deleted} deleted"))
    noop = vault.index()
    rows.append(("no-op re-index", f"{noop.seconds:.2f} s", f"{noop.embedded} embedded"))

    rng = random.Random(3)
    queries = [" ".join(rng.choice(EN_WORDS) for _ in range(4)) if i % 2 else
               "".join(rng.choice(ZH_WORDS) for _ in range(3)) for i in range(args.queries)]
    search_blocks(vault, queries[0], 10)  # warm caches
    lat = []
    for q in queries:
        t = time.perf_counter()
        search_blocks(vault, q, 10)
        lat.append((time.perf_counter() - t) * 1000)
    rows.append(("search (baseline)", f"p50 {statistics.median(lat):.1f} ms",
                 f"p95 {percentile(lat, 0.95):.1f} ms over {len(lat)} queries"))
    vault.close()

    # Median of 3 new processes each; an English first query never loads jieba's dictionary
    # (the ASCII fast path), a Chinese one does.
    for label, query in (("en", "vector index latency"), ("zh", "向量索引的延迟")):
        runs = sorted(float(subprocess.run(
            [sys.executable, "-c", COLD_OPEN, str(root), args.embedder, query],
            capture_output=True, text=True, check=True).stdout.split()[0]) for _ in range(3))
        rows.append((f"cold open + first search ({label})", f"{runs[1]:.2f} s",
                     f"new process, imports included; median of {', '.join(f'{r:.2f}' for r in runs)}"))

    width = max(len(r[0]) for r in rows)
    print(f"\nbench_index: {args.notes} notes, embedder={args.embedder}")
    for name, value, note in rows:
        print(f"  {name:<{width}}  {value:>14}  {note}")
    print(json.dumps({"notes": args.notes, "embedder": args.embedder, "rows": rows}))


if __name__ == "__main__":
    main()
