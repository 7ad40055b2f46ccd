"""Daily tools: upsert with default frontmatter, the one-way status machine, read and list."""

from __future__ import annotations

import datetime as dt

import pytest

from reme_agent.errors import InvalidArgument, NoteNotFound, StampChanged
from reme_agent.schema.frontmatter import validate_schema
from reme_agent.toolkit import build_toolkit
from reme_agent.toolkit.daily import daily_list, daily_read, daily_status, daily_write
from reme_agent.toolkit.notes import property_read
from tests.toolkit.conftest import call_toolkit, vault_hash

TUNING = "daily/2026-11-28/search-tuning/search-tuning.md"


def fm(vault, path: str) -> dict:
    return property_read(vault, path)["properties"]


def test_daily_write_creates_a_note_with_default_frontmatter(vault) -> None:
    got = daily_write(vault, "jwt-rotation", "Rotated the signing keys.", date="2026-12-01",
                      description="Key rotation.", tags=["security"], origin_session_id="s-9")
    path = "daily/2026-12-01/jwt-rotation/jwt-rotation.md"
    assert got["path"] == path and got["created"]
    props = fm(vault, path)
    assert {k: props[k] for k in ("lifecycle", "scope", "source", "role", "status",
                                  "originSessionId", "title")} == {
        "lifecycle": "streaming", "scope": "instance", "source": "auto", "role": "observation",
        "status": "active", "originSessionId": "s-9", "title": "jwt-rotation"}
    assert props["created"] == props["updated"] and props["tags"] == ["security"]
    assert validate_schema(path, props) == []
    body = (vault.root / path).read_text(encoding="utf-8").split("---\n", 2)[2]
    assert body == "# jwt-rotation\n\nRotated the signing keys.\n"


def test_daily_write_defaults_to_today(vault) -> None:
    got = daily_write(vault, "today-note", "x")
    assert got["path"].startswith(f"daily/{dt.date.today().isoformat()}/today-note/")


def test_daily_write_appends_to_an_active_note_and_refreshes_updated(vault) -> None:
    created = fm(vault, TUNING)["created"]
    daily_write(vault, "search-tuning", "- Also tried RRF k=20.", date="2026-11-28",
                tags=["search"], origin_session_id="other")
    text = (vault.root / TUNING).read_text(encoding="utf-8")
    assert text.endswith("[[向量检索|vector search]].\n\n- Also tried RRF k=20.\n")
    props = fm(vault, TUNING)
    assert props["created"] == created and props["updated"] != created
    assert props["originSessionId"] == "s-1" and props["tags"] == ["search"]


def test_daily_write_replace_must_keep_links(vault) -> None:
    before = vault_hash(vault)
    with pytest.raises(Exception, match="drops existing links"):
        daily_write(vault, "search-tuning", "# Search tuning\n\nnew", date="2026-11-28",
                    mode="replace")
    assert vault_hash(vault) == before


@pytest.mark.parametrize("kwargs,match", [
    ({"slug": "Not A Slug", "body": "x"}, "not-a-slug"),
    ({"slug": "ok", "body": "x", "date": "2026-13-40"}, "not a date"),
    ({"slug": "ok", "body": "x", "properties": {"status": "archived"}}, "daily_status"),
    ({"slug": "refactor", "body": "x", "date": "2026-11-29"}, "only active daily notes"),
    ({"slug": "ok", "body": "x", "properties": {"importance": 42}}, "importance"),
])
def test_daily_write_refuses_bad_input_and_writes_nothing(vault, kwargs, match) -> None:
    before = vault_hash(vault)
    with pytest.raises(InvalidArgument, match=match):
        daily_write(vault, **kwargs)
    assert vault_hash(vault) == before


def test_daily_write_with_stale_stamp_is_refused(vault) -> None:
    with pytest.raises(StampChanged):
        daily_write(vault, "search-tuning", "x", date="2026-11-28", stamp="0" * 64)


def test_status_moves_forward_one_step_at_a_time(vault) -> None:
    got = daily_status(vault, TUNING, "distilled")
    assert (got["old_status"], got["status"], got["changed"]) == ("active", "distilled", True)
    assert fm(vault, TUNING)["status"] == "distilled"
    assert not daily_status(vault, "daily/2026-11-28/search-tuning", "distilled")["changed"]
    assert daily_status(vault, TUNING, "archived")["changed"]


@pytest.mark.parametrize("path,status,match", [
    (TUNING, "archived", "skipping a step"),
    ("daily/2026-11-29/refactor/refactor.md", "active", "moving back"),
    ("daily/2026-11-29/refactor", "active", "only allowed next status is 'archived'"),
])
def test_status_refuses_reverse_and_skipping_moves(vault, path, status, match) -> None:
    before = vault_hash(vault)
    with pytest.raises(InvalidArgument, match=match):
        daily_status(vault, path, status)
    assert vault_hash(vault) == before


def test_status_refuses_non_daily_paths_and_bad_values(vault) -> None:
    before = vault_hash(vault)
    with pytest.raises(InvalidArgument, match="not a daily note"):
        daily_status(vault, "knowledge/bm25/bm25.md", "distilled")
    with pytest.raises(InvalidArgument, match="'status'"):
        daily_status(vault, TUNING, "done")
    with pytest.raises(NoteNotFound):
        daily_status(vault, "daily/2026-01-01/nope", "distilled")
    assert vault_hash(vault) == before


def test_daily_read_returns_summary_and_materials(vault) -> None:
    got = daily_read(vault, "daily/2026-11-28/search-tuning/")
    assert got["path"] == TUNING and got["frontmatter"]["status"] == "active"
    assert got["materials"] == [{"path": "daily/2026-11-28/search-tuning/transcript.txt",
                                 "size": 20}]
    assert got["body"].startswith("# Search tuning") and "Materials:" in got.text


def test_daily_list_by_range_and_status(vault) -> None:
    assert [n["slug"] for n in daily_list(vault)["notes"]] == ["search-tuning", "refactor"]
    assert [n["slug"] for n in daily_list(vault, start="2026-11-29")["notes"]] == ["refactor"]
    assert [n["slug"] for n in daily_list(vault, end="2026-11-28")["notes"]] == ["search-tuning"]
    assert [n["slug"] for n in daily_list(vault, status="distilled")["notes"]] == ["refactor"]
    with pytest.raises(InvalidArgument, match="after end"):
        daily_list(vault, start="2026-12-01", end="2026-11-01")


def test_daily_tools_through_the_toolkit(vault) -> None:
    tk = build_toolkit(vault)
    state, text = call_toolkit(tk, "daily_write", slug="项目x-重构", body="迁移到 TypeScript。",
                               date="2026-12-02", origin_session_id="s-5")
    assert state == "success" and "daily/2026-12-02/项目x-重构/项目x-重构.md" in text
    state, text = call_toolkit(tk, "daily_list", start="2026-12-01")
    assert state == "success" and "项目x-重构" in text
    state, text = call_toolkit(tk, "daily_read", path="daily/2026-12-02/项目x-重构")
    assert state == "success" and "迁移到 TypeScript。" in text
    state, text = call_toolkit(tk, "daily_status", path="daily/2026-12-02/项目x-重构",
                               status="archived")
    assert state == "error" and "skipping a step" in text
    state, text = call_toolkit(tk, "daily_status", path="daily/2026-12-02/项目x-重构",
                               status="distilled")
    assert state == "success" and "active -> distilled" in text
