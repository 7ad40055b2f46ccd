"""`reme-agent autolink` through click's runner, then checked through the files and the API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from reme_agent.cli import cli, main
from tests.autolink.conftest import kpath, node

GW, RATE = kpath("api-gateway"), kpath("rate-limit")


@pytest.fixture
def root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("REME_EMBEDDER__NAME", "hash")
    monkeypatch.delenv("REME_MODEL__PROVIDER", raising=False)
    vault = tmp_path / "vault"
    for rel, text in {GW: node("API gateway", "It enforces the rate limit."),
                      RATE: node("Rate limit", "Caps requests.")}.items():
        (vault / rel).parent.mkdir(parents=True)
        (vault / rel).write_text(text, encoding="utf-8")
    (vault / ".reme").mkdir()
    return vault


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def test_dry_run_reports_json_and_writes_nothing(root: Path) -> None:
    before = (root / GW).read_text(encoding="utf-8")
    code, out = run("autolink", "--vault", str(root), "--dry-run", "--json", "--levels", "L1,L4")
    data = json.loads(out)
    assert code == 0 and data["levels"] == ["L1", "L4"] and data["dry_run"] is True
    assert data["l1"]["links_added"] == 1
    assert data["l1"]["changed"][0]["links"][0]["target"] == RATE
    assert (root / GW).read_text(encoding="utf-8") == before


def test_a_run_on_one_path_links_it(root: Path) -> None:
    code, out = run("autolink", "--vault", str(root), "--path", GW)
    assert code == 0 and "L1: 1 notes scanned, added 1 links" in out
    assert "the [[rate-limit|rate limit]]." in (root / GW).read_text(encoding="utf-8")


def test_levels_that_need_a_model_fail_with_exit_code_1(root: Path, capsys) -> None:
    assert main(["autolink", "--vault", str(root), "--levels", "L2"]) == 1
    assert "needs a chat model" in capsys.readouterr().err
    assert main(["autolink", "--vault", str(root), "--levels", "L9"]) == 1


def test_dry_run_lists_fuzzy_proposals_without_a_model(root: Path) -> None:
    (root / GW).write_text(node("API gateway", "Clients get rate-limited at the edge."),
                           encoding="utf-8")
    code, out = run("autolink", "--vault", str(root), "--dry-run", "--json")
    data = json.loads(out)
    assert code == 0 and data["l1"]["links_added"] == 0
    (prop,) = data["l1"]["proposals"]
    assert prop["text"] == "rate-limited" and prop["kind"] == "variant"
    assert prop["candidates"] == [RATE] and prop["outcome"] == "skipped: no model"
    code, out = run("autolink", "--vault", str(root), "--dry-run")
    assert "1 fuzzy proposals left" in out and "variant" in out and "'rate-limited'" in out
