"""Ranking metrics over one query's ranked keys, and their aggregation with bootstrap CIs.

Why keys and not results: the same functions score node level (key = note path, or a
session id) and block level (key = a LoCoMo dia_id, a CMRC chunk id). A ranked list may hold
`None` (a result that maps to no gold-able unit) and repeats; a repeated key occupies its
slot but is only counted once, so a list that shows the same note five times does not get
five hits (that is what node grouping is meant to fix, and the metric must be able to see it).

All metrics are binary-relevance:
- P@k = relevant distinct keys in the first k slots / k
- R@k = relevant distinct keys in the first k slots / |relevant|
- Hit@k = 1 if any relevant key is in the first k slots
- MRR = 1 / rank of the first relevant key (0 when none is in the list; the list is cut at
  the search depth, so this is MRR@depth)
- nDCG@k = DCG of the first k slots (gain 1 for the first occurrence of a relevant key,
  log2 discount) / ideal DCG with min(|relevant|, k) hits
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence

import numpy as np

Key = Hashable | None

METRICS: tuple[str, ...] = ("p@5", "mrr", "r@5", "hit@1", "hit@5", "ndcg@5")
"""The headline metrics, in report order."""


def _gains(ranked: Sequence[Key], relevant: set, k: int | None) -> list[int]:
    """1 where a slot holds a not-yet-seen relevant key, else 0 (first k slots)."""
    seen: set = set()
    out = []
    for key in ranked if k is None else ranked[:k]:
        if key is not None and key in relevant and key not in seen:
            seen.add(key)
            out.append(1)
        else:
            out.append(0)
    return out


def precision_at(ranked: Sequence[Key], relevant: set, k: int = 5) -> float:
    return sum(_gains(ranked, relevant, k)) / k


def recall_at(ranked: Sequence[Key], relevant: set, k: int = 5) -> float:
    if not relevant:
        return 0.0
    return sum(_gains(ranked, relevant, k)) / len(relevant)


def hit_at(ranked: Sequence[Key], relevant: set, k: int = 1) -> float:
    return 1.0 if any(_gains(ranked, relevant, k)) else 0.0


def reciprocal_rank(ranked: Sequence[Key], relevant: set) -> float:
    for rank, key in enumerate(ranked, start=1):
        if key is not None and key in relevant:
            return 1.0 / rank
    return 0.0


def ndcg_at(ranked: Sequence[Key], relevant: set, k: int = 5) -> float:
    if not relevant:
        return 0.0
    dcg = sum(g / math.log2(i + 2) for i, g in enumerate(_gains(ranked, relevant, k)))
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(relevant), k)))
    return dcg / ideal


def score_ranking(ranked: Sequence[Key], relevant: Iterable[Hashable]) -> dict[str, float]:
    """All headline metrics for one query."""
    rel = set(relevant)
    return {
        "p@5": precision_at(ranked, rel, 5),
        "mrr": reciprocal_rank(ranked, rel),
        "r@5": recall_at(ranked, rel, 5),
        "hit@1": hit_at(ranked, rel, 1),
        "hit@5": hit_at(ranked, rel, 5),
        "ndcg@5": ndcg_at(ranked, rel, 5),
    }


def leak_at(ranked: Sequence[Key], forbidden: Iterable[Hashable], k: int = 5) -> float:
    """1 if a forbidden key (e.g. an archived note) shows in the first k slots."""
    bad = set(forbidden)
    return 1.0 if any(key in bad for key in ranked[:k] if key is not None) else 0.0


def answered_empty(results: Sequence[object]) -> float:
    """1 if search answered "nothing": no result, or every result flagged weak.

    Why the flag: a relevance floor may keep results but mark them `weak` (DESIGN §7,
    "no good match" is an answer). A result is weak when it has a truthy `weak` attribute or
    key; results without the flag count as real answers, so today's search (no floor) scores
    0 on every query, and the metric needs no change when the flag arrives.
    """
    def weak(result: object) -> bool:
        if isinstance(result, Mapping):
            return bool(result.get("weak", False))
        return bool(getattr(result, "weak", False))

    return 1.0 if all(weak(r) for r in results) else 0.0


def distinct_at(ranked: Sequence[Key], k: int = 5) -> float:
    """How many different keys the first k slots show (redundancy check for grouping)."""
    return float(len({key for key in ranked[:k] if key is not None}))


def bootstrap_ci(values: Sequence[float], *, seed: int = 0, n_boot: int = 1000,
                 level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (seeded, so reports are reproducible)."""
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        return (math.nan, math.nan)
    if arr.size == 1 or np.all(arr == arr[0]):
        return (float(arr[0]), float(arr[0]))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, arr.size, size=(n_boot, arr.size))
    means = arr[idx].mean(axis=1)
    tail = (1.0 - level) / 2.0
    return (float(np.quantile(means, tail)), float(np.quantile(means, 1.0 - tail)))


def summarize(rows: Sequence[Mapping[str, float]], *, seed: int = 0,
              n_boot: int = 1000) -> dict[str, dict[str, float]]:
    """metric -> {mean, lo, hi, n} over per-query rows (a metric missing from a row is skipped)."""
    names: list[str] = []
    for row in rows:
        names += [m for m in row if m not in names]
    out: dict[str, dict[str, float]] = {}
    for name in names:
        values = [row[name] for row in rows if name in row]
        lo, hi = bootstrap_ci(values, seed=seed, n_boot=n_boot)
        out[name] = {"mean": float(np.mean(values)) if values else math.nan,
                     "lo": lo, "hi": hi, "n": len(values)}
    return out


def latency_summary(ms: Sequence[float]) -> dict[str, float]:
    """p50 / p95 / mean of per-query latencies in milliseconds."""
    if not ms:
        return {"p50": math.nan, "p95": math.nan, "mean": math.nan}
    arr = np.asarray(ms, dtype=float)
    return {"p50": float(np.percentile(arr, 50)), "p95": float(np.percentile(arr, 95)),
            "mean": float(arr.mean())}
