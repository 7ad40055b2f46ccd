"""Ranking metrics on hand-made rankings with hand-computed values."""

from __future__ import annotations

import math

import pytest

from evals.metrics import (
    bootstrap_ci,
    distinct_at,
    latency_summary,
    leak_at,
    ndcg_at,
    precision_at,
    recall_at,
    reciprocal_rank,
    score_ranking,
    summarize,
)


def test_hand_checked_ranking() -> None:
    ranked = ["a", "b", "c", "d", "e", "f"]
    relevant = {"b", "e", "z"}
    scores = score_ranking(ranked, relevant)
    assert scores["p@5"] == pytest.approx(2 / 5)
    assert scores["r@5"] == pytest.approx(2 / 3)
    assert scores["mrr"] == pytest.approx(1 / 2)
    assert scores["hit@1"] == 0.0
    assert scores["hit@5"] == 1.0
    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert scores["ndcg@5"] == pytest.approx((1 / math.log2(3) + 1 / math.log2(6)) / ideal)
    assert scores["ndcg@5"] == pytest.approx(0.47762, abs=1e-5)


def test_repeats_and_unkeyed_slots_count_once() -> None:
    # A note shown three times fills three slots but is one relevant result.
    assert precision_at(["a", "a", "a", "b"], {"a"}, 5) == pytest.approx(0.2)
    assert recall_at(["a", "a", "b"], {"a", "b"}, 2) == pytest.approx(0.5)
    assert ndcg_at(["a", "a"], {"a"}, 5) == pytest.approx(1.0)
    # None = a result that maps to no gold unit (e.g. a block holding no turn).
    assert reciprocal_rank([None, None, "x"], {"x"}) == pytest.approx(1 / 3)
    assert distinct_at(["a", "a", None, "b", "c", "d"], 5) == 3.0


def test_empty_cases() -> None:
    assert score_ranking([], {"a"}) == {"p@5": 0.0, "mrr": 0.0, "r@5": 0.0, "hit@1": 0.0,
                                        "hit@5": 0.0, "ndcg@5": 0.0}
    assert recall_at(["a"], set(), 5) == 0.0
    assert ndcg_at(["a"], set(), 5) == 0.0


def test_perfect_ranking_with_more_relevant_than_k() -> None:
    ranked = list("abcdefg")
    scores = score_ranking(ranked, set(ranked))
    assert scores["p@5"] == 1.0 and scores["ndcg@5"] == pytest.approx(1.0)
    assert scores["r@5"] == pytest.approx(5 / 7)


def test_leak() -> None:
    assert leak_at(["a", "b", "x"], {"x"}, 5) == 1.0
    assert leak_at(["a", "b", "c", "d", "e", "x"], {"x"}, 5) == 0.0


def test_bootstrap_is_seeded_and_brackets_the_mean() -> None:
    values = [0.0, 1.0, 0.5, 1.0, 0.0, 1.0, 1.0, 0.25]
    lo, hi = bootstrap_ci(values, seed=3)
    assert (lo, hi) == bootstrap_ci(values, seed=3)
    assert lo < sum(values) / len(values) < hi
    assert bootstrap_ci([0.7, 0.7, 0.7]) == (0.7, 0.7)
    assert all(math.isnan(v) for v in bootstrap_ci([]))


def test_summarize_and_latency() -> None:
    out = summarize([{"mrr": 1.0, "leak@5": 1.0}, {"mrr": 0.5}, {"mrr": 0.0}], seed=1)
    assert out["mrr"]["mean"] == pytest.approx(0.5)
    assert out["mrr"]["n"] == 3
    assert out["leak@5"]["n"] == 1 and out["leak@5"]["mean"] == 1.0
    lat = latency_summary([1.0, 2.0, 3.0, 4.0])
    assert lat["p50"] == pytest.approx(2.5)
    assert lat["p95"] == pytest.approx(3.85)
