"""Frontmatter, blocks and links of one note (DESIGN §6)."""

from __future__ import annotations

import hashlib
import json
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from reme_agent.engine.parser import (
    MAX_YAML_ALIASES,
    Block,
    dump_note,
    normalize_eol,
    parse_note,
    split_blocks,
    split_frontmatter,
    split_note,
)
from reme_agent.errors import ParseError

NOTE = """\
---
title: Reciprocal Rank Fusion
tags: [retrieval, fusion]
created: 2024-05-01
---
# RRF

Fuses ranked lists: score = sum 1/(k + rank). See [[bm25]].

## Usage

```python
def rrf(ranks):

    return sum(1 / (60 + r) for r in ranks)
```

- is_a:: [[fusion method]]
- part_of:: [[hybrid search]]
"""


def file_lines(text: str) -> list[str]:
    """The file's lines as the parser counts them (one BOM dropped, CRLF -> LF, and CR ->
    LF in a text without LF)."""
    return normalize_eol(text.removeprefix("\ufeff")).split("\n")


def assert_blocks_match_file(text: str, blocks: list[Block]) -> None:
    lines = file_lines(text)
    for b in blocks:
        assert b.text == "\n".join(lines[b.start_line - 1:b.end_line]), b


# -- frontmatter ------------------------------------------------------------------------------
def test_chinese_frontmatter_round_trips_through_dump_and_parse():
    fm = {"title": "倒数排名融合", "tags": ["检索", "rrf"], "aliases": ["RRF", "融合"],
          "importance": 7, "lifecycle": "evolving", "nested": {"键": "值"}}
    body = "# 标题\n\n正文见 [[检索/检索.md|检索]]。\n"
    text = dump_note(fm, body)
    assert "倒数排名融合" in text and "\\u" not in text  # allow_unicode
    assert text.startswith("---\ntitle: 倒数排名融合\n")  # sort_keys=False
    note = parse_note("knowledge/rrf/rrf.md", text)
    assert note.error is None
    assert note.frontmatter == fm
    assert list(note.frontmatter) == list(fm)
    assert note.body == body
    assert [link.target for link in note.links] == ["检索/检索.md"]
    assert dump_note(note.frontmatter, note.body) == text


def test_dump_note_without_frontmatter_is_just_the_body():
    assert dump_note({}, "body\n") == "body\n"
    assert parse_note("a.md", dump_note({}, "body\n")).body == "body\n"


def test_dump_note_accepts_tuples_sets_and_dates():
    import datetime as dt

    text = dump_note({"tags": ("a", "b"), "s": {"x"}, "created": dt.date(2024, 5, 1)}, "")
    assert parse_note("a.md", text).frontmatter == {"tags": ["a", "b"], "s": ["x"],
                                                    "created": "2024-05-01"}


def test_frontmatter_is_json_able_with_iso_dates():
    note = parse_note("a.md", "---\ncreated: 2024-05-01\nupdated: 2024-05-02 10:30:00\n"
                              "1: one\n2024-01-01: day\nnull: x\n---\nbody")
    assert note.frontmatter == {"created": "2024-05-01", "updated": "2024-05-02T10:30:00",
                                "1": "one", "2024-01-01": "day", "null": "x"}
    json.dumps(note.frontmatter)


def test_body_start_line_and_body():
    fm, body, start, error = split_frontmatter(NOTE, "n.md")
    assert error is None
    assert fm["title"] == "Reciprocal Rank Fusion" and fm["created"] == "2024-05-01"
    assert start == 6
    assert body.startswith("# RRF\n")


def test_empty_frontmatter_and_missing_closing_line():
    assert split_frontmatter("---\n---\nbody") == ({}, "body", 3, None)
    assert split_frontmatter("---\nnot: closed\nbody") == ({}, "---\nnot: closed\nbody", 1, None)
    assert split_frontmatter("---") == ({}, "---", 1, None)
    assert split_frontmatter("----\na: 1\n---\n") == ({}, "----\na: 1\n---\n", 1, None)
    assert split_frontmatter("") == ({}, "", 1, None)


def test_dot_dot_dot_closes_frontmatter():
    fm, body, start, error = split_frontmatter("---\na: 1\n...\nbody")
    assert (fm, body, start, error) == ({"a": 1}, "body", 4, None)


def test_malformed_yaml_reports_the_file_line_and_keeps_the_whole_text_as_body():
    text = "---\ntitle: ok\ntags: [a, b\nmore: x\n---\n# Heading\n\nText [[link]]\n"
    note = parse_note("knowledge/x/x.md", text)
    assert isinstance(note.error, ParseError)
    assert note.error.path == "knowledge/x/x.md"
    assert note.error.line == 4  # the mark is on `more: x`, file line 4
    assert "knowledge/x/x.md:4" in str(note.error)
    assert note.frontmatter == {}
    assert note.body == text
    assert note.body_start_line == 1
    assert note.blocks and note.blocks[0].start_line == 1
    assert [(link.target, link.line) for link in note.links] == [("link", 8)]
    assert_blocks_match_file(text, note.blocks)


