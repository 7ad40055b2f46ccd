"""The ablation grid: which search options each eval config sets.

Every config is query-time only (fusion, weights, factors, grouping, expansion), so a vault
is indexed once and all configs run against it. Two modes:
- `blocks`: `rank_blocks` (every enabled factor, no grouping); node level is the block list
  de-duplicated by note (a note ranks where its best block ranks), block level is the raw list.
- `nodes`: the full `search()` (grouping by note, `top_chunks_per_path` chunks each, optional
  link expansion); block level is the chunks in the order the agent reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reme_agent.config import SearchSettings

NO_FACTORS: dict[str, Any] = {"use_centrality": False, "use_community": False,
                              "use_recency": False, "use_layer": False}
ALL_FACTORS: dict[str, Any] = {"use_centrality": True, "use_community": True,
                               "use_recency": True, "use_layer": True}
FACTORS = ("centrality", "community", "recency", "layer")
BLEND_WEIGHTS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.7)
RRF_WEIGHTS = (0.3, 0.5, 0.7)


@dataclass(frozen=True)
class EvalConfig:
    """One row of the ablation table."""

    name: str
    group: str                                   # text | factors | pipeline | tuning | default
    options: dict[str, Any] = field(default_factory=dict)   # SearchSettings overrides
    mode: str = "blocks"                         # blocks | nodes
    include_archived: bool = False
    expand_depth: int = 0
    note: str = ""
    post: tuple[tuple[str, float], ...] = ()     # experimental re-ranking (harness.rerank)

    def settings(self, base: SearchSettings) -> SearchSettings:
        return base.model_copy(update=dict(self.options))

    def signature(self, base: SearchSettings) -> tuple[Any, ...]:
        """Two configs with the same signature return the same rankings (run once)."""
        opts = self.settings(base).model_dump()
        if self.mode == "blocks":   # grouping/expansion options do not touch rank_blocks
            for key in ("top_chunks_per_path", "expand_depth", "max_links_per_direction",
                        "expand_path_budget"):
                opts.pop(key, None)
        return (self.mode, self.include_archived, self.expand_depth,
                tuple(sorted((k, repr(v)) for k, v in opts.items())))


def fusion_label(fusion: str, weight: float) -> str:
    return f"{fusion} w={weight:g}"


def standard_configs(base: SearchSettings, *, quick: bool = False) -> list[EvalConfig]:
    """The full grid: text fusion sweep, factors one by one, pipeline stages, the default."""
    chosen = {"fusion": base.fusion, "vector_weight": base.vector_weight}
    label = fusion_label(base.fusion, base.vector_weight)
    out = [
        EvalConfig("BM25 only", "text", {**NO_FACTORS, "fusion": "blend", "vector_weight": 0.0},
                   include_archived=True, note="keyword leg alone"),
        EvalConfig("vector only", "text", {**NO_FACTORS, "fusion": "blend", "vector_weight": 1.0},
                   include_archived=True, note="vector leg alone"),
    ]
    for w in (RRF_WEIGHTS if not quick else (0.7,)):
        out.append(EvalConfig(fusion_label("rrf", w), "text",
                              {**NO_FACTORS, "fusion": "rrf", "vector_weight": w},
                              include_archived=True, note="seed default" if w == 0.7 else ""))
    for w in (BLEND_WEIGHTS if not quick else (0.3,)):
        out.append(EvalConfig(fusion_label("blend", w), "text",
                              {**NO_FACTORS, "fusion": "blend", "vector_weight": w},
                              include_archived=True, note="min-max blend"))
    out.append(EvalConfig(f"{label} (chosen, text only)", "factors", {**chosen, **NO_FACTORS},
                          include_archived=True, note="baseline of the factor rows"))
    for name in FACTORS:
        out.append(EvalConfig(f"{label} + {name}", "factors",
                              {**chosen, **NO_FACTORS, f"use_{name}": True}, include_archived=True))
    out.append(EvalConfig(f"{label} + archive filter", "factors", {**chosen, **NO_FACTORS}))
    out.append(EvalConfig(f"{label} + all factors", "factors", {**chosen, **ALL_FACTORS},
                          note="all four factors + archive filter"))
    out.append(EvalConfig(f"{label} + all but recency", "factors",
                          {**chosen, **ALL_FACTORS, "use_recency": False},
                          note="centrality, community, layer + archive filter"))
    out.append(EvalConfig(f"{label} text only + node grouping", "pipeline",
                          {**chosen, **NO_FACTORS}, mode="nodes", expand_depth=0,
                          include_archived=True, note="grouping alone"))
    out.append(EvalConfig(f"{label} + all + node grouping", "pipeline", {**chosen, **ALL_FACTORS},
                          mode="nodes", expand_depth=0))
    out.append(EvalConfig(f"{label} + all + grouping + expansion", "pipeline",
                          {**chosen, **ALL_FACTORS}, mode="nodes", expand_depth=1))
    if not quick:
        for rw in (1.0, 0.5, 0.1):
            if rw == base.recency_weight:
                continue
            out.append(EvalConfig(f"{label} + all, recency_weight={rw:g}", "tuning",
                                  {**chosen, **ALL_FACTORS, "recency_weight": rw},
                                  note="1 = the seed's bare exp(-Δt/τ)" if rw == 1.0 else ""))
        out.append(EvalConfig(f"{label} + all, tau={365:g} d", "tuning",
                              {**chosen, **ALL_FACTORS, "tau_days": 365.0}))
        out.append(EvalConfig(f"{label} + all, recency without mtime", "tuning",
                              {**chosen, **ALL_FACTORS, "recency_use_mtime": False}))
    text_only = {**chosen, **NO_FACTORS}
    for decay in (0.3, 0.5, 1.0):
        out.append(EvalConfig(f"{label}, note score = blocks with decay {decay:g}", "experimental",
                              text_only, include_archived=True, post=(("node_decay", decay),),
                              note="not in search(): a note with several matching blocks rises"))
    out.append(EvalConfig(f"{label}, decay 0.5 + block mix 0.5", "experimental", text_only,
                          include_archived=True, post=(("node_decay", 0.5), ("block_mix", 0.5)),
                          note="not in search(): blocks of a strongly matching note rise"))
    out.append(EvalConfig(f"{label} + all factors, note decay 0.3", "experimental",
                          {**chosen, **ALL_FACTORS}, mode="ranked",
                          post=(("node_decay", 0.3), ("limit", base.candidates)),
                          note="not in search(): the proposed node score on top of the factors"))
    union = {"candidates": base.candidates}
    for w in (0.3, 0.5):
        out.append(EvalConfig(f"re-fused min-max w={w:g} (check)", "experimental", union,
                              mode="union", post=(("mm_w", w), ("limit", base.candidates)),
                              note="must equal the blend row: the re-fusion is faithful"))
    for w in (0.3, 0.5, 0.7):
        out.append(EvalConfig(f"coverage-normalised BM25 + min-max cosine w={w:g}", "experimental",
                              union, mode="union", post=(("cov_w", w), ("limit", base.candidates)),
                              note="not in search(): BM25 / sum of per-term best scores"))
    # G2: what each part of search() adds, one switched off at a time from the default
    for name, key, note in (
            ("names", "use_names", "names, relations and the name tiers (relations need names)"),
            ("relations", "use_relations", "predicate links of named notes not followed"),
            ("phrases", "use_phrases", "no verbatim phrase lookup"),
            ("floor", "use_floor", "no relevance floor (nothing marked weak)"),
            ("centrality", "use_centrality", "graph factor"),
            ("community", "use_community", "graph factor"),
            ("layer", "use_layer", "R-2 tie-break")):
        out.append(EvalConfig(f"default search() without {name}", "default",
                              {key: False}, mode="nodes", expand_depth=base.expand_depth,
                              note=note))
    out.append(EvalConfig("default search() without graph factors", "default",
                          {"use_centrality": False, "use_community": False}, mode="nodes",
                          expand_depth=base.expand_depth, note="centrality and community off"))
    out.append(EvalConfig("default search(), use_recency=False", "default",
                          {"use_recency": False}, mode="nodes", expand_depth=base.expand_depth,
                          note="the defaults without the recency factor"))
    for per in (1, 3):
        if per != base.top_chunks_per_path:
            out.append(EvalConfig(f"default search(), top_chunks_per_path={per}", "default",
                                  {"top_chunks_per_path": per}, mode="nodes",
                                  expand_depth=base.expand_depth,
                                  note="blocks shown per note: trades block recall for variety"))
    out.append(EvalConfig("default search()", "default", {}, mode="nodes",
                          expand_depth=base.expand_depth,
                          note="SearchSettings defaults, what the toolkit calls"))
    return out


def embedder_configs(base: SearchSettings) -> list[EvalConfig]:
    """The smaller grid run for each embedder in the comparison."""
    def text(name: str, fusion: str, w: float) -> EvalConfig:
        return EvalConfig(name, "text", {**NO_FACTORS, "fusion": fusion, "vector_weight": w},
                          include_archived=True)

    return [
        text("BM25 only", "blend", 0.0),
        text("vector only", "blend", 1.0),
        text(fusion_label("rrf", 0.7), "rrf", 0.7),
        *(text(fusion_label("blend", w), "blend", w) for w in (0.3, 0.5, 0.7)),
        EvalConfig("default search()", "default", {}, mode="nodes", expand_depth=base.expand_depth),
    ]
