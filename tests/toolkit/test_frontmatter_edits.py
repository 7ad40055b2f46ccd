"""G1/G3 frontmatter items through the tools: a property edit touches only its key's lines,
anchors are never expanded, nothing unreadable is written, duplicate keys are refused, CRLF
notes stay CRLF and CR-only notes are read, indexed and edited (each failed on main)."""

from __future__ import annotations

import pytest

from reme_agent.errors import InvalidArgument
from reme_agent.toolkit.daily import daily_write
from reme_agent.toolkit.files import move
from reme_agent.toolkit.lint import lint_schema
from reme_agent.toolkit.notes import property_delete, property_read, property_update, write_note
from reme_agent.toolkit.retrieve import graph_traverse, search
from tests.toolkit.conftest import vault_hash

PERSON = "people/Wang Fang.md"
HAND = """---
title: Wang Fang
aliases: [王芳]
tags: [person, team/payments]   # Obsidian keeps this flow list
# role is optional for hand-kept notes
'quoted': "yes"

created: 2026-11-02
---
# Wang Fang

Owns the ledger service.
"""


def raw(vault, path: str) -> bytes:
    return (vault.root / path).read_bytes()


def test_property_update_changes_only_the_line_of_its_key(vault) -> None:
    vault.store.write(PERSON, HAND)
    property_update(vault, PERSON, {"created": "2026-11-03"})
    assert raw(vault, PERSON).decode() == HAND.replace("created: 2026-11-02",
                                                       "created: '2026-11-03'")
    property_delete(vault, PERSON, ["quoted"])
    property_update(vault, PERSON, {"importance": 7})
    text = raw(vault, PERSON).decode()
    assert "tags: [person, team/payments]   # Obsidian keeps this flow list\n" in text
    assert "# role is optional for hand-kept notes\n\ncreated: '2026-11-03'\nimportance: 7\n---" in text


def test_property_update_never_expands_yaml_anchors(vault) -> None:
    refs = "\n".join(f"r{i}: *big" for i in range(60))
    text = f"---\nbig: &big [{', '.join(['word'] * 100)}]\n{refs}\n---\nbody\n"
    vault.store.write("notes/anchors.md", text)
    property_update(vault, "notes/anchors.md", {"importance": 3})
    new = raw(vault, "notes/anchors.md")
    assert len(new) < len(text.encode()) + 20  # was 698 B -> 512 KB on main (every *big expanded)
    assert b"r59: *big" in new and property_read(vault, "notes/anchors.md")[
        "properties"]["r59"] == ["word"] * 100


def test_property_update_refuses_frontmatter_the_reader_would_refuse(vault) -> None:
    before = vault_hash(vault)
    with pytest.raises(InvalidArgument, match="64 KB"):
        property_update(vault, "knowledge/bm25/bm25.md", {"notes": "x" * 70_000})
    with pytest.raises(InvalidArgument, match="64 KB"):  # `write` refused it already
        write_note(vault, "notes/big.md", frontmatter={"notes": "x" * 70_000}, body="b")
    assert vault_hash(vault) == before


def test_duplicate_keys_are_reported_and_block_property_edits(vault) -> None:
    text = "---\ntitle: Dup\ntags: [a]\nrole: concept\ntags: [b]\n---\nbody\n"
    vault.store.write("knowledge/dup/dup.md", text)
    with pytest.raises(InvalidArgument, match=r"duplicate key 'tags' \(lines 3 and 5\)"):
        property_update(vault, "knowledge/dup/dup.md", {"role": "method"})
    assert raw(vault, "knowledge/dup/dup.md").decode() == text
    found = [i for i in lint_schema(vault)["items"] if i["path"] == "knowledge/dup/dup.md"]
    assert found and "duplicate key 'tags'" in found[0]["errors"][0]
    with pytest.raises(InvalidArgument, match="duplicate key"):
        write_note(vault, "notes/dup2.md", text=text)


CRLF = "---\r\ntitle: Win\r\ntags: [a]\r\n---\r\n# Win\r\n\r\nSee [[bm25]].\r\n"


def test_crlf_notes_stay_crlf_after_property_body_and_link_writes(vault) -> None:
    path = "knowledge/win/win.md"
    vault.store.write(path, CRLF)
    property_update(vault, path, {"role": "concept"})
    write_note(vault, path, body="# Win\n\nSee [[bm25]] again.\n", overwrite=True,
               stamp=vault.store.stamp(path))
    move(vault, "knowledge/bm25/bm25.md", "knowledge/okapi/okapi.md")
    text = raw(vault, path).decode()
    assert "\n" not in text.replace("\r\n", "")
    assert text.endswith("# Win\r\n\r\nSee [[okapi]] again.\r\n")


def test_daily_appends_keep_a_crlf_daily_note_crlf(vault) -> None:
    path = "daily/2026-11-28/search-tuning/search-tuning.md"
    crlf = raw(vault, path).decode().replace("\n", "\r\n")
    vault.store.write(path, crlf)
    daily_write(vault, "search-tuning", "More findings.\n", date="2026-11-28")
    text = raw(vault, path).decode()
    assert "More findings.\r\n" in text and "\n" not in text.replace("\r\n", "")


