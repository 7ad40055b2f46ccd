"""Fusing the vector and keyword candidate lists into one score per block (DESIGN §7).

Two methods, chosen in config and compared by the evals:
- `rrf`: weight / (k + rank) per side, the seed's original (k=60, vector_weight 0.7).
- `blend`: w·minmax(cosine) + (1-w)·minmax(bm25) over the candidate union. A side that did
  not return a candidate contributes 0 for it. Measured better than RRF at every weight with
  the USE embedder (design/notes/embedder_quality.md), because RRF lets a weak side's rank 1
  outvote a strong lexical match.
"""

from __future__ import annotations

from collections.abc import Sequence

Scored = Sequence[tuple[str, float]]


def rrf(vector: Scored, keyword: Scored, vector_weight: float, k: int = 60) -> dict[str, float]:
    out: dict[str, float] = {}
    for rank, (doc, _) in enumerate(vector, start=1):
        out[doc] = out.get(doc, 0.0) + vector_weight / (k + rank)
    for rank, (doc, _) in enumerate(keyword, start=1):
        out[doc] = out.get(doc, 0.0) + (1.0 - vector_weight) / (k + rank)
    return out


def _minmax(scored: Scored) -> dict[str, float]:
    if not scored:
        return {}
    values = [s for _, s in scored]
    low, high = min(values), max(values)
    if high - low < 1e-12:
        return {doc: 1.0 for doc, _ in scored}
    return {doc: (s - low) / (high - low) for doc, s in scored}


def blend(vector: Scored, keyword: Scored, vector_weight: float) -> dict[str, float]:
    v, kw = _minmax(vector), _minmax(keyword)
    return {doc: vector_weight * v.get(doc, 0.0) + (1.0 - vector_weight) * kw.get(doc, 0.0)
            for doc in v.keys() | kw.keys()}


def fuse(method: str, vector: Scored, keyword: Scored, vector_weight: float,
         k: int = 60) -> dict[str, float]:
    if method == "rrf":
        return rrf(vector, keyword, vector_weight, k)
    if method == "blend":
        return blend(vector, keyword, vector_weight)
    raise ValueError(f"unknown fusion method {method!r} (use 'rrf' or 'blend')")
