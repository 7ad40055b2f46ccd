"""`reme-agent bench` runs the whole suite end to end on a tiny vault."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reme_agent.cli import main as cli_main
from reme_agent.cli.bench import load_suite
from reme_agent.errors import ConfigError

ROWS = ("full index", "incremental edit", "new note", "no-op re-index", "cold open",
        "search, no signals", "search, with signals", "traverse depth 2", "maintain",
        "L1 auto-link", "peak RSS")


def test_bench_command_measures_every_row(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    code = cli_main(["bench", "--notes", "20", "--queries", "5", "--out", str(tmp_path),
                     "--keep", "--json", "--text", "vocab"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    m = data["metrics"]
    assert m["blocks"] > 20 and m["search_p50_ms"] > 0 and m["cold_open_s"] > 0
    assert m["peak_rss_mb"] > 0 and data["machine"]["cpus"] >= 1
    assert [r["name"].split(" (")[0] for r in data["rows"]] == [
        "full index", "incremental edit", "new note", "no-op re-index", "maintain",
        "search, no signals", "search, with signals", "traverse depth 2", "L1 auto-link",
        "cold open + first search", "peak RSS"]
    assert (tmp_path / "suite-20-hash" / "knowledge").is_dir()  # --keep

    suite = load_suite()
    result = suite.SuiteResult(20, "hash", data["machine"],
                               [suite.Row(**r) for r in data["rows"]], m)
    table = suite.render(result)
    assert all(row in table for row in ROWS) and "[target < 1 s]" in table


def test_missing_suite_is_a_clear_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="ships with the source checkout"):
        load_suite(tmp_path / "bench_suite.py")


def test_bench_on_real_text_adds_a_quality_row(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from evals.datasets import data_dir

    if not (data_dir() / "locomo_dev.json").is_file():
        pytest.skip("LoCoMo / CMRC files not found ($REME_EVAL_DATA or ../shared/data)")
    code = cli_main(["bench", "--notes", "30", "--queries", "8", "--out", str(tmp_path),
                     "--json", "--skip", "maintain", "--skip", "autolink"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    names = [r["name"] for r in data["rows"]]
    assert "search quality (phrase queries)" in names
    m = data["metrics"]
    assert 0.0 <= m["search_hit5"] <= 1.0 and 0.0 < m["bm25_hit5"] <= 1.0


def test_bench_without_the_data_says_how_to_run_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is missing"):
        load_suite().run_suite(10, out=tmp_path, data=tmp_path / "nowhere", echo=lambda s: None)
