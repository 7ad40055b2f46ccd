"""The last link gaps a person's vault hit (session 8), through the tools, on real files.

- a create whose name makes an embed's, a Markdown link's or a property link's short name
  ambiguous rewrites them, as it did wikilinks (the create's cheap check now knows them);
- a delete reports every reference it leaves dangling, not only wikilinks;
- a move or merge rewrites wikilinks in frontmatter values (`related: "[[Old]]"`) as
  Obsidian does, changing only that value's characters; they stay no edges (DESIGN §4).
"""

from __future__ import annotations

import pytest

from reme_agent.engine.links import extract_links, property_links
from reme_agent.engine.parser import split_note
from reme_agent.errors import FrontmatterEditError
from reme_agent.toolkit.files import delete, move
from reme_agent.toolkit.lint import lint_dangling
from reme_agent.toolkit.notes import write_note
from reme_agent.toolkit.retrieve import graph_traverse


def text(vault, path: str) -> str:
    return (vault.root / path).read_text(encoding="utf-8")


def test_a_create_that_makes_only_embeds_and_property_links_ambiguous_rewrites_them(
        make_vault) -> None:
    vault = make_vault({
        "knowledge/bm25.md": "# BM25\n",
        "hub.md": ("![[bm25]] and ![[bm25#Scores|shown]]\n\n"
                   "[by path](knowledge/bm25.md) and [by name](bm25.md)\n"),
        "props.md": '---\nrelated: "[[bm25]]"  # the ranker\n---\n# Props\n',
    })
    write_note(vault, "other/bm25.md", body="# Another BM25\n")
    assert text(vault, "hub.md") == (
        "![[knowledge/bm25]] and ![[knowledge/bm25#Scores|shown]]\n\n"
        "[by path](knowledge/bm25.md) and [by name](knowledge/bm25.md)\n")
    # a wikilink gets its old text as shown text, as in the body (`[[bm25]]` reads the same)
    assert text(vault, "props.md") == (
        '---\nrelated: "[[knowledge/bm25|bm25]]"  # the ranker\n---\n# Props\n')
    view = vault.view()
    for source in ("hub.md", "props.md"):
        parts = split_note(text(vault, source), source)
        found = [*extract_links(parts.body, refs=True), *property_links(parts.frontmatter)]
        assert found and all(view.resolver.resolve(x.target, source, markdown=x.kind == "markdown")
                             == "knowledge/bm25.md" for x in found)


def test_a_create_that_makes_only_a_property_links_name_ambiguous_rewrites_it(
        make_vault) -> None:
    vault = make_vault({"knowledge/bm25.md": "# BM25\n",
                        "props.md": "---\nsee:\n  - '[[bm25#Scores]]'\n---\n# Props\n"})
    write_note(vault, "other/bm25.md", body="# Another BM25\n")
    assert text(vault, "props.md") == (
        "---\nsee:\n  - '[[knowledge/bm25#Scores]]'\n---\n# Props\n")


def test_a_move_rewrites_property_links_keeping_quotes_comments_and_style(make_vault) -> None:
    fm = ('---\n'
          'title: Hub\n'
          'related: "[[Old Name]]"   # hand-written comment\n'
          'up:\n'
          '  - "[[Old Name|the old one]]"\n'
          "  - '[[notes/Old Name#Part]]'\n"
          '  - "[[Unrelated]]"\n'
          'cover: "![[Old Name]]"\n'
          'see: plain text [[Old Name]] here\n'
          'tags: [a, b]\n'
          '---\n')
    vault = make_vault({"notes/Old Name.md": "# Old\n", "Unrelated.md": "# U\n",
                        "hub.md": fm + "Body [[Old Name]].\n"})
    out = move(vault, "notes/Old Name.md", "archive/New Name.md")
    assert text(vault, "hub.md") == (
        '---\n'
        'title: Hub\n'
        'related: "[[New Name]]"   # hand-written comment\n'
        'up:\n'
        '  - "[[New Name|the old one]]"\n'
        "  - '[[archive/New Name#Part]]'\n"
        '  - "[[Unrelated]]"\n'
        'cover: "![[New Name]]"\n'
        'see: plain text [[New Name]] here\n'
        'tags: [a, b]\n'
        '---\n'
        'Body [[New Name]].\n')
    assert out.data["rewritten"] == [{"path": "hub.md", "links": 6}]
    # still no edges: the only edge of hub is its body link
    assert graph_traverse(vault, seeds=["hub.md"], direction="out").data["nodes"] == [
        "archive/New Name.md"]


