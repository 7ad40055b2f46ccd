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
        for o in sorted(nodes, key=lambda o: (-catalog.in_degree(graph, o, suspended), o)):
            if allowed(o):
                kept.append(o)
                if len(kept) > per_direction:
                    return kept[:per_direction]
        return sorted(kept)

    for hop in range(1, depth + 1):
        queues: list[list[tuple[str, str | None, str, str, str]]] = []
        for node, seed in frontier:
            for direction, links in (("out", graph.outbound(node)), ("in", graph.inbound(node))):
                predicates: dict[str, str | None] = {}
                for other, predicate in links:
                    if other == node or other in seen:
                        continue
                    # Prefer a named predicate over the bare link when both exist.
                    if other not in predicates or predicates[other] is None:
                        predicates[other] = predicate
                fresh = pick(list(predicates))
                queues.append([(o, predicates[o], direction, node, seed) for o in fresh])
        nxt: list[tuple[str, str]] = []
        for row in zip_longest(*queues):
            for item in row:
                if item is None or item[0] in seen:
                    continue
                other, predicate, direction, via, seed = item
                seen.add(other)
                info = catalog.get(other)
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
