"""Auto-link L1 on the labelled mention set must not fall below the figures in docs/autolink.md.

Runs `evals.autolink_pr.evaluate` (the real vault, matchers and embedder; the judge is the
oracle) and checks each mode against the reported numbers minus a small margin, so a change
that loses recall or links traps fails here before it reaches a vault.
"""

from __future__ import annotations

import pytest

from evals.autolink_pr import evaluate, render

MARGIN = 0.03
# embedder -> mode -> (precision, recall) as reported in docs/autolink.md
REPORTED = {
    "use": {"exact": (0.90, 0.47), "fuzzy": (0.95, 0.46), "judge": (0.98, 0.99)},
    "hash": {"exact": (0.90, 0.47), "fuzzy": (0.95, 0.46), "judge": (0.98, 0.95)},
}
PROPOSALS = {"use": (85, 0.92), "hash": (78, 0.92)}  # true proposals without a model, precision


@pytest.mark.slow
@pytest.mark.parametrize("embedder", ["use", "hash"])
def test_labelled_mentions_keep_their_precision_and_recall(embedder: str) -> None:
    res = evaluate(embedder)
    table = render(res)
    assert res["labels"] >= 200 and res["modes"]["exact"]["links"]["traps"] >= 50, table
    for mode, (precision, recall) in REPORTED[embedder].items():
        got = res["modes"][mode]["links"]
        assert got["precision"] >= precision - MARGIN, (mode, table)
        assert got["recall"] >= recall - MARGIN, (mode, table)
    proposals = res["modes"]["fuzzy"]["proposals"]
    true, precision = PROPOSALS[embedder]
    assert proposals["tp"] >= true - 3 and proposals["precision"] >= precision - MARGIN, table
    judge = res["modes"]["judge"]["links"]["kinds"]
    assert sum(judge[k]["fp"] for k in ("longer-name", "fuzzy-trap", "code-link")) == 0, table
