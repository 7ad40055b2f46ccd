"""The signal factors of recall scoring (DESIGN §7; seed §3).

    final = base × centrality × community × recency × layer

- centrality = 1 + α·log(1 + in_degree), live from the in-memory graph (always available);
  archived notes' links are suspended (DESIGN §7): a link from an archived note does not
  count, and an archived note (shown only with include_archived) has in-degree 0.
- community = β when the node's community (meta/communities.json) is the community of one of
  the top-3 fused seed nodes (the seeds themselves included), else 1.0.
- recency = (1-w) + w·exp(-Δt/τ) with w = `recency_weight` (w=1 is the seed's exp(-Δt/τ);
  the default is set by the evals, see docs/decisions.md), Δt in days (≥ 0) since the
  node's last activity: the latest of its
  last hit in meta/access_log.json, its frontmatter `updated` (or `created`) and its file
  mtime. Decision: the *latest* wins, so a human edit that forgot to bump `updated` still
  counts as fresh; `recency_use_mtime=False` drops the mtime term for vaults whose mtimes are
  meaningless (fresh clone, sync tools), keeping it only as a fallback for notes with no
  date. A missing access log only removes the last-hit term. recency.json (the maintainer's
  decay score) is not used here: the raw times are fresher than its snapshot.
- layer = the R-2 tie-break weight of the node's top folder (knowledge > daily > resource).

Each factor is 1.0 when switched off in the options or when its signal is missing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reme_agent.config import SearchSettings
    from reme_agent.recall.group import NodeCatalog

FACTOR_NAMES = ("centrality", "community", "recency", "layer")
SEED_COUNT = 3


@dataclass
class FactorContext:
    """Everything the factors of one query need, gathered once per search."""

    options: SearchSettings
    graph: Any
    catalog: NodeCatalog
    now: datetime
    communities: dict[str, int] | None = None
    seed_communities: frozenset[int] = frozenset()
    last_hits: dict[str, datetime] | None = None
    evidence: Any = None          # recall.evidence.QueryEvidence of the query, if gathered
    tokens: list[str] = field(default_factory=list)   # the query's keyword tokens
    freshness: Any = None         # recall.freshness.IndexFreshness of this search
    warnings: list[str] = field(default_factory=list)
    archived: Any = None          # recall.archive.Archived: notes whose links are suspended


def centrality(in_degree: int, alpha: float) -> float:
    return 1.0 + alpha * math.log1p(max(0, in_degree))


def community(path: str, communities: dict[str, int] | None, seeds: frozenset[int],
              beta: float) -> float:
    if not communities or not seeds:
        return 1.0
    cid = communities.get(path)
    return beta if cid is not None and cid in seeds else 1.0


def recency(ctx: FactorContext, path: str) -> float:
    info = ctx.catalog.get(path)
    times = []
    if ctx.last_hits and path in ctx.last_hits:
        times.append(ctx.last_hits[path])
    if info is not None:
        if info.updated is not None:
            times.append(info.updated)
        if ctx.options.recency_use_mtime or info.updated is None:
            times.append(info.mtime)
    if not times:
        return 1.0
    days = max(0.0, (ctx.now - max(times)).total_seconds() / 86400.0)
    # recency_weight w bounds the factor to [1-w, 1]; w=1 is the seed's bare exp(-Δt/τ),
    # which the LoCoMo eval showed silencing text relevance for notes months apart.
    w = ctx.options.recency_weight
    return (1.0 - w) + w * math.exp(-days / ctx.options.tau_days)


def layer(path: str, weights: dict[str, float]) -> float:
    # The top folder, as layer_of() gives it, without building a PurePosixPath per candidate.
    return float(weights.get(path.partition("/")[0], 1.0))


def seed_communities(seed_paths: list[str], communities: dict[str, int] | None) -> frozenset[int]:
    if not communities:
        return frozenset()
    return frozenset(communities[p] for p in seed_paths[:SEED_COUNT] if p in communities)


def node_factors(ctx: FactorContext, path: str) -> dict[str, float]:
    """The four factors of one node, each 1.0 when disabled or without its signal."""
    o = ctx.options
    return {
        "centrality": (centrality(ctx.catalog.in_degree(ctx.graph, path, ctx.archived), o.alpha)
                       if o.use_centrality else 1.0),
        "community": (community(path, ctx.communities, ctx.seed_communities, o.beta)
                      if o.use_community else 1.0),
        "recency": recency(ctx, path) if o.use_recency else 1.0,
        "layer": layer(path, o.layer_weights) if o.use_layer else 1.0,
    }


def combine(base: float, factors: dict[str, float]) -> float:
    out = base
    for name in FACTOR_NAMES:
        out *= factors.get(name, 1.0)
    return out
