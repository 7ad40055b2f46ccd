"""Step 2, communities: Louvain over the undirected knowledge-link graph -> meta/communities.json.

DESIGN §8 (communities.json), §9 (maintainer); recall's community factor reads the result.

- Nodes are the notes of `layers` (default: knowledge/ only, the "knowledge-link graph");
  edges are their links in either direction, weighted by the number of predicates linking
  the pair (`GraphProjection.undirected`). Unlinked notes end up as singletons.
- Archived notes (`recall.archive`: listed in archived.json or `status: archived`) are left
  out, with their links: the partition ranks live notes (recall drops archived ones), and an
  old overview linking two topics must not make them one community (DESIGN §7: archived
  notes' edges do not count). They get no id, so recall's community factor is 1.0 for them.
- `networkx.community.louvain_communities` with a fixed seed: same graph, same partition.
- Community ids are kept stable across runs: each new community takes the id of the previous
  community it overlaps most (greedy by Jaccard), so an unchanged vault rewrites the same map
  and recall's factors do not flicker. New communities get fresh ids.
- Louvain is the costly part (~8 s at 10,000 notes), so `stats.fingerprint` hashes the graph,
  the seed and the resolution; an unchanged fingerprint reuses the previous partition (the
  seeded algorithm would return it again) and only refreshes `computed_at`.
- `stats.stability` compares with the previous run: `jaccard` is the size-weighted mean of
  each community's best Jaccard with a previous one, `kept` the share of nodes (present in
  both runs) whose id did not change; null on the first run.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Container, Iterable
from typing import TYPE_CHECKING, Any

import networkx as nx

from reme_agent.maintenance.report import StepResult
from reme_agent.recall.signals import CommunitiesSignal, iso_utc
from reme_agent.schema.layout import layer_of

if TYPE_CHECKING:
    from reme_agent.vault import Vault

__all__ = ["assign_ids", "detect_communities", "stability"]


def detect_communities(vault: Vault, notes: Iterable[str], *, layers: Iterable[str] = ("knowledge",),
                       resolution: float = 1.0, seed: int = 42, dry_run: bool = False,
                       archived: Container[str] = frozenset(),
                       ) -> tuple[StepResult, CommunitiesSignal]:
    """Compute (and unless dry_run, write) meta/communities.json over the live notes of
    `layers` (`archived` ones left out)."""
    result = StepResult("communities", dry_run=dry_run)
    wanted = set(layers)
    in_layers = [p for p in notes if layer_of(p) in wanted]
    nodes = sorted(p for p in in_layers if p not in archived)
    previous = vault.signals.get("communities")
    prev_map = previous.communities if isinstance(previous, CommunitiesSignal) else None
    fingerprint = graph_fingerprint(vault, nodes, resolution=resolution, seed=seed)
    if (isinstance(previous, CommunitiesSignal) and prev_map is not None
            and previous.stats.get("fingerprint") == fingerprint and set(prev_map) == set(nodes)):
        # Same graph, same seed: Louvain would return the same partition; reuse it.
        mapping = dict(prev_map)
        modularity = previous.stats.get("modularity", 0.0)
        edges = previous.stats.get("edges", 0)
        groups_by_id: dict[int, list[str]] = defaultdict(list)
        for path, cid in mapping.items():
            groups_by_id[cid].append(path)
        groups = list(groups_by_id.values())
        result.found["reused"] = 1
    else:
        graph = vault.graph.undirected(nodes)
        graph.add_nodes_from(nodes)  # a note the graph has not seen yet is still a node
        parts: list[set[str]] = (nx.community.louvain_communities(
            graph, weight="weight", resolution=resolution, seed=seed)
            if graph.number_of_nodes() else [])
        groups = sorted((sorted(c) for c in parts), key=lambda c: (-len(c), c[0]))
        mapping = assign_ids(groups, prev_map)
        edges = graph.number_of_edges()
        modularity = (round(float(nx.community.modularity(graph, parts, weight="weight",
                                                          resolution=resolution)), 6)
                      if edges else 0.0)
    sizes = sorted((len(g) for g in groups), reverse=True)
    stats: dict[str, Any] = {
        "nodes": len(nodes),
        "archived_left_out": len(in_layers) - len(nodes),
        "edges": edges,
        "communities": len(groups),
        "singletons": sum(1 for s in sizes if s == 1),
        "largest": sizes[0] if sizes else 0,
        "sizes_top10": sizes[:10],
        "modularity": modularity,
        "layers": sorted(wanted),
        "seed": seed,
        "fingerprint": fingerprint,
        "stability": stability(mapping, prev_map),
    }
    if previous is not None:
        stats["previous_computed_at"] = iso_utc(previous.computed_at)
    signal = CommunitiesSignal(algorithm="louvain", resolution=resolution, communities=mapping,
                               stats=stats)
    result.found.update({k: stats[k] for k in ("nodes", "edges", "communities", "singletons",
                                               "largest", "modularity")})
    if stats["stability"] is not None:
        result.found.update({f"stability_{k}": v for k, v in stats["stability"].items()})
    changed = prev_map != mapping
    result.actions.append({"action": "write", "path": "meta/communities.json",
                           "partition_changed": changed})
    if not dry_run:
        vault.signals.write_signal("communities", signal)
        result.changed.append("meta/communities.json")
    return result, signal


def graph_fingerprint(vault: Vault, nodes: list[str], *, resolution: float, seed: int) -> str:
    """sha1 over the nodes, their links among themselves (with predicates) and the parameters."""
    keep = set(nodes)
    h = hashlib.sha1(f"louvain|{resolution!r}|{seed}|{len(nodes)}".encode())
    for path in nodes:
        h.update(b"\0" + path.encode())
        for target, predicate in vault.graph.outbound(path):
            if target in keep and target != path:
                h.update(f"\1{target}\2{predicate or ''}".encode())
    return h.hexdigest()


def assign_ids(groups: list[list[str]], previous: dict[str, int] | None) -> dict[str, int]:
    """path -> id, reusing the previous id of the best-overlapping old community."""
    if not previous:
        return {p: i for i, g in enumerate(groups) for p in g}
    old: dict[int, set[str]] = defaultdict(set)
    for path, cid in previous.items():
        old[cid].add(path)
    pairs: list[tuple[float, int, int, int]] = []
    for i, g in enumerate(groups):
        overlap: dict[int, int] = defaultdict(int)
        for p in g:
            if p in previous:
                overlap[previous[p]] += 1
        for cid, n in overlap.items():
            jac = n / (len(g) + len(old[cid]) - n)
            pairs.append((-jac, -n, i, cid))
    pairs.sort()
    ids: dict[int, int] = {}
    taken: set[int] = set()
    for _, _, i, cid in pairs:
        if i not in ids and cid not in taken:
            ids[i] = cid
            taken.add(cid)
    fresh = max(old, default=-1) + 1
    for i in range(len(groups)):
        if i not in ids:
            ids[i] = fresh
            fresh += 1
    return {p: ids[i] for i, g in enumerate(groups) for p in g}


def stability(current: dict[str, int], previous: dict[str, int] | None) -> dict[str, float] | None:
    """Jaccard-based agreement of two partitions (see the module docstring)."""
    if not previous:
        return None
    old: dict[int, set[str]] = defaultdict(set)
    for path, cid in previous.items():
        old[cid].add(path)
    new: dict[int, set[str]] = defaultdict(set)
    for path, cid in current.items():
        new[cid].add(path)
    total = sum(len(g) for g in new.values())
    weighted = 0.0
    for members in new.values():
        best = 0.0
        for cid in {previous[p] for p in members if p in previous}:
            inter = len(members & old[cid])
            best = max(best, inter / len(members | old[cid]))
        weighted += best * len(members)
    common = [p for p in current if p in previous]
    kept = sum(1 for p in common if current[p] == previous[p])
    return {"jaccard": round(weighted / total, 6) if total else 1.0,
            "kept": round(kept / len(common), 6) if common else 1.0}
