"""Embedder threads: single-query latency and bulk blocks/s per setting, quiet and loaded (G6).

    .venv/bin/python bench/bench_threads.py [--settings 1,2,auto] [--conditions quiet,burn]

One USE model in this process; the settings take turns chunk by chunk (a few queries, then a
batch of blocks, for each setting, round after round), so every setting sees the same
machine. "burn" starts a second process that keeps one core busy for that chunk (the
issue's loaded condition: a 2-core laptop running an agent and something else); "quiet" runs
without it, with whatever else the machine is doing (its load average is printed at start
and end). `auto` is what `embedder.threads: auto` resolves to for each call
(engine/embedders.py `resolve_threads`: 1 for a query; the idle cores minus one, at least 1,
for bulk). A second table does the same for chroma's HNSW insertion threads
(`hnsw.num_threads`, default = CPU count), the other thread pool on the index path, and a
third the bulk blocks/s per batch size (`embedder.batch_size`) at `auto`.
Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from generate import _sentence  # noqa: E402
from machine import burner, load_text, percentile  # noqa: E402

from reme_agent.engine.embedders import UseEmbedder, resolve_threads  # noqa: E402


def texts(n: int, sentences: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(_sentence(rng, i % 3 == 0) for _ in range(sentences)) for i in range(n)]


def embed_chunk(emb: UseEmbedder, queries: list[str], blocks: list[str],
                batch: int) -> tuple[list[float], float]:
    """Query latencies (ms) and bulk blocks/s for one chunk at the embedder's setting."""
    lat = []
    for q in queries:
        t = time.perf_counter()
        emb.embed_query(q)
        lat.append((time.perf_counter() - t) * 1000)
    t = time.perf_counter()
    for s in range(0, len(blocks), batch):
        emb.embed_documents(blocks[s:s + batch])
    return lat, len(blocks) / (time.perf_counter() - t)


