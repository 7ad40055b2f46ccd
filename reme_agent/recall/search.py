"""Recall entry points (DESIGN §7; seed §2–§9): signal-fused, node-level search.

    hybrid candidates (vector + BM25, fused `base`)        candidates.py / fusion.py
    -> filters: meta/ + audit/ (unless asked), archived, prefix / layers
    -> final = base × centrality × community × recency × layer   factors.py
    -> group by node, top chunks per node, limit            group.py
    -> link expansion of the result nodes                   expand.py
    -> access log: the returned nodes, one hit per (path, day)   access_log.py

`search_blocks` is the F1 baseline (text relevance only, no filters beyond the prefix) and
stays for callers and the benchmark; `rank_blocks` is the block ranking with every factor
(what the evals score); `search` is the full node-level pipeline the toolkit calls.
`options` (a SearchSettings) overrides the vault's settings for one call, so the evals can
switch any factor off without touching files. The only write is the access log, in memory
here, flushed later; a failure there never fails a search.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from reme_agent.engine.tokenize import tokenize
from reme_agent.errors import InvalidArgument
from reme_agent.recall.archive import archived_now
from reme_agent.recall.candidates import BlockHit, hybrid_candidates, vector_want
from reme_agent.recall.evidence import QueryEvidence, extra_block_ids, gather
from reme_agent.recall.expand import MAX_DEPTH, expand_links
from reme_agent.recall.factors import (
    FACTOR_NAMES,
    FactorContext,
    node_factors,
    seed_communities,
)
from reme_agent.recall.floor import mark_weak
from reme_agent.recall.freshness import IndexFreshness, check_for, refresh_stale
from reme_agent.recall.group import (
    ChunkResult,
    NodeResult,
    catalog_for,
    group_by_node,
)
from reme_agent.recall.signals import utc_now
from reme_agent.recall.snippets import order_chunks
from reme_agent.recall.timings import stage
from reme_agent.recall.vector_side import start_vector_side
from reme_agent.schema.layout import AUDIT, META, TOP_FOLDERS, layer_of
from reme_agent.schema.obsidian import excluded_matcher

if TYPE_CHECKING:
    from reme_agent.config import SearchSettings
    from reme_agent.vault import Vault

__all__ = [
    "BlockHit",
    "ChunkResult",
    "NodeResult",
    "SearchResponse",
    "rank_blocks",
    "search",
    "search_blocks",
]

log = logging.getLogger("reme_agent.recall")

HIDDEN_LAYERS = (META, AUDIT)
"""Never search hits unless a prefix or `layers` names them (derived data, reports)."""


@dataclass
class SearchResponse:
    query: str
    results: list[NodeResult]
    expansion: list[dict[str, Any]] = field(default_factory=list)
    signals_freshness: dict[str, str | None] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    index_freshness: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form for Python callers, the CLI's --json and the toolkit.

        Written out field by field: `dataclasses.asdict` deep-copies every value through
        `copy.deepcopy` and cost more than the rest of the answer's shaping (~0.6 ms of a
        5 ms search). The result holds no object of the response (dicts and lists are new).
        """
        with stage("json"):
            return {
                "query": self.query,
                "results": [_node_dict(n) for n in self.results],
                "expansion": [dict(e) for e in self.expansion],
                "signals_freshness": dict(self.signals_freshness),
                "warnings": list(self.warnings),
                "index_freshness": {k: list(v) if isinstance(v, list) else v
                                    for k, v in self.index_freshness.items()},
            }

    def render(self) -> str:
        """The seed §4.1 text form, for a model."""
        from reme_agent.recall.render import render_response

        with stage("rendering"):
            return render_response(self)


def _node_dict(node: NodeResult) -> dict[str, Any]:
    return {
        "path": node.path,
        "title": node.title,
        "description": node.description,
        "score": round(node.score, 6),
        "factors": {k: round(v, 6) for k, v in node.factors.items()},
        "chunks": [{"block_id": c.block_id, "start_line": c.start_line,
                    "end_line": c.end_line, "text": c.text, "score": round(c.score, 6)}
                   for c in node.chunks],
        "match": dict(node.match) if node.match is not None else None,
        "weak": node.weak,
    }


