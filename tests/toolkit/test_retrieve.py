"""Retrieve and tag tools: search, graph_traverse, tags_list, tags_stat."""

from __future__ import annotations

import pytest

from reme_agent.errors import InvalidArgument, NoteNotFound
from reme_agent.toolkit import build_toolkit
from reme_agent.toolkit.notes import property_update
from reme_agent.toolkit.retrieve import graph_traverse, search
from reme_agent.toolkit.tags import tags_list, tags_stat
from tests.toolkit.conftest import call_toolkit

BM25 = "knowledge/bm25/bm25.md"
HYBRID = "knowledge/hybrid-search/hybrid-search.md"
VEC = "knowledge/向量检索/向量检索.md"


def test_search_finds_english_and_chinese_blocks(vault) -> None:
    got = search(vault, "term frequency inverse document", limit=3)
    assert got["results"][0]["path"] == BM25 and got["count"] == 3
    assert {"path", "title", "description", "score", "factors", "chunks"} <= set(got["results"][0])
    assert {"start_line", "end_line", "text"} <= set(got["results"][0]["chunks"][0])
    assert search(vault, "余弦相似度", limit=1)["results"][0]["path"] == VEC
    scoped = search(vault, "BM25 blend RRF", path_prefix="daily/")["results"]
    assert scoped and all(r["path"].startswith("daily/") for r in scoped)


@pytest.mark.parametrize("kwargs", [{"query": ""}, {"query": "x", "limit": 0},
                                    {"query": "x", "path_prefix": "../x"}])
def test_search_rejects_bad_input(vault, kwargs) -> None:
    with pytest.raises(Exception) as err:
        search(vault, **kwargs)
    assert type(err.value).__module__ == "reme_agent.errors"


def test_traverse_out_in_and_both_with_predicates(vault) -> None:
    out = graph_traverse(vault, HYBRID)
    assert {(e["target"], e["predicate"]) for e in out["edges"]} >= {(BM25, "uses"), (VEC, "uses"),
                                                                     (BM25, None)}
    uses = graph_traverse(vault, [HYBRID], predicates=["uses"])
    assert {e["target"] for e in uses["edges"]} == {BM25, VEC}
    inbound = graph_traverse(vault, [BM25], direction="in")
    assert {e["source"] for e in inbound["edges"]} == {HYBRID,
                                                       "daily/2026-11-28/search-tuning/search-tuning.md"}
    deep = graph_traverse(vault, ["bm25"], direction="out", depth=2)
    assert max(e["depth"] for e in deep["edges"]) == 2 and deep["seeds"] == [BM25]
    bare = graph_traverse(vault, [HYBRID], predicates=[""])
    assert {e["predicate"] for e in bare["edges"]} == {None}


def test_traverse_leaves_archived_notes_out_unless_asked(vault) -> None:
    daily = "daily/2026-11-28/search-tuning/search-tuning.md"
    assert daily in {e["source"] for e in graph_traverse(vault, [BM25], direction="in")["edges"]}
    property_update(vault, daily, {"status": "distilled"})
    property_update(vault, daily, {"status": "archived"})
    got = graph_traverse(vault, [BM25], direction="in")
    assert daily not in {e["source"] for e in got["edges"]} and HYBRID in got["nodes"]
    kept = graph_traverse(vault, [BM25], direction="in", include_archived=True)
    assert daily in {e["source"] for e in kept["edges"]}
    # a seed is walked from even when archived; its neighbours are live
    assert BM25 in graph_traverse(vault, [daily])["nodes"]


@pytest.mark.parametrize("kwargs,error", [
    ({"seeds": ["knowledge/nope/nope.md"]}, NoteNotFound),
    ({"seeds": []}, InvalidArgument),
    ({"seeds": [BM25], "depth": 9}, InvalidArgument),
    ({"seeds": [BM25], "direction": "sideways"}, InvalidArgument),
])
def test_traverse_rejects_bad_input(vault, kwargs, error) -> None:
    with pytest.raises(error):
        graph_traverse(vault, **kwargs)


def test_tags_list_counts_and_tags_stat_lists_notes(vault) -> None:
    got = tags_list(vault)
    assert got["tags"][0] == {"tag": "search", "count": 3}
    assert {"tag": "中文", "count": 1} in got["tags"]
    stat = tags_stat(vault, "#search")
    assert [n["path"] for n in stat["notes"]] == [BM25, HYBRID, VEC]
    vault.store.write("knowledge/n/n.md", "---\ntags: [search/bm25]\n---\nx\n")
    assert "knowledge/n/n.md" in [n["path"] for n in tags_stat(vault, "search")["notes"]]
    with pytest.raises(InvalidArgument):
        tags_stat(vault, "  ")


def test_retrieve_and_tags_through_the_toolkit(vault) -> None:
    tk = build_toolkit(vault, groups=["retrieve", "tags"])
    state, text = call_toolkit(tk, "search", query="inverse document frequency", limit=2)
    assert state == "success" and text.startswith(f"========== {BM25} ==========")
    state, text = call_toolkit(tk, "graph_traverse", seeds=[HYBRID], direction="out")
    assert state == "success" and f"-[uses]-> {BM25}" in text
    state, text = call_toolkit(tk, "tags_list")
    assert state == "success" and "#search (3)" in text
    state, text = call_toolkit(tk, "tags_stat", tag="people")
    assert state == "success" and "张三" in text
    state, text = call_toolkit(tk, "graph_traverse", seeds=["knowledge/nope.md"])
    assert state == "error" and "No file at" in text
