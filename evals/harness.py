"""Run eval configs over real vaults: write, index once, query through the recall API, score.

Why through the real API: the point is to measure what an agent gets from `search()` (and the
block ranking under it), with the real parser, tokenizer, embedder, chromadb and signals, not
a re-implementation. The only eval-specific choices are `log_access=False` (an eval never
writes the access log) and a fixed `now` for vaults with synthetic dates.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evals.ablations import EvalConfig
from evals.datasets import Dataset, Query, VaultSpec
from evals.metrics import (
    answered_empty,
    bootstrap_ci,
    distinct_at,
    latency_summary,
    leak_at,
    recall_at,
    score_ranking,
    summarize,
)

log = logging.getLogger("evals")

NODE_DEPTH = 10     # results an agent asks for; MRR is MRR@10
BLOCK_DEPTH = 10
WORK_DIR = Path(__file__).resolve().parent / "work"


@dataclass
class QueryRow:
    """Per-query scores of one config (kept in memory for paired comparisons)."""

    qid: str
    kind: str
    node: dict[str, float]
    block: dict[str, float] = field(default_factory=dict)
    extra: dict[str, float] = field(default_factory=dict)
    ms: float = 0.0


@dataclass
class ConfigResult:
    config: EvalConfig
    rows: list[QueryRow] = field(default_factory=list)

    def summary(self, levels: Iterable[str], seed: int = 0) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.config.name, "group": self.config.group, "mode": self.config.mode,
            "options": self.config.options, "include_archived": self.config.include_archived,
            "expand_depth": self.config.expand_depth, "note": self.config.note,
            "n": len(self.rows), "levels": {}, "kinds": {},
            "latency_ms": latency_summary([r.ms for r in self.rows]),
        }
        for level in levels:
            out["levels"][level] = summarize([_level(r, level) for r in self.rows], seed=seed)
        extra = [r.extra for r in self.rows if r.extra]
        if extra:
            out["extra"] = summarize(extra, seed=seed)
        kinds = sorted({r.kind for r in self.rows})
        for kind in kinds:
            rows = [r for r in self.rows if r.kind == kind]
            entry: dict[str, Any] = {"n": len(rows)}
            for level in levels:
                entry[level] = summarize([_level(r, level) for r in rows], seed=seed)
            kind_extra = [r.extra for r in rows if r.extra]
            if kind_extra:
                entry["extra"] = summarize(kind_extra, seed=seed)
            out["kinds"][kind] = entry
        return out


def _level(row: QueryRow, level: str) -> dict[str, float]:
    return row.node if level == "node" else row.block


@dataclass
class VaultRun:
    name: str
    files: int
    blocks: int
    embedded: int
    index_seconds: float
    reused: bool


@dataclass
class DatasetRun:
    dataset: Dataset
    embedder: str
    results: dict[str, ConfigResult]
    vaults: list[VaultRun]
    seconds: float

    def to_json(self, seed: int = 0) -> dict[str, Any]:
        ds = self.dataset
        embedded = sum(v.embedded for v in self.vaults)
        fresh_secs = sum(v.index_seconds for v in self.vaults)
        return {
            "dataset": ds.name, "embedder": self.embedder, "levels": list(ds.levels),
            "level_names": ds.level_names, "kinds": ds.kinds, "notes": ds.notes,
            "n_queries": ds.n_queries, "n_notes": ds.n_files,
            "vaults": [v.__dict__ for v in self.vaults],
            "index": {"blocks": sum(v.blocks for v in self.vaults), "embedded": embedded,
                      "seconds": round(fresh_secs, 2),
                      "blocks_per_s": round(embedded / fresh_secs, 1) if embedded and fresh_secs else None},
            "seconds": round(self.seconds, 1),
            "configs": [self._with_delta(r, seed) for r in self.results.values()],
        }

    def baseline(self) -> ConfigResult | None:
        """The factor rows' baseline: the chosen fusion, text only."""
        for result in self.results.values():
            if result.config.group == "factors" and "text only" in result.config.name:
                return result
        return None

    def _with_delta(self, result: ConfigResult, seed: int) -> dict[str, Any]:
        out = result.summary(self.dataset.levels, seed=seed)
        base = self.baseline()
        if base is None or base is result or len(base.rows) != len(result.rows):
            return out
        out["delta"] = {"vs": base.config.name}
        for level in self.dataset.levels:
            diffs = [_level(r, level).get("mrr", 0.0) - _level(b, level).get("mrr", 0.0)
                     for r, b in zip(result.rows, base.rows, strict=True)
                     if "mrr" in _level(b, level)]
            if diffs:
                lo, hi = bootstrap_ci(diffs, seed=seed)
                out["delta"][level] = {"mrr": {"mean": sum(diffs) / len(diffs), "lo": lo, "hi": hi}}
        return out


