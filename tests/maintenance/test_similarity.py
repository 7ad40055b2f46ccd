"""One pair search for merge and auto-link L2/L4: named pairs match a brute-force reference."""

from __future__ import annotations

import numpy as np

from reme_agent.maintenance.similarity import similar_paths


def test_similar_paths_are_every_pair_over_the_threshold_most_similar_first() -> None:
    rng = np.random.default_rng(7)
    base = rng.normal(size=(30, 24))
    mat = np.vstack([base, base + rng.normal(0, 0.3, base.shape)])   # 30 look-alike pairs
    mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    names = [f"knowledge/n{i:02d}.md" for i in range(len(mat))]
    vectors = dict(zip(names, mat, strict=True))
    sims = mat @ mat.T
    brute = {(names[i], names[j]) for i in range(len(mat)) for j in range(i + 1, len(mat))
             if sims[i, j] >= 0.8}
    got = similar_paths(vectors, 0.8)
    assert {(a, b) for a, b, _ in got} == brute and len(brute) >= 20   # no neighbour cap
    assert [s for _, _, s in got] == sorted((s for _, _, s in got), reverse=True)
    assert similar_paths({"a.md": mat[0]}, 0.1) == []
