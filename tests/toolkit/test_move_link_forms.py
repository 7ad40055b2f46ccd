"""Every link form a user's vault holds survives a `move`: embeds, Markdown links, comments.

Real files on disk: build an indexed vault, `move`, then read the files back.
"""

from __future__ import annotations

from reme_agent.toolkit.files import delete, move
from reme_agent.toolkit.lint import lint_dangling
from reme_agent.toolkit.retrieve import graph_traverse
from tests.toolkit.conftest import build

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 16


def text(vault, path: str) -> str:
    return (vault.root / path).read_text(encoding="utf-8")


def test_a_move_rewrites_embeds_keeping_heading_block_and_shown_text(make_vault) -> None:
    vault = make_vault({
        "notes/Old note.md": "# Old note\n\n## Heading\n\nA paragraph. ^blk\n",
        "notes/hub.md": (
            "![[Old note]]\n\n"
            "![[Old note#Heading]]\n\n"
            "![[notes/Old note#^blk|the block]]\n\n"
            "> quoted ![[Old note|shown]] and [[Old note]]\n"),
    })
    out = move(vault, "notes/Old note.md", "archive/New note.md")
    assert text(vault, "notes/hub.md") == (
        "![[New note]]\n\n"
        "![[New note#Heading]]\n\n"
        "![[archive/New note#^blk|the block]]\n\n"
        "> quoted ![[New note|shown]] and [[New note]]\n")
    assert out.data["rewritten"] == [{"path": "notes/hub.md", "links": 5}]
    # An embed is still not an edge (DESIGN §4): hub's only edge is its one [[link]].
    hits = graph_traverse(vault, seeds=["notes/hub.md"], direction="out").data["nodes"]
    assert hits == ["archive/New note.md"]


def test_moving_an_attachment_rewrites_its_embeds_and_markdown_images(tmp_path) -> None:
    vault = build(tmp_path / "v", {
        "notes/hub.md": ("![[img.png|100]] and ![[assets/img.png]]\n\n"
                         "![alt](assets/img.png) and ![alt](../assets/img.png \"A title\")\n"),
        "notes/other.md": "Unrelated ![pic](other.png) and [[hub]].\n",
    }, binary={"assets/img.png": PNG, "notes/other.png": PNG})
    try:
        move(vault, "assets/img.png", "media/diagram 1.png")
        assert (vault.root / "media/diagram 1.png").read_bytes() == PNG
        assert text(vault, "notes/hub.md") == (
            "![[diagram 1.png|100]] and ![[media/diagram 1.png]]\n\n"
            "![alt](media/diagram%201.png) and ![alt](../media/diagram%201.png \"A title\")\n")
        assert text(vault, "notes/other.md") == "Unrelated ![pic](other.png) and [[hub]].\n"
    finally:
        vault.close()


MD = {
    "projects/Old Name.md": "# Old Name\n\n## Heading\n\nUp: [ref](../other/ref.md).\n",
    "projects/hub.md": (
        "- name: [a](Old%20Name.md)\n"
        "- absolute: [b](projects/Old%20Name.md#Heading)\n"
        "- angle: [c](<Old Name.md>)\n"
        "- relative: [d](../projects/Old%20Name.md \"title\")\n"
        "- web: [e](https://example.com/Old%20Name.md) [m](mailto:old@example.com)\n"
        "- code: `[f](Old%20Name.md)`\n"
        "- same note: [g](#Heading)\n"
        "```\n[h](Old%20Name.md) ![[Old Name]]\n```\n"),
    "other/crlf.md": "![[Old Name#Heading]]\r\n[i](Old%20Name.md)\r\n",
    "other/ref.md": "Back to [f](../projects/Old%20Name.md) and [[hub]].\n",
    "projects/index.md": "Spec: [s](sub/Spec.md)\n",
    "projects/sub/Spec.md": "# Spec\n",
    "zh/笔记.md": "# 笔记\n",
    "zh/refs.md": "[中](笔记.md) and [编码](%E7%AC%94%E8%AE%B0.md)\n",
}


def test_a_move_rewrites_markdown_links_keeping_encoding_relative_paths_and_fragments(
        make_vault) -> None:
    vault = make_vault(MD)
    move(vault, "projects/Old Name.md", "archive/2026/New Name.md")
    assert text(vault, "projects/hub.md") == (
        "- name: [a](New%20Name.md)\n"
        "- absolute: [b](archive/2026/New%20Name.md#Heading)\n"
        "- angle: [c](<New Name.md>)\n"
        "- relative: [d](../archive/2026/New%20Name.md \"title\")\n"
        "- web: [e](https://example.com/Old%20Name.md) [m](mailto:old@example.com)\n"
        "- code: `[f](Old%20Name.md)`\n"
        "- same note: [g](#Heading)\n"
        "```\n[h](Old%20Name.md) ![[Old Name]]\n```\n")
    assert (vault.root / "other/crlf.md").read_bytes() == (
        b"![[New Name#Heading]]\r\n[i](New%20Name.md)\r\n")
    assert text(vault, "other/ref.md") == (
        "Back to [f](../archive/2026/New%20Name.md) and [[hub]].\n")
    # the moved note's own relative link follows it
    assert "Up: [ref](../../other/ref.md)." in text(vault, "archive/2026/New Name.md")

    # Obsidian's "relative path" format writes no ./ : sub/Spec.md is under the note's folder
    move(vault, "projects/sub/Spec.md", "projects/specs/Spec v2.md")
    assert text(vault, "projects/index.md") == "Spec: [s](specs/Spec%20v2.md)\n"

    # non-ASCII names stay readable unless the link had them percent-encoded
    move(vault, "zh/笔记.md", "zh/新 笔记.md")
    assert text(vault, "zh/refs.md") == (
        "[中](新%20笔记.md) and [编码](%E6%96%B0%20%E7%AC%94%E8%AE%B0.md)\n")


