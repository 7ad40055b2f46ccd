"""Obsidian day notes are daily notes too (DESIGN §2): listed, read, written as a section per
slug (never a second daily/<date>/<slug>/ system), status per day note; both layouts."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from reme_agent.errors import ConservationViolation, InvalidArgument
from reme_agent.schema.obsidian import (
    DailyNotesLayout,
    detect_daily_layout,
    format_date,
    parse_date,
)
from reme_agent.toolkit.daily import daily_list, daily_read, daily_status, daily_write
from reme_agent.toolkit.notes import property_read
from tests.toolkit.conftest import build

DAY_NOTE = """---
tags: [journal]   # kept as written
---
# Monday

Coffee with [[bm25]] folks.
"""
KNOW = {"knowledge/bm25/bm25.md": "---\ntitle: BM25\nlifecycle: evolving\nscope: class\n"
                                  "source: curated\nrole: concept\n---\nRanking.\n",
        "knowledge/rrf/rrf.md": "# RRF\n"}


@pytest.fixture
def obsidian(make_vault):
    """A vault with Obsidian day notes in daily/ (no daily-notes.json)."""
    return make_vault({**KNOW, "daily/2026-11-30.md": DAY_NOTE})


def test_obsidian_day_notes_are_listed_and_read(obsidian) -> None:
    got = daily_list(obsidian)
    assert [(n["path"], n["date"], n["slug"], n["status"]) for n in got["notes"]] == [
        ("daily/2026-11-30.md", "2026-11-30", "", "active")]
    read = daily_read(obsidian, "daily/2026-11-30.md")
    assert read["layout"] == "obsidian" and read["materials"] == []
    assert daily_read(obsidian, "2026-11-30")["path"] == "daily/2026-11-30.md"  # a name


def test_daily_write_adds_a_section_to_the_day_note_never_a_parallel_workspace(obsidian) -> None:
    got = daily_write(obsidian, "search-tuning", "# Search tuning\n\n## Findings\n- blend wins",
                      date="2026-11-30", origin_session_id="s-1")
    assert got["path"] == "daily/2026-11-30.md" and not got["created"]
    assert not (obsidian.root / "daily/2026-11-30").exists()
    text = (obsidian.root / "daily/2026-11-30.md").read_text(encoding="utf-8")
    assert text.startswith("---\ntags: [journal]   # kept as written\n")
    assert text.endswith("Coffee with [[bm25]] folks.\n\n# search-tuning\n\n## Findings\n"
                         "- blend wins\n")
    daily_write(obsidian, "search-tuning", "- RRF k=20 too", date="2026-11-30")
    daily_write(obsidian, "jwt", "Rotated keys.", date="2026-11-30")
    text = (obsidian.root / "daily/2026-11-30.md").read_text(encoding="utf-8")
    assert "- blend wins\n\n- RRF k=20 too\n\n# jwt\n\nRotated keys.\n" in text
    assert daily_read(obsidian, "daily/2026-11-30.md")["sections"] == [
        "Monday", "search-tuning", "jwt"]
    assert property_read(obsidian, "daily/2026-11-30.md")["properties"]["originSessionId"] == "s-1"


def test_replace_replaces_only_its_section_and_keeps_links(obsidian) -> None:
    daily_write(obsidian, "a", "first [[rrf]]", date="2026-11-30")
    daily_write(obsidian, "b", "other", date="2026-11-30")
    with pytest.raises(ConservationViolation):
        daily_write(obsidian, "a", "dropped the link", date="2026-11-30", mode="replace")
    daily_write(obsidian, "a", "second [[rrf]]", date="2026-11-30", mode="replace")
    text = (obsidian.root / "daily/2026-11-30.md").read_text(encoding="utf-8")
    assert "# a\n\nsecond [[rrf]]\n\n# b\n\nother\n" in text and "first" not in text


def test_a_new_day_note_follows_daily_notes_json_and_its_template(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    (root / ".obsidian").mkdir(parents=True)
    (root / ".obsidian/daily-notes.json").write_text(json.dumps(
        {"folder": "Journal", "format": "YYYY/MM/DD-dddd", "template": "Templates/Day"}))
    (root / "Templates").mkdir()
    (root / "Templates/Day.md").write_text("# {{title}} ({{date:MMMM Do}})\n\n## Log\n")
    vault = build(root, KNOW)
    try:
        got = daily_write(vault, "jwt", "Rotated keys.", date="2026-11-30")
        path = "Journal/2026/11/30-Monday.md"
        assert got["path"] == path and got["created"]
        text = (root / path).read_text(encoding="utf-8")
        body = text.split("---\n", 2)[2]
        assert body == "# 30-Monday (November 30th)\n\n## Log\n\n# jwt\n\nRotated keys.\n"
        props = property_read(vault, path)["properties"]
        assert props["lifecycle"] == "streaming" and props["status"] == "active"
        assert [n["path"] for n in daily_list(vault)["notes"]] == [path]
        assert not (root / "daily").exists()
    finally:
        vault.close()


def test_status_is_the_day_notes_own_and_a_distilled_day_takes_no_section(obsidian) -> None:
    got = daily_status(obsidian, "daily/2026-11-30.md", "distilled")
    assert got["old_status"] == "active" and got["status"] == "distilled"
    text = (obsidian.root / "daily/2026-11-30.md").read_text(encoding="utf-8")
    assert "tags: [journal]   # kept as written\nstatus: distilled\n" in text
    with pytest.raises(InvalidArgument, match="only an active day note"):
        daily_write(obsidian, "late", "x", date="2026-11-30")
    assert daily_list(obsidian, status="distilled")["count"] == 1


def test_both_layouts_are_read_and_the_native_one_is_kept_without_obsidian(make_vault) -> None:
    vault = make_vault(KNOW)
    got = daily_write(vault, "topic", "x", date="2026-12-01")
    assert got["path"] == "daily/2026-12-01/topic/topic.md"  # no day notes: workspaces
    (vault.root / "daily/2026-12-02.md").write_text("# Tuesday\n", encoding="utf-8")
    paths = [n["path"] for n in daily_list(vault)["notes"]]
    assert paths == ["daily/2026-12-01/topic/topic.md", "daily/2026-12-02.md"]
    # once day notes exist, a write goes into the day note
    assert daily_write(vault, "topic", "y", date="2026-12-02")["path"] == "daily/2026-12-02.md"


@pytest.mark.parametrize("fmt", ["YYYY-MM-DD", "DD.MM.YY", "YYYY/MMMM/YYYY-MMM-DD",
                                 "dddd, MMMM Do YYYY", "[Day] DDDD [of] YYYY", "gggg-[W]ww-e-YYYY-M-D"])
def test_moment_formats_round_trip(fmt: str) -> None:
    for day in (dt.date(2026, 1, 1), dt.date(2026, 11, 30), dt.date(2024, 2, 29),
                dt.date(2027, 12, 31)):
        assert parse_date(fmt, format_date(fmt, day)) == day
    assert format_date("YYYY-MM-DD", dt.date(2026, 11, 30)) == "2026-11-30"
    assert format_date("dddd, MMMM Do YYYY", dt.date(2026, 11, 30)) == "Monday, November 30th 2026"


def test_layout_detection(tmp_path: Path) -> None:
    assert detect_daily_layout(tmp_path) is None
    (tmp_path / ".obsidian").mkdir()
    (tmp_path / "2026-11-30.md").write_text("x")
    assert detect_daily_layout(tmp_path) == DailyNotesLayout(
        "", source="YYYY-MM-DD.md files at the vault root")
    (tmp_path / ".obsidian/daily-notes.json").write_text('{"folder": "../escape", "format": ""}')
    assert detect_daily_layout(tmp_path) == DailyNotesLayout("", "YYYY-MM-DD")
