"""`recent`: notes changed or read lately, from file mtimes and the access log (real files).

A read is what a search records in the access log (`vault.access_log.record`), flushed to
`meta/access_log.json` as a search process does.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time

import pytest

from reme_agent.errors import InvalidArgument
from reme_agent.toolkit import build_toolkit
from reme_agent.toolkit.activity import parse_timeframe, recent
from tests.toolkit.conftest import call_toolkit

BM25 = "knowledge/bm25/bm25.md"
HYBRID = "knowledge/hybrid-search/hybrid-search.md"
DAY = 86400


def age(vault, path: str, days: float) -> None:  # type: ignore[no-untyped-def]
    when = time.time() - days * DAY
    os.utime(vault.root / path, (when, when))


def make_old(vault, days: float = 30) -> None:  # type: ignore[no-untyped-def]
    for p in vault.store.list():
        age(vault, p, days)


def test_edits_created_notes_and_reads_newest_first(vault) -> None:
    make_old(vault)
    age(vault, HYBRID, 2)
    vault.access_log.record([BM25])  # what a search returning it records
    vault.access_log.flush()
    today = dt.date.today().isoformat()
    vault.store.write("knowledge/new/new.md", f"---\ntitle: New idea\ncreated: {today}\n"
                      "description: Something we learned today.\n---\nBody.\n")
    age(vault, "knowledge/new/new.md", -0.001)  # a minute ahead: surely after the read
    got = recent(vault, timeframe="7d")
    assert [(n["path"], n["event"]) for n in got["notes"]] == [
        ("knowledge/new/new.md", "created"), (BM25, "read"), (HYBRID, "edited")]
    assert got["notes"][0]["title"] == "New idea"
    assert got["notes"][0]["description"] == "Something we learned today."
    text = got.text
    assert text.startswith("Recent activity since ") and "3 notes" in text
    assert f"read: {BM25} \"BM25\"" in text and f"edited: {HYBRID}" in text


def test_a_note_both_edited_and_read_lists_both_events(vault) -> None:
    make_old(vault)
    vault.access_log.record([BM25])
    vault.access_log.flush()
    age(vault, BM25, 0)  # edited after the read
    item = recent(vault)["notes"][0]
    assert item["path"] == BM25 and item["event"] == "edited"
    assert [e["event"] for e in item["events"]] == ["edited", "read"]
    assert "edited (also read)" in recent(vault).text


def test_timeframe_folder_limit_and_the_reports_left_out(vault) -> None:
    make_old(vault)
    age(vault, BM25, 3)
    age(vault, HYBRID, 10)
    age(vault, "daily/2026-11-29/refactor/refactor.md", 1)
    vault.store.write("audit/2026-11-30/maintain.md", "# report\n")
    assert [n["path"] for n in recent(vault, timeframe="7d")["notes"]] == [
        "daily/2026-11-29/refactor/refactor.md", BM25]
    assert [n["path"] for n in recent(vault, timeframe="2w", folder="knowledge")["notes"]] == [
        BM25, HYBRID]
    since = (dt.date.today() - dt.timedelta(days=5)).isoformat()
    assert recent(vault, timeframe=since)["count"] == 2
    one = recent(vault, timeframe="2w", limit=1)
    assert one["count"] == 3 and one["truncated"] and "1 of 3 notes" in one.text
    assert [n["path"] for n in recent(vault, folder="audit")["notes"]] == [
        "audit/2026-11-30/maintain.md"]
    assert recent(vault, timeframe="1h")["notes"] == []
    assert "No notes changed or read" in recent(vault, timeframe="1h").text


def test_timeframes_parse_and_bad_ones_say_what_to_use() -> None:
    now = dt.datetime(2026, 11, 30, 15, 0, tzinfo=dt.UTC)
    assert parse_timeframe("24h", now) == now - dt.timedelta(hours=24)
    assert parse_timeframe("2w", now) == now - dt.timedelta(days=14)
    assert parse_timeframe("today", now) == dt.datetime(2026, 11, 30, tzinfo=dt.UTC)
    assert parse_timeframe("2026-11-25", now) == dt.datetime(2026, 11, 25, tzinfo=dt.UTC)
    with pytest.raises(InvalidArgument, match='"7d"'):
        parse_timeframe("last tuesday", now)


def test_the_model_and_the_cli_get_the_same_answer(vault) -> None:
    from click.testing import CliRunner

    from reme_agent.cli import cli

    make_old(vault)
    age(vault, BM25, 0)
    state, text = call_toolkit(build_toolkit(vault), "recent", timeframe="1d")
    assert state == "success" and f"edited: {BM25}" in text
    got = CliRunner().invoke(cli, ["tool", "recent", "--timeframe", "1d", "--json",
                                   "--vault", str(vault.root)])
    assert got.exit_code == 0, got.output
    assert [n["path"] for n in json.loads(got.stdout)["notes"]] == [BM25]
