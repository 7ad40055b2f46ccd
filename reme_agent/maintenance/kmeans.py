"""K-means and the silhouette score in plain numpy, for the split proposal (DESIGN §9 split).

scikit-learn is not a dependency, and a note has at most a few hundred blocks, so the full
pairwise distance matrix the silhouette needs is small. Everything is seeded: the same
vectors and seed always give the same clusters (maintenance runs must be repeatable).

Rows are expected L2-normalised (embeddings are), so Euclidean distance orders pairs exactly
as cosine distance does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["KMeansResult", "choose_k", "kmeans", "silhouette"]


@dataclass
class KMeansResult:
    labels: np.ndarray          # (n,) cluster index per row, 0..k-1
    centers: np.ndarray         # (k, d)
    inertia: float              # sum of squared distances to the assigned center
    k: int
    silhouette: float = 0.0
    scores: dict[int, float] = field(default_factory=dict)   # k -> silhouette (choose_k)


def _sq_dists(x: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Squared Euclidean distances (n, k), clipped at 0 against rounding."""
    d = (x * x).sum(1)[:, None] - 2.0 * x @ c.T + (c * c).sum(1)[None, :]
    return np.maximum(d, 0.0)


def _plus_plus(x: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """k-means++ seeding: each next center drawn with probability ∝ squared distance."""
    n = len(x)
    centers = [x[rng.integers(n)]]
    closest = _sq_dists(x, centers[0][None, :])[:, 0]
    for _ in range(1, k):
        total = closest.sum()
        if total <= 0:  # every point sits on a center already: pick any other row
            idx = int(rng.integers(n))
        else:
            idx = int(np.searchsorted(np.cumsum(closest), rng.random() * total))
            idx = min(idx, n - 1)
        centers.append(x[idx])
        closest = np.minimum(closest, _sq_dists(x, x[idx][None, :])[:, 0])
    return np.array(centers)


def _lloyd(x: np.ndarray, centers: np.ndarray, max_iter: int,
           tol: float) -> tuple[np.ndarray, np.ndarray, float]:
    k = len(centers)
    labels = np.zeros(len(x), dtype=np.int64)
    for _ in range(max_iter):
        d = _sq_dists(x, centers)
        labels = d.argmin(1)
        new = centers.copy()
        for j in range(k):
            members = x[labels == j]
            if len(members):
                new[j] = members.mean(0)
            else:  # empty cluster: restart it on the point farthest from its center
                far = int(d[np.arange(len(x)), labels].argmax())
                new[j] = x[far]
                labels[far] = j
        shift = float(((new - centers) ** 2).sum())
        centers = new
        if shift <= tol:
            break
    d = _sq_dists(x, centers)
    labels = d.argmin(1)
    inertia = float(d[np.arange(len(x)), labels].sum())
    return labels, centers, inertia


def kmeans(x: np.ndarray, k: int, *, seed: int = 0, n_init: int = 8, max_iter: int = 100,
           tol: float = 1e-8) -> KMeansResult:
    """Best of `n_init` seeded k-means++ runs (lowest inertia); labels renumbered by first row."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or len(x) < k or k < 1:
        raise ValueError(f"kmeans needs at least k={k} rows of a 2-D array, got shape {x.shape}")
    rng = np.random.default_rng(seed)
    best: tuple[np.ndarray, np.ndarray, float] | None = None
    for _ in range(max(1, n_init)):
        run = _lloyd(x, _plus_plus(x, k, rng), max_iter, tol)
        if best is None or run[2] < best[2] - 1e-12:
            best = run
    assert best is not None
    labels, centers, inertia = best
    # Canonical numbering (cluster of row 0 is 0, ...): equal partitions compare equal.
    order: dict[int, int] = {}
    for lab in labels.tolist():
        order.setdefault(lab, len(order))
    for j in range(k):
        order.setdefault(j, len(order))
    remap = np.array([order[j] for j in range(k)])
    new_centers = np.zeros_like(centers)
    new_centers[remap] = centers
    return KMeansResult(remap[labels], new_centers, inertia, k)


def silhouette(x: np.ndarray, labels: np.ndarray) -> float:
    """Mean silhouette coefficient (Euclidean); a point alone in its cluster scores 0.

    Same definition as scikit-learn's `silhouette_score`; needs 2 <= clusters <= n - 1.
    """
    x = np.asarray(x, dtype=np.float64)
    labels = np.asarray(labels)
    uniq = np.unique(labels)
    n = len(x)
    if not 2 <= len(uniq) <= n - 1:
        raise ValueError(f"silhouette needs 2..{n - 1} clusters, got {len(uniq)}")
    dist = np.sqrt(_sq_dists(x, x))
    sizes = np.array([(labels == u).sum() for u in uniq])
    # sums[i, j] = total distance from point i to the members of cluster j
    onehot = (labels[:, None] == uniq[None, :]).astype(np.float64)
    sums = dist @ onehot
    own = np.searchsorted(uniq, labels)
    own_size = sizes[own]
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(own_size > 1, sums[np.arange(n), own] / np.maximum(own_size - 1, 1), 0.0)
        means = sums / sizes[None, :]
    means[np.arange(n), own] = np.inf
    b = means.min(1)
    denom = np.maximum(a, b)
    s = np.where((own_size > 1) & (denom > 0), (b - a) / np.where(denom > 0, denom, 1.0), 0.0)
    return float(s.mean())


def choose_k(x: np.ndarray, k_min: int = 2, k_max: int = 6, *, seed: int = 0,
             n_init: int = 8) -> KMeansResult | None:
    """K-means for every K in k_min..k_max; the K with the best silhouette wins (ties: smaller K).

    None when there are fewer than 3 distinct rows (no K >= 2 can be scored).
    """
    x = np.asarray(x, dtype=np.float64)
    distinct = len(np.unique(np.round(x, 9), axis=0)) if len(x) else 0
    top = min(k_max, distinct - 1, len(x) - 1)
    best: KMeansResult | None = None
    scores: dict[int, float] = {}
    for k in range(max(2, k_min), top + 1):
        run = kmeans(x, k, seed=seed, n_init=n_init)
        if len(np.unique(run.labels)) < 2:
            continue
        run.silhouette = silhouette(x, run.labels)
        scores[k] = round(run.silhouette, 6)
        if best is None or run.silhouette > best.silhouette + 1e-9:
            best = run
    if best is not None:
        best.scores = scores
    return best