# -- vaults ---------------------------------------------------------------------------------


def write_vault(spec: VaultSpec, root: Path) -> None:
    """Write the spec's files (and mtimes) into an empty folder."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    for rel, text in spec.files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if rel in spec.mtimes:
            os.utime(path, (spec.mtimes[rel], spec.mtimes[rel]))


def prepare_vault(spec: VaultSpec, root: Path, settings: Any) -> tuple[Any, VaultRun]:
    """Open an indexed vault for `spec`, reusing the folder when its content is unchanged.

    The marker next to the folder keeps the fingerprint and the stats of the run that built
    the index, so a reused vault still reports the real indexing throughput.
    """
    from reme_agent.vault import open_vault

    marker = root.parent / f"{root.name}.index.json"
    fingerprint = spec.fingerprint()
    try:
        previous = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        previous = {}
    reused = root.is_dir() and previous.get("fingerprint") == fingerprint
    if not reused:
        marker.unlink(missing_ok=True)
        write_vault(spec, root)
    vault = open_vault(root, settings, create=True)
    started = time.perf_counter()
    report = vault.index()
    seconds = time.perf_counter() - started
    if not reused or report.embedded:
        previous = {"fingerprint": fingerprint, "embedded": report.embedded,
                    "seconds": round(seconds, 2)}
        marker.write_text(json.dumps(previous), encoding="utf-8")
    return vault, VaultRun(spec.name, report.files, report.blocks, int(previous["embedded"]),
                           float(previous["seconds"]), reused and not report.embedded)


# -- one query ------------------------------------------------------------------------------


def _dedup(keys: Iterable[Any]) -> list[Any]:
    out, seen = [], set()
    for key in keys:
        if key in seen:
            continue
        seen.add(key)
        out.append(key)
    return out


def execute(vault: Any, spec: VaultSpec, query: Query, cfg: EvalConfig,
            options: Any) -> tuple[Any, float]:
    """One call of the recall API for `cfg`: block hits or a SearchResponse, and its ms."""
    from reme_agent.recall.search import rank_blocks, search

    started = time.perf_counter()
    if cfg.mode == "union":
        out: Any = union_candidates(vault, query.text, options)
    elif cfg.mode == "ranked":
        out = ranked_union(vault, query.text, options, cfg.include_archived, spec.now)
    elif cfg.mode == "blocks":
        out = rank_blocks(vault, query.text, limit=options.candidates, options=options,
                               include_archived=cfg.include_archived, now=spec.now)
    else:
        out = search(vault, query.text, limit=NODE_DEPTH, options=options,
                     include_archived=cfg.include_archived, expand_depth=cfg.expand_depth,
                     log_access=False, now=spec.now)
    return out, (time.perf_counter() - started) * 1000


@dataclass
class Scored:
    """A block with an experimental score (what `rerank` needs of a BlockHit)."""

    path: str
    start_line: int
    end_line: int
    score: float


def union_candidates(vault: Any, query: str, options: Any) -> tuple[list[Any], float]:
    """Experimental fusions' input: the candidate union with raw cosine and BM25 per block,
    and the query's BM25 ceiling (sum over its terms of the best single-term score)."""
    from reme_agent.engine.tokenize import tokenize
    from reme_agent.recall.candidates import hybrid_candidates

    hits = hybrid_candidates(vault, query, fusion="blend", vector_weight=0.5,
                             rrf_k=options.rrf_k, candidates=options.candidates)
    ceiling = 0.0
    for term in dict.fromkeys(tokenize(query)):
        best = vault.keyword.scores([term])
        ceiling += max(best.values(), default=0.0)
    return hits, ceiling


