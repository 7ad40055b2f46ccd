"""Graph projection (DESIGN §6): links, predicates, dangling targets, traversal."""

from __future__ import annotations

import networkx as nx

from reme_agent.engine.projections.graph import GraphProjection


def _chain() -> GraphProjection:
    """a -> b -> c -> d, plus x -> b (so b has two inbound)."""
    g = GraphProjection()
    g.set_links("a.md", [("b.md", None, False)])
    g.set_links("b.md", [("c.md", "part_of", False)])
    g.set_links("c.md", [("d.md", None, False)])
    g.set_links("d.md", [])
    g.set_links("x.md", [("b.md", "related", False)])
    return g


def test_set_links_replaces_outbound_and_keeps_predicates() -> None:
    g = GraphProjection()
    g.mark_present("b.md")
    g.set_links("a.md", [("b.md", None, False), ("b.md", "related", False), ("c.md", None, False),
                         ("img.png", None, False)])
    assert "img.png" in g and not g.is_dangling("img.png")
    assert g.outbound("a.md") == [("b.md", None), ("b.md", "related"), ("c.md", None),
                                  ("img.png", None)]
    assert g.inbound("b.md") == [("a.md", None), ("a.md", "related")]
    g.set_links("a.md", [("c.md", "cites", False)])
    assert g.outbound("a.md") == [("c.md", "cites")]
    assert g.inbound("b.md") == []
    assert "b.md" in g  # a real note stays even with no links left
    assert "img.png" not in g  # a file that is only a link target goes with its last link
    assert g.outbound("missing.md") == [] and g.inbound("missing.md") == []


def test_in_degree_counts_distinct_sources_without_self_links() -> None:
    g = GraphProjection()
    g.set_links("a.md", [("t.md", None, False), ("t.md", "related", False)])
    g.set_links("b.md", [("t.md", None, False)])
    g.set_links("t.md", [("t.md", None, False)])
    assert g.in_degree("t.md") == 2
    assert ("t.md", None) in g.inbound("t.md")  # the self-link is stored, just not counted
    assert g.in_degree("nothing.md") == 0


def test_dangling_targets_and_mark_present() -> None:
    g = GraphProjection()
    g.set_links("a.md", [("Missing Note", None, True), ("b.md", "rel", False)])
    assert g.is_dangling("Missing Note")
    assert g.dangling_edges() == [("a.md", "Missing Note", None)]
    g.mark_present("Missing Note")
    assert not g.is_dangling("Missing Note")
    assert g.dangling_edges() == []
    # a dangling node nothing points to any more disappears
    g.set_links("c.md", [("Ghost", "rel", True)])
    assert "Ghost" in g
    g.set_links("c.md", [])
    assert "Ghost" not in g


def test_remove_source_keeps_linked_nodes_as_dangling() -> None:
    g = _chain()
    g.remove_source("b.md")  # a and x still link to it
    assert "b.md" in g and g.is_dangling("b.md")
    assert g.outbound("b.md") == []
    assert g.inbound("c.md") == []
    assert ("a.md", "b.md", None) in g.dangling_edges()
    assert g.in_degree("c.md") == 0
    g.remove_source("d.md")  # c still links to d
    assert g.is_dangling("d.md")
    g.remove_source("c.md")  # nobody links to c any more; d loses its last inbound
    assert "c.md" not in g and "d.md" not in g
    g.remove_source("a.md")
    g.remove_source("x.md")
    assert g.nodes() == []  # b was only dangling: gone with its last inbound link


def test_dangling_source_not_counted() -> None:
    g = GraphProjection()
    g.set_links("a.md", [("b.md", None, False)])
    g.set_links("b.md", [("c.md", None, False)])
    g.set_links("z.md", [("a.md", None, False)])
    g.remove_source("a.md")  # a is now dangling (z links to it), and has no outbound
    assert g.in_degree("b.md") == 0