def test_malformed_yaml_line_for_a_bad_indent():
    text = "---\na: 1\nb: 2\n  c: 3\n---\n"
    note = parse_note("n.md", text)
    assert note.error is not None and note.error.line == 4


def test_invalid_date_is_text_not_an_exception():
    note = parse_note("n.md", "---\ncreated: 2024-13-45\n---\nbody")
    assert note.error is None and note.frontmatter == {"created": "2024-13-45"}


def test_non_mapping_yaml_is_a_parse_error():
    for yaml_text in ("- a\n- b", "just a string", "42"):
        note = parse_note("n.md", f"---\n{yaml_text}\n---\nbody")
        assert note.error is not None, yaml_text
        assert note.error.line == 2
        assert "mapping" in note.error.detail
        assert note.frontmatter == {}


def test_yaml_bomb_is_refused():
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 9):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 9) + "]")
    start = time.process_time()
    note = parse_note("bomb.md", "---\n" + "\n".join(lines) + "\n---\nbody\n")
    assert time.process_time() - start < 5
    assert note.error is not None and "bomb" in note.error.detail
    assert note.frontmatter == {}


def test_too_many_anchors_and_aliases_are_refused_with_the_line():
    refs = ", ".join(["*x"] * MAX_YAML_ALIASES)
    note = parse_note("n.md", f"---\nok: 1\nv: &x 1\nlist: [{refs}]\n---\n")
    assert note.error is not None
    assert note.error.line == 4
    assert "anchors/aliases" in note.error.detail


def test_oversized_frontmatter_is_refused():
    big = "k: " + "x" * (65 * 1024)
    note = parse_note("n.md", f"---\n{big}\n---\nbody")
    assert note.error is not None and "64 KB" in note.error.detail


def test_recursive_and_deep_yaml_is_refused():
    assert parse_note("n.md", "---\na: &a [*a]\n---\n").error is not None
    deep = "[" * 3000 + "]" * 3000
    assert parse_note("n.md", f"---\na: {deep}\n---\n").error is not None


def test_bom_is_ignored():
    note = parse_note("n.md", "\ufeff---\ntitle: x\n---\nbody")
    assert note.error is None and note.frontmatter == {"title": "x"}
    assert note.body == "body" and note.body_start_line == 4


def test_crlf_parses_like_lf():
    lf = parse_note("n.md", NOTE)
    crlf = parse_note("n.md", NOTE.replace("\n", "\r\n"))
    assert crlf.error is None
    assert crlf.frontmatter == lf.frontmatter
    assert crlf.body == lf.body
    assert crlf.blocks == lf.blocks
    assert crlf.links == lf.links


def test_frontmatter_is_never_a_link_source():
    note = parse_note("n.md", "---\nrelated: '[[not a link]]'\n---\nis_a:: [[real]]\n")
    assert [(link.target, link.predicate, link.line) for link in note.links] == [("real", "is_a", 4)]


# -- blocks -----------------------------------------------------------------------------------
def test_block_lines_count_the_frontmatter():
    note = parse_note("n.md", NOTE)
    spans = [(b.start_line, b.end_line, b.heading) for b in note.blocks]
    assert spans == [(6, 8, "RRF"), (10, 16, "Usage"), (18, 19, "Usage")]
    assert_blocks_match_file(NOTE, note.blocks)
    assert [b.index for b in note.blocks] == [0, 1, 2]


def test_heading_is_kept_with_its_first_paragraph():
    blocks = split_blocks("# Title\n\nFirst paragraph.\n\nSecond paragraph.")
    assert [b.text for b in blocks] == ["# Title\n\nFirst paragraph.", "Second paragraph."]
    assert [b.heading for b in blocks] == ["Title", "Title"]


def test_consecutive_headings_start_new_blocks():
    blocks = split_blocks("# A\n## B ##\ntext\n### \nmore")
    assert [(b.text, b.heading) for b in blocks] == [("# A", "A"), ("## B ##\ntext", "B"),
                                                     ("### \nmore", None)]


def test_hashtags_and_indented_hashes_are_not_headings():
    blocks = split_blocks("#tag text\n    # code\n\npara")
    assert [b.heading for b in blocks] == [None, None]


def test_fence_with_blank_lines_stays_one_block():
    body = "Intro\n\n```\n# not a heading\n\n\nstill code\n```\n\nAfter"
    blocks = split_blocks(body)
    assert [b.text for b in blocks] == ["Intro", "```\n# not a heading\n\n\nstill code\n```", "After"]
    assert [b.heading for b in blocks] == [None, None, None]


