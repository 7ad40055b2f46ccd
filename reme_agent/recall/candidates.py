"""Stage 1 of recall: hybrid block candidates from the vector and keyword projections.

Both sides are asked for `candidates` blocks; the union is then scored on both sides (a block
the vector side missed still gets its real BM25 score and vice versa) so the blend is
normalised over the same set, and fused into one text-relevance score per block.
`allowed_path` filters both sides before the cut; the vector side over-fetches
(`vector_overfetch` × candidates) so a filter does not starve it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from reme_agent.engine.tokenize import tokenize
from reme_agent.recall.fusion import fuse
from reme_agent.recall.rows import rows_for
from reme_agent.recall.timings import stage
from reme_agent.recall.vector_side import VectorSide, run_beside, start_vector_side

if TYPE_CHECKING:
    from reme_agent.engine.projections.keyword import QueryScores
    from reme_agent.engine.state import BlockRow
    from reme_agent.vault import Vault

log = logging.getLogger("reme_agent.recall")
_warned_no_embeddings = False


@dataclass
class BlockHit:
    """One block: its text-relevance `base`, and (after `rank_blocks`) its final score.

    `score` equals `base` until the signal factors are applied; `factors` then holds them.
    """

    block_id: str
    path: str
    start_line: int
    end_line: int
    text: str
    heading: str | None
    base: float
    vector: float | None = None
    keyword: float | None = None
    score: float = 0.0
    factors: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.score:
            self.score = self.base


def vector_want(candidates: int, overfetch: float, filtered: bool) -> int:
    """How many nearest blocks to ask the vector projection for (a filter over-fetches)."""
    return int(candidates * overfetch) if filtered else candidates


def hybrid_candidates(vault: Vault, query: str, *, fusion: str, vector_weight: float,
                      rrf_k: int = 60, candidates: int = 50, query_rewrite: str | None = None,
                      allowed_path: Callable[[str], bool] | None = None,
                      vector_overfetch: float = 4.0, tokens: list[str] | None = None,
                      extra_ids: Sequence[str] = (),
                      vector_side: VectorSide | None = None,
                      while_waiting: Callable[[list[str]], None] | None = None,
                      known_paths: Mapping[str, str] | None = None) -> list[BlockHit]:
    """Fused candidates, best first. `query_rewrite` replaces the query on the vector side only.

    `extra_ids` are blocks that must be candidates whatever their text scores (the blocks of
    notes the query names, relation answers, verbatim phrase matches): they join the union
    and are scored on both sides like any other candidate.

    The vector side (query embedding + ANN) runs on a worker thread while the keyword side
    is scored here (`vector_side.py`); `vector_side` is one the caller started earlier, for
    `query_rewrite or query` and `vector_want(...)` blocks, to overlap more of its own work;
    `while_waiting(the keyword candidates' paths)` is called before waiting for it, for per-note
    work the caller would do on these candidates anyway. `known_paths` (block id -> path)
    are paths the caller already has, e.g. of its extras: the filter looks no id up for them.
    """
    vault.ready()
    allowed_id = _memo_allowed(vault, allowed_path, known_paths) if allowed_path else None
    row_cache = rows_for(vault)

    extra = [d for d in dict.fromkeys(extra_ids) if allowed_id is None or allowed_id(d)]
    side = None
    if vector_weight > 0.0:
        side = vector_side or start_vector_side(
            vault, query_rewrite or query,
            vector_want(candidates, vector_overfetch, allowed_id is not None))

    keyword_top: list[tuple[str, float]] = []
    scores: QueryScores | None = None
    if vector_weight < 1.0:
        with stage("BM25"):
            scores = vault.keyword.query_scores(tokenize(query) if tokens is None else tokens)
            keyword_top = scores.top(candidates, allowed_id)
            if extra:   # the blend below scores them on the vector side too
                have = {d for d, _ in keyword_top}
                of_extra = scores.of(extra)
                keyword_top += [(d, of_extra.get(d, 0.0)) for d in extra if d not in have]
    blend = fusion == "blend" and side is not None and bool(keyword_top)
    stored: dict[str, np.ndarray] | None = None
    rows: dict[str, BlockRow] = {}
    fetch = None
    keyword_ids = [d for d, _ in keyword_top]
    if side is not None and keyword_top:
        # While the vector side runs: (blend) the keyword candidates' stored vectors, which
        # score the ones the vector side does not return, and their rows.
        if blend and side.threaded:
            if getattr(vault.vector, "copy", None) is not None:
                # from the SQLite copy, here: on the worker every row step waited for the
                # GIL while this thread ran (5.2 ms a search there, 1.3 here, 0.3 alone)
                with stage("vector lookups"):
                    stored = _embeddings(vault, keyword_ids)
            else:   # a chroma read: on the worker pool, like the ANN call
                fetch = run_beside("vector lookups", lambda: _embeddings(vault, keyword_ids))
        with stage("block rows"):
            rows = row_cache.rows(keyword_ids)
        if while_waiting is not None:   # their paths from the rows just read
            while_waiting(list(dict.fromkeys(r.path for r in rows.values())))

    vector_top: list[tuple[str, float]] = []
    qvec = None
    if side is not None:
        qvec, nearest = side.result()   # first: a chroma failure is reported as the query's
        if fetch is not None:
            stored = fetch()
        elif blend and stored is None:
            with stage("vector lookups"):
                stored = _embeddings(vault, keyword_ids)
        vector_top = [(d, s) for d, s in nearest
                      if allowed_id is None or allowed_id(d)][:candidates]
        if extra and scores is None:
            have = {d for d, _ in vector_top}
            with stage("vector lookups"):
                embs = _embeddings(vault, [d for d in extra if d not in have])
            vector_top += [(d, float(np.dot(v, qvec))) for d, v in embs.items()]

    if blend and qvec is not None and scores is not None:
        # Score the union on both sides so min-max runs over one candidate set.
        have = {d for d, _ in vector_top}
        keyword_in = {d for d, _ in keyword_top}
        missing = [d for d, _ in keyword_top if d not in have]
        vector_only = [d for d, _ in vector_top if d not in keyword_in]
        with stage("BM25"):
            of_vector = scores.of(vector_only)
        keyword_top += [(d, of_vector.get(d, 0.0)) for d in vector_only]
        vectors = stored or {}
        vector_top += [(d, float(np.dot(vectors[d], qvec))) for d in missing if d in vectors]

    with stage("fusion"):
        fused = fuse(fusion, vector_top, keyword_top, vector_weight, rrf_k)
    with stage("block rows"):
        vec, kw = dict(vector_top), dict(keyword_top)
        rest = [d for d in fused if d not in rows]
        if rest:
            rows.update(row_cache.rows(rest))
        hits = [BlockHit(bid, r.path, r.start_line, r.end_line, r.text, r.heading, score,
                         vec.get(bid), kw.get(bid))
                for bid, score in fused.items() if (r := rows.get(bid)) is not None]
        hits.sort(key=lambda h: (-h.base, h.path, h.start_line))
    return hits


def _memo_allowed(vault: Vault, allowed_path: Callable[[str], bool],
                  known_paths: Mapping[str, str] | None = None) -> Callable[[str], bool]:
    """allowed(block id), each id's verdict kept for this query: the keyword ranking, the
    vector side and the extras ask for the same ids (~250 asks, ~130 ids at 10k notes, each
    a path lookup in the block id map, unless `known_paths` has it)."""
    paths_of = vault.indexer.path_of_block
    known = known_paths or {}
    verdicts: dict[str, bool] = {}

    def allowed_id(bid: str) -> bool:
        verdict = verdicts.get(bid)
        if verdict is None:
            path = known.get(bid) or paths_of(bid) or ""
            verdict = verdicts[bid] = allowed_path(path)
        return verdict
    return allowed_id


def _embeddings(vault: Vault, ids: list[str]) -> dict[str, np.ndarray]:
    """Stored vectors of `ids`; without the projection's `embeddings` they count as 0."""
    global _warned_no_embeddings
    getter = getattr(vault.vector, "embeddings", None)
    if getter is None:
        if not _warned_no_embeddings:
            _warned_no_embeddings = True
            log.warning("VectorProjection.embeddings is missing: keyword-only candidates get "
                        "vector score 0 in the blend")
        return {}
    return getter(ids)
