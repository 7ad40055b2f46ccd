"""Auto-link L1 on the labelled mention set must not fall below the figures in docs/autolink.md.

Runs `evals.autolink_pr.evaluate` (the real vault, matchers and embedder; the judge is the
oracle) and checks each mode against the reported numbers minus a small margin, so a change
that loses recall or links traps fails here before it reaches a vault.
"""

from __future__ import annotations

import pytest

from evals.autolink.check_labels import bodies, check
from evals.autolink_pr import DATA, evaluate, render

MARGIN = 0.03
# embedder -> mode -> (precision, recall) as reported in docs/autolink.md
REPORTED = {
    "use": {"exact": (0.90, 0.47), "fuzzy": (0.95, 0.46), "judge": (0.98, 0.99)},
    "hash": {"exact": (0.90, 0.47), "fuzzy": (0.95, 0.46), "judge": (0.98, 0.95)},
}
PROPOSALS = {"use": (85, 0.92), "hash": (78, 0.92)}  # true proposals without a model, precision


def test_every_label_is_found_in_the_committed_vault() -> None:
    import yaml

    labels = yaml.safe_load((DATA / "labels.yaml").read_text(encoding="utf-8"))["notes"]
    notes = bodies()
    assert len(notes) >= 60
    problems, _ = check(notes, labels)
    assert problems == []


def test_label_check_reports_a_missing_nth_and_target() -> None:
    notes = {"knowledge/a/a.md": "we go live, then go home", "knowledge/go/go.md": "Go."}
    labels = {"knowledge/a/a.md": [
        {"text": "go", "nth": 2, "target": None, "kind": "common-word"},
        {"text": "go", "nth": 3, "target": None, "kind": "common-word"},
        {"text": "live", "target": "knowledge/live/live.md", "kind": "exact"}]}
    problems, others = check(notes, labels)
    assert problems == ["knowledge/a/a.md: target knowledge/live/live.md does not exist",
                        "knowledge/a/a.md: 'go' nth [2, 3], found 2 times"]
    assert check(notes, {"knowledge/a/a.md": labels["knowledge/a/a.md"][:1]})[1] == [
        "knowledge/a/a.md: 'go' occurrence 1 (unlabelled): ...we go live, then go home..."]


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
