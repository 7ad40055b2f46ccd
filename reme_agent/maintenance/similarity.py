"""Near-duplicate pairs by cosine similarity: one function for merge and auto-link L2/L4.

DESIGN §9 (maintainer merge candidates: similarity threshold, same community; auto-link L2
related-but-unlinked, L4 duplicate report). The callers keep their own inputs and knobs
(`maintain.merge_similarity` over summary vectors; `autolink.l2_similarity` /
`l4_similarity` over node vectors); the pair search is this one.

Vectors are expected L2-normalised (the dot product is the cosine). Products take at most
`block` rows at a time, never the full n x n matrix, so memory stays bounded.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = ["similar_pairs", "similar_paths"]

_BLOCK = 1024
_PACK = 256   # communities smaller than this share one matrix product


def similar_pairs(mat: np.ndarray, threshold: float, *, groups: np.ndarray | None = None,
                  free: np.ndarray | None = None, neighbors: int | None = 10,
                  block: int = _BLOCK) -> list[tuple[int, int, float]]:
    """(i, j, cosine) with i < j and cosine >= threshold, by i, then cosine desc, then j.

    `groups[i] == groups[j]` (or `free[i] | free[j]`) gates a pair when given; each row keeps
    its `neighbors` most similar partners (None: all of them). Why per community: under the gate a pair is either
    inside one community or has a free end, so only the community blocks and the free rows
    (against every node) are multiplied: O(sum n_c^2 + n * n_free), not O(n^2). Products
    take at most `block` rows, so memory stays bounded even for one huge community.
    """
    n = len(mat)
    groups = None if groups is None else np.asarray(groups)
    free = None if free is None else np.asarray(free, dtype=bool)
    whole = groups is None or n <= block           # every row against every node, as before
    if whole:
        loose = np.ones(n, dtype=bool)
    else:
        loose = free if free is not None else np.zeros(n, dtype=bool)
    free_idx = np.flatnonzero(loose)
    hits: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for rows in _chunks(free_idx, block):
        # a slice where possible, not a copy: the very BLAS call of a plain all-pairs product
        contiguous = rows[-1] - rows[0] + 1 == len(rows)
        sims = _product(mat[rows[0]:rows[-1] + 1] if contiguous else mat[rows], mat)
        mask = sims >= threshold
        if groups is not None and whole:           # n <= block: one chunk of all rows
            gate = groups[:, None] == groups[None, :]
            if free is not None:
                gate |= free[:, None] | free[None, :]
            mask &= gate
        r, c = np.nonzero(mask)
        s, r = sims[r, c], rows[r]
        own = c > r
        back = ~own & ~loose[c]    # (c, r) for a gated c < r: c's community search skips r
        hits.append(_top(np.r_[r[own], c[back]], np.r_[c[own], r[back]],
                         np.r_[s[own], s[back]], neighbors))
    if not whole:
        gated = np.flatnonzero(~loose)
        order = gated[np.argsort(groups[gated], kind="stable")]   # by community, then index
        labels = groups[order]
        edges = np.r_[0, np.flatnonzero(labels[1:] != labels[:-1]) + 1, len(order)]
        sizes = np.diff(edges)
        for a, b in zip(edges[:-1], edges[1:], strict=True):
            if b - a <= _PACK:
                continue
            colmat = mat[order[a:b]]               # a large community: rows in chunks
            for rows in _chunks(order[a:b], block):
                at = int(np.searchsorted(order[a:b], rows[0]))   # columns j > i only
                hits.append(_gated_hits(mat[rows], rows, colmat[at:], order[a + at:b], None,
                                        threshold, neighbors))
        small = np.repeat(sizes <= _PACK, sizes)   # small communities share one product
        rest, lab = order[small], labels[small]
        packs: list[list[int]] = []
        start = 0
        for end in np.r_[np.flatnonzero(lab[1:] != lab[:-1]) + 1, len(rest)]:
            if end - start >= _PACK:
                packs.append([start, int(end)])
                start = int(end)
        if start < len(rest):                      # no tiny last product: join the one before
            if packs:
                packs[-1][1] = len(rest)
            else:
                packs.append([start, len(rest)])
        for a, b in packs:
            same = None if lab[a] == lab[b - 1] else lab[a:b, None] == lab[None, a:b]
            hits.append(_gated_hits(mat[rest[a:b]], rest[a:b], mat[rest[a:b]], rest[a:b], same,
                                    threshold, neighbors))
    if not hits:
        return []
    r, c, s = _top(*(np.concatenate(parts) for parts in zip(*hits, strict=True)), neighbors)
    return [(int(a), int(b), float(x)) for a, b, x in zip(r, c, s, strict=True)]


def _chunks(idx: np.ndarray, block: int) -> list[np.ndarray]:
    """`idx` in near-equal pieces of at most `block`: no tiny last product."""
    pieces = -(-len(idx) // block)
    return list(np.array_split(idx, pieces)) if pieces else []


def _product(rowmat: np.ndarray, colmat: np.ndarray) -> np.ndarray:
    """rowmat @ colmat.T, always through BLAS gemm: numpy sends a one-row or one-column
    product to gemv, which rounds differently, so such a product is padded to two."""
    if len(rowmat) == 1:
        return _product(np.vstack([rowmat, rowmat]), colmat)[:1]
    if len(colmat) == 1:
        return _product(rowmat, np.vstack([colmat, colmat]))[:, :1]
    return rowmat @ colmat.T


def _gated_hits(rowmat: np.ndarray, rows: np.ndarray, colmat: np.ndarray, cols: np.ndarray,
                same: np.ndarray | None, threshold: float, neighbors: int | None,
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs of `rows` with `cols` (j > i), gated by `same` when the block mixes groups."""
    sims = _product(rowmat, colmat)
    mask = (sims >= threshold) & (cols[None, :] > rows[:, None])
    if same is not None:
        mask &= same
    r, c = np.nonzero(mask)
    return _top(rows[r], cols[c], sims[r, c], neighbors)


def _top(r: np.ndarray, c: np.ndarray, s: np.ndarray, neighbors: int | None,
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted by row, then similarity desc, then column; at most `neighbors` per row."""
    order = np.lexsort((c, -s, r))
    r, c, s = r[order], c[order], s[order]
    if neighbors is None:
        return r, c, s
    starts = np.r_[0, np.flatnonzero(np.diff(r)) + 1]
    rank = np.arange(len(r)) - np.repeat(starts, np.diff(np.r_[starts, len(r)]))
    keep = rank < neighbors
    return r[keep], c[keep], s[keep]


def similar_paths(vectors: Mapping[str, np.ndarray], threshold: float,
                  ) -> list[tuple[str, str, float]]:
    """(a, b, cosine) over named vectors with a < b and cosine >= threshold, every pair (no
    neighbour cap), most similar first; cosines rounded to 4 places."""
    paths = sorted(vectors)
    if len(paths) < 2:
        return []
    mat = np.stack([np.asarray(vectors[p]) for p in paths]).astype(np.float32)
    out = [(paths[i], paths[j], round(s, 4))
           for i, j, s in similar_pairs(mat, threshold, neighbors=None)]
    out.sort(key=lambda t: (-t[2], t[0], t[1]))
    return out