# -- baseline ---------------------------------------------------------------------------


def search_blocks(vault: Vault, query: str, limit: int = 10, *, fusion: str | None = None,
                  vector_weight: float | None = None, prefix: str | None = None,
                  query_rewrite: str | None = None) -> list[BlockHit]:
    """Best blocks for `query` by text relevance only (the F1 baseline)."""
    _check_query(query, limit)
    cfg = vault.settings.search
    allowed = (lambda p: p.startswith(prefix)) if prefix else None
    hits = hybrid_candidates(
        vault, query, fusion=fusion or cfg.fusion,
        vector_weight=cfg.vector_weight if vector_weight is None else vector_weight,
        rrf_k=cfg.rrf_k, candidates=max(cfg.candidates, limit), query_rewrite=query_rewrite,
        allowed_path=allowed)
    return hits[:limit]


# -- full pipeline ----------------------------------------------------------------------


def rank_blocks(vault: Vault, query: str, *, limit: int = 10,
                options: SearchSettings | None = None, include_archived: bool = False,
                prefix: str | None = None, layers: list[str] | None = None,
                query_rewrite: str | None = None, now: datetime | None = None) -> list[BlockHit]:
    """Blocks ranked by the final score (every factor applied, no grouping), best first."""
    _check_query(query, limit)
    opts = options or vault.settings.search
    freshness = IndexFreshness()
    for attempt in range(2):
        hits, _, held_back = _ranked(vault, query, opts, include_archived=include_archived,
                                     prefix=prefix, layers=layers, query_rewrite=query_rewrite,
                                     now=now, candidates=max(opts.candidates, limit),
                                     freshness=freshness)
        shown = hits[:limit]
        verdict = _verify(vault, [h.path for h in shown], [h.path for h in hits], held_back,
                          freshness, retry=attempt == 0)
        if verdict is None:
            continue
        if verdict:
            hits = [h for h in hits if h.path not in verdict.gone]
        return hits[:limit]
    raise AssertionError("unreachable: the second attempt never retries")


def search(vault: Vault, query: str, *, limit: int = 10, include_archived: bool = False,
           expand_depth: int | None = None, top_chunks_per_path: int | None = None,
           query_rewrite: str | None = None, prefix: str | None = None,
           layers: list[str] | None = None, options: SearchSettings | None = None,
           log_access: bool = True, now: datetime | None = None) -> SearchResponse:
    """Node-level search with signal factors, grouping, expansion and the access log."""
    with vault.state.pinned():   # one index generation read per search
        return _search(vault, query, limit=limit, include_archived=include_archived,
                       expand_depth=expand_depth, top_chunks_per_path=top_chunks_per_path,
                       query_rewrite=query_rewrite, prefix=prefix, layers=layers,
                       options=options, log_access=log_access, now=now)