def test_markdown_links_are_not_edges_so_lint_and_traverse_ignore_them(make_vault) -> None:
    vault = make_vault({"a.md": "[gone](missing.md) and [b](b.md)\n", "b.md": "# B\n"})
    assert lint_dangling(vault).data["items"] == []
    assert graph_traverse(vault, seeds=["a.md"], direction="out").data["nodes"] == []


def test_links_in_html_comments_stay_as_written_and_links_in_percent_comments_move(
        make_vault) -> None:
    hub = ("Seen: [[Old]] and %% [[Old]] %%.\n"
           "Hidden inline: <!-- [[Old]] ![[Old]] [x](Old.md) --> after.\n\n"
           "<!--\n[[Old]]\n\n![[Old#Heading]] [y](Old.md)\n--> [[Old]] on the closing line\n\n"
           "%%\n[[Old]] in a comment block\n%%\n")
    vault = make_vault({"Old.md": "# Old\n", "hub.md": hub})
    move(vault, "Old.md", "New.md")
    assert text(vault, "hub.md") == (
        "Seen: [[New]] and %% [[New]] %%.\n"
        "Hidden inline: <!-- [[Old]] ![[Old]] [x](Old.md) --> after.\n\n"
        "<!--\n[[Old]]\n\n![[Old#Heading]] [y](Old.md)\n--> [[Old]] on the closing line\n\n"
        "%%\n[[New]] in a comment block\n%%\n")
    # the parser agrees with the mover: an HTML comment's links are no edges, so none dangles
    assert lint_dangling(vault).data["items"] == []


REFERENCE = {
    "projects/Old Name.md": "# Old Name\n\n[up]: ../other/Target.md\n\nSee [up].\n",
    "other/Target.md": "# Target\n",
    "projects/hub.md": (
        "Read [the note][n], [again][a], [once more][r] and [the web][w].\n\n"
        "[n]: Old%20Name.md \"Its title\"\n"
        "[a]: <projects/Old Name.md#Heading>\n"
        "[r]: ../projects/Old%20Name.md 'single'\n"
        "[w]: https://example.com/Old%20Name.md\n"
        "[^1]: a footnote, not a definition: Old%20Name.md\n\n"
        "> [q]: Old%20Name.md\n\n"
        "- [l]: Old%20Name.md (paren title)\n\n"
        "`[c]: Old%20Name.md`\n\n"
        "```\n[f]: Old%20Name.md\n```\n\n"
        "text first\n[late]: Old%20Name.md\n"),
}


def test_a_move_rewrites_reference_definitions_keeping_their_form(make_vault) -> None:
    """`[text][id]` with `[id]: path "title"`: only the definition's destination changes,
    as an inline Markdown link's would (relative stays relative, `<...>` and titles kept);
    external URLs, footnotes, code and a line inside a paragraph are no definitions."""
    vault = make_vault(REFERENCE)
    out = move(vault, "projects/Old Name.md", "archive/New Name.md")
    assert text(vault, "projects/hub.md") == (
        "Read [the note][n], [again][a], [once more][r] and [the web][w].\n\n"
        "[n]: New%20Name.md \"Its title\"\n"
        "[a]: <archive/New Name.md#Heading>\n"
        "[r]: ../archive/New%20Name.md 'single'\n"
        "[w]: https://example.com/Old%20Name.md\n"
        "[^1]: a footnote, not a definition: Old%20Name.md\n\n"
        "> [q]: New%20Name.md\n\n"
        "- [l]: New%20Name.md (paren title)\n\n"
        "`[c]: Old%20Name.md`\n\n"
        "```\n[f]: Old%20Name.md\n```\n\n"
        "text first\n[late]: Old%20Name.md\n")
    assert out.data["rewritten"] == [{"path": "projects/hub.md", "links": 5}]
    # the moved note's own relative definition follows it
    assert "[up]: ../other/Target.md" in text(vault, "archive/New Name.md")
    move(vault, "other/Target.md", "other/deep/Target 2.md")
    assert "[up]: ../other/deep/Target%202.md" in text(vault, "archive/New Name.md")


def test_definitions_after_a_block_of_one_line_are_rewritten_and_reported(make_vault) -> None:
    """A definition right under a thematic break, a setext heading or a callout's `[!note]`
    line opens a block of its own (CommonMark; Obsidian reads a callout's body as a new
    document); the line kinds join those lines, and such a definition was left stale by a
    move and missing from a delete's report. A line continuing a paragraph still is none."""
    hub = ("Intro [a][a], [b][b], [c][c].\n\n***\n[a]: Old.md\n\n"
           "Title\n=====\n[b]: Old.md\n\n> [!note] Links\n> [c]: Old.md\n\n"
           "> text first\n> [d]: Old.md\n")
    vault = make_vault({"Old.md": "# Old\n", "hub.md": hub})
    out = move(vault, "Old.md", "sub/New.md")
    want = hub
    for ref in "abc":
        want = want.replace(f"[{ref}]: Old.md", f"[{ref}]: New.md")   # shortest, as before
    assert text(vault, "hub.md") == want
    assert out.data["rewritten"] == [{"path": "hub.md", "links": 3}]
    report = delete(vault, "sub/New.md")
    assert sorted(e["line"] for e in report.data["dangling"]) == [4, 8, 11]