def ranked_union(vault: Any, query: str, options: Any, include_archived: bool,
                 now: Any) -> list[Any]:
    """Experimental factor combinations' input: every candidate with its factors, uncut.

    Uses the search module's internal ranking (what `rank_blocks` cuts to `limit`), so a
    re-combination of the factors sees the same candidate union the engine does.
    """
    from reme_agent.recall.search import _ranked

    hits, _, _ = _ranked(vault, query, options, include_archived=include_archived,
                         prefix=None, layers=None, query_rewrite=None, now=now,
                         candidates=options.candidates)
    return hits


def recombine(hits: list[Any], post: dict[str, float]) -> list[Scored]:
    """The engine's final scores (base x factors), for experimental node scoring on top."""
    del post
    out = [Scored(h.path, h.start_line, h.end_line, h.score) for h in hits]
    out.sort(key=lambda h: (-h.score, h.path, h.start_line))
    return out


def refuse(payload: tuple[list[Any], float], post: dict[str, float]) -> list[Scored]:
    """Re-fuse the union: `mm_w` = the engine's min-max blend (a check: it must match the
    blend rows), `cov_w` = min-max cosine + BM25 divided by the query's ceiling, so a note
    sharing one minor term with the query no longer gets the full keyword weight."""
    hits, ceiling = payload
    if not hits:
        return []
    vec = [h.vector if h.vector is not None else 0.0 for h in hits]
    kw = [h.keyword or 0.0 for h in hits]
    lo, hi = min(vec), max(vec)
    vnorm = [(v - lo) / (hi - lo) if hi - lo > 1e-12 else 1.0 for v in vec]
    if "cov_w" in post:
        w = post["cov_w"]
        knorm = [min(1.0, k / ceiling) if ceiling > 0 else 0.0 for k in kw]
    else:
        w = post.get("mm_w", 0.3)
        klo, khi = min(kw), max(kw)
        knorm = [(k - klo) / (khi - klo) if khi - klo > 1e-12 else 1.0 for k in kw]
        if not any(h.keyword is not None for h in hits):
            knorm = [0.0] * len(hits)
    out = [Scored(h.path, h.start_line, h.end_line, w * v + (1 - w) * k)
           for h, v, k in zip(hits, vnorm, knorm, strict=True)]
    out.sort(key=lambda h: (-h.score, h.path, h.start_line))
    return out


def rerank(hits: list[Any], post: dict[str, float]) -> tuple[list[str], list[Any]]:
    """Experimental node scoring from one block list: (node paths, blocks) best first.

    `node_decay` d: a note scores sum_i d^i * s_i over its blocks' scores, best first (d=0 is
    the best block, what `search()` does; d=1 sums them). `block_mix` m: each block is
    re-scored (1-m)*s + m*note score, so blocks of a strongly matching note rise.
    """
    decay = float(post.get("node_decay", 0.0))
    mix = float(post.get("block_mix", 0.0))
    per_path: dict[str, list[float]] = {}
    for hit in hits:
        per_path.setdefault(hit.path, []).append(hit.score)
    node_score = {p: sum(s * decay ** i for i, s in enumerate(sorted(v, reverse=True)))
                  for p, v in per_path.items()}
    paths = sorted(node_score, key=lambda p: (-node_score[p], p))
    blocks = sorted(hits, key=lambda h: (-((1 - mix) * h.score + mix * node_score[h.path]),
                                         h.path, h.start_line))
    return paths, blocks


def options_limit(cfg: EvalConfig) -> int:
    return int(dict(cfg.post).get("limit", 50))


