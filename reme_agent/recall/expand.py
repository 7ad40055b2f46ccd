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

from collections.abc import Callable
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
        degree = catalog.in_degrees(graph, nodes, suspended)
        for o in sorted(nodes, key=lambda o: (-degree[o], o)):
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
        if suspended is not None:   # the archived check of the whole hop in one lookup
            suspended.prefetch(o for *_, predicates in found for o in predicates)
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
