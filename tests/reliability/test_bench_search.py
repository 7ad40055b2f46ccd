"""The real-text bench vault (bench/real_text.py) and the search bench that uses it (issue G6)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from reme_agent.errors import ConfigError

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import real_text  # noqa: E402

from evals.datasets import data_dir  # noqa: E402

needs_data = pytest.mark.skipif(
    not (data_dir() / real_text.LOCOMO).is_file() or not (data_dir() / real_text.CMRC).is_file(),
    reason="LoCoMo / CMRC files not found ($REME_EVAL_DATA or ../shared/data)")


@needs_data
def test_the_vault_is_real_text_recut_to_any_size_and_the_same_for_a_seed() -> None:
    notes = real_text.generate_real_notes(300, seed=7)
    assert len(notes) == 300 and [n.text for n in notes] == \
        [n.text for n in real_text.generate_real_notes(300, seed=7)]
    assert [n.text for n in notes] != [n.text for n in real_text.generate_real_notes(300, 8)]
    langs = {n.lang for n in notes}
    assert langs == {"en", "zh"} and sum(n.lang == "zh" for n in notes) == 100
    assert len({n.title for n in notes}) == 300                   # titles are unique
    assert sum("aliases: [" in n.text for n in notes) > 30
    assert all("related:: [[knowledge/" in n.text for n in notes)
    assert any("[image: " in n.text for n in notes)               # LoCoMo captions kept
    mixed = [n for n in notes if n.lang == "en" and any(
        "\u4e00" <= c <= "\u9fff" for b in n.blocks for c in b)]
    assert mixed                                                  # some notes hold both


@needs_data
def test_phrase_queries_know_every_note_holding_both_phrases(tmp_path: Path) -> None:
    notes = real_text.generate_real_vault(tmp_path / "v", 200)
    again = real_text.read_real_notes(tmp_path / "v", 200)
    assert [n.text for n in again] == [n.text for n in notes]
    queries = real_text.phrase_queries(again, 40)
    assert len(queries) == 40 and len({q.text for q in queries}) == 40
    assert {q.lang for q in queries} == {"en", "zh"}
    for q in queries:
        assert q.source in q.relevant and len(q.relevant) <= real_text.MAX_RELEVANT
        # brute force: split the query back into its two phrases, check every note
        holders = {n.path for n in notes
                   if any(q.text[:k] in n.text and q.text[k + 1:] in n.text
                          for k in range(len(q.text)) if q.text[k] == " ")}
        assert q.relevant <= holders


def test_missing_data_is_a_clear_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="locomo_dev.json is missing"):
        real_text.generate_real_notes(10, data=tmp_path)


@needs_data
def test_search_bench_prints_latency_breakdown_and_quality_with_peers(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import bench_search

    bench_search.main(["--notes", "40", "--embedder", "hash", "--queries", "6", "--rounds", "2",
                       "--peers", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    data = json.loads(out.strip().splitlines()[-1])
    rows = {r["row"]: r for r in data["rows"]}
    assert {"floor: BM25 + query embedding", "default search (tool: search + JSON + text)",
            "peer: rank_bm25 BM25Okapi"} <= set(rows)
    # rank_bm25 over the same tokens ranks like our BM25: same Hit@5
    assert rows["peer: rank_bm25 BM25Okapi"]["hit5"] == rows["BM25 alone (numpy, ours)"]["hit5"]
    assert rows["default search (tool: search + JSON + text)"]["hit5"] is not None
    stages = {s["stage"] for s in data["stages"]}
    assert {"BM25", "grouping", "expansion", "rendering"} <= stages
    assert "where the default search spends its time" in out and "load" in out
