"""The frontmatter model, the DESIGN §3 rules, the status machine and audit notes."""

from __future__ import annotations

import datetime as dt

import pytest

from reme_agent.engine.store import FileStore
from reme_agent.errors import InvalidArgument
from reme_agent.schema.audit import append_audit, audit_path
from reme_agent.schema.frontmatter import (
    Frontmatter,
    status_move_error,
    type_errors,
    validate_schema,
)

KNOWLEDGE = "knowledge/x/x.md"
DAILY = "daily/2026-11-28/x/x.md"
GOOD = {"lifecycle": "evolving", "scope": "class", "source": "curated", "role": "concept"}
STREAM = {"lifecycle": "streaming", "scope": "instance", "source": "auto", "role": "observation",
          "status": "active", "originSessionId": "s-1"}


def test_model_is_open_and_types_known_keys() -> None:
    fm = Frontmatter.model_validate({"name": "N", "tags": "one", "custom": {"a": 1},
                                     "created": "2026-11-28"})
    assert fm.title == "N" and fm.tags == ["one"] and fm.importance == 5
    assert fm.model_extra == {"custom": {"a": 1}}


@pytest.mark.parametrize("fm,key", [
    ({"importance": 0}, "importance"), ({"importance": True}, "importance"),
    ({"importance": "high"}, "importance"), ({"lifecycle": "eternal"}, "lifecycle"),
    ({"confidence": "yes"}, "confidence"), ({"tags": [1, 2]}, "tags"),
    ({"created": "yesterday"}, "created"), ({"title": 3}, "title"), ({"name": ["x"]}, "name"),
    ({"status": "done"}, "status"), ({"aliases": {"a": 1}}, "aliases"),
])
def test_type_errors_name_the_key(fm, key) -> None:
    errors = type_errors(fm)
    assert len(errors) == 1 and errors[0].startswith(key)


def test_knowledge_and_daily_notes_need_the_four_axes() -> None:
    assert validate_schema(KNOWLEDGE, GOOD) == []
    assert validate_schema(DAILY, STREAM) == []
    missing = validate_schema(KNOWLEDGE, {"title": "x"})
    assert [e.split("'")[1] for e in missing] == ["lifecycle", "scope", "source", "role"]
    assert len(validate_schema(DAILY, {})) == 4
    # other files (resources, daily materials, audit) are checked for types only
    assert validate_schema("resource/r.md", {}) == []
    assert validate_schema("daily/2026-11-28/x/material.md", {}) == []
    assert validate_schema("knowledge/x/data.txt", {}) == []


def test_status_only_and_required_when_streaming() -> None:
    assert any("status" in e for e in validate_schema(DAILY, {**STREAM, "status": None}))
    assert any("only allowed when lifecycle is streaming" in e
               for e in validate_schema(KNOWLEDGE, {**GOOD, "status": "active"}))
    assert any("status" in e for e in validate_schema(DAILY, {**STREAM, "status": "done"}))


def test_confidence_required_for_claims_and_session_for_auto() -> None:
    claim = {**GOOD, "role": "claim"}
    assert any("confidence" in e for e in validate_schema(KNOWLEDGE, claim))
    assert validate_schema(KNOWLEDGE, {**claim, "confidence": "⏳"}) == []
    auto = {**GOOD, "source": "auto"}
    assert any("originSessionId" in e for e in validate_schema(KNOWLEDGE, auto))
    assert validate_schema(KNOWLEDGE, {**auto, "originSessionId": "s"}) == []


def test_frontmatter_that_is_not_a_mapping_is_an_error() -> None:
    assert validate_schema(KNOWLEDGE, ["a"])[0].startswith("frontmatter must be a mapping")  # type: ignore[arg-type]


@pytest.mark.parametrize("old,new,ok", [
    ("active", "distilled", True), ("distilled", "archived", True), ("active", "active", True),
    (None, "distilled", True), ("active", "archived", False), ("distilled", "active", False),
    ("archived", "distilled", False), ("archived", "active", False), (None, "archived", False),
    ("active", "gone", False),
])
def test_status_machine_moves_one_step_forward(old, new, ok) -> None:
    assert (status_move_error(old, new) is None) is ok


def test_audit_entries_append_to_a_dated_note(tmp_path) -> None:
    store = FileStore(tmp_path)
    when = dt.datetime(2026, 11, 30, 9, 15, tzinfo=dt.UTC)
    path = append_audit(store, "refused", "E-1 on knowledge/x/x.md", "dropped [[y]]", now=when)
    assert path == "audit/2026-11-30/refused.md"
    append_audit(store, "refused", "second", "again", now=when)
    text = store.read_text(path)
    assert text.startswith("# Audit: refused (2026-11-30)\n")
    assert text.count("## 2026-11-30T09:15:00+00:00") == 2 and text.endswith("again\n")
    with pytest.raises(InvalidArgument):
        audit_path("Not a slug!")


def test_an_audit_entry_makes_no_link(tmp_path) -> None:
    from reme_agent.engine.links import extract_links

    store = FileStore(tmp_path)
    when = dt.datetime(2026, 11, 30, 9, 15, tzinfo=dt.UTC)
    path = append_audit(store, "refused", "E-1 on [[x]]",
                        "dropped owner:: [[y|Y]], ![[z.png]] and `[[kept in code]]`; "
                        "pairs [[\"a.md\", \"b.md\", 0.9]]", now=when)
    text = store.read_text(path)
    assert extract_links(text, refs=True) == []
    assert "`[[y|Y]]`" in text and "`[[kept in code]]`" in text and "!`[[z.png]]`" in text


def test_protocol_ships_and_names_every_axis_value_and_decision() -> None:
    from importlib.resources import files

    from reme_agent.schema.frontmatter import AXES, CONFIDENCES, STATUSES
    from reme_agent.toolkit import TOOLS

    text = files("reme_agent").joinpath("protocol.md").read_text(encoding="utf-8")
    for values in [*AXES.values(), STATUSES, CONFIDENCES]:
        for value in values:
            assert f"`{value}`" in text or value in text, value
    for decision in ("SKIP", "CONTRADICT", "EXTEND", "CREATE", "LINK", "STATUS FLIP"):
        assert f"**{decision}**" in text
    named = {s.name for s in TOOLS if f"`{s.name}`" in text}
    assert {"search", "read", "write", "property_update", "daily_status", "lint_schema",
            "graph_traverse", "move", "delete", "daily_write"} <= named