def chroma_chunk(threads: int | None, vectors: list, folder: Path) -> float:
    """Blocks/s of upserting `vectors` into a new chroma collection (hnsw num_threads)."""
    from reme_agent.engine.projections.vector import _chromadb

    chromadb = _chromadb()
    client = chromadb.PersistentClient(path=str(folder))  # a new folder each time
    hnsw = {"space": "cosine", **({"num_threads": threads} if threads else {})}
    col = client.create_collection("bench-threads", configuration={"hnsw": hnsw})
    t = time.perf_counter()
    for i, (ids, vecs, docs) in enumerate(vectors):
        col.upsert(ids=ids, embeddings=vecs, documents=docs,
                   metadatas=[{"path": f"p{i}"}] * len(ids))
    rate = sum(len(v[0]) for v in vectors) / (time.perf_counter() - t)
    client.delete_collection("bench-threads")
    return rate


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--settings", default="1,2,auto")
    ap.add_argument("--conditions", default="quiet,burn")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--queries", type=int, default=40, help="queries per chunk")
    ap.add_argument("--blocks", type=int, default=256, help="blocks per chunk")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--batches", default="16,64,256", help="batch sizes compared (at auto)")
    ap.add_argument("--chroma", type=int, default=2048, help="vectors per chroma chunk (0: skip)")
    args = ap.parse_args()

    settings: list[int | str] = [s if s == "auto" else int(s) for s in args.settings.split(",")]
    conditions = args.conditions.split(",")
    emb = UseEmbedder()
    emb.load()
    queries = texts(args.queries * args.rounds, 1, 1)
    blocks = texts(args.blocks * args.rounds, 3, 2)
    emb.embed_documents(blocks[:args.batch])  # first-call costs out of the way
    lat = {(c, s): [] for c in conditions for s in settings}
    rate = {(c, s): [] for c in conditions for s in settings}
    resolved: dict[tuple[str, object], set[int]] = {k: set() for k in lat}
    chroma_settings = [1, None]
    crate = {(c, s): [] for c in conditions for s in chroma_settings}
    batches = [int(b) for b in args.batches.split(",") if b]
    brate = {(c, b): [] for c in conditions for b in batches}
    start = load_text()
    tmp = Path(tempfile.mkdtemp(prefix="bench-threads-"))
    try:
        for r in range(args.rounds):
            qs = queries[r * args.queries:(r + 1) * args.queries]
            bs = blocks[r * args.blocks:(r + 1) * args.blocks]
            vecs = []
            if args.chroma:
                rng = random.Random(r)
                base = emb.embed_documents(bs[:64])
                for k in range(0, args.chroma, 256):
                    pick = [base[rng.randrange(len(base))] for _ in range(256)]
                    vecs.append(([f"{r}-{k + j}" for j in range(256)], pick,
                                 [bs[j % len(bs)] for j in range(256)]))
            for cond in conditions:
                with burner(cond == "burn"):
                    time.sleep(0.3)  # let the burner reach the core
                    for s in (settings if r % 2 == 0 else settings[::-1]):
                        emb.threads = s  # type: ignore[assignment]
                        resolved[(cond, s)] |= {resolve_threads(s, "query"),
                                                resolve_threads(s, "bulk")}
                        got, blocks_s = embed_chunk(emb, qs, bs, args.batch)
                        lat[(cond, s)] += got
                        rate[(cond, s)].append(blocks_s)
                    emb.threads = "auto"
                    for b in (batches if r % 2 == 0 else batches[::-1]):
                        brate[(cond, b)].append(embed_chunk(emb, [], bs, b)[1])
                    for cs in (chroma_settings if args.chroma else []):
                        folder = tmp / f"chroma-{r}-{cond}-{cs}"
                        crate[(cond, cs)].append(chroma_chunk(cs, vecs, folder))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    end = load_text()

    print(f"\nbench_threads: {args.rounds} rounds x ({args.queries} queries + {args.blocks} "
          f"blocks in batches of {args.batch}) per setting and condition; "
          f"{os.cpu_count()} CPUs; start {start}; end {end}")
    print(f"  {'condition':<9} {'threads':<12} {'query p50 ms':>12} {'p95 ms':>8} "
          f"{'bulk blocks/s':>14}  vs threads=1 (p50, p95, blocks/s)")
    rows = []
    for cond in conditions:
        base = (cond, settings[0])
        for s in settings:
            key = (cond, s)
            p50, p95 = statistics.median(lat[key]), percentile(lat[key], 0.95)
            bps = statistics.median(rate[key])
            b50, b95 = statistics.median(lat[base]), percentile(lat[base], 0.95)
            bb = statistics.median(rate[base])
            shown = f"{s}" + (f" (={sorted(resolved[key])})" if s == "auto" else "")
            print(f"  {cond:<9} {shown:<12} {p50:>12.1f} {p95:>8.1f} {bps:>14.0f}  "
                  f"x{p50 / b50:.2f}, x{p95 / b95:.2f}, x{bps / bb:.2f}")
            rows.append({"condition": cond, "threads": str(s), "query_p50_ms": p50,
                         "query_p95_ms": p95, "bulk_blocks_s": bps})
    if args.chroma:
        print(f"  chroma upsert of {args.chroma} vectors into a new collection (blocks/s):")
        for cond in conditions:
            one, default = statistics.median(crate[(cond, 1)]), statistics.median(
                crate[(cond, None)])
            print(f"  {cond:<9} hnsw num_threads=1: {one:.0f}; default ({os.cpu_count()}): "
                  f"{default:.0f}; default/1 = x{default / one:.2f}")
            rows.append({"condition": cond, "chroma_threads_1": one, "chroma_default": default})
    if batches:
        print("  bulk blocks/s by batch size (threads auto): " + "; ".join(
            f"{cond}: " + ", ".join(f"{b}: {statistics.median(brate[(cond, b)]):.0f}"
                                    for b in batches) for cond in conditions))
        rows += [{"condition": c, "batch": b, "bulk_blocks_s": statistics.median(brate[(c, b)])}
                 for c in conditions for b in batches]
    print(json.dumps({"load_start": start, "load_end": end, "rows": rows}))


if __name__ == "__main__":
    main()
