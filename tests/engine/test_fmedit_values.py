"""`fmedit.edit_values`: a move rewrites links in frontmatter values, changing only the
characters of the values it rewrites (session 8, property links)."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from reme_agent.engine.fmedit import edit_values
from reme_agent.engine.parser import split_note
from reme_agent.errors import FrontmatterEditError, ParseError


def old_to_new(value: str) -> str | None:
    return value.replace("[[Old", "[[New") if "[[Old" in value else None


def changed_lines(old: str, new: str) -> list[tuple[str, str]]:
    a, b = old.split("\n"), new.split("\n")
    assert len(a) == len(b)
    return [(x, y) for x, y in zip(a, b, strict=True) if x != y]


NOTE = """---
# the person's comment
title: "[[Old]] title"   # trailing comment
plain: see [[Old]] here
single: '[[Old|it''s]]'
list:
  - "[[Old#Part]]"
  - '[[Other]]'
flow: [a, "[[Old]]", b]
nested:
  deep: "[[Old]]"
"[[Old]]": a key is never rewritten
anchored: &a "[[Old]]"
alias: *a
tagged: !!str "[[Old]]"
literal: |
  first [[Old]]
    indented [[Old]] line

  last
number: 3
---
Body [[Old]] stays: the body is not a frontmatter value.
"""


def test_only_the_rewritten_values_characters_change() -> None:
    new = edit_values(NOTE, old_to_new, "n.md")
    assert changed_lines(NOTE, new) == [
        ('title: "[[Old]] title"   # trailing comment', 'title: "[[New]] title"   # trailing comment'),
        ("plain: see [[Old]] here", "plain: see [[New]] here"),
        ("single: '[[Old|it''s]]'", "single: '[[New|it''s]]'"),
        ('  - "[[Old#Part]]"', '  - "[[New#Part]]"'),
        ('flow: [a, "[[Old]]", b]', 'flow: [a, "[[New]]", b]'),
        ('  deep: "[[Old]]"', '  deep: "[[New]]"'),
        ('anchored: &a "[[Old]]"', 'anchored: &a "[[New]]"'),
        ('tagged: !!str "[[Old]]"', 'tagged: !!str "[[New]]"'),
        ("  first [[Old]]", "  first [[New]]"),
        ("    indented [[Old]] line", "    indented [[New]] line"),
    ]
    fm = split_note(new).frontmatter
    assert fm["alias"] == fm["anchored"] == "[[New]]"
    assert fm["[[Old]]"] == "a key is never rewritten"


def test_crlf_cr_and_a_bom_are_kept() -> None:
    for eol in ("\r\n", "\r"):
        text = "\ufeff" + NOTE.replace("\n", eol)
        new = edit_values(text, old_to_new, "n.md")
        assert new == "\ufeff" + edit_values(NOTE, old_to_new, "n.md").replace("\n", eol)


def test_a_value_that_cannot_stay_as_written_becomes_one_double_quoted_line() -> None:
    text = ('---\nmulti: "[[Old]] and\n  more"\nfolded: >\n  [[Old]]\n  folded\n'
            "plain: a [[Old]] b\n---\n")

    def to_odd(value: str) -> str | None:   # a new name that plain YAML would misread
        return value.replace("[[Old]]", "[[New: #1]]") if "[[Old]]" in value else None

    new = edit_values(text, to_odd, "n.md")
    assert new == ('---\nmulti: "[[New: #1]] and more"\nfolded: "[[New: #1]] folded\\n"\n'
                   'plain: "a [[New: #1]] b"\n---\n')
    assert split_note(new).frontmatter == {"multi": "[[New: #1]] and more",
                                           "folded": "[[New: #1]] folded\n",
                                           "plain": "a [[New: #1]] b"}


def test_nothing_to_rewrite_returns_the_text_itself() -> None:
    text = "---\na: '[[Other]]'\n---\nBody [[Old]]\n"
    assert edit_values(text, old_to_new) is text
    assert edit_values("no frontmatter [[Old]]\n", old_to_new) == "no frontmatter [[Old]]\n"


def test_unreadable_frontmatter_is_an_error_and_a_result_that_reads_wrong_is_refused() -> None:
    with pytest.raises(ParseError):
        edit_values('---\na: "[[Old]]"\na: 2\n---\n', old_to_new)
    with pytest.raises(FrontmatterEditError):   # a rewrite whose answer is not a string
        edit_values('---\na: "[[Old]]"\n---\n', lambda v: "\ud800" if "[[" in v else None)


_PIECES = st.sampled_from(["[[Old]]", "[[Old|x]]", "\t", "'", '"', ":", " #", "\\", "中", " ", "-",
                           "[", "]", "{", "}", ",", "&", "*", "!", "%", "@", "`", "|", ">"])
VALUES = st.lists(_PIECES, min_size=1, max_size=8).map("".join)
STYLES = st.sampled_from(["plain", "single", "double", "item", "flow"])


def _render(style: str, value: str) -> str:
    if style == "single":
        return "k: '" + value.replace("'", "''") + "'"
    if style == "double":
        return 'k: "' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if style == "item":
        return 'k:\n  - "' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if style == "flow":
        return 'k: [x, "' + value.replace("\\", "\\\\").replace('"', '\\"') + '"]'
    return "k: " + value


@settings(max_examples=300, deadline=None)
@given(VALUES, STYLES, st.sampled_from(["[[New]]", "[[a/New b]]", "[[It's \"new\"]]",
                                         "[[N: #1]]", "[[新]]"]))
def test_any_value_in_any_style_reads_back_rewritten_and_other_keys_stay(value, style, new):
    text = f"---\nbefore: 1\n{_render(style, value)}\nafter: '[[Keep]] kept'\n---\nbody\n"
    old = split_note(text)
    if old.error is not None or "k" not in old.frontmatter:
        return   # not YAML a person could have written this way
    want = split_note(text).frontmatter

    def rewrite(v: str) -> str | None:
        return v.replace("[[Old]]", new) if "[[Old]]" in v else None

    def expect(v):
        if isinstance(v, str):
            return v.replace("[[Old]]", new)
        if isinstance(v, list):
            return [expect(x) for x in v]
        return v

    try:
        new_text = edit_values(text, rewrite)
    except FrontmatterEditError:
        # refused, nothing written: only where the offset scanner (pure PyYAML) rejects
        # what the reader (libyaml) took, e.g. `k: [[Old]]!<TAB>`
        with pytest.raises(yaml.YAMLError):
            list(yaml.parse(text.split("---\n")[1]))
        assert expect(want["k"]) != want["k"]   # a value with no link is never refused
        return
    got = split_note(new_text).frontmatter
    assert got == {**want, "k": expect(want["k"])}
    lines = new_text.split("\n")
    assert lines[:2] == ["---", "before: 1"]
    assert lines[-4:] == ["after: '[[Keep]] kept'", "---", "body", ""]


def test_a_value_the_offset_scanner_rejects_is_left_alone_when_nothing_changes() -> None:
    # libyaml reads `k: !<TAB>`, pure PyYAML's scanner does not: with no link to rewrite the
    # text comes back as it was (Hypothesis found it: the edit used to raise)
    text = "---\nbefore: 1\nk: !\t\nafter: '[[Keep]] kept'\n---\nbody\n"
    assert edit_values(text, lambda v: v.replace("[[Old]]", "[[New]]")) == text