CR_ONLY = "---\rtitle: Old Mac\rtags: [legacy]\r---\r# Old Mac\r\rClassic note about [[bm25]].\r"


def test_cr_only_notes_are_read_indexed_and_edited(vault) -> None:
    path = "knowledge/old-mac/old-mac.md"
    vault.store.write(path, CR_ONLY)
    vault.index()
    assert property_read(vault, path)["properties"] == {"title": "Old Mac", "tags": ["legacy"]}
    hits = search(vault, "classic note about", limit=3)
    assert hits["results"] and hits["results"][0]["path"] == path
    property_update(vault, path, {"tags": ["legacy", "mac"]})
    assert raw(vault, path).decode() == CR_ONLY.replace("[legacy]", "[legacy, mac]")
    write_note(vault, path, body="# Old Mac\n\nStill about [[bm25]].\n", overwrite=True,
               stamp=vault.store.stamp(path))
    assert raw(vault, path).decode() == "---\rtitle: Old Mac\rtags: [legacy, mac]\r---\r" \
                                        "# Old Mac\r\rStill about [[bm25]].\r"
    back = graph_traverse(vault, ["knowledge/bm25/bm25.md"], direction="in")["edges"]
    assert path in [e["source"] for e in back]


@pytest.mark.parametrize("key", ["a\nb", "tab\there", " padded", "padded ", "", "nel\x85", "ls\u2028"])
def test_a_property_name_no_one_could_type_back_is_refused(vault, key: str) -> None:
    vault.store.write(PERSON, HAND)
    with pytest.raises(InvalidArgument, match="property name"):
        property_update(vault, PERSON, {key: 1})
    with pytest.raises(InvalidArgument, match="property name"):
        write_note(vault, "notes/new.md", frontmatter={key: 1}, body="x\n")
    assert raw(vault, PERSON).decode() == HAND and not (vault.root / "notes/new.md").exists()


def test_an_odd_name_already_in_the_note_stays_editable(vault) -> None:
    vault.store.write(PERSON, "---\n? 'two\n\n  lines'\n: 1\n---\nbody\n")
    property_update(vault, PERSON, {"two\nlines": 2, "due date": "2026-12-03"})
    assert property_read(vault, PERSON)["properties"] == {"two\nlines": 2,
                                                          "due date": "2026-12-03"}


@pytest.mark.parametrize("key", ["a\nb", "tab\there", " padded", "nel\x85"])
def test_other_write_paths_refuse_such_a_name_too(vault, key: str) -> None:
    """`daily_write(properties=...)` (the synchronizer's path) and a whole `text` holding
    the name as a quoted YAML key went around the check."""
    import yaml

    vault.store.write(PERSON, HAND)
    day = "daily/2026-12-01/standup/standup.md"
    with pytest.raises(InvalidArgument, match="property name"):
        daily_write(vault, "standup", "Notes.", date="2026-12-01", properties={key: 1})
    assert not (vault.root / day).exists()
    daily_write(vault, "standup", "Notes.", date="2026-12-01")
    before = raw(vault, day)
    with pytest.raises(InvalidArgument, match="property name"):
        daily_write(vault, "standup", "More.", date="2026-12-01", properties={key: 1})
    assert raw(vault, day) == before
    text = "---\n" + yaml.safe_dump({key: 1}) + "---\nbody\n"
    with pytest.raises(InvalidArgument, match="property name"):
        write_note(vault, "notes/new.md", text=text)
    with pytest.raises(InvalidArgument, match="property name"):
        write_note(vault, PERSON, text=text, overwrite=True,
                   stamp=vault.store.stamp(PERSON))
    assert raw(vault, PERSON).decode() == HAND and not (vault.root / "notes/new.md").exists()


def test_daily_write_keeps_an_odd_name_already_in_the_note(vault) -> None:
    day = "daily/2026-12-01/standup/standup.md"
    daily_write(vault, "standup", "Notes.", date="2026-12-01")
    text = raw(vault, day).decode().replace("---\n", "---\n? 'two\n\n  lines'\n: 1\n", 1)
    vault.store.write(day, text)
    daily_write(vault, "standup", "More.", date="2026-12-01", properties={"two\nlines": 2})
    assert property_read(vault, day)["properties"]["two\nlines"] == 2


def test_a_nested_name_is_checked_too_and_an_old_nested_one_passes(vault) -> None:
    with pytest.raises(InvalidArgument, match="property name"):
        write_note(vault, "notes/new.md", frontmatter={"meta": {"a\nb": 1}}, body="x\n")
    with pytest.raises(InvalidArgument, match="property name"):
        write_note(vault, "notes/new.md", frontmatter={"people": [{"name\t": "A"}]}, body="x\n")
    assert not (vault.root / "notes/new.md").exists()
    vault.store.write(PERSON, "---\nmeta:\n  ? 'two\n\n    lines'\n  : 1\n---\nbody\n")
    property_update(vault, PERSON, {"meta": {"two\nlines": 2, "plain": 3}})
    assert property_read(vault, PERSON)["properties"]["meta"] == {"two\nlines": 2, "plain": 3}
