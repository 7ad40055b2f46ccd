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
from typing import Any

from reme_agent.recall.group import NodeCatalog

MAX_DEPTH = 3
_BATCH = 2   # a long list's nodes whose live in-degree is counted together
_EAGER = 64  # lists up to this long are ranked whole, as before (lazy ranking pays for hubs)


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

    def bound_of(o: str) -> int:
        if o not in bound:
            bound[o] = graph.in_edges(o)
        return bound[o]

    def heads(nodes: list[str]) -> list[str]:
        """The `per_direction + 1` nodes with the highest bound: enough to tell, in the
        usual case, that more than the cap are allowed."""
        return heapq.nsmallest(per_direction + 1, nodes, key=lambda o: (-bound_of(o), o))

    def pick(nodes: list[str]) -> Iterator[str]:
        """The allowed nodes, by name; most linked-to first (at most the cap) when more
        than the cap are allowed. Lazy: the round-robin below takes one or two from most
        lists, so a hub's neighbours are ranked only as far as they are taken."""
        if len(nodes) <= per_direction:
            yield from sorted(o for o in nodes if allowed(o))
            return
        if len(nodes) <= _EAGER:   # every in-degree at once (memoised: cheap when warm)
            degree = catalog.in_degrees(graph, nodes, suspended)
            kept: list[str] = []
            for o in sorted(nodes, key=lambda o: (-degree[o], o)):
                if allowed(o):
                    kept.append(o)
                    if len(kept) > per_direction:
                        yield from kept[:per_direction]
                        return
            yield from sorted(kept)
            return
        many = False
        for group in (heads(nodes), nodes):
            if suspended is not None:
                suspended.prefetch(group)
            many = sum(1 for o in group if allowed(o)) > per_direction
            if many:
                break
        if not many:
            yield from sorted(o for o in nodes if allowed(o))
            return
        given = 0
        for o in _by_degree(graph, nodes, catalog, suspended, _BATCH, bound_of):
            if allowed(o):
                yield o
                given += 1
                if given >= per_direction:
                    return

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
        if suspended is not None:   # the archived status the hop surely needs, one lookup
            suspended.prefetch(o for *_, p in found
                               for o in (p if len(p) <= _EAGER else heads(list(p))))
        # Round-robin over the lists (in result order), the i-th of each list in round i,
        # until the budget is spent.
        live = [(pick(list(p)), p, direction, node, seed) for node, seed, direction, p in found]
        taken: list[tuple[str, str | None, str, str, str]] = []
        while live and len(out) + len(taken) < budget:
            still = []
            for queue in live:
                if len(out) + len(taken) >= budget:
                    break
                other = next(queue[0], None)
                if other is None:
                    continue
                still.append(queue)
                if other not in seen:
                    _, predicates, direction, node, seed = queue
                    seen.add(other)
                    taken.append((other, predicates[other], direction, node, seed))
            live = still
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


def _by_degree(graph: Any, nodes: list[str], catalog: NodeCatalog, suspended: Any,
               batch: int, bound: Callable[[str], int]) -> Iterator[str]:
    """`nodes` by (-in-degree without `suspended` linkers, name), computed lazily.

    A hub has thousands of neighbours and the caller needs the first few allowed ones: the
    inbound edge count (no status lookup) bounds the live degree from above, so nodes are
    taken by that bound and their live degree (linkers' archived status: SQLite reads) is
    computed `batch` at a time, only for those the bound cannot rule out. A node comes out
    once its live degree is no lower than every other node's bound: the order of ranking
    them all.
    """
    if suspended is None:   # no suspended links: the raw degree is the live one
        degree = catalog.in_degrees(graph, nodes, None)
        yield from sorted(nodes, key=lambda o: (-degree[o], o))
        return
    heap = [(-bound(o), o, False) for o in nodes]
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