def test_blank_only_text_has_no_blocks():
    assert split_blocks("") == []
    assert split_blocks("\n \n\t\n") == []


def test_block_hash_is_md5_of_text_without_trailing_whitespace():
    [block] = split_blocks("line one   \nline two\t")
    assert block.hash == hashlib.md5(b"line one\nline two").hexdigest()
    assert block.text == "line one   \nline two\t"


def test_hashes_are_stable_and_change_only_for_the_edited_block():
    first = parse_note("n.md", NOTE)
    again = parse_note("n.md", NOTE)
    assert [b.hash for b in first.blocks] == [b.hash for b in again.blocks]
    edited = parse_note("n.md", NOTE.replace("Fuses ranked lists", "Fuses several ranked lists"))
    changed = [a.hash != b.hash for a, b in zip(first.blocks, edited.blocks, strict=True)]
    assert changed == [True, False, False]


def test_hashes_do_not_depend_on_position():
    shifted = NOTE.replace("tags: [retrieval, fusion]\n", "tags: [retrieval, fusion]\nextra: 1\n")
    a, b = parse_note("n.md", NOTE), parse_note("n.md", shifted)
    assert [x.hash for x in a.blocks] == [x.hash for x in b.blocks]
    assert [x.start_line + 1 for x in a.blocks] == [x.start_line for x in b.blocks]


def test_long_paragraphs_are_cut_at_line_boundaries():
    body = "\n".join(f"line {i:04d} " + "x" * 40 for i in range(200))
    blocks = split_blocks(body, max_block_chars=500)
    assert len(blocks) > 10
    assert all(len(b.text) <= 500 for b in blocks)
    assert "\n".join(b.text for b in blocks) == body
    assert_blocks_match_file(body, blocks)


def test_a_huge_single_line_is_hard_cut():
    body = "para\n\n" + "y" * 5000 + "\n\nend"
    blocks = split_blocks(body, max_block_chars=2000)
    assert [(b.start_line, b.end_line, len(b.text)) for b in blocks] == [
        (1, 1, 4), (3, 3, 2000), (3, 3, 2000), (3, 3, 1000), (5, 5, 3)]


def test_huge_fence_is_cut_too():
    body = "```\n" + "\n".join("code line " + "z" * 50 for _ in range(200)) + "\n```"
    blocks = split_blocks(body, max_block_chars=1000)
    assert len(blocks) > 5 and all(len(b.text) <= 1000 for b in blocks)


def test_deep_nesting_and_huge_notes_parse_quickly():
    deep = "\n".join(" " * (2 * k) + f"- level {k} [[n{k}]]" for k in range(3_000))
    assert len(parse_note("deep.md", deep).links) == 3_000
    para = ("Lorem ipsum dolor sit amet, see [[some note|a note]] and `code`. " * 8 + "\n") * 4
    chunk = para + "\n- item related:: [[x]]\n- item two\n\n```\ncode [[no]]\n\n```\n\n# Head\n\n"
    text = "---\ntitle: big\n---\n" + chunk * (50_000_000 // len(chunk))
    start = time.process_time()
    note = parse_note("big.md", text)
    elapsed = time.process_time() - start
    assert len(text) > 49_000_000
    assert note.blocks[-1].end_line <= text.count("\n") + 1
    assert elapsed < 20, elapsed


# -- properties -------------------------------------------------------------------------------
_PIECES = st.sampled_from([
    "---\n", "---", "...\n", "title: x\n", "a: [1\n", "&a ", "*a ", "# ", "## h\n", "```\n",
    "~~~\n", "`", "[[", "]]", "[[x]]", "p:: ", "- ", "    ", "\n", "\n\n", "\r\n", "\ufeff", "中文",
    "word ", ":", "|", "#", "\t", "\r",
])
NOTE_TEXT = st.one_of(st.text(), st.lists(st.one_of(_PIECES, st.text(max_size=4)),
                                          max_size=60).map("".join))


@settings(max_examples=400, deadline=None)
@given(NOTE_TEXT, st.integers(min_value=1, max_value=80))
def test_parse_note_never_raises_and_blocks_are_ordered_within_the_file(text, max_chars):
    note = parse_note("p.md", text)
    n_lines = len(file_lines(text))
    assert isinstance(note.frontmatter, dict)
    json.dumps(note.frontmatter)
    assert 1 <= note.body_start_line <= n_lines + 1
    blocks = split_blocks(note.body, note.body_start_line, max_block_chars=max_chars)
    for blocks_ in (note.blocks, blocks):
        lines = file_lines(text)
        prev = None
        for k, b in enumerate(blocks_):
            assert b.index == k
            assert 1 <= b.start_line <= b.end_line <= n_lines
            assert b.text.strip()
            whole = "\n".join(lines[b.start_line - 1:b.end_line])
            assert b.text == whole or (b.start_line == b.end_line and b.text in whole)
            if prev is not None:
                shared_line = prev.end_line == b.start_line == b.end_line == prev.start_line
                assert b.start_line > prev.end_line or shared_line
            prev = b


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=8),
                       st.one_of(st.text(max_size=20), st.integers(), st.booleans(),
                                 st.lists(st.text(max_size=8), max_size=3)),
                       max_size=5),
       NOTE_TEXT)
