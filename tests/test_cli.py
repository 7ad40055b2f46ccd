"""The F1 command line: init, index, search, errors (through click's runner, then the API)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from reme_agent.cli import cli, main


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("REME_EMBEDDER__NAME", "hash")
    return tmp_path / "vault"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def test_init_index_search_round_trip(env: Path) -> None:
    code, _ = run("init", "--vault", str(env))
    assert code == 0 and (env / "knowledge").is_dir() and (env / ".reme").is_dir()
    note = env / "knowledge" / "otters" / "otters.md"
    note.parent.mkdir(parents=True)
    note.write_text("---\ntitle: Otters\n---\nSea otters hold hands while sleeping.\n")
    code, out = run("index", "--vault", str(env), "--json")
    data = json.loads(out)
    assert code == 0 and data["files"] == 1 and data["embedded"] == data["blocks"] > 0
    assert set(data) >= {"files", "blocks", "embedded", "deleted", "seconds"}
    code, out = run("search", "sleeping otters", "--vault", str(env), "--json", "--limit", "3")
    results = json.loads(out)["results"]
    assert code == 0 and results[0]["path"] == "knowledge/otters/otters.md"
    assert {"path", "title", "score", "factors", "chunks"} <= set(results[0])
    assert {"start_line", "end_line", "text"} <= set(results[0]["chunks"][0])


def test_missing_vault_is_one_clear_line_and_exit_1(env: Path, capsys: pytest.CaptureFixture) -> None:
    code = main(["index", "--vault", str(env / "nope")])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("Error: No vault at") and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_bad_config_value_is_a_user_error(env: Path, capsys: pytest.CaptureFixture,
                                          tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("search:\n  vector_weight: 7\n")
    env.mkdir()
    code = main(["index", "--vault", str(env), "--config", str(bad)])
    assert code == 1
    assert "search.vector_weight" in capsys.readouterr().err


def test_python_dash_m_entry_point_runs() -> None:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "reme_agent", "--help"], capture_output=True,
                         text=True, check=True)
    assert "init" in out.stdout and "search" in out.stdout