def _search(vault: Vault, query: str, *, limit: int, include_archived: bool,
            expand_depth: int | None, top_chunks_per_path: int | None,
            query_rewrite: str | None, prefix: str | None, layers: list[str] | None,
            options: SearchSettings | None, log_access: bool,
            now: datetime | None) -> SearchResponse:
    _check_query(query, limit)
    opts = options or vault.settings.search
    depth = opts.expand_depth if expand_depth is None else expand_depth
    if not 0 <= depth <= MAX_DEPTH:
        raise InvalidArgument(f"expand_depth must be between 0 and {MAX_DEPTH}, got {depth}.")
    per_node = opts.top_chunks_per_path if top_chunks_per_path is None else top_chunks_per_path
    if per_node < 1:
        raise InvalidArgument(f"top_chunks_per_path must be at least 1, got {per_node}.")

    freshness = IndexFreshness()
    for attempt in range(2):
        hits, ctx, held_back = _ranked(vault, query, opts, include_archived=include_archived,
                                       prefix=prefix, layers=layers,
                                       query_rewrite=query_rewrite, now=now,
                                       candidates=max(opts.candidates, limit * per_node),
                                       freshness=freshness)
        results = _grouped(vault, hits, ctx, opts, per_node, limit)
        verdict = _verify(vault, [n.path for n in results], [h.path for h in hits],
                          held_back, freshness, retry=attempt == 0)
        if verdict is None:
            continue   # re-indexed: rank again on the fresh projections
        if verdict:    # could not re-index: answer without them
            hits = [h for h in hits if h.path not in verdict.gone]
            ctx.evidence.forget(verdict.gone)
            ctx.warnings.append(verdict.warning)
            results = _grouped(vault, hits, ctx, opts, per_node, limit)
        break
    with stage("relevance floor"):
        mark_weak(vault, results, hits, ctx.tokens, ctx.evidence, opts, vault.settings.embedder.name)

    expansion: list[dict[str, Any]] = []
    if depth and results:
        # Links cross layers, so no prefix/layer filter here; hidden + archived still apply.
        with stage("expansion"):
            shown = _excluder(vault, include_archived, prefix=None, layers=None)
            expansion = expand_links(vault.graph, [n.path for n in results], ctx.catalog,
                                     depth=depth, per_direction=opts.max_links_per_direction,
                                     budget=opts.expand_path_budget,
                                     exclude=lambda p: not shown(p), suspended=ctx.archived)
        with stage("freshness"):
            expansion = _fresh_expansion(vault, expansion, ctx)

    if log_access and results:
        with stage("access log"):
            try:
                vault.access_log.record([n.path for n in results])
            except Exception as exc:  # the access log never fails a search
                log.warning("access log record failed: %s", exc)

    with stage("freshness"):
        freshness = ctx.freshness
        report = check_for(vault).report(vault, tuple(f"{h}/" for h in HIDDEN_LAYERS))
        freshness.indexed_files = report.indexed_files
        freshness.unindexed_files = report.unindexed_files
        hint = freshness.hint()
    with stage("signals"):
        return SearchResponse(query=query, results=results, expansion=expansion,
                              signals_freshness=vault.signals.freshness(),
                              warnings=[*vault.signals.warnings(), *ctx.warnings,
                                        *([hint] if hint else [])],
                              index_freshness=freshness.as_dict())


def _grouped(vault: Vault, hits: list[BlockHit], ctx: FactorContext, opts: SearchSettings,
             per_node: int, limit: int) -> list[NodeResult]:
    ev = ctx.evidence
    with stage("grouping"):
        scores = {h.block_id: h.score for h in hits}
        factors = {h.path: h.factors for h in hits}
        results = group_by_node(hits, scores, factors, ctx.catalog,
                                top_chunks_per_path=per_node, limit=limit,
                                block_decay=opts.node_block_decay,
                                tiers={p: ev.tier(p) for p in factors},
                                shown=lambda blocks: _snippets(vault, ctx.tokens, blocks,
                                                               ev.asked))
        for node in results:
            node.match = ev.match_of(node.path)
    return results


def _snippets(vault: Vault, tokens: list[str], blocks: list[BlockHit],
              asked: set[str]) -> list[BlockHit]:
    with stage("snippets"):
        return order_chunks(vault, tokens, blocks, asked)


# -- internals --------------------------------------------------------------------------


def _fresh_expansion(vault: Vault, expansion: list[dict[str, Any]],
                     ctx: FactorContext) -> list[dict[str, Any]]:
    """Linked notes listed beside the results exist: a vanished one is left out, and any
    changed one is re-indexed for the next search."""
    stale = check_for(vault).stale(str(vault.root), [e["path"] for e in expansion])
    if not stale:
        return expansion
    done, warning = refresh_stale(vault, stale)
    ctx.freshness.reindexed += done
    if warning:
        ctx.warnings.append(warning)
    root = str(vault.root)
    gone = {p for p in stale if not os.path.isfile(os.path.join(root, p))}
    return [e for e in expansion if e["path"] not in gone]


