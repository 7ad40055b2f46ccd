"""Multi-hop link expansion of search results (DESIGN §7; seed §5).

From the result nodes, walk the link graph breadth-first in both directions up to
`expand_depth` hops (max 3). Per hop each node contributes at most `max_links_per_direction`
new neighbours per direction (the most linked-to first), and the whole expansion stops at
`expand_path_budget` nodes. Shallow beats deep, and within one hop the candidates of the
different result nodes are taken round-robin (in result order), so the budget is not spent
on the first result's neighbourhood alone.

Listed: notes not already in the results, reached through a resolved link; dangling targets,
excluded paths (archived unless asked, meta/, audit/) are neither listed nor walked through.
Each entry names the result node it hangs off (`seed`) and the node it was reached from
(`via`); `direction` is "out" when `via` links to it, "in" when it links to `via`.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from itertools import zip_longest
from typing import Any

from reme_agent.recall.group import NodeCatalog

MAX_DEPTH = 3


def expand_links(graph: Any, seeds: list[str], catalog: NodeCatalog, *, depth: int,
                 per_direction: int, budget: int,
                 exclude: Callable[[str], bool] | None = None,
                 suspended: Any = None) -> list[dict[str, Any]]:
    """Expansion entries (path, title, predicate, direction, depth, via, seed), walk order;
    `suspended` (archived) notes' links do not count in the in-degree that ranks them."""
    depth = max(0, min(depth, MAX_DEPTH))
    if depth == 0 or budget <= 0 or not seeds:
        return []
    seen = set(seeds)
    out: list[dict[str, Any]] = []
    bound: dict[str, int] = {}   # inbound edges: an upper bound of the ranked degree
    frontier = [(s, s) for s in dict.fromkeys(seeds)]

    def allowed(node: str) -> bool:
        return not graph.is_dangling(node) and not (exclude and exclude(node))

    def pick(nodes: list[str]) -> list[str]:
        """The allowed nodes, by name; most linked-to first when more than the cap are
        allowed (only then is the in-degree needed, and `allowed` is asked in that order
        until the cap is passed, not for every neighbour of a hub)."""
        if len(nodes) <= per_direction:
            return sorted(o for o in nodes if allowed(o))
        kept: list[str] = []
        for o in _by_degree(graph, nodes, catalog, suspended, per_direction + 1, bound):
            if allowed(o):
                kept.append(o)
                if len(kept) > per_direction:
                    return kept[:per_direction]
        return sorted(kept)

    for hop in range(1, depth + 1):
        found: list[tuple[str, str, str, dict[str, str | None]]] = []
        for node, seed in frontier:
            for direction, links in (("out", graph.outbound(node)), ("in", graph.inbound(node))):
                predicates: dict[str, str | None] = {}
                for other, predicate in links:
                    if other == node or other in seen:
                        continue
                    # Prefer a named predicate over the bare link when both exist.
                    if other not in predicates or predicates[other] is None:
                        predicates[other] = predicate
                found.append((node, seed, direction, predicates))
        if suspended is not None:
            _prefetch_hop([p for *_, p in found], graph, catalog, suspended, per_direction,
                          bound)
        queues: list[list[tuple[str, str | None, str, str, str]]] = []
        for node, seed, direction, predicates in found:
            fresh = pick(list(predicates))
            queues.append([(o, predicates[o], direction, node, seed) for o in fresh])
        taken: list[tuple[str, str | None, str, str, str]] = []
        for row in zip_longest(*queues):
            for item in row:
                if item is None or item[0] in seen or len(out) + len(taken) >= budget:
                    continue
                seen.add(item[0])
                taken.append(item)
        infos = catalog.many(item[0] for item in taken)   # one read for the hop
        nxt: list[tuple[str, str]] = []
        for other, predicate, direction, via, seed in taken:
            info = infos[other]
            out.append({"path": other, "title": info.title if info else other,
                        "predicate": predicate, "direction": direction, "depth": hop,
                        "via": via, "seed": seed})
            nxt.append((other, seed))
        if len(out) >= budget:
            return out
        frontier = nxt
        if not frontier:
            break
    return out


def _prefetch_hop(lists: list[dict[str, str | None]], graph: Any, catalog: NodeCatalog,
                  suspended: Any, per_direction: int, bound: dict[str, int]) -> None:
    """The archived status a hop is sure to need, in one lookup: every node of the short
    lists (each is asked), the first `per_direction + 1` of each longer list by their
    bound (inbound edges), and (one more) the linkers that rank those."""
    short: list[str] = []
    heads: list[str] = []
    for nodes in lists:
        if len(nodes) <= per_direction:
            short.extend(nodes)
            continue
        for o in nodes:
            if o not in bound:
                bound[o] = graph.in_edges(o)
        heads.extend(heapq.nsmallest(per_direction + 1, nodes, key=lambda o: (-bound[o], o)))
    suspended.prefetch([*short, *heads])
    if heads:
        catalog.in_degrees(graph, heads, suspended)


def _by_degree(graph: Any, nodes: list[str], catalog: NodeCatalog, suspended: Any,
               batch: int, bound: dict[str, int]) -> Iterator[str]:
    """`nodes` by (-in-degree without `suspended` linkers, name), computed lazily.

    A hub has thousands of neighbours and the caller needs the first few allowed ones: the
    inbound edge count (no status lookup) bounds the live degree from above, so nodes are taken by
    that bound and their live degree (linkers' archived status: SQLite reads) is computed
    `batch` at a time, only for those the bound cannot rule out. A node comes out once its
    live degree is no lower than every other node's bound: the order of ranking them all.
    """
    if suspended is None:   # no suspended links: the raw degree is the live one
        degree = catalog.in_degrees(graph, nodes, None)
        yield from sorted(nodes, key=lambda o: (-degree[o], o))
        return
    heap = [(-(bound[o] if o in bound else graph.in_edges(o)), o, False) for o in nodes]
    heapq.heapify(heap)
    while heap:
        if heap[0][2]:
            yield heapq.heappop(heap)[1]
            continue
        todo: list[str] = []
        while heap and not heap[0][2] and len(todo) < batch:
            todo.append(heapq.heappop(heap)[1])
        suspended.prefetch(todo)   # their own status too: `allowed` asks it next
        for o, d in catalog.in_degrees(graph, todo, suspended).items():
            heapq.heappush(heap, (-d, o, True))
