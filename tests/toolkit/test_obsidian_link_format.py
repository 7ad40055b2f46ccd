"""Tools write links in the vault's Obsidian "New link format" unless the config sets one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reme_agent.config import Settings
from reme_agent.toolkit.notes import write_note
from reme_agent.vault import open_vault

HASH = {"embedder": {"name": "hash"}, "index": {"progress": False}}


def _vault(root: Path, link_format: str | None) -> None:
    (root / "knowledge/bm25").mkdir(parents=True)
    (root / "knowledge/bm25/bm25.md").write_text("# BM25\n", encoding="utf-8")
    (root / ".obsidian").mkdir()
    app = {"newLinkFormat": link_format} if link_format else {"alwaysUpdateLinks": True}
    (root / ".obsidian/app.json").write_text(json.dumps(app), encoding="utf-8")


@pytest.mark.parametrize(("link_format", "written"), [
    ("absolute", "[[knowledge/bm25/bm25]]"), ("relative", "[[knowledge/bm25/bm25]]"),
    ("shortest", "[[bm25]]"), (None, "[[bm25]]")])
def test_written_links_follow_obsidian_new_link_format(tmp_path: Path, link_format,
                                                       written: str) -> None:
    root = tmp_path / "v"
    _vault(root, link_format)
    with open_vault(root, Settings(**HASH)) as v:
        write_note(v, "knowledge/a/a.md", body="uses:: [[knowledge/bm25/bm25.md]]\n")
    assert (root / "knowledge/a/a.md").read_text("utf-8") == f"uses:: {written}\n"


def test_the_config_wins_over_obsidian(tmp_path: Path) -> None:
    root = tmp_path / "v"
    _vault(root, "absolute")
    settings = Settings(**HASH, links={"style": "shortest"})
    with open_vault(root, settings) as v:
        assert v.settings.links.style == "shortest"
        write_note(v, "knowledge/a/a.md", body="uses:: [[knowledge/bm25/bm25.md]]\n")
    assert (root / "knowledge/a/a.md").read_text("utf-8") == "uses:: [[bm25]]\n"
    assert settings.links.style == "shortest"   # the caller's settings are not changed
