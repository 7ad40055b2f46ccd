"""Graph projection: the vault's link graph in a networkx DiGraph (DESIGN §6).

Nodes are vault paths. A link whose target does not resolve to a file still creates a node,
named by its raw target and marked ``dangling=True``, so "what links to a missing note" and
dangling-link reports are cheap; such a node disappears once nothing points to it.

Several links between the same pair with different predicates (``related:: [[b]]`` and a bare
``[[b]]``) are all kept: each edge stores the set of its predicates (``None`` = bare link).
A DiGraph with predicate sets (rather than a MultiDiGraph) keeps "distinct sources"
(``in_degree``) and neighbour walks simple, while losing nothing.

networkx gives the reverse index (predecessors) for free. Neo4j is a later backend with the
same interface. One ``RLock`` makes reads safe while the indexer thread writes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any, Literal

import networkx as nx

__all__ = ["GraphProjection"]

Direction = Literal["in", "out", "both"]


def _pred_key(p: str | None) -> tuple[bool, str]:
    """Sort key that puts the bare link (None) first and is total over str | None."""
    return (p is not None, p or "")


class GraphProjection:
    """Directed link graph between vault paths, with predicates and dangling targets."""

    def __init__(self) -> None:
        self._g: nx.DiGraph = nx.DiGraph()
        self._lock = threading.RLock()

    # --- writes -----------------------------------------------------------------------------

    def _set_present(self, path: str) -> None:
        if path in self._g:
            self._g.nodes[path].update(dangling=False, note=True)
        else:
            self._g.add_node(path, dangling=False, note=True)

    def _gc(self, node: str) -> None:
        """Drop a node that only existed as a link target (dangling, or a file that is not a
        note, like an image) once nothing points to it any more."""
        g = self._g
        if (
            node in g
            and not g.nodes[node].get("note")
            and g.in_degree(node) == 0
            and g.out_degree(node) == 0
        ):
            g.remove_node(node)

    def set_links(self, source: str, edges: Iterable[tuple[str, str | None, bool]]) -> None:
        """Replace ``source``'s outbound links with ``edges`` = (target, predicate, dangling).

        ``source`` is marked present (it has a file). A target that resolved
        (``dangling=False``) is marked present too; a dangling target is created as a
        dangling node unless a file for it is already known.
        """
        with self._lock:
            g = self._g
            self._set_present(source)
            old_targets = list(g.successors(source))
            g.remove_edges_from([(source, t) for t in old_targets])
            for target, predicate, dangling in edges:
                if target not in g:
                    g.add_node(target, dangling=bool(dangling))
                elif not dangling:
                    g.nodes[target]["dangling"] = False
                if g.has_edge(source, target):
                    g[source][target]["predicates"].add(predicate)
                else:
                    g.add_edge(source, target, predicates={predicate})
            for t in old_targets:
                self._gc(t)

    def remove_source(self, source: str) -> None:
        """A note was deleted: drop its outbound links, and the node unless still linked to.

        If other notes still link to it, the node stays, now ``dangling=True``, so their
        links show up as dangling.
        """
        with self._lock:
            g = self._g
            if source not in g:
                return
            targets = list(g.successors(source))
            g.remove_edges_from([(source, t) for t in targets])
            if g.in_degree(source) == 0:
                g.remove_node(source)
            else:
                g.nodes[source].update(dangling=True, note=False)
            for t in targets:
                if t != source:
                    self._gc(t)

    def clear(self) -> None:
        """Forget every node and edge (before a cold reload)."""
        with self._lock:
            self._g.clear()

    def mark_present(self, path: str) -> None:
        """A file exists for ``path`` (also turns a dangling node into a real one)."""
        with self._lock:
            self._set_present(path)

    def export_state(self) -> dict[str, Any]:
        """Nodes, dangling flags and edges as JSON-able lists, for a cold-open snapshot."""
        with self._lock:
            g = self._g
            nodes = list(g.nodes)
            index = {n: i for i, n in enumerate(nodes)}
            return {
                "nodes": nodes,
                "dangling": [bool(g.nodes[n].get("dangling")) for n in nodes],
                "note": [bool(g.nodes[n].get("note")) for n in nodes],
                "edges": [[index[s], index[t], list(d["predicates"])]
                          for s, nbrs in g.adjacency() for t, d in nbrs.items()],
            }

    def import_state(self, state: dict[str, Any]) -> None:
        """Replace the graph with one from ``export_state`` (no link resolution needed)."""
        nodes = state["nodes"]
        g: nx.DiGraph = nx.DiGraph()
        g.add_nodes_from((n, {"dangling": d, "note": k})
                         for n, d, k in zip(nodes, state["dangling"], state["note"], strict=True))
        g.add_edges_from((nodes[s], nodes[t], {"predicates": set(p)})
                         for s, t, p in state["edges"])
        with self._lock:
            self._g = g

    # --- reads ------------------------------------------------------------------------------

    def __contains__(self, path: object) -> bool:
        return path in self._g

    def __len__(self) -> int:
        return self._g.number_of_nodes()

    def nodes(self) -> list[str]:
        """All nodes, dangling ones included, sorted."""
        with self._lock:
            return sorted(self._g.nodes)

    def is_dangling(self, path: str) -> bool:
        """True if ``path`` is only known as a link target without a file."""
        with self._lock:
            return bool(path in self._g and self._g.nodes[path].get("dangling"))

    def outbound(self, path: str) -> list[tuple[str, str | None]]:
        """(target, predicate) for every outbound link, one entry per predicate."""
        with self._lock:
            if path not in self._g:
                return []
            adj = self._g.succ[path]
            return [
                (t, p) for t in sorted(adj) for p in sorted(adj[t]["predicates"], key=_pred_key)
            ]

    def inbound(self, path: str) -> list[tuple[str, str | None]]:
        """(source, predicate) for every link pointing at ``path``, one entry per predicate."""
        with self._lock:
            if path not in self._g:
                return []
            adj = self._g.pred[path]
            return [
                (s, p) for s in sorted(adj) for p in sorted(adj[s]["predicates"], key=_pred_key)
            ]

    def in_degree(self, path: str, skip: Collection[str] = ()) -> int:
        """Distinct notes linking here, not counting self-links, dangling sources or the
        sources in `skip` (whose links a caller suspends)."""
        with self._lock:
            if path not in self._g:
                return 0
            nodes = self._g.nodes
            return sum(1 for s in self._g.pred[path]
                       if s != path and not nodes[s].get("dangling") and s not in skip)

    def dangling_edges(self) -> list[tuple[str, str, str | None]]:
        """(source, raw target, predicate) for every link to a node without a file."""
        with self._lock:
            nodes = self._g.nodes
            out = [
                (s, t, p)
                for s, t, data in self._g.edges(data=True)
                if nodes[t].get("dangling")
                for p in data["predicates"]
            ]
            return sorted(out, key=lambda e: (e[0], e[1], _pred_key(e[2])))

    def traverse(
        self,
        seeds: Sequence[str],
        direction: Direction = "out",
        depth: int = 1,
        predicates: Collection[str | None] | None = None,
        exclude: Callable[[str], bool] | None = None,
        max_nodes: int | None = None,
    ) -> list[dict[str, Any]]:
        """Breadth-first walk from ``seeds``; one dict per edge walked, in walk order.

        Each dict: ``source``, ``target`` (the edge's own direction, whichever way it was
        walked), ``predicate``, ``depth`` (1 = touches a seed), ``direction`` ('out' or 'in':
        how it was walked) and ``dangling`` (the target has no file).

        - ``predicates``: walk only edges with these predicates (include ``None`` for bare
          links); ``None`` means all.
        - ``exclude(node)``: never step onto such a node (seeds are never excluded).
        - ``max_nodes``: stop once this many nodes beyond the seeds have been reached.
        - Each edge is reported once and each node expanded once, so cycles terminate.
        Unknown seeds are ignored. Neighbours are visited in sorted order (deterministic).
        """
        if direction not in ("in", "out", "both"):
            raise ValueError(f"direction must be 'in', 'out' or 'both', not {direction!r}")
        allowed = None if predicates is None else set(predicates)
        excluded: dict[str, bool] = {}

        def blocked(node: str) -> bool:
            if exclude is None:
                return False
            if node not in excluded:
                excluded[node] = bool(exclude(node))
            return excluded[node]

        out: list[dict[str, Any]] = []
        with self._lock:
            g = self._g
            nodes = g.nodes
            frontier = [s for s in dict.fromkeys(seeds) if s in g]
            seen_nodes = set(frontier)
            seen_edges: set[tuple[str, str, str | None]] = set()
            reached = 0
            for d in range(1, max(0, depth) + 1):
                nxt: list[str] = []
                for u in frontier:
                    steps: list[tuple[str, str, str | None, str, str]] = []
                    if direction in ("out", "both"):
                        for v in sorted(g.succ[u]):
                            for p in sorted(g.succ[u][v]["predicates"], key=_pred_key):
                                steps.append((u, v, p, "out", v))
                    if direction in ("in", "both"):
                        for v in sorted(g.pred[u]):
                            for p in sorted(g.pred[u][v]["predicates"], key=_pred_key):
                                steps.append((v, u, p, "in", v))
                    for s, t, p, how, other in steps:
                        if allowed is not None and p not in allowed:
                            continue
                        if (s, t, p) in seen_edges or blocked(other):
                            continue
                        if other not in seen_nodes:
                            if max_nodes is not None and reached >= max_nodes:
                                return out
                            seen_nodes.add(other)
                            reached += 1
                            nxt.append(other)
                        seen_edges.add((s, t, p))
                        out.append(
                            {
                                "source": s,
                                "target": t,
                                "predicate": p,
                                "depth": d,
                                "direction": how,
                                "dangling": bool(nodes[t].get("dangling")),
                            }
                        )
                frontier = nxt
                if not frontier:
                    break
        return out

    def undirected(self, nodes: Collection[str] | None = None) -> nx.Graph:
        """Undirected, weighted copy for community detection and similar analyses.

        Only ``nodes`` (default: every node with a file) are kept; self-links are dropped;
        ``weight`` counts the predicates linking the pair in either direction.
        """
        with self._lock:
            g = self._g
            if nodes is None:
                keep = {n for n, data in g.nodes(data=True) if not data.get("dangling")}
            else:
                keep = {n for n in nodes if n in g}
            h = nx.Graph()
            h.add_nodes_from(sorted(keep))
            for s, t, data in g.edges(data=True):
                if s == t or s not in keep or t not in keep:
                    continue
                w = len(data["predicates"])
                if h.has_edge(s, t):
                    h[s][t]["weight"] += w
                else:
                    h.add_edge(s, t, weight=w)
            return h
