"""Graph projection: the vault's link graph, with predicates and a reverse index (DESIGN §6).

Nodes are vault paths. A link whose target does not resolve to a file still creates a node,
named by its raw target and marked dangling, so "what links to a missing note" and
dangling-link reports are cheap; such a node disappears once nothing points to it.

Several links between the same pair with different predicates (``related:: [[b]]`` and a bare
``[[b]]``) are all kept: an edge is (source, target, predicate), ``None`` = bare link.

The graph also remembers which nodes changed (their flags or outbound links) since the
last `forget_changes`: `changes` lists their new state, and `apply_changes` replays it on a
graph loaded from an older snapshot, so a cold open follows a few edits without resolving
any link (the indexer's snapshot delta).

Storage (G6): nodes are small integers; each node keeps its outbound and its inbound edges
as one packed ``array('q')`` each (the other end's number << 20 | predicate number), and two
flags. A networkx DiGraph with a predicate set per edge cost ~2.3 KB per note at 100k notes
(230 MB: a dict per node, per adjacency and per edge, plus a set per edge); this costs
~0.3 KB. Reads sort by path as before, so every answer is what the networkx version gave;
`undirected` still hands analyses (communities) a networkx graph, built on demand.
Neo4j is a later backend with the same interface. One ``RLock`` makes reads safe while the
indexer thread writes.
"""

from __future__ import annotations

import threading
from array import array
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

if TYPE_CHECKING:
    import networkx as nx

__all__ = ["GraphProjection"]

Direction = Literal["in", "out", "both"]

_PRED_BITS = 20
_PRED_MASK = (1 << _PRED_BITS) - 1
_DANGLING = 1   # only known as a link target without a file
_NOTE = 2       # a file exists for it (an indexed note)


def _pred_key(p: str | None) -> tuple[bool, str]:
    """Sort key that puts the bare link (None) first and is total over str | None."""
    return (p is not None, p or "")


