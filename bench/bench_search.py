"""Search latency against its floor, where the time goes, and the quality beside it (issue G6).

    .venv/bin/python bench/bench_search.py --notes 1000 [--embedder use] [--peers] [--fresh]
    .venv/bin/python bench/bench_search.py --notes 10000 --text vocab      # the old word-list vault

The vault is the real-text bench vault (`real_text.py`: LoCoMo turns + CMRC paragraphs, with
titles, aliases, links and hubs) plus maintenance signals, so every factor is live:
communities.json (25 communities), archived.json (5% of notes), access_log.json (30% read in
the last 100 days), file mtimes spread over a year. It is generated once per size under
`--out` and reused (`--fresh` regenerates). Queries are two phrases from two blocks of one
note (`phrase_queries`), half English, half Chinese; the relevant notes are every note
holding both, so Hit@5 and MRR are exact.

Timed, interleaved query by query (the order rotates, so load from other processes hits
every row alike), over `--rounds` passes of new queries (no query is asked twice, so the
caches of a long-running process help only as much as queries share blocks):
- floor: a plain BM25 search (our numpy BM25: tokenize + top blocks + their notes) plus
  embedding the query: what any hybrid search must pay;
- default search: what the `search` tool does (`toolkit.retrieve.run_search`: vectors,
  names, phrases, relations, factors, grouping, relevance floor, expansion, freshness, the
  JSON and the text), without the access log (a write: it would change the next run);
- `search_blocks`: the hybrid text relevance alone (the F1 baseline);
- `--peers`: rank_bm25's BM25Okapi over the same blocks' tokens (the reference BM25 of
  `engine/projections/keyword.py`, so its Hit@5 equals the BM25 row), and bm25s when it is
  installed; in a second loop over the same queries, interleaved with a floor and a BM25
  row of its own (rank_bm25 is slow enough to disturb the rows after it). Other memory
  systems (ReMe, basic-memory) need their own environments and are not run here.
"CPU ms" is the p50 of the process's CPU time per call (every thread: the part of the cost
other processes' load does not inflate). The breakdown lists the default search's stages (`recall/timings.py`): main-thread stages
add up to its wall time; the vector side's stages ran on a worker thread meanwhile.
Numbers are printed, never asserted; ratios are of rows measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

from generate import EN_WORDS, ZH_WORDS, generate_vault  # noqa: E402

from reme_agent.config import Settings  # noqa: E402
from reme_agent.engine.tokenize import tokenize  # noqa: E402
from reme_agent.recall.search import search_blocks  # noqa: E402

try:  # absent before issue G6: the bench still runs (no breakdown) to measure "before"
    from reme_agent.recall.timings import Timings, collect
except ImportError:  # pragma: no cover
    import contextlib

    class Timings:  # type: ignore[no-redef]
        seconds: dict[str, float] = {}
        overlapped: dict[str, float] = {}

    def collect() -> contextlib.AbstractContextManager[Timings]:  # type: ignore[misc]
        return contextlib.nullcontext(Timings())
from reme_agent.toolkit.retrieve import run_search  # noqa: E402
from reme_agent.vault import Vault, open_vault  # noqa: E402

MARKER = ".bench-search-ready"
VAULT_VERSION = "real-text v1"   # bump when the generator changes what it writes
TOP = 10          # notes each system returns
HIT_AT = 5


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


@dataclass
class Query:
    text: str
    relevant: frozenset[str] = frozenset()    # empty: no quality figure (vocab queries)


def prepare_vault(root: Path, notes: int, text: str, data: str | None,
                  fresh: bool) -> None:
    """Generate the vault + signals unless this exact one is already there."""
    stamp = f"{VAULT_VERSION} text={text} notes={notes}\n"
    marker = root / MARKER
    if not fresh and marker.exists() and marker.read_text(encoding="utf-8") == stamp:
        return
    if root.exists():
        shutil.rmtree(root)
    paths = generate_vault(root, notes, text=text, data=data)
    add_signals(root, paths)
    marker.write_text(stamp, encoding="utf-8")


def make_queries(root: Path, notes: int, text: str, n: int) -> list[Query]:
    if text == "real":
        from real_text import phrase_queries, read_real_notes

        return [Query(q.text, q.relevant)
                for q in phrase_queries(read_real_notes(root, notes), n)]
    rng = random.Random(3)
    return [Query(" ".join(rng.choice(EN_WORDS) for _ in range(4)) if i % 2 else
                  "".join(rng.choice(ZH_WORDS) for _ in range(3))) for i in range(n)]


def notes_of(block_ids: list[str], path_of: Callable[[str], str | None],
             limit: int = TOP) -> list[str]:
    """Blocks (best first) -> their notes, best first, each once."""
    out: list[str] = []
    for bid in block_ids:
        path = path_of(bid)
        if path and path not in out:
            out.append(path)
            if len(out) >= limit:
                break
    return out


# -- systems ----------------------------------------------------------------------------------


@dataclass
class System:
    """One row: a callable query -> ranked note paths, and what it measured."""

    name: str
    run: Callable[[str], list[str]]
    latency: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)       # process CPU ms (all threads)
    first_pass: list[float] = field(default_factory=list)
    ranked: dict[str, list[str]] = field(default_factory=dict)   # query -> notes (1st pass)


def floor_system(vault: Vault) -> System:
    """BM25 over the same blocks (top 50 blocks -> 10 notes) plus embedding the query."""
    keyword, embedder, path_of = vault.keyword, vault.embedder, vault.indexer.path_of_block

    def run(q: str) -> list[str]:
        embedder.embed_query(q)
        top, _ = keyword.top(tokenize(q), 50)
        return notes_of([d for d, _ in top], path_of)
    return System("floor: BM25 + query embedding", run)


def bm25_system(vault: Vault) -> System:
    keyword, path_of = vault.keyword, vault.indexer.path_of_block

    def run(q: str) -> list[str]:
        top, _ = keyword.top(tokenize(q), 50)
        return notes_of([d for d, _ in top], path_of)
    return System("  BM25 alone (numpy, ours)", run)


def embed_system(vault: Vault) -> System:
    embedder = vault.embedder

    def run(q: str) -> list[str]:
        embedder.embed_query(q)
        return []
    return System("  query embedding alone", run)


def default_system(vault: Vault, stages: list[Timings]) -> System:
    def run(q: str) -> list[str]:
        with collect() as t:
            result = run_search(vault, q, log_access=False)
        stages.append(t)
        return [r["path"] for r in result.data["results"]]
    return System("default search (tool: search + JSON + text)", run)


def blocks_system(vault: Vault) -> System:
    def run(q: str) -> list[str]:
        return notes_of([h.block_id for h in search_blocks(vault, q, 50)],
                        vault.indexer.path_of_block)
    return System("search_blocks (hybrid text relevance)", run)


def peer_systems(vault: Vault, echo: Callable[[str], None]) -> list[System]:
    """rank_bm25 (always: a dev dependency) and bm25s (when installed), on the same tokens."""
    ids = sorted(vault.keyword.doc_ids())
    corpus = [vault.keyword.tokens_of(d) or [] for d in ids]
    path_of = vault.indexer.path_of_block
    out = []
    import numpy as np
    from rank_bm25 import BM25Okapi

    t = time.perf_counter()
    okapi = BM25Okapi(corpus)
    echo(f"rank_bm25: built over {len(ids)} blocks in {time.perf_counter() - t:.1f} s")

    def run_okapi(q: str) -> list[str]:
        scores = okapi.get_scores(tokenize(q))
        k = min(50, len(scores))
        head = np.argpartition(-scores, k - 1)[:k] if k else np.zeros(0, dtype=int)
        head = head[np.lexsort((head, -scores[head]))]
        return notes_of([ids[i] for i in head.tolist() if scores[i] > 0], path_of)
    out.append(System("peer: rank_bm25 BM25Okapi", run_okapi))
    try:
        import bm25s
    except ImportError:
        echo("peer bm25s: not installed, skipped (pip install bm25s to compare)")
    else:
        t = time.perf_counter()
        retriever = bm25s.BM25()
        retriever.index(corpus, show_progress=False)
        echo(f"bm25s: built in {time.perf_counter() - t:.1f} s")

        def run_bm25s(q: str) -> list[str]:
            docs, scores = retriever.retrieve([tokenize(q)], k=min(50, len(ids)),
                                              show_progress=False)
            return notes_of([ids[int(i)] for i, s in zip(docs[0], scores[0], strict=True)
                             if s > 0], path_of)
        out.append(System("peer: bm25s", run_bm25s))
    return out


# -- measuring --------------------------------------------------------------------------------


def measure(systems: list[System], passes: list[list[Query]], warm: list[Query]) -> None:
    """Each pass has its own queries (no query repeats, so no cache sees one twice)."""
    for s in systems:                         # warm up: jieba, model, catalog, names
        for q in warm:
            s.run(q.text)
    for r, queries in enumerate(passes):
        for i, q in enumerate(queries):
            k = (i + r) % len(systems)
            for s in systems[k:] + systems[:k]:   # rotate who runs first
                c = time.process_time()
                t = time.perf_counter()
                ranked = s.run(q.text)
                ms = (time.perf_counter() - t) * 1000
                s.cpu.append((time.process_time() - c) * 1000)
                s.latency.append(ms)
                if r == 0:
                    s.first_pass.append(ms)
                s.ranked[q.text] = ranked


def quality(system: System, queries: list[Query]) -> tuple[float, float] | None:
    """(Hit@5, MRR@10) over queries with relevant notes."""
    graded = [q for q in queries if q.relevant]
    if not graded or not system.ranked:
        return None
    hits = mrr = 0.0
    for q in graded:
        ranked = system.ranked.get(q.text, [])
        first = next((k for k, p in enumerate(ranked[:TOP], 1) if p in q.relevant), None)
        hits += 1.0 if first is not None and first <= HIT_AT else 0.0
        mrr += 1.0 / first if first else 0.0
    return hits / len(graded), mrr / len(graded)


def breakdown(stages: list[Timings], skip: int) -> list[tuple[str, float, float, bool]]:
    """(stage, p50 ms, mean ms, on a worker thread) of the timed default searches."""
    timed = stages[skip:]
    main = {k for t in timed for k in t.seconds}
    worker = {k for t in timed for k in t.overlapped}
    rows = []
    for names, overlapped in ((main, False), (worker, True)):
        for k in names:
            vals = [(t.overlapped if overlapped else t.seconds).get(k, 0.0) * 1000
                    for t in timed]
            rows.append((k, statistics.median(vals), statistics.mean(vals), overlapped))
    return sorted(rows, key=lambda r: (r[3], -r[2]))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--notes", type=int, default=1000)
    ap.add_argument("--embedder", default="use", choices=["use", "hash", "e5"])
    ap.add_argument("--threads", type=int, default=None,
                    help="embedder.threads (default: the config default)")
    ap.add_argument("--text", default="real", choices=["real", "vocab"])
    ap.add_argument("--data", default=None,
                    help="Folder with locomo_dev.json and cmrc2018_dev_half.json "
                         "(default $REME_EVAL_DATA or ../shared/data)")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3,
                    help="Passes, each with --queries new queries (none is asked twice).")
    ap.add_argument("--peers", action="store_true", help="Also rank_bm25 (and bm25s).")
    ap.add_argument("--out", default=str(BENCH / "out"))
    ap.add_argument("--fresh", action="store_true", help="Regenerate the vault.")
    ap.add_argument("--json", default=None, help="Also write the numbers to this file.")
    args = ap.parse_args(argv)

    def echo(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    load_start = os.getloadavg()
    root = Path(args.out) / f"search-vault-{args.notes}-{args.text}"
    prepare_vault(root, args.notes, args.text, args.data, args.fresh)
    embedder: dict[str, Any] = {"name": args.embedder}
    if args.threads is not None:
        embedder["threads"] = args.threads
    vault = open_vault(root, Settings(embedder=embedder, index={"progress": True}))
    t = time.perf_counter()
    report = vault.index()
    echo(f"index: {report.files} files, {report.blocks} blocks, embedded {report.embedded} "
         f"in {time.perf_counter() - t:.1f} s")
    warm_n = min(20, args.queries)
    every = make_queries(root, args.notes, args.text, args.queries * args.rounds + warm_n)
    warm, timed = every[:warm_n], every[warm_n:]
    passes = [timed[r * args.queries:(r + 1) * args.queries] for r in range(args.rounds)]
    queries = [q for p in passes for q in p]

    stages: list[Timings] = []
    floor = floor_system(vault)
    default = default_system(vault, stages)
    systems = [floor, default, bm25_system(vault), embed_system(vault), blocks_system(vault)]
    echo(f"timing {len(systems)} rows x {args.queries} queries x {args.rounds} passes")
    measure(systems, passes, warm)
    peers: list[System] = []
    if args.peers:
        # A loop of its own: rank_bm25 takes ~80 ms a query at 10k notes and evicts what the
        # rows after it had in the CPU caches (the query embedding doubled), so peers are
        # interleaved only with a floor and a BM25 row of their own.
        peers = [floor_system(vault), bm25_system(vault), *peer_systems(vault, echo)]
        peers[0].name, peers[1].name = "floor (peer loop)", "  BM25 alone (peer loop)"
        echo(f"timing {len(peers)} peer rows x {args.queries} queries x {args.rounds} passes")
        measure(peers, passes, warm)
    cache = getattr(vault.vector, "cache", None)
    vault.close()
    load_end = os.getloadavg()

    f50 = statistics.median(floor.latency)
    f95 = percentile(floor.latency, 0.95)
    print(f"\nbench_search: {args.notes} notes ({args.text} text), {report.blocks} blocks, "
          f"embedder={args.embedder} threads={vault.settings.embedder.threads}, "
          f"{args.queries} new queries x {args.rounds} passes, load {load_start[0]:.1f} -> "
          f"{load_end[0]:.1f} ({os.cpu_count()} CPUs)")
    width = max(len(s.name) for s in systems + peers)
    print(f"  {'row':<{width}}  {'p50 ms':>7} {'p95 ms':>7} {'1st pass p50':>12}  "
          f"{'p50/floor':>9}  {'CPU ms':>6}  Hit@{HIT_AT}   MRR")
    rows = []
    for s in systems + peers:
        if peers and s is peers[0]:
            print("  peers, measured in a loop of their own against its own floor:")
            f50 = statistics.median(s.latency)
            f95 = percentile(s.latency, 0.95)
        p50, p95 = statistics.median(s.latency), percentile(s.latency, 0.95)
        q = quality(s, queries)
        qual = f"{q[0]:6.3f} {q[1]:6.3f}" if q and s.ranked and any(s.ranked.values()) else ""
        cpu = statistics.median(s.cpu)
        print(f"  {s.name:<{width}}  {p50:7.2f} {p95:7.2f} {statistics.median(s.first_pass):12.2f}"
              f"  {p50 / f50:8.2f}x  {cpu:6.2f}  {qual}")
        rows.append({"row": s.name.strip(), "p50_ms": round(p50, 3), "p95_ms": round(p95, 3),
                     "first_pass_p50_ms": round(statistics.median(s.first_pass), 3),
                     "p50_ratio": round(p50 / f50, 3), "p95_ratio": round(p95 / f95, 3),
                     "cpu_p50_ms": round(cpu, 3),
                     "hit5": q[0] if q else None, "mrr": q[1] if q else None})
    cached = f"; stored-vector cache {cache.hits} hits / {cache.misses} misses" if cache else ""
    ratio = statistics.median(default.latency) / statistics.median(floor.latency)
    print(f"\n  default search: p50 {ratio:.2f}x the floor (target <= 2x){cached}")
    print("\n  where the default search spends its time (ms per search; main thread adds up "
          "to the wall time, the vector side ran on a worker meanwhile):")
    parts = breakdown(stages, warm_n)
    main_total = statistics.median([sum(t.seconds.values()) * 1000 for t in stages[warm_n:]])
    for name, p50, mean, overlapped in parts:
        where = "worker" if overlapped else "main  "
        print(f"    {where}  {name:<22} p50 {p50:6.2f}  mean {mean:6.2f}")
    print(f"    (stages p50 total {main_total:.2f} ms of a {statistics.median(default.latency):.2f}"
          " ms search; the rest is untimed glue)")
    print(json.dumps({"notes": args.notes, "text": args.text, "embedder": args.embedder,
                      "blocks": report.blocks, "load": [load_start[0], load_end[0]],
                      "rows": rows,
                      "stages": [{"stage": n, "p50_ms": round(a, 3), "mean_ms": round(b, 3),
                                  "worker": w} for n, a, b, w in parts]}))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows}, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
