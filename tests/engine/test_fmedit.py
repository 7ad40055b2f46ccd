"""Frontmatter edits change only the lines of the keys they touch (engine.fmedit, codec)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reme_agent.engine.codec import HANDLER
from reme_agent.engine.fmedit import edit_frontmatter
from reme_agent.engine.parser import split_note
from reme_agent.errors import FrontmatterEditError, ParseError

HAND_WRITTEN = """---
# who this is
title: "Wang Fang"
aliases: [Wang Fang, 王芳]
tags: [person, team/payments]   # kept as a flow list

role: profile
notes: |
  Joined in 2024.
  Owns the ledger.
base: &b
  team: payments
copy: *b
---
Body [[x]]
"""


def _lines(text: str) -> list[str]:
    return text.split("\n")


def test_setting_one_key_changes_only_its_line() -> None:
    new = edit_frontmatter(HAND_WRITTEN, {"role": "concept"})
    old_lines, new_lines = _lines(HAND_WRITTEN), _lines(new)
    changed = [i for i, (a, b) in enumerate(zip(old_lines, new_lines, strict=True)) if a != b]
    assert [new_lines[i] for i in changed] == ["role: concept"]
    assert "tags: [person, team/payments]   # kept as a flow list" in new  # flow + comment
    assert "copy: *b" in new and len(new) < len(HAND_WRITTEN) + 10  # the anchor is not expanded


def test_a_flow_list_is_rewritten_in_flow_style_and_new_keys_go_after_the_last_key() -> None:
    new = edit_frontmatter(HAND_WRITTEN, {"tags": ["person", "team/risk"], "importance": 7})
    assert "tags: [person, team/risk]\n" in new
    assert "copy: *b\nimportance: 7\n---\n" in new
    assert split_note(new).frontmatter["copy"] == {"team": "payments"}


def test_removing_a_multiline_key_removes_exactly_its_lines() -> None:
    new = edit_frontmatter(HAND_WRITTEN, remove=["notes"])
    assert "Joined" not in new and "Owns the ledger" not in new
    assert new.replace("", "") == HAND_WRITTEN.replace(
        "notes: |\n  Joined in 2024.\n  Owns the ledger.\n", "")


def test_crlf_and_cr_only_notes_keep_their_line_endings() -> None:
    crlf = HAND_WRITTEN.replace("\n", "\r\n")
    new = edit_frontmatter(crlf, {"role": "concept", "new": 1})
    assert "\n" not in new.replace("\r\n", "")
    assert new.replace("\r\n", "\n") == edit_frontmatter(HAND_WRITTEN, {"role": "concept", "new": 1})
    cr = "---\rtitle: T\rtags: [a]\r---\rBody\r"
    assert edit_frontmatter(cr, {"tags": ["a", "b"]}) == "---\rtitle: T\rtags: [a, b]\r---\rBody\r"


def test_an_edit_that_would_break_an_alias_is_refused() -> None:
    with pytest.raises(FrontmatterEditError, match="anchor"):
        edit_frontmatter(HAND_WRITTEN, {"base": "other"})


def test_an_edit_whose_result_the_reader_refuses_is_not_made() -> None:
    with pytest.raises(FrontmatterEditError, match="64 KB"):
        edit_frontmatter(HAND_WRITTEN, {"big": "x" * 70_000})


def test_duplicate_keys_are_refused_with_the_key_and_its_lines() -> None:
    text = "---\ntitle: A\ntags: [a]\nrole: concept\ntags: [b]\n---\nbody\n"
    parts = split_note(text, "n.md")
    assert parts.frontmatter == {} and isinstance(parts.error, ParseError)
    assert "duplicate key 'tags' (lines 3 and 5)" in str(parts.error)
    with pytest.raises(ParseError, match="duplicate key 'tags'"):
        edit_frontmatter(text, {"role": "method"}, path="n.md")


def test_a_merge_key_may_be_overridden_without_being_a_duplicate() -> None:
    text = "---\nbase: &b {x: 1, y: 2}\nnode:\n  <<: *b\n  x: 3\n---\n"
    assert split_note(text).frontmatter["node"] == {"x": 3, "y": 2}


def test_the_codec_is_a_python_frontmatter_handler() -> None:
    import frontmatter

    post = frontmatter.loads("---\ntitle: T\n---\nbody\n", handler=HANDLER)
    assert post["title"] == "T" and post.content == "body"
    assert frontmatter.checks("---\na: 1\n---\n")
    with pytest.raises(ParseError):
        HANDLER.load("a: !!python/object/apply:os.system [ls]")


# -- property: random blocks, random edits ----------------------------------------------------
KEYS = st.sampled_from(["title", "tags", "role", "importance", "aliases", "notes", "k1", "键"])
SCALAR = st.one_of(st.integers(-5, 5), st.booleans(), st.none(),
                   st.text(alphabet="abc xyz:#-'\"é中", max_size=8))
VALUE = st.one_of(SCALAR, st.lists(SCALAR, max_size=3),
                  st.dictionaries(st.sampled_from(["a", "b"]), SCALAR, max_size=2))
STYLE = st.sampled_from(["block", "flow", "comment", "blank"])


@st.composite
def blocks(draw: st.DrawFn) -> tuple[str, dict, list[tuple[str | None, str]]]:
    """A frontmatter block as a person writes it (mixed flow/block styles, comments, blank
    lines, LF or CRLF): (text, its mapping, [(key owning the line or None, line)])."""
    from reme_agent.engine.codec import render_entry

    keys = draw(st.lists(KEYS, unique=True, max_size=6))
    owned: list[tuple[str | None, str]] = [(None, "---")]
    expected = {}
    for key in keys:
        value = draw(VALUE)
        style = draw(STYLE)
        if style == "comment":
            owned.append((None, "# a comment"))
        elif style == "blank":
            owned.append((None, ""))
        rendered = render_entry(key, value, flow=style == "flow").rstrip("\n").split("\n")
        owned += [(key, line) for line in rendered]
        expected[key] = value
    owned += [(None, "---"), (None, "Body line [[x]]"), (None, "")]
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    return eol.join(line for _, line in owned), expected, owned


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(blocks(), st.dictionaries(KEYS, VALUE, max_size=3), st.lists(KEYS, max_size=3))
def test_untouched_lines_are_byte_identical_and_the_result_parses_as_expected(
        block: tuple[str, dict, list[tuple[str | None, str]]], set_: dict,
        remove: list[str]) -> None:
    text, old, owned = block
    assert split_note(text).frontmatter == old
    remove = [k for k in remove if k not in set_]
    new = edit_frontmatter(text, set_, remove)
    want = {k: v for k, v in old.items() if k not in remove} | set_
    assert split_note(new).frontmatter == want  # the reader sees exactly the edit
    eol = "\r\n" if "\r\n" in text else "\n"
    assert "\n" not in new.replace(eol, "") or eol == "\n"  # the note's line ending kept
    changed = {k for k in set_ if k not in old or old[k] != set_[k]} | set(remove)
    kept = [line for key, line in owned if key is None or key not in changed]
    if not want and set(remove) & set(old) and all(line in ("---", "") for line in kept[:-2]):
        kept = kept[-2:]  # the last property gone: the block goes too (only its body stays)
    added = new.split(eol)
    # every line of an untouched key, comment or blank survives in order, byte for byte...
    it = iter(added)
    assert all(any(line == other for other in it) for line in kept)
    # ...and the only other lines are the changed keys' own
    assert len(added) - len(kept) == sum(
        len(split_note_lines(k, set_[k], owned)) for k in changed if k in set_)


def split_note_lines(key: str, value: object, owned: list[tuple[str | None, str]]) -> list[str]:
    """The lines `edit_frontmatter` writes for a changed key (flow kept when it was flow)."""
    from reme_agent.engine.codec import render_entry

    old = [line for k, line in owned if k == key]
    flow = len(old) == 1 and old[0].rstrip().endswith(("]", "}"))  # `[]` is flow too
    return render_entry(key, value, flow=flow).rstrip("\n").split("\n")


def test_tabs_the_reader_accepts_do_not_stop_an_edit() -> None:
    """`k:<TAB>value`, a tab before a comment and inside a plain value read fine (libyaml,
    Obsidian); the in-place editor's pure-Python scanner raised a ScannerError on them."""
    text = 'a:\t"x"\t# why\nb:\tone\ttwo\nc: 3\n'
    note = f"---\n{text}---\nbody\n"
    assert split_note(note).frontmatter == {"a": "x", "b": "one\ttwo", "c": 3}
    new = edit_frontmatter(note, {"c": 4})
    assert new == note.replace("c: 3", "c: 4")
    assert edit_frontmatter(note, {"b": "one\ttwo", "d": 1}) == note.replace("---\nbody",
                                                                           "d: 1\n---\nbody")
