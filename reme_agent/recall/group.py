"""Node-level grouping of ranked blocks (DESIGN §7; seed §4) and the node catalog behind it.

A node (one note, its path is its id) is the unit of recall; blocks are only windows onto
it. Ranked blocks are grouped by path, each node keeps its best `top_chunks_per_path` blocks
(best first), carries its title + description from the frontmatter, and nodes are ranked by
their best block's final score, then cut at `limit`.

`NodeCatalog` caches what recall needs per note (title, description, content dates, mtime,
in-degree) from the index state and the graph, so a search reads no file: entries are filled
on first use and the whole cache is dropped when the index generation changes (any index
run, in any process; the graph only changes inside one).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from reme_agent.engine.names import note_title
from reme_agent.recall.pervault import PerVault
from reme_agent.recall.signals import parse_moment

if TYPE_CHECKING:
    from reme_agent.engine.state import IndexState
    from reme_agent.recall.candidates import BlockHit
    from reme_agent.vault import Vault


@dataclass(frozen=True)
class NodeInfo:
    path: str
    title: str
    description: str
    updated: datetime | None      # latest of frontmatter `updated` / `created`, if any parse
    mtime: datetime


@dataclass
class ChunkResult:
    block_id: str
    start_line: int
    end_line: int
    text: str
    score: float


@dataclass
class NodeResult:
    path: str
    title: str
    description: str
    score: float
    factors: dict[str, float]     # base, centrality, community, recency, layer
    chunks: list[ChunkResult] = field(default_factory=list)
    match: dict[str, Any] | None = None   # why beyond text: a name, a relation, a phrase
    weak: bool = False            # below the relevance floor: a guess, not an answer


class NodeCatalog:
    """Per-vault cache of NodeInfo, invalidated by the index generation."""

    def __init__(self, state: IndexState) -> None:
        self.state = state
        self._lock = threading.Lock()
        self._generation = -1
        self._nodes: dict[str, NodeInfo | None] = {}
        self._degrees: dict[str, int] = {}
        self._suspended: Any = None   # what `_degrees` was counted without (an Archived)

    def sync(self) -> None:
        """Drop the cache if an index run committed since it was filled (one SQL read)."""
        gen = self.state.generation()
        with self._lock:
            if gen != self._generation:
                self._nodes = {}
                self._degrees = {}
                self._generation = gen

    def in_degree(self, graph: Any, path: str, suspended: Any = None) -> int:
        """The graph's in_degree without links from or to `suspended` notes (an
        `recall.archive.Archived`), memoised until the next index run or another suspended
        set (hubs cost a walk)."""
        if suspended is not self._suspended:
            self._degrees, self._suspended = {}, suspended
        value = self._degrees.get(path)
        if value is None:
            value = self._degrees[path] = _live_in_degree(graph, path, suspended)
        return value

    def in_degrees(self, graph: Any, paths: Iterable[str], suspended: Any = None
                   ) -> dict[str, int]:
        """`in_degree` of many paths, the suspended check of all their linkers in one
        status lookup (a hub's neighbours ranked for expansion: one query, not one each)."""
        paths = list(dict.fromkeys(paths))
        if suspended is not None:
            if suspended is not self._suspended:
                self._degrees, self._suspended = {}, suspended
            todo = [p for p in paths if p not in self._degrees]
            if len(todo) > 1:
                suspended.prefetch(todo)
                suspended.prefetch(s for p in todo if p not in suspended
                                   for s, _ in graph.inbound(p))
        return {p: self.in_degree(graph, p, suspended) for p in paths}

    def get(self, path: str) -> NodeInfo | None:
        """The note's info, or None when no indexed file has this path (e.g. a dangling link)."""
        with self._lock:
            if path in self._nodes:
                return self._nodes[path]
        info = self._build(path)
        with self._lock:
            self._nodes[path] = info
        return info

    def many(self, paths: Iterable[str]) -> dict[str, NodeInfo | None]:
        """Infos of many paths, the missing ones read in one query."""
        paths = list(dict.fromkeys(paths))
        with self._lock:
            todo = [p for p in paths if p not in self._nodes]
        if len(todo) > 1:
            with self._lock:
                self._nodes.update(self._read(todo))
        return {p: self.get(p) for p in paths}

    def _build(self, path: str) -> NodeInfo | None:
        return self._read([path])[path]

    def _read(self, paths: list[str]) -> dict[str, NodeInfo | None]:
        """Infos from the state: each note's frontmatter and mtime (not its links: a hub's
        list of links was most of a row to decode), and for notes without a frontmatter
        title their first block (an H1 names them), each kind in one query."""
        rows = self.state.frontmatters_of(paths)
        firsts = self.state.first_block_texts([p for p, (_, fm) in rows.items()
                                               if not _titled(fm)])
        return {p: self._info(p, rows[p], firsts.get(p, "")) if p in rows else None
                for p in paths}

    def _info(self, path: str, row: tuple[int, dict[str, Any]], body: str) -> NodeInfo:
        mtime_ns, fm = row
        desc = fm.get("description")
        dates = [m for m in (parse_moment(fm.get("updated")), parse_moment(fm.get("created")))
                 if m is not None]
        return NodeInfo(
            path=path,
            title=note_title(path, fm, body),
            description=" ".join(desc.split()) if isinstance(desc, str) else "",
            updated=max(dates) if dates else None,
            mtime=datetime.fromtimestamp(mtime_ns / 1e9, tz=UTC))


def _titled(fm: dict[str, Any]) -> bool:
    return any(isinstance(fm.get(k), str) and fm[k].strip() for k in ("title", "name"))


def _live_in_degree(graph: Any, path: str, suspended: Any) -> int:
    if suspended is None or getattr(suspended, "nothing", False):
        return int(graph.in_degree(path))
    if path in suspended:
        return 0
    sources = [s for s, _ in graph.inbound(path)]
    if not sources:
        return 0
    suspended.prefetch(sources)   # one status lookup for all linkers
    return int(graph.in_degree(path, skip=suspended))


_catalogs: PerVault[NodeCatalog] = PerVault(NodeCatalog)


def catalog_for(vault: Vault) -> NodeCatalog:
    """The vault's catalog (one per Vault object; it dies with the vault)."""
    return _catalogs.get(vault)


def group_by_node(hits: list[BlockHit], scores: dict[str, float],
                  factors: dict[str, dict[str, float]], catalog: NodeCatalog, *,
                  top_chunks_per_path: int, limit: int, block_decay: float = 0.0,
                  tiers: dict[str, int] | None = None,
                  shown: Callable[[list[BlockHit]], list[BlockHit]] | None = None
                  ) -> list[NodeResult]:
    """Ranked blocks -> ranked nodes (`scores` by block id, `factors` by path).

    A node scores its best block plus `block_decay`^i times its (i+1)-th best block
    (0 = best block only): a note matching the query in several places outranks one lucky
    block. The LoCoMo eval measured +0.021 session MRR at 0.3 (evals/README.md).
    `tiers` (path -> tier, default 0) sort before the score: a note the query names.
    `shown` reorders a kept node's blocks for display (default: by score).
    """
    by_path: dict[str, list[BlockHit]] = {}
    for hit in sorted(hits, key=lambda h: (-scores[h.block_id], h.path, h.start_line)):
        by_path.setdefault(hit.path, []).append(hit)
    tier = tiers or {}
    # Rank every node first, then build results for the kept ones only (a query has ~100
    # candidate notes and shows 10).
    ranked = sorted(((-tier.get(path, 0), -_node_score([scores[b.block_id] for b in blocks],
                                                        block_decay), path)
                     for path, blocks in by_path.items()))[:limit]
    nodes = []
    for _, neg_score, path in ranked:
        blocks = by_path[path]
        info = catalog.get(path)
        shown_blocks = shown(blocks) if shown is not None else blocks
        nodes.append(NodeResult(
            path=path,
            title=info.title if info else path,
            description=info.description if info else "",
            score=-neg_score,
            factors={"base": blocks[0].base, **factors.get(path, {})},
            chunks=[ChunkResult(b.block_id, b.start_line, b.end_line, b.text, scores[b.block_id])
                    for b in shown_blocks[:top_chunks_per_path]]))
    return nodes


def _node_score(ordered: list[float], decay: float) -> float:
    if decay <= 0.0:
        return ordered[0]
    total, weight = 0.0, 1.0
    for value in ordered[:10]:
        total += weight * value
        weight *= decay
    return total