def _check_query(query: str, limit: int) -> None:
    if not isinstance(query, str) or not query.strip():
        raise InvalidArgument("The query is empty.", "Pass the words or question to search for.")
    if limit < 1:
        raise InvalidArgument(f"limit must be at least 1, got {limit}.")


def _excluder(vault: Vault, include_archived: bool, *, prefix: str | None,
              layers: list[str] | None, held_back: set[str] | None = None
              ) -> Callable[[str], bool]:
    """allowed(path): the prefix / layer filter, hidden layers, the files Obsidian's
    "Excluded files" hides (unless `prefix` names them) and the archived set.

    Archived paths it refuses are added to `held_back`: the candidates are asked only near
    the top of their ranking, so these are the archived notes this query would have found,
    the ones whose file to check for a hand edit that un-archived them."""
    if layers:
        unknown = [name for name in layers if name not in TOP_FOLDERS]
        if unknown:
            raise InvalidArgument(f"Unknown layer(s) {unknown}.",
                                  f"Use some of {list(TOP_FOLDERS)}.")
    wanted = set(layers or ())
    shown_hidden = {h for h in HIDDEN_LAYERS
                    if h in wanted or (prefix and layer_of(prefix.lstrip("/")) == h)}
    hidden = tuple(f"{h}/" for h in HIDDEN_LAYERS if h not in shown_hidden)
    archived = None if include_archived else archived_now(vault)
    excluded = excluded_matcher(vault.root)
    if excluded is not None and prefix and excluded(prefix.lstrip("/")):
        excluded = None   # the caller asked for that folder by name

    def allowed(path: str) -> bool:
        if hidden and path.startswith(hidden):
            return False
        if excluded is not None and excluded(path):
            return False
        if prefix and not path.startswith(prefix):
            return False
        if wanted and layer_of(path) not in wanted:
            return False
        if archived is not None and path in archived:
            if held_back is not None:
                held_back.add(path)
            return False
        return True
    return allowed


@dataclass
class _Dropped:
    """Shown notes whose changed file could not be re-indexed: left out, with a warning."""

    gone: set[str]
    warning: str

    def __bool__(self) -> bool:
        return bool(self.gone)


def _verify(vault: Vault, shown: list[str], candidates: list[str], held_back: set[str],
            freshness: IndexFreshness, *, retry: bool) -> _Dropped | None:
    """Never stale (DESIGN §7), checked where it matters: the files of the notes the answer
    shows, and of the archived notes the filter held back (a hand edit may have un-archived
    one), against the index state (one stat each).

    Only what is shown is checked on the way out, not every candidate (~90 notes at 10k:
    one stat each was the largest stage of a search): a stale candidate that is not shown
    returns nothing stale. When a shown one is stale, all `candidates` are checked then, and
    every changed file is re-indexed path-limited in one go (a batch of hand edits costs one
    re-index, not one per round); None says "rank again". When that fails, or on the second
    attempt (a file changed again meanwhile), the stale notes are dropped."""
    check, root = check_for(vault), str(vault.root)
    with stage("freshness"):
        stale = check.stale(root, [*shown, *sorted(held_back)])
        if stale and retry:
            stale = check.stale(root, [*stale, *candidates])
    if not stale:
        return _Dropped(set(), "")
    if retry:
        done, warning = refresh_stale(vault, stale)
        if done:
            freshness.reindexed += done
            return None
    else:
        warning = (f"{len(stale)} note(s) changed again while searching; left out of the "
                   "results: " + ", ".join(stale[:5]))
    freshness.dropped += stale
    return _Dropped(set(stale), warning or "")


