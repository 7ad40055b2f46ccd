"""K-means and silhouette in numpy: hand-computed silhouettes, K chosen by silhouette."""

from __future__ import annotations

import numpy as np
import pytest

from reme_agent.maintenance.kmeans import choose_k, kmeans, silhouette


def blobs(centers: list[list[float]], per: int = 20, spread: float = 0.05,
          seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.vstack([np.array(c) + rng.normal(0, spread, (per, len(c))) for c in centers])


def test_silhouette_matches_a_hand_computed_case() -> None:
    x = np.array([[0.0], [1.0], [10.0], [11.0]])
    # a = 1 for every point; b = 10.5, 9.5, 9.5, 10.5 -> s = 9.5/10.5, 8.5/9.5, 8.5/9.5, 9.5/10.5
    expected = (2 * (9.5 / 10.5) + 2 * (8.5 / 9.5)) / 4
    assert silhouette(x, np.array([0, 0, 1, 1])) == pytest.approx(expected)


def test_a_point_alone_in_its_cluster_scores_zero() -> None:
    x = np.array([[0.0], [1.0], [10.0]])
    # points 0 and 1: a = 1, b = 10 and 9; point 2 alone: 0
    expected = ((10 - 1) / 10 + (9 - 1) / 9 + 0.0) / 3
    assert silhouette(x, np.array([0, 0, 1])) == pytest.approx(expected)


def test_silhouette_needs_two_to_n_minus_one_clusters() -> None:
    with pytest.raises(ValueError):
        silhouette(np.zeros((3, 2)), np.array([0, 0, 0]))


def test_kmeans_separates_blobs_and_is_deterministic() -> None:
    x = blobs([[0, 0], [5, 5]])
    a, b = kmeans(x, 2, seed=3), kmeans(x, 2, seed=3)
    assert (a.labels == b.labels).all()
    assert set(a.labels[:20]) == {0} and set(a.labels[20:]) == {1}   # numbered by first row
    assert a.inertia < 1.0


def test_choose_k_picks_the_number_of_blobs_by_silhouette() -> None:
    x = blobs([[0, 0], [5, 5], [0, 5]])
    best = choose_k(x, 2, 6, seed=1)
    assert best is not None and best.k == 3
    assert best.scores[3] == max(best.scores.values())
    assert set(best.scores) == {2, 3, 4, 5, 6}


def test_choose_k_gives_up_on_identical_rows() -> None:
    assert choose_k(np.ones((5, 3))) is None
