"""Indexing and search benchmark on a generated vault (prints numbers; asserts nothing).

    .venv/bin/python bench/bench_index.py --notes 2000 [--embedder use|hash] [--burn]
    .venv/bin/python bench/bench_index.py --notes 1000 --only-throughput --modes auto,thread,inline

Measures: index throughput against the embedder alone (G6, below); re-index after editing
one note (seconds, blocks embedded); no-op re-index; baseline search p50/p95; cold open +
first search in a new process.

Throughput (G6): the same blocks are embedded by the embedder alone (in this process, in
batches of `embedder.batch_size`, model already loaded) and indexed from scratch (`.reme/`
removed, a new Vault: reading, parsing, BM25, SQLite, embedding and chroma writes, plus
whatever process start the pipeline needs), alternating E, I, E, I, E, ...; each index round
is divided by the mean of the embedder rounds on either side of it and the ratio printed.
`--modes` compares the pipeline's modes (engine/pipeline.py) in the same run; `--burn`
keeps one core busy with a second process (the loaded condition).
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
from machine import burner, load_text, percentile  # noqa: E402

from reme_agent.config import Settings  # noqa: E402
from reme_agent.engine.embedders import make_embedder  # noqa: E402
from reme_agent.engine.indexer import block_document, first_block_description  # noqa: E402
from reme_agent.engine.names import note_title  # noqa: E402
from reme_agent.recall.search import search_blocks  # noqa: E402
from reme_agent.vault import Vault, open_vault  # noqa: E402

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

Row = tuple[str, str, str]


def block_documents(vault: Vault) -> list[str]:
    """Every block's embedded text, as the indexer builds it (title + block, and the
    description in a note's first block)."""
    files = vault.state.files()
    titles = {path: note_title(path, row.frontmatter, "") for path, row in files.items()}
    rows = vault.state.blocks_by_id(sorted(vault.state.all_block_ids()))
    return [block_document(titles.get(r.path, ""), r.text,
                           first_block_description(files[r.path].frontmatter, r.idx)
                           if r.path in files else "")
            for r in rows.values()]


def embed_alone(embedder: object, docs: list[str], batch: int) -> float:
    """Blocks/s of the embedder alone over `docs`, in batches like the indexer's."""
    t = time.perf_counter()
    for s in range(0, len(docs), batch):
        embedder.embed_documents(docs[s:s + batch])  # type: ignore[attr-defined]
    return len(docs) / (time.perf_counter() - t)


def index_fresh(root: Path, settings: Settings, mode: str) -> tuple[float, int, str, Vault]:
    """Index the vault from nothing (`.reme/` removed): blocks/s, blocks, pipeline mode used."""
    shutil.rmtree(root / ".reme", ignore_errors=True)
    vault = open_vault(root, settings)
    vault.indexer.embed_mode = mode  # type: ignore[assignment]
    t = time.perf_counter()
    report = vault.index()
    rate = report.blocks / (time.perf_counter() - t)
    return rate, report.blocks, vault.indexer.last_embed_mode, vault


def throughput(root: Path, settings: Settings, modes: list[str],
               rounds: int) -> tuple[list[Row], Vault]:
    """Interleaved rounds: embedder alone, index (each mode in turn), embedder alone, ..."""
    _, blocks, _, vault = index_fresh(root, settings, modes[0])  # fills the state for the docs
    docs = block_documents(vault)
    embedder = make_embedder(settings.embedder.name, threads=settings.embedder.threads)
    embedder.embed_documents(docs[:8])  # load the model before timing
    batch = settings.embedder.batch_size
    alone = [embed_alone(embedder, docs, batch)]
    got: dict[str, list[tuple[float, str, float]]] = {m: [] for m in modes}
    for _ in range(rounds):
        for mode in modes:
            vault.close()
            rate, blocks, used, vault = index_fresh(root, settings, mode)
            alone.append(embed_alone(embedder, docs, batch))
            got[mode].append((rate, used, (alone[-2] + alone[-1]) / 2))
    rows = [("embedder alone", f"{statistics.median(alone):.0f} blocks/s",
             f"{len(docs)} blocks; rounds: {', '.join(f'{a:.0f}' for a in alone)}")]
    for mode, results in got.items():
        ratios = [rate / around for rate, _, around in results]
        rows.append((f"full index ({mode}: {results[0][1]})",
                     f"{statistics.median(r for r, _, _ in results):.0f} blocks/s",
                     f"{blocks} blocks; / embedder alone around it: "
                     + ", ".join(f"{x:.2f}" for x in ratios)
                     + f" (median {statistics.median(ratios):.2f}; target >= 0.90)"))
    return rows, vault


def edits_and_search(root: Path, vault: Vault, args: argparse.Namespace) -> list[Row]:
    """One edit, a no-op run, baseline search latency and cold opens (the F1 rows)."""
    rows: list[Row] = []
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
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", type=int, default=2000)
    ap.add_argument("--embedder", default="use", choices=["use", "hash", "e5"])
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=2, help="index rounds per mode")
    ap.add_argument("--modes", default="auto",
                    help="pipeline modes to compare, e.g. auto,thread,inline")
    ap.add_argument("--only-throughput", action="store_true", help="skip the F1 rows")
    ap.add_argument("--burn", action="store_true", help="keep one core busy meanwhile")
    ap.add_argument("--out", default="bench/out")
    args = ap.parse_args()

    root = Path(args.out) / f"vault-{args.notes}"
    if root.exists():
        shutil.rmtree(root)
    t = time.perf_counter()
    generate_vault(root, args.notes)
    gen_s = time.perf_counter() - t
    settings = Settings(embedder={"name": args.embedder}, index={"progress": True})

    start_load = load_text()
    with burner(args.burn):
        rows: list[Row] = [("generate vault", f"{gen_s:.1f} s", f"{args.notes} notes")]
        more, vault = throughput(root, settings, args.modes.split(","), args.rounds)
        rows += more
        if args.only_throughput:
            vault.close()
        else:
            rows += edits_and_search(root, vault, args)
        end_load = load_text()

    width = max(len(r[0]) for r in rows)
    print(f"\nbench_index: {args.notes} notes, embedder={args.embedder}, "
          f"burn={'on' if args.burn else 'off'}; start {start_load}; end {end_load}")
    for name, value, note in rows:
        print(f"  {name:<{width}}  {value:>14}  {note}")
    print(json.dumps({"notes": args.notes, "embedder": args.embedder, "burn": args.burn,
                      "load_start": start_load, "load_end": end_load, "rows": rows},
                     ensure_ascii=False))


if __name__ == "__main__":
    main()