def _ranked(vault: Vault, query: str, opts: SearchSettings, *, include_archived: bool,
            prefix: str | None, layers: list[str] | None, query_rewrite: str | None,
            now: datetime | None, candidates: int, freshness: IndexFreshness | None = None
            ) -> tuple[list[BlockHit], FactorContext, set[str]]:
    """Every candidate with its factors, best first, and the archived paths held back
    (unchecked against the files: `_verify` checks what is shown)."""
    freshness = freshness if freshness is not None else IndexFreshness()
    held_back: set[str] = set()
    allowed = _excluder(vault, include_archived, prefix=prefix, layers=layers,
                        held_back=held_back)
    vault.ready()
    with stage("tokenize"):
        tokens = tokenize(query)

    # An exclusion-only filter (hidden layers, archived) drops few candidates.
    overfetch = 4.0 if (prefix or layers) else 1.5

    def while_waiting(paths: list[str]) -> None:
        """The keyword side's share of the per-note work, done while the vector side runs:
        the catalog entries of its notes (factors read them)."""
        with stage("factors"):
            catalog = catalog_for(vault)
            catalog.sync()
            graph, suspended = vault.graph, archived_now(vault)  # the factors' own key
            catalog.many(paths)
            catalog.in_degrees(graph, paths, suspended)

    # The vector side starts first: it runs while names, phrases and BM25 are found here.
    side = (start_vector_side(vault, query_rewrite or query,
                              vector_want(candidates, overfetch, True))
            if opts.vector_weight > 0.0 else None)
    evidence = gather(vault, query, tokens, opts)
    with stage("names"):
        named = extra_block_ids(vault, [p for p in evidence.paths() if allowed(p)])
        extra = [*named, *evidence.phrases]
    hits = hybrid_candidates(
        vault, query, fusion=opts.fusion, vector_weight=opts.vector_weight,
        rrf_k=opts.rrf_k, candidates=candidates, query_rewrite=query_rewrite,
        allowed_path=allowed, vector_overfetch=overfetch, tokens=tokens,
        extra_ids=extra, vector_side=side, while_waiting=while_waiting,
        known_paths={**named, **evidence.phrases})
    with stage("factors"):
        hits, ctx = _factored(vault, hits, evidence, opts, tokens, now, freshness, [])
    return hits, ctx, held_back


def _factored(vault: Vault, hits: list[BlockHit], evidence: QueryEvidence,
              opts: SearchSettings, tokens: list[str], now: datetime | None,
              freshness: IndexFreshness, warnings: list[str]
              ) -> tuple[list[BlockHit], FactorContext]:
    """Every factor applied to every hit, hits sorted (tier, score, path, line)."""
    catalog = catalog_for(vault)
    catalog.sync()
    communities = vault.signals.communities() if opts.use_community else None
    seeds = list(dict.fromkeys(h.path for h in hits))   # hits arrive sorted by base
    ctx = FactorContext(
        options=opts, graph=vault.graph, catalog=catalog, now=now or utc_now(),
        communities=communities, seed_communities=seed_communities(seeds, communities),
        last_hits=vault.signals.last_hits() if opts.use_recency else None,
        evidence=evidence, tokens=tokens, freshness=freshness, warnings=warnings,
        archived=archived_now(vault))
    # Per note once: its factors (in `combine`'s order), whether the query's evidence boosts
    # it, its tier. Per hit only the arithmetic, as `combine(evidence.boosted(...))` does it.
    catalog.many(seeds)                                   # one read for the notes not cached
    if opts.use_centrality:
        catalog.in_degrees(ctx.graph, seeds, ctx.archived)
    per_path: dict[str, tuple[dict[str, float], tuple[float, ...], bool, int]] = {}
    with_evidence = evidence.names.keys() | evidence.relations.keys() | evidence.neighbours.keys()
    for hit in hits:
        path = hit.path
        known = per_path.get(path)
        if known is None:
            f = node_factors(ctx, path)
            known = per_path[path] = (f, tuple(f.get(n, 1.0) for n in FACTOR_NAMES),
                                      path in with_evidence, -evidence.tier(path))
        f, multipliers, boosted, _ = known
        hit.factors = f
        score = evidence.boosted(hit, opts) if boosted else hit.base
        for m in multipliers:
            score *= m
        hit.score = score
    hits.sort(key=lambda h: (per_path[h.path][3], -h.score, h.path, h.start_line))
    return hits, ctx