class GraphProjection:
    """Directed link graph between vault paths, with predicates and dangling targets."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._reset()

    def _reset(self) -> None:
        self._names: list[str | None] = []         # node number -> path (None: free)
        self._num: dict[str, int] = {}
        self._free: list[int] = []
        self._flags = bytearray()
        self._out: list[array | None] = []          # (target << 20 | predicate) per edge
        self._in: list[array | None] = []           # (source << 20 | predicate) per edge
        self._preds: list[str | None] = [None]      # predicate number -> name (0: bare)
        self._pred_num: dict[str | None, int] = {None: 0}
        self._changed: set[str] | None = None       # None: everything (after a clear)

    # --- storage ------------------------------------------------------------------------------

    def _add_node(self, path: str, flags: int) -> int:
        if self._free:
            n = self._free.pop()
            self._names[n] = path
            self._flags[n] = flags
        else:
            n = len(self._names)
            self._names.append(path)
            self._flags.append(flags)
            self._out.append(None)
            self._in.append(None)
        self._num[path] = n
        self._touch(path)
        return n

    def _touch(self, path: str | None) -> None:
        if self._changed is not None and path is not None:
            self._changed.add(path)

    def _drop_node(self, n: int) -> None:
        name = self._names[n]
        if name is not None:
            del self._num[name]
            self._touch(name)
        self._names[n] = None
        self._flags[n] = 0
        self._out[n] = self._in[n] = None
        self._free.append(n)

    def _pred(self, predicate: str | None) -> int:
        p = self._pred_num.get(predicate)
        if p is None:
            p = self._pred_num[predicate] = len(self._preds)
            if p > _PRED_MASK:
                raise OverflowError("GraphProjection holds at most 1M distinct predicates")
            self._preds.append(predicate)
        return p

    def _set_present(self, path: str) -> int:
        n = self._num.get(path)
        if n is None:
            return self._add_node(path, _NOTE)
        if self._flags[n] != _NOTE:
            self._flags[n] = _NOTE
            self._touch(path)
        return n

    def _unlink_out(self, n: int) -> list[int]:
        """Remove every outbound edge of node `n`; returns the former targets."""
        out = self._out[n]
        self._out[n] = None
        if not out:
            return []
        targets: list[int] = []
        for packed in out:
            t = packed >> _PRED_BITS
            inbound = self._in[t]
            if inbound is not None:
                inbound.remove((n << _PRED_BITS) | (packed & _PRED_MASK))
                if not inbound:
                    self._in[t] = None
            targets.append(t)
        return list(dict.fromkeys(targets))

    def _gc(self, n: int) -> None:
        """Drop a node that only existed as a link target (dangling, or a file that is not a
        note, like an image) once nothing points to it any more."""
        if self._names[n] is not None and not self._flags[n] & _NOTE \
                and not self._in[n] and not self._out[n]:
            self._drop_node(n)

    def _grouped(self, edges: array | None) -> dict[str, list[str | None]]:
        """Packed edges -> {other end's path: its predicates, sorted}."""
        out: dict[str, list[str | None]] = {}
        if not edges:
            return out
        names, preds = self._names, self._preds
        for packed in edges:
            out.setdefault(names[packed >> _PRED_BITS], []).append(  # type: ignore[arg-type]
                preds[packed & _PRED_MASK])
        for ps in out.values():
            ps.sort(key=_pred_key)
        return out

    # --- writes -----------------------------------------------------------------------------

    def set_links(self, source: str, edges: Iterable[tuple[str, str | None, bool]]) -> None:
        """Replace ``source``'s outbound links with ``edges`` = (target, predicate, dangling).

        ``source`` is marked present (it has a file). A target that resolved
        (``dangling=False``) is marked present too; a dangling target is created as a
        dangling node unless a file for it is already known.
        """
        with self._lock:
            s = self._set_present(source)
            self._touch(source)
            old_targets = self._unlink_out(s)
            out = array("q")
            seen: set[int] = set()
            for target, predicate, dangling in edges:
                t = self._num.get(target)
                if t is None:
                    t = self._add_node(target, _DANGLING if dangling else 0)
                elif not dangling and self._flags[t] & _DANGLING:
                    self._flags[t] &= ~_DANGLING
                    self._touch(target)
                self._add_edge(s, t, self._pred(predicate), seen, out)
            self._out[s] = out or None
            for t in old_targets:
                self._gc(t)

    def _add_edge(self, s: int, t: int, p: int, seen: set[int], out: array) -> None:
        """Link node `s` to `t` with predicate `p`, once per (target, predicate): the
        outbound key goes to `out`, the inbound one to `t`'s array."""
        key = (t << _PRED_BITS) | p
        if key in seen:
            return
        seen.add(key)
        out.append(key)
        inbound = self._in[t]
        if inbound is None:
            inbound = self._in[t] = array("q")
        inbound.append((s << _PRED_BITS) | p)

    def remove_source(self, source: str) -> None:
        """A note was deleted: drop its outbound links, and the node unless still linked to.

        If other notes still link to it, the node stays, now dangling, so their links show
        up as dangling.
        """
        with self._lock:
            s = self._num.get(source)
            if s is None:
                return
            targets = self._unlink_out(s)
            self._touch(source)
            if not self._in[s]:
                self._drop_node(s)
            else:
                self._flags[s] = _DANGLING
            for t in targets:
                if t != s:
                    self._gc(t)

    def clear(self) -> None:
        """Forget every node and edge (before a cold reload)."""
        with self._lock:
            self._reset()

    def mark_present(self, path: str) -> None:
        """A file exists for ``path`` (also turns a dangling node into a real one)."""
        with self._lock:
            self._set_present(path)

    # --- snapshot ---------------------------------------------------------------------------

    def export_arrays(self) -> tuple[list[str], list[str | None], dict[str, np.ndarray]]:
        """(node paths, predicate names, arrays) for a cold-open snapshot: per node its flags
        (``g_flags``); per edge its source, target and predicate numbers (``g_src``,
        ``g_dst``, ``g_pred``), nodes numbered densely in their current order."""
        with self._lock:
            live = [n for n, name in enumerate(self._names) if name is not None]
            dense = np.full(len(self._names) + 1, -1, dtype=np.int64)
            dense[live] = np.arange(len(live))
            src: list[int] = []
            packed: list[int] = []
            for n in live:
                out = self._out[n]
                if out:
                    src += [n] * len(out)
                    packed += out.tolist()
            edges = np.asarray(packed, dtype=np.int64)
            arrays = {
                "g_flags": np.frombuffer(bytes(self._flags[n] for n in live), dtype=np.uint8),
                "g_src": dense[np.asarray(src, dtype=np.int64)].astype(np.int32),
                "g_dst": dense[edges >> _PRED_BITS].astype(np.int32),
                "g_pred": (edges & _PRED_MASK).astype(np.int32),
            }
            return [self._names[n] for n in live], list(self._preds), arrays  # type: ignore[misc]

    def import_arrays(self, names: Sequence[str], preds: Sequence[str | None],
                      arrays: dict[str, np.ndarray]) -> None:
        """Replace the graph with one from ``export_arrays`` (no link resolution needed)."""
        flags = np.asarray(arrays["g_flags"], dtype=np.uint8)
        src = np.asarray(arrays["g_src"], dtype=np.int64)
        dst = np.asarray(arrays["g_dst"], dtype=np.int64)
        pred = np.asarray(arrays["g_pred"], dtype=np.int64)
        n = len(names)
        if len(flags) != n or not len(src) == len(dst) == len(pred) or not preds \
                or preds[0] is not None or len(set(preds)) != len(preds) \
                or len(set(names)) != n:
            raise ValueError("graph snapshot arrays do not match their nodes")
        if len(src) and (min(src.min(), dst.min(), pred.min()) < 0
                         or max(src.max(), dst.max()) >= n or pred.max() >= len(preds)):
            raise ValueError("graph snapshot edges point outside their nodes")
        out = self._per_node(src, (dst << _PRED_BITS) | pred, n)
        inbound = self._per_node(dst, (src << _PRED_BITS) | pred, n)
        with self._lock:
            self._reset()
            self._names = list(names)
            self._num = {name: i for i, name in enumerate(names)}
            self._flags = bytearray(flags.tobytes())
            self._out, self._in = out, inbound
            self._preds = list(preds)
            self._pred_num = {p: i for i, p in enumerate(preds)}
            self._changed = set()

    # --- changes since a snapshot -------------------------------------------------------------

    def forget_changes(self) -> None:
        """Start counting changes from here (a snapshot of this state was written)."""
        with self._lock:
            self._changed = set()

    def changes(self) -> dict[str, list[Any] | None] | None:
        """Every node whose flags or outbound links changed since `forget_changes`, as
        ``[flags, [[target, predicate], ...]]`` (JSON-able), or None where the node is gone;
        None for the whole answer when the graph was cleared since (too much to list)."""
        with self._lock:
            if self._changed is None:
                return None
            out: dict[str, list[Any] | None] = {}
            for path in sorted(self._changed):
                n = self._num.get(path)
                if n is None:
                    out[path] = None
                    continue
                edges = [[self._names[p >> _PRED_BITS], self._preds[p & _PRED_MASK]]
                         for p in self._out[n] or ()]
                out[path] = [int(self._flags[n]), edges]
            return out

    def apply_changes(self, changes: dict[str, list[Any] | None]) -> None:
        """Replay `changes` taken from a graph that started from this one (a snapshot plus
        its delta): the listed nodes get their recorded flags and outbound links, the others
        keep theirs, so the result is that graph. Not counted as new changes."""
        with self._lock:
            for path, rec in changes.items():
                if rec is not None:
                    n = self._num.get(path)
                    if n is None:
                        n = self._add_node(path, 0)
                    self._flags[n] = int(rec[0]) & (_DANGLING | _NOTE)
            for path, rec in changes.items():
                if rec is None:
                    continue
                s = self._num[path]
                self._unlink_out(s)
                out = array("q")
                seen: set[int] = set()
                for target, predicate in rec[1]:
                    t = self._num.get(target)
                    if t is None:   # every new target is listed itself; keep going if not
                        t = self._add_node(target, _DANGLING)
                    self._add_edge(s, t, self._pred(predicate), seen, out)
                self._out[s] = out or None
            for path, rec in changes.items():
                n = self._num.get(path)
                if rec is None and n is not None:
                    self._unlink_out(n)
                    if self._in[n]:   # still linked: the recorded graph had it dangling
                        self._flags[n] = _DANGLING
                    else:
                        self._drop_node(n)
            self._changed = set()

    @staticmethod
    def _per_node(keys: np.ndarray, values: np.ndarray, n: int) -> list[array | None]:
        order = np.argsort(keys, kind="stable")
        ends = np.cumsum(np.bincount(keys, minlength=n)) if len(keys) else np.zeros(n, np.int64)
        raw = memoryview(values[order].astype(np.int64).tobytes())
        out: list[array | None] = [None] * n
        start = 0
        for node, end in enumerate(ends.tolist()):
            if end > start:
                a = array("q")
                a.frombytes(raw[start * 8:end * 8])
                out[node] = a
            start = end
        return out

    def export_state(self) -> dict[str, Any]:
        """Nodes, flags and edges as JSON-able lists (edges with their predicates grouped)."""
        names, preds, arrays = self.export_arrays()
        grouped: dict[tuple[int, int], list[str | None]] = {}
        for s, t, p in zip(arrays["g_src"].tolist(), arrays["g_dst"].tolist(),
                           arrays["g_pred"].tolist(), strict=True):
            grouped.setdefault((s, t), []).append(preds[p])
        flags = arrays["g_flags"].tolist()
        return {
            "nodes": names,
            "dangling": [bool(f & _DANGLING) for f in flags],
            "note": [bool(f & _NOTE) for f in flags],
            "edges": [[s, t, sorted(ps, key=_pred_key)] for (s, t), ps in grouped.items()],
        }

    def import_state(self, state: dict[str, Any]) -> None:
        """Replace the graph with one from ``export_state``."""
        preds: list[str | None] = [None]
        index: dict[str | None, int] = {None: 0}
        src, dst, pred = [], [], []
        for s, t, ps in state["edges"]:
            for p in ps:
                if p not in index:
                    index[p] = len(preds)
                    preds.append(p)
                src.append(s)
                dst.append(t)
                pred.append(index[p])
        flags = [(_DANGLING if d else 0) | (_NOTE if k else 0)
                 for d, k in zip(state["dangling"], state["note"], strict=True)]
        self.import_arrays(state["nodes"], preds, {
            "g_flags": np.asarray(flags, dtype=np.uint8), "g_src": np.asarray(src, np.int64),
            "g_dst": np.asarray(dst, np.int64), "g_pred": np.asarray(pred, np.int64)})

    # --- reads ------------------------------------------------------------------------------

    def __contains__(self, path: object) -> bool:
        return path in self._num

    def __len__(self) -> int:
        return len(self._num)

    def nodes(self) -> list[str]:
        """All nodes, dangling ones included, sorted."""
        with self._lock:
            return sorted(self._num)

    def is_note(self, path: str) -> bool:
        """True if ``path`` is a node with a file (an indexed note)."""
        with self._lock:
            n = self._num.get(path)
            return n is not None and bool(self._flags[n] & _NOTE)

    def is_dangling(self, path: str) -> bool:
        """True if ``path`` is only known as a link target without a file."""
        with self._lock:
            n = self._num.get(path)
            return n is not None and bool(self._flags[n] & _DANGLING)

    def outbound(self, path: str) -> list[tuple[str, str | None]]:
        """(target, predicate) for every outbound link, one entry per predicate."""
        with self._lock:
            n = self._num.get(path)
            if n is None:
                return []
            adj = self._grouped(self._out[n])
            return [(t, p) for t in sorted(adj) for p in adj[t]]

    def inbound(self, path: str) -> list[tuple[str, str | None]]:
        """(source, predicate) for every link pointing at ``path``, one entry per predicate."""
        with self._lock:
            n = self._num.get(path)
            if n is None:
                return []
            adj = self._grouped(self._in[n])
            return [(s, p) for s in sorted(adj) for p in adj[s]]

    def in_degree(self, path: str, skip: Collection[str] = ()) -> int:
        """Distinct notes linking here, not counting self-links, dangling sources or the
        sources in `skip` (whose links a caller suspends)."""
        with self._lock:
            n = self._num.get(path)
            if n is None or not self._in[n]:
                return 0
            flags, names = self._flags, self._names
            sources = {packed >> _PRED_BITS for packed in self._in[n]}  # type: ignore[union-attr]
            return sum(1 for s in sources if s != n and not flags[s] & _DANGLING
                       and names[s] not in skip)

    def in_edges(self, path: str) -> int:
        """Inbound edges, one per (source, predicate), self-links and dangling sources
        included: an upper bound of `in_degree` that costs no walk over them."""
        with self._lock:
            n = self._num.get(path)
            return 0 if n is None or not self._in[n] else len(self._in[n])  # type: ignore[arg-type]

    def dangling_edges(self) -> list[tuple[str, str, str | None]]:
        """(source, raw target, predicate) for every link to a node without a file."""
        with self._lock:
            names, preds = self._names, self._preds
            out = [
                (names[packed >> _PRED_BITS], name, preds[packed & _PRED_MASK])
                for n, name in enumerate(names)
                if name is not None and self._flags[n] & _DANGLING and self._in[n]
                for packed in self._in[n]  # type: ignore[union-attr]
            ]
            return sorted(out, key=lambda e: (e[0], e[1], _pred_key(e[2])))  # type: ignore[arg-type, return-value]

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
            num, flags = self._num, self._flags
            frontier = [s for s in dict.fromkeys(seeds) if s in num]
            seen_nodes = set(frontier)
            seen_edges: set[tuple[str, str, str | None]] = set()
            reached = 0
            for d in range(1, max(0, depth) + 1):
                nxt: list[str] = []
                for u in frontier:
                    n = num[u]
                    steps: list[tuple[str, str, str | None, str, str]] = []
                    if direction in ("out", "both"):
                        adj = self._grouped(self._out[n])
                        steps += [(u, v, p, "out", v) for v in sorted(adj) for p in adj[v]]
                    if direction in ("in", "both"):
                        adj = self._grouped(self._in[n])
                        steps += [(v, u, p, "in", v) for v in sorted(adj) for p in adj[v]]
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
                                "dangling": bool(flags[num[t]] & _DANGLING),
                            }
                        )
                frontier = nxt
                if not frontier:
                    break
        return out

    def undirected(self, nodes: Collection[str] | None = None) -> nx.Graph:
        """Undirected, weighted networkx copy for community detection and similar analyses.

        Only ``nodes`` (default: every node with a file) are kept; self-links are dropped;
        ``weight`` counts the predicates linking the pair in either direction. Nodes and
        edges are added in sorted order, so the copy (and what is computed on it) does not
        depend on the order in which links were indexed.
        """
        import networkx as nx  # ~0.1 s: only analyses need it, never a search (G6 cold start)

        with self._lock:
            names, num = self._names, self._num
            if nodes is None:
                keep = {name for name, n in num.items() if not self._flags[n] & _DANGLING}
            else:
                keep = {p for p in nodes if p in num}
            h = nx.Graph()
            h.add_nodes_from(sorted(keep))
            for s in sorted(keep):
                out = self._out[num[s]]
                if not out:
                    continue
                weights: dict[str, int] = {}
                for packed in out:
                    t = names[packed >> _PRED_BITS]
                    if t != s and t in keep:
                        weights[t] = weights.get(t, 0) + 1  # type: ignore[index]
                for t in sorted(weights):
                    if h.has_edge(s, t):
                        h[s][t]["weight"] += weights[t]
                    else:
                        h.add_edge(s, t, weight=weights[t])
            return h