def test_traverse_out_in_both_and_depth() -> None:
    g = _chain()
    out1 = g.traverse(["a.md"], "out", depth=1)
    assert [(e["source"], e["target"], e["depth"], e["direction"]) for e in out1] == [
        ("a.md", "b.md", 1, "out")
    ]
    out3 = g.traverse(["a.md"], "out", depth=3)
    assert [(e["target"], e["depth"]) for e in out3] == [("b.md", 1), ("c.md", 2), ("d.md", 3)]
    assert out3[1]["predicate"] == "part_of"
    inn = g.traverse(["c.md"], "in", depth=2)
    assert [(e["source"], e["target"], e["depth"], e["direction"]) for e in inn] == [
        ("b.md", "c.md", 1, "in"),
        ("a.md", "b.md", 2, "in"),
        ("x.md", "b.md", 2, "in"),
    ]
    both = g.traverse(["b.md"], "both", depth=1)
    assert {(e["source"], e["target"], e["direction"]) for e in both} == {
        ("b.md", "c.md", "out"),
        ("a.md", "b.md", "in"),
        ("x.md", "b.md", "in"),
    }
    assert all(e["dangling"] is False for e in both)
    assert g.traverse(["nope.md"], "out", depth=3) == []
    assert g.traverse(["a.md"], "out", depth=0) == []


def test_traverse_predicate_filter_exclude_and_max_nodes() -> None:
    g = _chain()
    only_part = g.traverse(["b.md"], "both", depth=2, predicates={"part_of"})
    assert [(e["source"], e["target"]) for e in only_part] == [("b.md", "c.md")]
    bare = g.traverse(["a.md"], "out", depth=3, predicates={None})
    assert [(e["source"], e["target"]) for e in bare] == [("a.md", "b.md")]
    excl = g.traverse(["b.md"], "both", depth=3, exclude=lambda n: n.startswith("x"))
    assert all("x.md" not in (e["source"], e["target"]) for e in excl)
    assert {e["target"] for e in excl} >= {"c.md", "d.md"}
    capped = g.traverse(["a.md"], "out", depth=5, max_nodes=2)
    assert [e["target"] for e in capped] == ["b.md", "c.md"]


def test_traverse_cycles_terminate_and_report_each_edge_once() -> None:
    g = GraphProjection()
    g.set_links("a.md", [("b.md", None, False)])
    g.set_links("b.md", [("c.md", None, False)])
    g.set_links("c.md", [("a.md", None, False), ("c.md", None, False)])
    edges = g.traverse(["a.md"], "both", depth=10)
    keys = [(e["source"], e["target"], e["predicate"]) for e in edges]
    assert len(keys) == len(set(keys)) == 4


def test_traverse_marks_dangling_edges() -> None:
    g = GraphProjection()
    g.set_links("a.md", [("Nowhere", None, True)])
    (edge,) = g.traverse(["a.md"], "out")
    assert edge["dangling"] is True and edge["target"] == "Nowhere"


def test_undirected_weights_and_node_selection() -> None:
    g = GraphProjection()
    g.set_links("a.md", [("b.md", None, False), ("b.md", "rel", False), ("Gone", None, True)])
    g.set_links("b.md", [("a.md", None, False), ("b.md", None, False)])
    h = g.undirected()
    assert isinstance(h, nx.Graph) and not h.is_directed()
    assert set(h.nodes) == {"a.md", "b.md"}
    assert h["a.md"]["b.md"]["weight"] == 3
    assert not h.has_edge("b.md", "b.md")
    sub = g.undirected(["a.md", "Gone"])
    assert set(sub.nodes) == {"a.md", "Gone"} and sub.has_edge("a.md", "Gone")
    assert g.nodes() == ["Gone", "a.md", "b.md"]


def test_clear_forgets_everything() -> None:
    g = _chain()
    g.clear()
    assert g.nodes() == [] and g.dangling_edges() == [] and len(g) == 0
    g.set_links("a.md", [("b.md", None, False)])
    assert g.outbound("a.md") == [("b.md", None)]
