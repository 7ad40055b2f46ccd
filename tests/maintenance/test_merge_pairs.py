"""`similar_pairs` per community block (PERF-6) against a plain all-pairs reference."""

from __future__ import annotations

import numpy as np
import pytest

from reme_agent.maintenance.similarity import _PACK, similar_pairs

THRESHOLD = 0.9
NEIGHBORS = 3


def reference(mat: np.ndarray, threshold: float, groups: np.ndarray | None,
              free: np.ndarray | None, neighbors: int) -> list[tuple[int, int, float]]:
    """Every pair, one at a time: the gate and the per-row cap exactly as documented."""
    sims = mat @ mat.T
    out: list[tuple[int, int, float]] = []
    for i in range(len(mat)):
        row = []
        for j in range(i + 1, len(mat)):
            allowed = (groups is None or groups[i] == groups[j]
                       or (free is not None and (free[i] or free[j])))
            if allowed and sims[i, j] >= threshold:
                row.append((i, j, float(sims[i, j])))
        row.sort(key=lambda t: (-t[2], t[1]))
        out += row[:neighbors]
    return out


def instance(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Clusters of look-alikes that straddle communities: one community larger than `_PACK`
    (chunked), mid-sized and tiny ones (packed together), singletons and free nodes."""
    rng = np.random.default_rng(seed)
    sizes = [_PACK + 45, 200, 120, 60, 33, 9, 4, 2, 1, 1]
    n = sum(sizes) + 40
    groups = rng.permutation(np.r_[np.repeat(np.arange(len(sizes)), sizes), -np.arange(1, 41)])
    free = groups < 0                               # like find_duplicates: unique label
    base = rng.normal(size=(n // 6, 32))
    mat = base[rng.integers(0, len(base), n)] + rng.normal(0, 0.12, (n, 32))
    mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    return mat, groups, free


@pytest.mark.parametrize("block", [16, 100, 1024])
@pytest.mark.parametrize("gate", ["groups+free", "groups", "none"])
def test_pairs_equal_the_all_pairs_reference(block: int, gate: str) -> None:
    mat, groups, free = instance()
    g = None if gate == "none" else groups
    f = free if gate == "groups+free" else None
    want = reference(mat, THRESHOLD, g, f, NEIGHBORS)
    sims = mat @ mat.T
    assert np.abs(sims - THRESHOLD).min() > 1e-9    # no pair sits on the threshold
    got = similar_pairs(mat, THRESHOLD, groups=g, free=f, neighbors=NEIGHBORS, block=block)
    assert [(i, j) for i, j, _ in got] == [(i, j) for i, j, _ in want]   # none missed, same order
    assert np.allclose([s for *_, s in got], [s for *_, s in want], rtol=0, atol=1e-12)
    assert len(want) > 150
    if g is not None:                               # the gate really removed pairs
        assert len(want) < len(reference(mat, THRESHOLD, None, None, NEIGHBORS))


def test_the_cap_and_the_free_nodes_are_exercised() -> None:
    """Guards the test above: rows over the cap exist, and free nodes pair across groups
    on both sides (a free node before and after its gated partner)."""
    mat, groups, free = instance()
    uncapped = reference(mat, THRESHOLD, groups, free, len(mat))
    per_row = np.bincount([i for i, _, _ in uncapped])
    assert per_row.max() > NEIGHBORS
    cross = [(i, j) for i, j, _ in reference(mat, THRESHOLD, groups, free, NEIGHBORS)
             if groups[i] != groups[j]]
    assert any(free[i] and not free[j] for i, j in cross)
    assert any(free[j] and not free[i] for i, j in cross)


def test_float32_vectors_give_the_same_pairs() -> None:
    """The production dtype; one large product against the per-community ones."""
    mat, groups, free = instance(seed=1)
    mat32 = mat.astype(np.float32)
    whole = similar_pairs(mat32, THRESHOLD, groups=groups, free=free, neighbors=NEIGHBORS,
                          block=len(mat))
    split = similar_pairs(mat32, THRESHOLD, groups=groups, free=free, neighbors=NEIGHBORS,
                          block=64)
    assert [(i, j) for i, j, _ in split] == [(i, j) for i, j, _ in whole]
    assert np.allclose([s for *_, s in split], [s for *_, s in whole], rtol=0, atol=1e-6)


def test_empty_and_single_node() -> None:
    empty = np.zeros((0, 4), dtype=np.float32)
    assert similar_pairs(empty, 0.5) == []
    one = np.ones((1, 4), dtype=np.float32) / 2
    assert similar_pairs(one, 0.5, groups=np.array([0]), free=np.array([True]), block=1) == []
