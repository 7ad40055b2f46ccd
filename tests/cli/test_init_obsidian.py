"""`reme-agent init` in a vault Obsidian opened: audit/ and meta/ join its Excluded files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reme_agent.cli import main


@pytest.fixture
def obsidian_vault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("REME_EMBEDDER__NAME", "hash")
    root = tmp_path / "vault"
    (root / ".obsidian").mkdir(parents=True)
    (root / ".obsidian/app.json").write_text(json.dumps(
        {"alwaysUpdateLinks": True, "userIgnoreFilters": ["Archive/", "meta"]}, indent=2))
    return root


def app(root: Path) -> dict:
    return json.loads((root / ".obsidian/app.json").read_text(encoding="utf-8"))


def test_init_merges_audit_and_meta_into_excluded_files_by_default(obsidian_vault: Path) -> None:
    assert main(["init", "--vault", str(obsidian_vault)]) == 0  # not a TTY: the default, yes
    assert app(obsidian_vault) == {"alwaysUpdateLinks": True,
                                   "userIgnoreFilters": ["Archive/", "meta", "audit/"]}
    assert main(["init", "--vault", str(obsidian_vault)]) == 0  # idempotent
    assert app(obsidian_vault)["userIgnoreFilters"] == ["Archive/", "meta", "audit/"]
    assert not list((obsidian_vault / ".obsidian").glob(".app.json*"))  # no temp file left


def test_no_obsidian_exclude_leaves_obsidian_alone(obsidian_vault: Path) -> None:
    before = (obsidian_vault / ".obsidian/app.json").read_bytes()
    assert main(["init", "--vault", str(obsidian_vault), "--no-obsidian-exclude"]) == 0
    assert (obsidian_vault / ".obsidian/app.json").read_bytes() == before


def test_an_unreadable_app_json_is_never_overwritten(obsidian_vault: Path) -> None:
    (obsidian_vault / ".obsidian/app.json").write_text("{ not json")
    assert main(["init", "--vault", str(obsidian_vault), "--obsidian-exclude"]) == 0
    assert (obsidian_vault / ".obsidian/app.json").read_text() == "{ not json"


def test_a_missing_app_json_is_created_and_no_obsidian_folder_means_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REME_EMBEDDER__NAME", "hash")
    root = tmp_path / "v"
    (root / ".obsidian").mkdir(parents=True)
    assert main(["init", "--vault", str(root), "--obsidian-exclude"]) == 0
    assert app(root) == {"userIgnoreFilters": ["audit/", "meta/"]}
    plain = tmp_path / "plain"
    assert main(["init", "--vault", str(plain), "--obsidian-exclude"]) == 0
    assert not (plain / ".obsidian").exists()
