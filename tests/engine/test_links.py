"""Wikilink forms, resolution, conservation diff and retargeting (DESIGN §4, §5 E-1)."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reme_agent.engine.links import (
    EMBED,
    FENCE,
    INDENTED,
    LINK,
    MARKDOWN,
    PREDICATE_RE,
    Link,
    LinkResolver,
    edges_of,
    extract_links,
    line_kinds,
    markdown_destination,
    missing_edges,
    property_links,
    rewrite_targets,
)


def targets(text: str) -> list[str]:
    return [link.target for link in extract_links(text)]


def edges(text: str) -> list[tuple[str, str | None]]:
    return [(link.target, link.predicate) for link in extract_links(text)]


# -- forms ------------------------------------------------------------------------------------
def test_bare_link_has_target_line_and_offsets_of_the_whole_brackets():
    text = "intro\nsee [[Reciprocal Rank Fusion]] here"
    [link] = extract_links(text)
    assert link == Link("Reciprocal Rank Fusion", None, None, 2, 10, 36)
    assert text[link.start:link.end] == "[[Reciprocal Rank Fusion]]"


def test_alias_is_the_text_after_the_bar():
    [link] = extract_links("[[knowledge/rrf/rrf.md|RRF fusion]]")
    assert (link.target, link.alias, link.predicate) == ("knowledge/rrf/rrf.md", "RRF fusion", None)


def test_anchors_are_split_off_the_target():
    heading, block, caret, both = extract_links(
        "[[note#Main idea]] [[note#^abc123]] [[note^blk]] [[a/b.md#Sec|shown]]")
    assert (heading.target, heading.anchor) == ("note", "Main idea")
    assert (block.target, block.anchor) == ("note", "^abc123")
    assert (caret.target, caret.anchor) == ("note", "^blk")
    assert (both.target, both.anchor, both.alias) == ("a/b.md", "Sec", "shown")


def test_targets_are_stripped_but_keep_case_and_unicode():
    assert targets("[[  Mixed Case.md  ]] [[检索融合|RRF 融合]] [[Café Notes]]") == [
        "Mixed Case.md", "检索融合", "Café Notes"]
    assert extract_links("[[检索融合|RRF 融合]]")[0].alias == "RRF 融合"


@pytest.mark.parametrize("prefix", ["", "  ", "- ", "* ", "+ ", "1. ", "12) ", "    - ",
                                    "\t- ", "> ", "- [ ] ", "- [x] "])
def test_line_predicate_is_recognised_after_indentation_and_bullets(prefix):
    assert edges(f"- intro\n{prefix}is_a:: [[Concept]]") == [("Concept", "is_a")]
    assert edges(f"{prefix}is_a:: [[Concept]]".lstrip(" \t")) == [("Concept", "is_a")]


def test_line_predicate_with_several_targets_gives_one_edge_each():
    text = "- related:: [[A]], [[B|bee]] and [[C#x]]\nplain [[D]]"
    assert edges(text) == [("A", "related"), ("B", "related"), ("C", "related"), ("D", None)]
    assert edges_of(extract_links(text)) == {("A", "related"), ("B", "related"),
                                             ("C", "related"), ("D", None)}


def test_line_predicate_needs_an_identifier_and_a_double_colon():
    assert edges("相关:: [[A]]") == [("A", None)]
    assert edges("1abc:: [[A]]") == [("A", None)]
    assert edges("p: [[A]]") == [("A", None)]
    assert edges("text then p:: [[A]]") == [("A", None)]
    assert edges("  snake_Case_2 :: [[A]]") == [("A", "snake_Case_2")]


def test_inline_predicate_applies_only_inside_its_brackets():
    text = "Mixes [is_a:: [[Fusion]]] with [[Plain]] and [part_of:: [[X]], [[Y]]]."
    assert edges(text) == [("Fusion", "is_a"), ("Plain", None), ("X", "part_of"), ("Y", "part_of")]


def test_inline_predicate_wins_over_the_line_predicate_and_innermost_wins():
    text = "rel:: [[A]] [is_a:: [[B]] [uses:: [[C]]]] [[D]]"
    assert edges(text) == [("A", "rel"), ("B", "is_a"), ("C", "uses"), ("D", "rel")]


def test_unclosed_inline_field_is_not_a_predicate():
    assert edges("[is_a:: [[A]] no closing bracket") == [("A", None)]


def test_predicate_re_is_the_open_vocabulary():
    assert PREDICATE_RE.fullmatch("is_a")
    assert PREDICATE_RE.fullmatch("_x9")
    assert not PREDICATE_RE.fullmatch("9x")
    assert not PREDICATE_RE.fullmatch("has-part")


def test_embeds_are_not_links():
    assert targets("![[diagram.png]] and ![[note#sec]] but [[real]]") == ["real"]


def test_empty_and_same_note_targets_are_ignored():
    assert targets("[[]] [[ ]] [[|alias]] [[#Heading]] [[#^block]]") == []


def test_unclosed_and_broken_brackets_never_make_links():
    assert targets("[[abc") == []
    assert targets("[[a\nb]]") == []
    assert targets("[[a]b]]") == []
    assert targets("[[[a]]]") == ["a"]
    assert targets("]] [[ [[x]]") == ["x"]


def test_escaped_bar_in_tables_is_the_alias_separator():
    [link] = extract_links("| col | [[target\\|shown]] |")
    assert (link.target, link.alias) == ("target", "shown")


def test_line_offset_shifts_line_numbers_only():
    [link] = extract_links("a\n\n[[x]]", line_offset=10)
    assert link.line == 12
    assert (link.start, link.end) == (3, 8)


# -- code is not a link source ----------------------------------------------------------------
def test_links_in_code_spans_are_not_links():
    assert targets("`[[a]]` and ``x ` [[b]] `` and [[c]]") == ["c"]
    assert targets("```inline [[d]]``` then [[e]]") == ["e"]


def test_code_span_may_cross_lines_within_one_paragraph():
    assert targets("start `code\n[[hidden]] end` [[shown]]") == ["shown"]


def test_code_span_does_not_cross_a_blank_line():
    assert targets("a ` b\n\n[[shown]] `") == ["shown"]


def test_unmatched_backticks_do_not_hide_links():
    assert targets("a ` b [[x]] `` c") == ["x"]


@pytest.mark.parametrize("fence", ["```", "~~~", "````", "```python", "~~~~ yaml"])
def test_links_in_fenced_blocks_are_not_links(fence):
    close = fence.split()[0].rstrip("python")
    text = f"[[before]]\n{fence}\n[[inside]]\n\n[[still inside]]\n{close}\n[[after]]"
    assert targets(text) == ["before", "after"]


def test_fence_closes_only_with_same_char_and_at_least_its_length():
    text = "````\n```\n[[in1]]\n~~~~\n[[in2]]\n`````\n[[out]]"
    assert targets(text) == ["out"]


def test_unclosed_fence_hides_the_rest():
    assert targets("[[a]]\n```\n[[b]]\n\n[[c]]") == ["a"]


def test_backtick_fence_whose_info_has_a_backtick_is_not_a_fence():
    assert targets("```a`b [[x]]\n[[y]]") == ["x", "y"]
    assert targets("```a`b\n[[y]] ```") == []  # the runs of three pair up as a code span


def test_fence_inside_list_item_and_block_quote():
    assert targets("- item\n  ```\n  [[no]]\n  ```\n- [[yes]]") == ["yes"]
    assert targets("> ```\n> [[no]]\n> ```\n> [[yes]]") == ["yes"]
    assert targets("> ```\n> [[no]]\nout of quote [[yes]]") == ["yes"]


def test_links_in_indented_code_are_not_links():
    assert targets("para\n\n    [[code]]\n\n[[after]]") == ["after"]
    assert targets("    [[first line code]]\n\nx [[after]]") == ["after"]
    assert targets("\t[[tab code]]\n\n[[after]]") == ["after"]


def test_indented_lines_in_paragraphs_and_lists_are_not_code():
    assert targets("para\n    [[continuation]]") == ["continuation"]
    assert targets("- a\n    - nested [[n1]]") == ["n1"]
    assert targets("- a\n\n    - nested after blank [[n2]]") == ["n2"]
    assert targets("1. a\n\n   text of item [[n3]]") == ["n3"]
    assert targets("- a\n\n        code in item [[no]]\n\n[[yes]]") == ["yes"]


def test_line_kinds_marks_fences_and_indented_code():
    kinds = line_kinds(["text", "```", "code", "", "```", "", "    code", "text"])
    assert [k == FENCE for k in kinds] == [False, True, True, True, True, False, False, False]
    assert kinds[6] == INDENTED


def test_crlf_text_is_handled_without_normalising():
    assert targets("a\r\n```\r\n[[no]]\r\n```\r\np:: [[yes]]\r\n") == ["yes"]
    assert edges("p:: [[yes]]\r\n") == [("yes", "p")]


def test_deep_nesting_does_not_recurse():
    deep_list = "\n".join(" " * (2 * k) + f"- item [[n{k}]]" for k in range(3_000))
    assert len(extract_links(deep_list)) == 3_000
    assert targets(">" * 50_000 + " [[q]]") == ["q"]


# -- resolution -------------------------------------------------------------------------------
VAULT = [
    "knowledge/rrf/rrf.md",
    "knowledge/bm25/bm25.md",
    "knowledge/bm25/notes.md",
    "daily/2024-05-01/notes/notes.md",
    "notes.md",
    "Top/Top.md",
    "knowledge/检索/检索.md",
    "resource/diagram.png",
    "knowledge/a/b/deep.md",
]
ALIASES = {
    "knowledge/rrf/rrf.md": ["Reciprocal Rank Fusion", "倒数排名融合", "RRF"],
    "knowledge/bm25/bm25.md": ["Okapi", "ranking"],
    "knowledge/检索/检索.md": ["ranking"],
}


@pytest.fixture
def resolver() -> LinkResolver:
    return LinkResolver(VAULT, ALIASES)


@pytest.mark.parametrize(("target", "expected"), [
    ("knowledge/rrf/rrf.md", "knowledge/rrf/rrf.md"),       # 1 exact path
    ("knowledge/rrf/rrf", "knowledge/rrf/rrf.md"),          # 2 path + .md
    ("notes", "notes.md"),                                  # 2 beats the ambiguous basename
    ("knowledge/rrf", "knowledge/rrf/rrf.md"),              # 3 folder note a/X -> a/X/X.md
    ("Top", "Top/Top.md"),                                  # 3 folder note X -> X/X.md
    ("rrf", "knowledge/rrf/rrf.md"),                        # 4 unique basename
    ("RRF.md", "knowledge/rrf/rrf.md"),                     # 4 case-insensitive, with .md
    ("rrf/rrf", "knowledge/rrf/rrf.md"),                    # 4 path tail
    ("检索", "knowledge/检索/检索.md"),                       # 4 Chinese basename
    ("diagram.png", "resource/diagram.png"),                # 4 non-note file name
    ("reciprocal RANK fusion", "knowledge/rrf/rrf.md"),     # 4 alias, case-insensitive
    ("倒数排名融合", "knowledge/rrf/rrf.md"),                  # 4 Chinese alias
    ("/knowledge/bm25/bm25.md", "knowledge/bm25/bm25.md"),  # leading '/'
    ("./knowledge/bm25/bm25", "knowledge/bm25/bm25.md"),    # leading './'
    ("knowledge/x/../rrf/rrf.md", "knowledge/rrf/rrf.md"),  # normalised inside the vault
])
def test_resolution_order(resolver, target, expected):
    assert resolver.resolve(target) == expected


def test_dangling_target_resolves_to_none(resolver):
    assert resolver.resolve("no such note") is None
    assert resolver.resolve("") is None
    assert resolver.ambiguous("no such note") == []


def test_ambiguous_basename_resolves_to_none_and_lists_candidates(resolver):
    resolver.remove("notes.md")
    assert resolver.resolve("notes") is None
    assert resolver.ambiguous("notes") == ["daily/2024-05-01/notes/notes.md",
                                           "knowledge/bm25/notes.md"]
    assert resolver.resolve("bm25/notes") == "knowledge/bm25/notes.md"


def test_ambiguous_alias_resolves_to_none_and_lists_candidates(resolver):
    assert resolver.resolve("Ranking") is None
    assert resolver.ambiguous("Ranking") == ["knowledge/bm25/bm25.md", "knowledge/检索/检索.md"]


def test_file_name_wins_over_another_notes_alias():
    r = LinkResolver(["knowledge/rrf/rrf.md", "knowledge/fusion/fusion.md"],
                     {"knowledge/fusion/fusion.md": ["rrf"]})
    assert r.resolve("rrf") == "knowledge/rrf/rrf.md"
    assert r.ambiguous("rrf") == []


def test_relative_targets_resolve_against_the_source_folder(resolver):
    src = "knowledge/bm25/bm25.md"
    assert resolver.resolve("./notes.md", src) == "knowledge/bm25/notes.md"
    assert resolver.resolve("../rrf/rrf.md", src) == "knowledge/rrf/rrf.md"
    assert resolver.resolve("../rrf/rrf", src) == "knowledge/rrf/rrf.md"


def test_relative_targets_that_leave_the_vault_are_refused(resolver):
    src = "knowledge/bm25/bm25.md"
    assert resolver.resolve("../../../notes.md", src) is None
    assert resolver.resolve("../../../../etc/passwd", src) is None
    assert resolver.resolve("../notes.md") is None  # no source: relative to the vault root
    assert resolver.resolve("a/../../notes.md") is None
    assert resolver.resolve("../../notes.md", src) == "notes.md"  # stays inside: fine


def test_relative_target_that_misses_is_dangling_not_guessed(resolver):
    assert resolver.resolve("../missing/rrf.md", "knowledge/bm25/bm25.md") is None


def test_resolver_is_incremental():
    r = LinkResolver([])
    assert r.resolve("rrf") is None
    r.add("knowledge/rrf/rrf.md", ["Fusion"])
    assert r.resolve("rrf") == "knowledge/rrf/rrf.md"
    assert r.resolve("fusion") == "knowledge/rrf/rrf.md"
    r.add("archive/rrf.md")
    assert r.resolve("rrf") is None
    r.remove("archive/rrf.md")
    assert r.resolve("rrf") == "knowledge/rrf/rrf.md"
    r.add("knowledge/rrf/rrf.md", ["Other name"])  # re-adding replaces the aliases
    assert r.resolve("fusion") is None
    assert r.resolve("other NAME") == "knowledge/rrf/rrf.md"
    r.remove("knowledge/rrf/rrf.md")
    r.remove("never/added.md")
    assert len(r) == 0
    assert r.resolve("other name") is None


def test_a_single_string_alias_is_one_alias():
    r = LinkResolver(["a/a.md"], {"a/a.md": "Single Alias"})
    assert r.resolve("single alias") == "a/a.md"
    assert r.resolve("s") is None


def test_unicode_normalisation_forms_resolve_to_the_stored_path():
    nfd = unicodedata.normalize("NFD", "notes/café.md")
    r = LinkResolver([nfd])
    assert r.resolve(unicodedata.normalize("NFC", "notes/café.md")) == nfd
    assert r.resolve(unicodedata.normalize("NFC", "Café")) == nfd


# -- edges and conservation -------------------------------------------------------------------
def test_edges_of_uses_resolved_paths_and_raw_targets_when_dangling(resolver):
    links = extract_links("[[rrf]] is_a:: [[nowhere]]\n[[RRF|x]]")
    assert edges_of(links, resolver.resolve) == {("knowledge/rrf/rrf.md", None), ("nowhere", None)}
    assert edges_of(links) == {("rrf", None), ("RRF", None), ("nowhere", None)}


def test_missing_edges_detects_a_dropped_link():
    old = "Uses [[A]] and [[B]].\nrel:: [[C]]"
    new = "Uses [[A]] only."
    assert missing_edges(old, new) == {("B", None), ("C", "rel")}
    assert missing_edges(old, old) == set()


def test_rewriting_to_the_full_path_alias_form_is_not_a_drop(resolver):
    old = "See [[rrf]] and [[Reciprocal Rank Fusion]]."
    new = "See [[knowledge/rrf/rrf.md|rrf]] and [[knowledge/rrf/rrf.md|Reciprocal Rank Fusion]]."
    assert missing_edges(old, new, resolver.resolve) == set()


def test_spelling_variants_are_not_drops_without_a_resolver():
    assert missing_edges("[[RRF]] [[./notes.md]]", "[[rrf.md]] [[notes]]") == set()


def test_predicate_change_is_a_drop_and_an_add():
    old, new = "[[A]]", "is_a:: [[A]]"
    assert missing_edges(old, new) == {("A", None)}
    assert missing_edges(new, old) == {("A", "is_a")}


def test_moving_a_link_into_code_is_a_drop():
    assert missing_edges("[[A]]", "`[[A]]`") == {("A", None)}
    assert missing_edges("[[A]]", "![[A]]") == {("A", None)}


def test_missing_edges_report_the_resolved_path(resolver):
    assert missing_edges("[[rrf]] [[ghost]]", "", resolver.resolve) == {
        ("knowledge/rrf/rrf.md", None), ("ghost", None)}


def test_relative_resolution_in_missing_edges(resolver):
    src = "knowledge/bm25/bm25.md"
    old, new = "[[./notes.md]]", "[[knowledge/bm25/notes.md]]"
    assert missing_edges(old, new, lambda t: resolver.resolve(t, src)) == set()


# -- retargeting ------------------------------------------------------------------------------
def test_rewrite_targets_keeps_alias_anchor_predicate_and_other_bytes():
    text = ("- is_a:: [[old#Sec|Shown]], [[ old ]]\n"
            "Inline [part_of:: [[old^b1]]] and ![[old]] and `[[old]]` and [[other]]\n"
            "| t | [[old\\|cell]] |\n")
    out = rewrite_targets(text, lambda link: "knowledge/新/新.md" if link.target == "old" else None)
    assert out == ("- is_a:: [[knowledge/新/新.md#Sec|Shown]], [[ knowledge/新/新.md ]]\n"
                   "Inline [part_of:: [[knowledge/新/新.md^b1]]] and ![[old]] and `[[old]]` "
                   "and [[other]]\n"
                   "| t | [[knowledge/新/新.md\\|cell]] |\n")
    assert edges(out) == [("knowledge/新/新.md", "is_a"), ("knowledge/新/新.md", "is_a"),
                          ("knowledge/新/新.md", "part_of"), ("other", None),
                          ("knowledge/新/新.md", None)]


def test_rewrite_targets_with_no_mapping_returns_the_text_unchanged():
    text = "[[a|b]] p:: [[c#d]]"
    assert rewrite_targets(text, lambda link: None) == text
    assert rewrite_targets(text, lambda link: link.target) == text


# -- properties -------------------------------------------------------------------------------
_PIECES = st.sampled_from([
    "[[", "]]", "[", "]", "`", "``", "```", "~~~", "![[", "|", "#", "^", "::", "p:: ", "[p:: ",
    "- ", "1. ", "> ", "    ", "\t", "\n", "\n\n", "\r\n", "---", "a", "B", "中文", " ", "\\",
    "<!--", "-->", "%%",
])
MARKDOWNISH = st.lists(st.one_of(_PIECES, st.text(max_size=5)), max_size=60).map("".join)
ANY_TEXT = st.one_of(st.text(), MARKDOWNISH)


@settings(max_examples=400, deadline=None)
@given(ANY_TEXT, st.integers(min_value=1, max_value=50))
def test_extract_links_never_raises_and_offsets_are_consistent(text, offset):
    for link in extract_links(text, line_offset=offset):
        raw = text[link.start:link.end]
        assert raw.startswith("[[") and raw.endswith("]]")
        assert link.target and link.target == link.target.strip()
        assert link.line == text.count("\n", 0, link.start) + offset
        assert link.predicate is None or PREDICATE_RE.fullmatch(link.predicate)


@settings(max_examples=300, deadline=None)
@given(ANY_TEXT)
def test_rewrite_targets_identity_and_retarget(text):
    assert rewrite_targets(text, lambda link: None) == text
    # Only plain-word targets are retargeted: removing e.g. a backtick from a target may turn
    # the line into a fence, which changes the structure rather than the target.
    plain = re.compile(r"[\w .-]+")

    def retarget(link: Link) -> str | None:
        return "T" if plain.fullmatch(link.target) else None

    before = extract_links(text)
    after = extract_links(rewrite_targets(text, retarget))
    assert [(a.predicate, a.alias, a.anchor) for a in after] == [
        (b.predicate, b.alias, b.anchor) for b in before]
    assert [a.target for a in after] == [retarget(b) or b.target for b in before]


@settings(max_examples=200, deadline=None)
@given(ANY_TEXT, ANY_TEXT)
def test_missing_edges_is_the_set_difference_of_edges(old, new):
    assert missing_edges(old, new) <= edges_of(extract_links(old))
    assert missing_edges(old, old) == set()


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=30), st.text(max_size=30))
def test_resolver_never_raises_and_never_leaves_the_vault(target, source):
    r = LinkResolver(VAULT, ALIASES)
    hit = r.resolve(target, source)
    assert hit is None or hit in VAULT
    assert isinstance(r.ambiguous(target), list)


# -- comments and references that are not edges -------------------------------------------
def test_links_in_html_comments_are_no_links_inline_or_as_a_block():
    text = ("a [[one]] <!-- [[two]] --> [[three]] `<!--` [[four]] `-->`\n"
            "an unclosed <!-- inline comment is text [[five]]\n\n"
            "<!--\n[[six]]\n\n[[seven]]\n--> [[eight]] shares the closing line\n"
            "[[nine]]\n- <!-- [[ten]] -->\n```\n<!--\n```\n[[eleven]]\n")
    assert targets(text) == ["one", "three", "four", "five", "nine", "eleven"]
    # a line starting <!-- opens a block to the line holding -->, blank lines and all
    assert targets("<!-- no close here [[a]]\n\n[[b]]\n-->\n[[c]]\n") == ["c"]
    assert targets("x <!--> [[a]] <!---> [[b]] -->\n\n<!-->\n[[c]]\n") == ["a", "b", "c"]


def test_links_in_percent_comments_are_links_as_obsidian_lists_them():
    assert targets("x %% [[a]] %% y\n\n%%\n[[b]]\n%%\n") == ["a", "b"]


def test_refs_are_embeds_and_markdown_links_to_vault_paths_in_order():
    text = ("[[a]] ![[b#h|100]] [c](c%20d.md#Sec \"t\") ![e](<e f.png>) [g](https://x.io/g.md)\n"
            "[m](mailto:x@y.z) [s](#same) [o](//host/x.md) `[k](k.md)` <!-- [h](h.md) -->\n"
            "[![i](i.png)](j.md) [[k]](l.md)\n")
    refs = extract_links(text, refs=True)
    assert [(r.kind, r.target, r.anchor) for r in refs] == [
        (LINK, "a", None), (EMBED, "b", "h"), (MARKDOWN, "c d.md", "Sec"),
        (MARKDOWN, "e f.png", None), (MARKDOWN, "i.png", None), (MARKDOWN, "j.md", None),
        (LINK, "k", None), (MARKDOWN, "l.md", None)]
    assert [text[r.start:r.end] for r in refs if r.kind == MARKDOWN] == [
        "c%20d.md#Sec", "<e f.png>", "i.png", "j.md", "l.md"]
    assert targets(text) == ["a", "k"]   # only wikilinks are edges (DESIGN §4)


@pytest.mark.parametrize(("text", "found"), [
    ("***\n[a]: a.md\n", ["a.md"]), ("Title\n===\n[b]: b.md\n", ["b.md"]),
    ("> [!note] Links\n> [c]: c.md\n", ["c.md"]),
    ("[d]: d.md\n---\n", ["d.md"]), ("[e]: e.md\n===\n", ["e.md"]),   # not a heading
    ("text\n[f]: f.md\n", []), ("> text\n> [g]: g.md\n", []),         # continuations
])
def test_a_definition_under_a_block_of_one_line(text: str, found: list[str]) -> None:
    assert [r.target for r in extract_links(text, refs=True)] == found


def test_markdown_destination_is_encoded_as_the_old_one_was():
    assert markdown_destination("old.md", "New Name.md") == "New%20Name.md"
    assert markdown_destination("old.md#H%20x", "a/b c.md") == "a/b%20c.md#H%20x"
    assert markdown_destination("<old name.md#h>", "new (1).md") == "<new (1).md#h>"
    assert markdown_destination("笔记.md", "新 笔记.md") == "新%20笔记.md"
    assert markdown_destination("%E7%AC%94.md", "新.md") == "%E6%96%B0.md"
    assert markdown_destination("x.md", "50% (draft)#1.md") == "50%25%20(draft)%231.md"
    assert markdown_destination("x.md", "a) [b].md") == "a%29%20[b].md"   # unpaired: escaped


def test_markdown_links_resolve_from_the_vault_root_then_the_notes_folder():
    r = LinkResolver(["p/sub/x.md", "sub/y.md", "p/sub/y.md", "p/n.md", "q/n2.md"])
    assert r.resolve_how("sub/x.md", "p/n.md", markdown=True) == ("p/sub/x.md", "relative")
    assert r.resolve_how("sub/y.md", "p/n.md", markdown=True) == ("sub/y.md", "path")
    assert r.resolve_how("n2.md", "p/n.md", markdown=True) == ("q/n2.md", "name")
    assert r.resolve_how("../q/n2.md", "p/n.md", markdown=True) == ("q/n2.md", "path")
    assert r.resolve("../../x.md", "p/n.md", markdown=True) is None   # leaves the vault
    assert r.resolve("sub/x.md", "p/n.md") == "p/sub/x.md"   # a wikilink: by path suffix


_REF_PIECES = st.sampled_from([
    "[a](", "![b](", "](", "(", ")", "<", ">", "x.md", "%20", "#h", " \"t\"", "<!--", "-->",
    "%%", "http://h/", "`", "[[w]]", "![[e]]", "\n", "\n\n", " ", "[", "]", "\\", "中",
    "\n[d]: ", "]:", "> [q]: ", "- [l]: ", "[^f]: ", " 'T'",
])
REFISH = st.lists(st.one_of(_REF_PIECES, _PIECES, st.text(max_size=3)), max_size=60).map("".join)
_PLAIN_DEST = re.compile(r"[\w.%/# -]+")


@settings(max_examples=400, deadline=None)
@given(REFISH)
def test_refs_never_raise_and_a_rewrite_changes_only_their_paths(text):
    refs = extract_links(text, refs=True)
    assert [x for x in refs if x.kind == LINK] == extract_links(text)
    assert [x.start for x in refs] == sorted(x.start for x in refs)
    md = [x for x in refs if x.kind == MARKDOWN and _PLAIN_DEST.fullmatch(text[x.start:x.end])]
    chosen = {x.start for x in md}
    new = rewrite_targets(text, lambda x: "新 dir/N (1).md"
                          if x.kind == MARKDOWN and x.start in chosen else None, refs=True)
    after = [x for x in extract_links(new, refs=True) if x.kind == MARKDOWN]
    before = [x for x in refs if x.kind == MARKDOWN]
    pairs = list(zip(after, before, strict=True))
    assert [(a.anchor, a.target if b.start in chosen else None) for a, b in pairs] \
        == [(b.anchor, "新 dir/N (1).md" if b.start in chosen else None) for b in before]
    assert [x.target for x in extract_links(new)] == [x.target for x in extract_links(text)]


def test_a_rename_keeps_every_reference_on_its_file_randomised():
    """Conservation for every form (no edge is lost, and no embed or Markdown link either):
    after `rewrite_links`, each reference that named a file names that file's new path, from
    the note's new place; every other one is byte for byte as it was."""
    import posixpath
    import random

    from reme_agent.engine.parser import split_note
    from reme_agent.engine.retarget import rewrite_links, rewrite_property_links

    names = ["a", "Old note", "笔记", "x (1)", "50% done", "img.png", "doc.pdf", "b c.png"]
    folders = ["", "k", "k/sub", "notes", "新 夹"]
    for seed in range(300):
        rng = random.Random(seed)
        files = sorted({posixpath.join(rng.choice(folders), n if "." in n else n + ".md")
                        for n in rng.sample(names, 5)} | {"notes/src.md"})
        src = rng.choice([f for f in files if f != "notes/src.md"] + ["notes/src.md"])
        dst = posixpath.join(rng.choice(folders + ["moved/deep"]),
                             rng.choice(["New name", "新 名", "n2"]) + posixpath.splitext(src)[1])
        if dst in files:
            continue
        source = "notes/src.md"
        new_source = dst if src == source else source
        before = LinkResolver(files)
        after = LinkResolver(sorted(dst if f == src else f for f in files))
        refs = []
        for f in rng.sample(files, min(4, len(files))):
            stem = f[:-3] if f.endswith(".md") else f
            rel = posixpath.relpath(f, "notes")
            def enc(p: str) -> str:
                return (p.replace("%", "%25").replace(" ", "%20").replace("(", "%28")
                        .replace(")", "%29"))

            refs += rng.sample([
                f"[[{posixpath.basename(stem)}]]", f"![[{stem}#h|s]]", f"[[{stem}|t]]",
                f"[t]({enc(f)})", f"[t]({enc(rel)}#x)", f"![a](<{rel}>)",
                f"[t]({enc(posixpath.basename(f))} \"T\")", f"[t](./{enc(rel)})"
                if not rel.startswith("..") else f"[t]({enc(rel)})",
                f"[r{len(refs)}]: {enc(rel)} \"T\"", f"[r{len(refs)}]: <{f}#h>",
                f"- [r{len(refs)}]: {enc(posixpath.basename(f))}"], 3)
        body = "\n\n".join(refs) + "\n\n[w](https://x.io/a.md) `[c](a.md)`\n"
        new_body, _ = rewrite_links(body, source, new_source, before, after, {src: dst},
                                    alias_bare=False)
        old_refs = extract_links(body, refs=True)
        new_refs = extract_links(new_body, refs=True)
        assert len(old_refs) == len(refs), (seed, body)   # every form is read as one
        assert [r.kind for r in new_refs] == [r.kind for r in old_refs], (seed, new_body)
        for old, new in zip(old_refs, new_refs, strict=True):
            md = old.kind == MARKDOWN
            was = before.resolve(old.target, source, markdown=md)
            now = after.resolve(new.target, new_source, markdown=md)
            assert now == (dst if was == src else was), (seed, body, new_body, old, new)
            assert (new.alias, new.anchor) == (old.alias, old.anchor)
        # the same links held in frontmatter values (DESIGN §4: no edges, but a move keeps
        # them on their file), quoted each way a person writes them
        wiki = [r for r in refs if r.startswith(("[[", "![["))]
        if not wiki:
            continue
        quoted = [rng.choice([f'"{w}"', "'" + w.replace("'", "''") + "'", f"see {w} here"])
                  for w in wiki]
        text = (f"---\nfirst: {quoted[0]}\nitems:\n" + "".join(f"  - {q}\n" for q in quoted)
                + "n: 1\n---\n" + body)
        new_text, _ = rewrite_property_links(text, source, new_source, before, after,
                                             {src: dst}, alias_bare=False)
        old_fm = split_note(text).frontmatter
        new_fm = split_note(new_text).frontmatter
        assert split_note(new_text).body == body and new_fm["n"] == 1
        old_props, new_props = property_links(old_fm), property_links(new_fm)
        assert len(old_props) == len(wiki) + 1, (seed, text)
        for old, new in zip(old_props, new_props, strict=True):
            was = before.resolve(old.target, source)
            now = after.resolve(new.target, new_source)
            assert now == (dst if was == src else was), (seed, text, new_text, old, new)
            assert (new.alias, new.anchor, new.kind) == (old.alias, old.anchor, old.kind)
