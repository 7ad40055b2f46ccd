"""Per-kind tables and chart for datasets judged kind by kind (kvault, issue G2).

Why separate from report.py: the kvault kinds are all read with the same three ranking
metrics (hit@1, hit@5, MRR@10) plus one "answered with nothing" share, where the synthetic
kinds each have their own metric and designed lift. Keeping this here keeps report.py small.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evals.report import _fmt as _fmt3
from evals.report import find_config as _find

DATASETS = ("kvault",)
"""Datasets whose report gets the per-kind tables and the `<stem>.kinds.png` chart."""
NO_MATCH = "no_match"
RANKING = ("hit@1", "hit@5", "mrr")
LINK_KINDS = ("relation", "multi_hop")   # their r@5+x shows what link expansion adds
PICKS = ("BM25 only", "vector only", "(chosen, text only)", "+ centrality", "+ community",
         "+ recency", "+ layer", "+ all factors", "+ all but recency",
         "text only + node grouping", "+ all + node grouping", "+ all + grouping + expansion",
         "default search(), use_recency=False", "default search() without names",
         "default search() without relations", "default search() without phrases",
         "default search() without floor", "default search() without centrality",
         "default search() without community", "default search() without graph factors",
         "default search()")


def _fmt(value: float | None) -> str:
    return _fmt3(value, 2)


def kind_value(cfg: dict[str, Any], kind: str, metric: str) -> float | None:
    """A kind's mean: ranking metrics from the node level, `empty` / `r@5+x` from extra."""
    entry = cfg.get("kinds", {}).get(kind, {})
    source = "node" if metric in RANKING else "extra"
    value = entry.get(source, {}).get(metric)
    return value["mean"] if value else None


def empty_share(cfg: dict[str, Any]) -> float | None:
    """Share of no_match queries answered with nothing (no result, or all results weak)."""
    return kind_value(cfg, NO_MATCH, "empty")


def answerable(data: dict[str, Any]) -> list[str]:
    return [k for k in data.get("kinds", {}) if k != NO_MATCH]


def default_table(data: dict[str, Any]) -> list[str]:
    """The default search() per kind: n, hit@1, hit@5, MRR, and the empty share."""
    cfg = _find(data, "default search()")
    if cfg is None:
        return []
    lines = ["| kind | n | hit@1 | hit@5 | MRR@10 | answered empty | exercises |",
             "|---|---|---|---|---|---|---|"]
    for kind, what in data.get("kinds", {}).items():
        n = cfg["kinds"].get(kind, {}).get("n", 0)
        empty = _fmt(kind_value(cfg, kind, "empty"))
        if kind == NO_MATCH:
            cells = ["", "", "", f"**{empty}** (higher is better)"]
        else:
            cells = [_fmt(kind_value(cfg, kind, m)) for m in RANKING] + [f"{empty} (lower is better)"]
        lines.append(f"| {kind} | {n} | " + " | ".join(cells) + f" | {what.split(';')[0]} |")
    node = cfg["levels"]["node"]
    lines.append(f"| **all answerable** | {node['mrr']['n']} | **{_fmt(node['hit@1']['mean'])}** "
                 f"| **{_fmt(node['hit@5']['mean'])}** | **{_fmt(node['mrr']['mean'])}** | | |")
    return lines