def score_query(out: Any, ms: float, spec: VaultSpec, query: Query, cfg: EvalConfig,
                want_blocks: bool) -> QueryRow:
    """Score one query's result at node (and block) level."""
    extra: dict[str, float] = {}
    expanded: list[str] = []
    shown: list[Any] = out.results if cfg.mode == "nodes" else []
    if cfg.mode in ("blocks", "union", "ranked"):
        if cfg.mode == "union":
            hits = refuse(out, dict(cfg.post))[:options_limit(cfg)]
        elif cfg.mode == "ranked":
            hits = recombine(out, dict(cfg.post))[:options_limit(cfg)]
        else:
            hits = out
        shown = hits[:NODE_DEPTH]
        raw_nodes = [spec.node_key(h.path) for h in hits]
        if cfg.post:
            paths, hits = rerank(hits, dict(cfg.post))
            nodes = _dedup(spec.node_key(p) for p in paths)[:NODE_DEPTH]
        else:
            nodes = _dedup(raw_nodes)[:NODE_DEPTH]
        blocks = [spec.block_key(h.path, h.start_line, h.end_line) for h in hits[:BLOCK_DEPTH]]
        extra["distinct@5"] = distinct_at(raw_nodes, 5)
    else:
        nodes = _dedup(spec.node_key(n.path) for n in out.results)
        blocks = [spec.block_key(n.path, c.start_line, c.end_line)
                  for n in out.results for c in n.chunks][:BLOCK_DEPTH]
        top5 = {n.path for n in out.results[:5]}
        expanded = [spec.node_key(e["path"]) for e in out.expansion if e.get("seed") in top5]
        extra["distinct@5"] = distinct_at(nodes, 5)
        if cfg.expand_depth:
            extra["expanded"] = float(len(out.expansion))
    # A query with no relevant note (kvault's no_match) is scored only by `empty`: the share
    # answered with nothing. On answerable queries `empty` is a floor silencing a real answer.
    extra["empty"] = answered_empty(shown)
    if not query.relevant:
        return QueryRow(query.qid, query.kind, {}, {}, extra, ms)
    node = score_ranking(nodes, query.relevant)
    if query.forbidden:
        extra["leak@5"] = leak_at(nodes, query.forbidden, 5)
    # Recall of the first 5 results plus the expansion hanging off them (what the agent sees).
    seen = _dedup(nodes[:5] + expanded)
    extra["r@5+x"] = recall_at(seen, query.relevant, len(seen)) if expanded else node["r@5"]
    block = score_ranking(blocks, query.relevant_blocks) if want_blocks and query.relevant_blocks else {}
    return QueryRow(query.qid, query.kind, node, block, extra, ms)


def run_query(vault: Any, spec: VaultSpec, query: Query, cfg: EvalConfig, options: Any,
              want_blocks: bool) -> QueryRow:
    """Run one query under one config and score it."""
    out, ms = execute(vault, spec, query, cfg, options)
    return score_query(out, ms, spec, query, cfg, want_blocks)


# -- a dataset ------------------------------------------------------------------------------


def run_dataset(ds: Dataset, configs: list[EvalConfig], *, embedder: str = "use",
                work_dir: Path = WORK_DIR, base_settings: Any = None,
                progress: bool = True, echo: Callable[[str], Any] | None = None) -> DatasetRun:
    """Index each vault of `ds` once and run every config's queries against it."""
    from reme_agent.config import Settings

    settings = base_settings or Settings()
    settings = settings.model_copy(update={
        "embedder": settings.embedder.model_copy(update={"name": embedder}),
        "index": settings.index.model_copy(update={"progress": progress})})
    base = settings.search
    want_blocks = "block" in ds.levels
    started = time.perf_counter()
    results: dict[str, ConfigResult] = {c.name: ConfigResult(c) for c in configs}
    groups: dict[tuple[Any, ...], list[EvalConfig]] = {}
    for cfg in configs:
        groups.setdefault(cfg.signature(base), []).append(cfg)
    vault_runs: list[VaultRun] = []
    bar = _bar(progress, sum(len(v.queries) for v in ds.vaults) * len(groups), ds.name)
    try:
        for spec in ds.vaults:
            root = work_dir / embedder / ds.name / spec.name
            if echo:
                echo(f"[{ds.name}] indexing {spec.name} ({sum(p.endswith('.md') for p in spec.files)} notes)")
            vault, vrun = prepare_vault(spec, root, settings)
            vault_runs.append(vrun)
            try:
                if spec.queries:   # warm-up: model load and caches do not count as latency
                    run_query(vault, spec, spec.queries[0], configs[0],
                              configs[0].settings(base), want_blocks)
                for same in groups.values():
                    cfg = same[0]
                    options = cfg.settings(base)
                    for query in spec.queries:
                        out, ms = execute(vault, spec, query, cfg, options)
                        for twin in same:   # same search, scored per twin (post-processing)
                            results[twin.name].rows.append(
                                score_query(out, ms, spec, query, twin, want_blocks))
                        if bar is not None:
                            bar.update(1)
            finally:
                vault.close()
    finally:
        if bar is not None:
            bar.close()
    return DatasetRun(ds, embedder, results, vault_runs, time.perf_counter() - started)


def _bar(enabled: bool, total: int, desc: str) -> Any:
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="q", file=sys.stderr, mininterval=1.0,
                dynamic_ncols=True)