def test_dump_then_parse_round_trips_any_printable_frontmatter(fm, body):
    printable = all(s.isprintable() for s in [*fm, *(v for v in fm.values() if isinstance(v, str))])
    text = dump_note(fm, body)
    note = parse_note("p.md", text)
    if printable and fm:
        assert note.error is None
        assert note.frontmatter == fm
        assert note.body == body.replace("\r\n", "\n")


def test_a_value_holding_nel_survives_a_write() -> None:
    """U+0085 (NEL) was written raw in a single-quoted scalar and read back as a space."""
    from reme_agent.engine.codec import render_entry

    for fm in ({"a": "x\x85y"}, {"0": ["\x85"]}, {"a": {"b": "\x85 z"}}):
        assert parse_note("p.md", dump_note(fm, "body\n")).frontmatter == fm
    for flow in (False, True):
        line = render_entry("k", ["a\x85b"], flow=flow)
        assert parse_note("p.md", f"---\n{line}---\n").frontmatter == {"k": ["a\x85b"]}


# -- split_note: the one raw split (head + body == text) -----------------------------------
def test_split_note_keeps_every_byte_of_crlf_and_reports_malformed_yaml() -> None:
    crlf = "---\r\ntitle: T\r\n---\r\nBody [[x]]\r\n"
    parts = split_note(crlf, "n.md")
    assert (parts.head, parts.body) == ("---\r\ntitle: T\r\n---\r\n", "Body [[x]]\r\n")
    assert parts.frontmatter == {"title": "T"} and parts.body_start == 4 and parts.error is None
    bad = split_note("---\ntitle: [\n---\nbody\n", "n.md")
    assert bad.head == "" and bad.body.startswith("---") and bad.frontmatter == {}
    assert isinstance(bad.error, ParseError) and bad.body_start == 1
    plain = split_note("just text\n")
    assert (plain.head, plain.body, plain.body_start) == ("", "just text\n", 1)


@given(st.text(alphabet="-.:ab \r\n#[]", max_size=60))
@settings(max_examples=300, deadline=None)
def test_split_note_head_plus_body_is_the_text(text: str) -> None:
    parts = split_note(text)
    assert parts.head + parts.body == text
    assert (parts.head == "") == (parts.body_start == 1)


def test_a_note_of_many_tiny_blocks_is_cut_into_at_most_max_blocks() -> None:
    """100k one-line headings made 100k blocks, each embedded and stored on its own (one
    write spent minutes in chroma): runs of consecutive blocks are merged past the cap, and
    every line is still in exactly one block, in order, with its own line numbers."""
    from reme_agent.engine.parser import MAX_BLOCKS

    lines = []
    for i in range(5 * MAX_BLOCKS // 2):
        lines += [f"# heading {i}", f"text {i}", ""]
    body = "\n".join(lines)
    blocks = split_blocks(body, line_offset=7)
    assert MAX_BLOCKS // 2 < len(blocks) <= MAX_BLOCKS
    assert [b.index for b in blocks] == list(range(len(blocks)))
    file_lines = body.split("\n")
    for before, block in zip(blocks, blocks[1:], strict=False):
        assert before.end_line < block.start_line
    for block in blocks:
        assert block.text == "\n".join(file_lines[block.start_line - 7:block.end_line - 6])
        assert block.heading == block.text.split("\n", 1)[0][2:]
    kept = "\n".join(b.text for b in blocks)
    assert [line for line in kept.split("\n") if line] == [line for line in lines if line]


def test_merged_pieces_of_one_long_line_read_as_that_line() -> None:
    line = "x" * 50 + "y" * 50
    blocks = split_blocks(f"{line}\n\nshort\n", max_block_chars=10, max_blocks=3)
    assert len(blocks) == 3
    assert "".join(b.text for b in blocks[:2]).startswith("x" * 50)
    assert blocks[-1].text.endswith("short") and blocks[0].start_line == blocks[0].end_line == 1


def test_a_note_under_the_cap_is_cut_as_before() -> None:
    body = "# A\n\none\n\ntwo\n\n# B\n\nthree\n"
    assert split_blocks(body) == split_blocks(body, max_blocks=10**9)
    assert len(split_blocks(body, max_blocks=2)) == 2