def ablation_table(data: dict[str, Any]) -> list[str]:
    """Each picked config: hit@1 / MRR per answerable kind, r@5+x on link kinds, empty share."""
    kinds = answerable(data)
    head = ["config", *kinds, *(f"{k} r@5+x" for k in LINK_KINDS if k in kinds), "no_match empty"]
    lines = ["cells: hit@1 / MRR@10", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for suffix in PICKS:
        cfg = _find(data, suffix)
        if cfg is None:
            continue
        cells = [cfg["name"]]
        cells += [f"{_fmt(kind_value(cfg, k, 'hit@1'))} / {_fmt(kind_value(cfg, k, 'mrr'))}"
                  for k in kinds]
        cells += [_fmt(kind_value(cfg, k, "r@5+x")) for k in LINK_KINDS if k in kinds]
        cells.append(_fmt(empty_share(cfg)))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def factor_lifts(data: dict[str, Any]) -> list[tuple[str, str, float]]:
    """(factor, kind, ΔMRR) of each factor alone against the text-only baseline, per kind."""
    base = _find(data, "(chosen, text only)")
    out: list[tuple[str, str, float]] = []
    if base is None:
        return out
    for factor in ("centrality", "community", "recency", "layer", "all factors"):
        cfg = _find(data, f"+ {factor}")
        if cfg is None:
            continue
        for kind in answerable(data):
            a, b = kind_value(base, kind, "mrr"), kind_value(cfg, kind, "mrr")
            if a is not None and b is not None:
                out.append((factor, kind, b - a))
    return out


def lift_table(data: dict[str, Any]) -> list[str]:
    """ΔMRR per kind of each graph/signal factor switched on alone (the ablation's question)."""
    lifts = factor_lifts(data)
    if not lifts:
        return []
    kinds = answerable(data)
    factors = list(dict.fromkeys(f for f, _, _ in lifts))
    by = {(f, k): v for f, k, v in lifts}
    lines = ["| factor alone (vs text only) | " + " | ".join(kinds) + " |",
             "|" + "---|" * (len(kinds) + 1)]
    for factor in factors:
        lines.append(f"| {factor} | " + " | ".join(f"{by[(factor, k)]:+.3f}" if (factor, k) in by
                                                   else "–" for k in kinds) + " |")
    return lines


def section(data: dict[str, Any]) -> list[str]:
    """The per-kind part of a dataset's report section."""
    return ["### Per query kind (default search())", "", *default_table(data), "",
            "### Per kind and config", "", *ablation_table(data), "",
            "### What each factor adds, per kind (ΔMRR, factor alone vs text only)", "",
            *lift_table(data), ""]


def kind_chart(data: dict[str, Any], path: Path) -> Path:
    """Left: default search() hit@1 / hit@5 / MRR per kind (+ no_match empty share).
    Right: MRR per kind for the picked configs (a heatmap: where each factor moves what)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    kinds = list(data.get("kinds", {}))
    default = _find(data, "default search()") or data["configs"][-1]
    fig, (left, right) = plt.subplots(1, 2, figsize=(15, 5.6),
                                      gridspec_kw={"width_ratios": [1.1, 1.0]})
    xs = np.arange(len(kinds))
    width = 0.26
    for i, (metric, color) in enumerate(zip(RANKING, ("#66c2a5", "#8da0cb", "#fc8d62"),
                                            strict=True)):
        vals = [0.0 if k == NO_MATCH else (kind_value(default, k, metric) or 0.0) for k in kinds]
        left.bar(xs + (i - 1) * width, vals, width, label=metric, color=color)
    if NO_MATCH in kinds:
        share = empty_share(default) or 0.0
        left.bar(xs[kinds.index(NO_MATCH)], share, width * 3, color="#e78ac3",
                 label="no_match: answered empty")
        left.text(xs[kinds.index(NO_MATCH)], share + 0.02, f"{share:.2f}", ha="center", fontsize=8)
    for target, style in ((0.85, ":"), (0.95, "--")):
        left.axhline(target, color="grey", linestyle=style, linewidth=0.8)
    left.set_xticks(xs)
    left.set_xticklabels(kinds, rotation=30, ha="right", fontsize=8)
    left.set_ylim(0, 1.05)
    left.set_title(f"{data['dataset']} · default search() per kind ({data['embedder']})")
    left.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=4, frameon=False)
    rows = [c for c in (_find(data, s) for s in PICKS) if c is not None]
    grid = np.array([[(empty_share(c) if k == NO_MATCH else kind_value(c, k, "mrr")) or 0.0
                      for k in kinds] for c in rows])
    right.imshow(grid, vmin=0, vmax=1, cmap="RdYlGn", aspect="auto")
    for (r, c), v in np.ndenumerate(grid):
        right.text(c, r, f"{v:.2f}", ha="center", va="center", fontsize=6.5)
    right.set_xticks(range(len(kinds)))
    right.set_xticklabels([k if k != NO_MATCH else "no_match (empty)" for k in kinds],
                          rotation=30, ha="right", fontsize=8)
    right.set_yticks(range(len(rows)))
    right.set_yticklabels([c["name"] for c in rows], fontsize=7)
    right.set_title("MRR@10 per kind and config")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