def test_a_move_of_the_note_itself_keeps_its_relative_property_links(make_vault) -> None:
    vault = make_vault({"a/b/n.md": '---\nparent: "[[../A]]"\n---\n# N\n', "a/A.md": "# A\n"})
    move(vault, "a/b/n.md", "a/b/c/n.md")
    parts = split_note(text(vault, "a/b/c/n.md"), "a/b/c/n.md")
    assert parts.frontmatter == {"parent": "[[../../A]]"}


def test_delete_reports_embeds_markdown_and_property_links_it_leaves_dangling(
        make_vault) -> None:
    vault = make_vault({
        "notes/Target.md": "# Target\n",
        "a.md": "[[Target]] here\n\n![[Target#Part]]\n",
        "b.md": ('---\nrelated: "[[Target]]"\nlist:\n  - x\n  - "[[notes/Target|t]]"\n---\n'
                 "See [it](notes/Target.md) and [ref][t].\n\n[t]: <notes/Target.md>\n"),
        "c.md": "[web](https://example.com/notes/Target.md) ![[Other]] `[[Target]]`\n",
    })
    got = delete(vault, "notes/Target.md")
    assert [(d["source"], d["line"], d["kind"], d["target"], d["property"])
            for d in got.data["dangling"]] == [
        ("a.md", 1, "link", "Target", None),
        ("a.md", 3, "embed", "Target", None),
        ("b.md", 2, "property", "Target", "related"),
        ("b.md", 3, "property", "notes/Target", "list"),
        ("b.md", 7, "markdown", "notes/Target.md", None),
        ("b.md", 9, "markdown", "notes/Target.md", None),
    ]
    assert all(d["now_resolves_to"] is None for d in got.data["dangling"])
    assert got.text.splitlines() == [
        "Deleted notes/Target.md; 6 link(s) now dangling",
        "  a.md:1 [[Target]]",
        "  a.md:3 ![[Target]]",
        "  b.md:2 [[Target]] (property related)",
        "  b.md:3 [[notes/Target]] (property list)",
        "  b.md:7 [](notes/Target.md)",
        "  b.md:9 [](notes/Target.md)",
    ]
    # lint (wikilinks only: DESIGN §4) agrees on the one edge left dangling
    assert [(x["source"], x["target"]) for x in lint_dangling(vault).data["items"]] == [
        ("a.md", "Target")]


def test_a_move_keeps_hand_written_yaml_of_every_shape_and_changes_only_link_text(
        make_vault) -> None:
    """Block scalars with indicators, a multi-line flow map, an anchored map merged
    elsewhere, an explicit key, a `...` end, quoted keys and tabs after the colon (which the
    reader and Obsidian accept; the in-place editor's scanner refused them)."""
    fm = ('---\n'
          'strip: |-\n  [[Old]]\n  two\n'
          'indented: |2\n    [[Old]]\n  two\n'
          'map: {a: "[[Old]]",\n  b: 2}\n'
          'base: &b\n  rel: "[[Old]]"\n'
          'merged:\n  <<: *b\n  x: 1\n'
          '? explicit\n: "[[Old]]"\n'
          '"quoted key": \'[[Old|it\'\'s]]\'\n'
          'tabbed:\t"[[Old]]"\t# tab before the comment\n'
          'plain:\tsee [[Old]]\there\n'
          '...\n')
    vault = make_vault({"Old.md": "# Old\n", "hub.md": fm + "Body [[Old]].\n"})
    before = text(vault, "hub.md")
    want = split_note(before, "hub.md").frontmatter
    move(vault, "Old.md", "sub/New b.md")
    after = text(vault, "hub.md")
    assert after == before.replace("[[Old", "[[New b")   # only the link text changed
    got = split_note(after, "hub.md").frontmatter
    assert got["merged"]["rel"] == got["base"]["rel"] == "[[New b]]"
    assert got.keys() == want.keys() and got["plain"] == "see [[New b]]\there"


def test_a_property_link_that_cannot_be_rewritten_refuses_the_move_whole(make_vault) -> None:
    """`v: *k` where the anchor `&k` sits on a key: the value reads "[[Old]]" but only a key
    holds its text, and keys are never rewritten. The move went through and left the
    property pointing at nothing; now it is refused and no file changes."""
    hub = '---\n? &k "[[Old]]"\n: 1\nv: *k\n---\nBody\n'
    vault = make_vault({"Old.md": "# Old\n", "hub.md": hub, "b.md": "see [[Old]]\n"})
    with pytest.raises(FrontmatterEditError, match="alias"):
        move(vault, "Old.md", "New.md")
    assert text(vault, "hub.md") == hub and text(vault, "b.md") == "see [[Old]]\n"
    assert (vault.root / "Old.md").exists() and not (vault.root / "New.md").exists()
