"""Links land in the vault's style (links.style), and a new name never leaves a link dangling."""

from __future__ import annotations

from pathlib import Path

from reme_agent.config import Settings
from reme_agent.engine.links import LinkResolver
from reme_agent.engine.linkstyle import format_link, keep_style
from reme_agent.toolkit.daily import daily_write
from reme_agent.toolkit.files import copy, move
from reme_agent.toolkit.lint import lint_dangling
from reme_agent.toolkit.notes import write_note
from tests.toolkit.conftest import build

NOTES = {
    "knowledge/bm25/bm25.md": "---\ntitle: BM25\n---\n# BM25\n",
    "knowledge/Circuit breaker.md": "# Circuit breaker\n",
    "notes/hub.md": "Uses [[bm25]] and [[Circuit breaker|the breaker]].\n",
}


def text(vault, path: str) -> str:
    return (vault.root / path).read_text(encoding="utf-8")


def test_format_link_writes_what_obsidian_writes() -> None:
    r = LinkResolver(["knowledge/bm25/bm25.md", "a/x.md", "b/x.md", "resource/p.pdf"])
    assert format_link("knowledge/bm25/bm25.md", r) == "[[bm25]]"
    assert format_link("knowledge/bm25/bm25.md", r, shown="BM25") == "[[bm25|BM25]]"
    assert format_link("knowledge/bm25/bm25.md", r, shown="bm25") == "[[bm25]]"
    assert format_link("a/x.md", r) == "[[a/x]]"  # the name alone is ambiguous
    assert format_link("resource/p.pdf", r) == "[[p.pdf]]"
    assert format_link("knowledge/bm25/bm25.md", r, "path") == "[[knowledge/bm25/bm25]]"


def test_keep_style_keeps_a_name_a_path_an_extension_and_a_relative_link() -> None:
    r = LinkResolver(["k/new/new.md", "k/other.md"])
    assert keep_style("old", "k/new/new.md", r) == "new"
    assert keep_style("k/old/old.md", "k/new/new.md", r) == "k/new/new.md"
    assert keep_style("k/old/old", "k/new/new.md", r) == "k/new/new"
    assert keep_style("/k/old/old", "k/new/new.md", r) == "/k/new/new"
    assert keep_style("old.md", "k/new/new.md", r) == "new.md"
    assert keep_style("../old/old", "k/new/new.md", r, "k/other.md") == "./new/new"


def test_job_links_named_by_full_path_are_stored_in_the_vault_style(make_vault) -> None:
    vault = make_vault(NOTES)
    write_note(vault, "notes/new.md", body="See [[knowledge/bm25/bm25.md|BM25]] and "
                                           "[[knowledge/Circuit breaker.md]], [[bm25]].")
    assert "See [[bm25|BM25]] and [[Circuit breaker]], [[bm25]]." in text(vault, "notes/new.md")
    copy(vault, "notes/new.md", "notes/copy.md")  # a copy is a copy, byte for byte
    assert text(vault, "notes/copy.md") == text(vault, "notes/new.md")


def test_the_path_style_writes_full_paths(tmp_path: Path) -> None:
    settings = Settings(embedder={"name": "hash"}, index={"progress": False},
                        links={"style": "path"})
    vault = build(tmp_path / "v", NOTES, settings=settings)
    try:
        write_note(vault, "notes/new.md", body="See [[knowledge/bm25/bm25.md|BM25]].")
        assert "See [[knowledge/bm25/bm25|BM25]]." in text(vault, "notes/new.md")
        move(vault, "knowledge/bm25/bm25.md", "knowledge/okapi/okapi.md")
        # each link keeps its own style: the name stays a name, the path a path
        assert "Uses [[okapi]] and" in text(vault, "notes/hub.md")
        assert "See [[knowledge/okapi/okapi|BM25]]." in text(vault, "notes/new.md")
    finally:
        vault.close()


def test_a_new_note_with_a_taken_name_rewrites_the_links_it_would_make_ambiguous(
        make_vault) -> None:
    vault = make_vault(NOTES)
    got = daily_write(vault, "bm25", "Read about ranking.", date="2026-11-30")
    assert got["created"] and got["path"] == "daily/2026-11-30/bm25/bm25.md"
    # the sentence still reads "Uses bm25": the old text is kept as shown text
    assert "Uses [[knowledge/bm25/bm25|bm25]] and" in text(vault, "notes/hub.md")
    write_note(vault, "people/Circuit breaker.md", body="A person called Circuit breaker.")
    assert "[[knowledge/Circuit breaker|the breaker]]" in text(vault, "notes/hub.md")
    assert lint_dangling(vault)["count"] == 0


def test_a_new_note_whose_alias_takes_a_name_link_rewrites_that_link(make_vault) -> None:
    """The create's check asks the index for links naming any of the new note's names: an
    alias, not only the file name, can take a link over."""
    vault = make_vault({**NOTES, "notes/ranking.md": "Ranking: [[Okapi BM25]] and [[bm25]].\n",
                        "knowledge/okapi/okapi.md": "---\naliases: [Okapi BM25]\n---\n# Okapi\n"})
    write_note(vault, "people/Okapi Jones.md", body="A person.",
               frontmatter={"aliases": ["Okapi BM25"]})
    after = text(vault, "notes/ranking.md")
    assert "[[Okapi BM25]]" not in after and "[[okapi|Okapi BM25]]" in after
    assert lint_dangling(vault)["count"] == 0
    vault.close()
