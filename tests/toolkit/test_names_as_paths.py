"""Tools take a note name wherever they take a path, resolved like a [[link]]."""

from __future__ import annotations

import pytest

from reme_agent.errors import AmbiguousName, NoteNotFound
from reme_agent.toolkit import build_toolkit
from reme_agent.toolkit.files import copy, delete, move
from reme_agent.toolkit.notes import (
    property_delete,
    property_read,
    property_update,
    read_note,
    stat_note,
)
from tests.toolkit.conftest import call_toolkit

NOTES = {
    "knowledge/bm25/bm25.md": "---\ntitle: BM25\n---\n# BM25\n\nRanking.\n",
    "people/wang-fang.md": "---\ntitle: Wang Fang\naliases: [王芳]\n---\nPayments.\n",
    "a/x.md": "# A x\n",
    "b/x.md": "# B x\n",
    "notes/links.md": "See [[王芳]] and [[bm25]].\n",
}


@pytest.fixture
def named(make_vault):
    return make_vault(NOTES)


def test_read_takes_a_file_name_a_title_or_an_alias(named) -> None:
    assert read_note(named, "bm25")["path"] == "knowledge/bm25/bm25.md"
    assert read_note(named, "BM25")["path"] == "knowledge/bm25/bm25.md"
    assert read_note(named, "王芳")["path"] == "people/wang-fang.md"
    assert read_note(named, "Wang Fang")["path"] == "people/wang-fang.md"
    assert stat_note(named, "王芳")["path"] == "people/wang-fang.md"


def test_an_ambiguous_name_lists_the_candidates_and_a_path_that_exists_wins(named) -> None:
    with pytest.raises(AmbiguousName) as err:
        read_note(named, "x")
    assert err.value.candidates == ["a/x.md", "b/x.md"]
    assert "a/x.md, b/x.md" in str(err.value)
    assert read_note(named, "a/x.md")["path"] == "a/x.md"
    with pytest.raises(NoteNotFound):
        read_note(named, "nothing-like-this")


def test_property_and_file_tools_take_names(named) -> None:
    property_update(named, "王芳", {"team": "payments"})
    assert property_read(named, "Wang Fang")["properties"]["team"] == "payments"
    property_delete(named, "王芳", ["team"])
    move(named, "王芳", "people/fang.md")
    assert "[[王芳]]" in (named.root / "notes/links.md").read_text(encoding="utf-8")  # alias kept
    copy(named, "BM25", "knowledge/bm25-copy.md")
    delete(named, "bm25-copy")
    assert not (named.root / "knowledge/bm25-copy.md").exists()


def test_names_work_through_the_toolkit(named) -> None:
    state, text = call_toolkit(build_toolkit(named), "read", path="王芳")
    assert state == "success" and "people/wang-fang.md" in text
    state, text = call_toolkit(build_toolkit(named), "read", path="x")
    assert state == "error" and "a/x.md, b/x.md" in text


def test_traverse_seeds_by_an_ambiguous_name_list_the_candidates(named) -> None:
    from reme_agent.toolkit.retrieve import graph_traverse

    with pytest.raises(AmbiguousName, match="a/x.md, b/x.md"):
        graph_traverse(named, ["x"])
    assert graph_traverse(named, ["王芳"], direction="in")["seeds"] == ["people/wang-fang.md"]
