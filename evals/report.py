"""Markdown report + PNG charts from the per-dataset JSON files of a results folder.

Why rebuild from JSON: each dataset run writes its own `<dataset>[.<embedder>].json`, and the
report is regenerated from every JSON in the folder, so running one dataset refreshes its
section without re-running the others, and a script can diff two runs' JSON directly.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"

# Issue #5 and G2 (#15) targets: (dataset, level, metric, threshold). A level "kind:<k>" reads
# the kind's extra metric (kvault: the share of no_match queries answered with nothing).
TARGETS: list[tuple[str, str, str, float]] = [
    ("locomo", "node", "mrr", 0.80),
    ("locomo", "node", "r@5", 0.90),
    ("locomo", "block", "mrr", 0.55),
    ("locomo", "block", "r@5", 0.65),
    ("cmrc", "node", "hit@1", 0.85),
    ("kvault", "node", "hit@1", 0.85),
    ("kvault", "node", "hit@5", 0.95),
    ("kvault", "kind:no_match", "empty", 0.80),
]

# Synthetic: the metric each kind is judged by, and the configs that should lift it.
KIND_METRIC: dict[str, tuple[str, str, bool]] = {   # kind -> (source, metric, higher is better)
    "exact": ("node", "mrr", True),
    "paraphrase": ("node", "mrr", True),
    "cross_language": ("node", "mrr", True),
    "hub": ("node", "mrr", True),
    "community": ("node", "r@5", True),
    "fresh": ("node", "mrr", True),
    "archived": ("extra", "leak@5", False),
    "multi_hop": ("extra", "r@5+x", True),
}
KIND_LIFT: dict[str, tuple[str, str]] = {   # kind -> (config without, config with), by suffix
    "exact": ("vector only", "BM25 only"),
    "paraphrase": ("BM25 only", "vector only"),
    "cross_language": ("BM25 only", "vector only"),
    "hub": ("(chosen, text only)", "+ centrality"),
    "community": ("(chosen, text only)", "+ community"),
    "fresh": ("(chosen, text only)", "+ recency"),
    "archived": ("(chosen, text only)", "+ archive filter"),
    "multi_hop": ("+ all + node grouping", "+ all + grouping + expansion"),
}
HEADLINE = ("p@5", "mrr", "r@5", "hit@1", "ndcg@5")


def _fmt(value: float | None, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.{digits}f}"


def _metric(cfg: dict[str, Any], level: str, metric: str) -> float | None:
    if level.startswith("kind:"):
        return _kind_value(cfg, level.removeprefix("kind:"), "extra", metric)
    entry = cfg.get("levels", {}).get(level, {}).get(metric)
    return entry["mean"] if entry else None


def _kind_value(cfg: dict[str, Any], kind: str, source: str, metric: str) -> float | None:
    entry = cfg.get("kinds", {}).get(kind, {}).get(source, {}).get(metric)
    return entry["mean"] if entry else None


def find_config(data: dict[str, Any], suffix: str) -> dict[str, Any] | None:
    for cfg in data["configs"]:
        if cfg["name"] == suffix or cfg["name"].endswith(suffix):
            return cfg
    return None


def best_config(data: dict[str, Any], level: str = "node", metric: str = "mrr") -> dict[str, Any]:
    return max(data["configs"], key=lambda c: _metric(c, level, metric) or -1.0)


def load_results(folder: Path) -> list[dict[str, Any]]:
    out = []
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(data, dict) and "configs" in data and "dataset" in data:
            data["_file"] = path.name
            out.append(data)
    return out


# -- tables -----------------------------------------------------------------------------------


def ablation_table(data: dict[str, Any]) -> list[str]:
    levels = data["levels"]
    names = data.get("level_names", {})
    head = ["config"] + [f"{names.get('node', 'node')} {m}" for m in HEADLINE]
    if "block" in levels:
        head += [f"{names.get('block', 'block')} {m}" for m in ("mrr", "r@5", "hit@1")]
    head += ["ΔMRR vs text-only [95% CI]", "ms p50/p95"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    best = best_config(data)
    for cfg in data["configs"]:
        node = cfg["levels"].get("node", {})
        mrr = node.get("mrr", {})
        cells = [cfg["name"] + (" **(best MRR)**" if cfg is best else "")]
        for m in HEADLINE:
            if m == "mrr" and mrr:
                cells.append(f"**{_fmt(mrr['mean'])}** [{_fmt(mrr['lo'])}, {_fmt(mrr['hi'])}]")
            else:
                cells.append(_fmt(_metric(cfg, "node", m)))
        if "block" in levels:
            cells += [_fmt(_metric(cfg, "block", m)) for m in ("mrr", "r@5", "hit@1")]
        delta = cfg.get("delta", {}).get("node", {}).get("mrr")
        cells.append(f"{delta['mean']:+.3f} [{delta['lo']:+.3f}, {delta['hi']:+.3f}]" if delta else "")
        lat = cfg.get("latency_ms", {})
        cells.append(f"{_fmt(lat.get('p50'), 1)} / {_fmt(lat.get('p95'), 1)}")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def kind_table(data: dict[str, Any]) -> list[str]:
    """Synthetic: each kind's metric under each config, then the designed lift per kind."""
    kinds = list(data.get("kinds", {}))
    head = ["config"] + [f"{k} ({KIND_METRIC.get(k, ('node', 'mrr', True))[1]})" for k in kinds]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for cfg in data["configs"]:
        cells = [cfg["name"]]
        for kind in kinds:
            source, metric, _ = KIND_METRIC.get(kind, ("node", "mrr", True))
            cells.append(_fmt(_kind_value(cfg, kind, source, metric), 2))
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Designed lift per kind (the part built for the kind, switched on alone):", "",
              "| kind | n | exercises | metric | without | with | lift | verdict |",
              "|---|---|---|---|---|---|---|---|"]
    for kind in kinds:
        if kind not in KIND_LIFT:
            continue
        source, metric, higher = KIND_METRIC[kind]
        off, on = (find_config(data, s) for s in KIND_LIFT[kind])
        if off is None or on is None:
            continue
        a = _kind_value(off, kind, source, metric)
        b = _kind_value(on, kind, source, metric)
        if a is None or b is None:
            continue
        lift = (b - a) if higher else (a - b)
        verdict = "earns its place" if lift > 0.02 else ("no effect" if abs(lift) <= 0.02 else "hurts")
        n = data["kinds"] and on["kinds"].get(kind, {}).get("n", "")
        what = data["kinds"].get(kind, "").split(":")[0]
        lines.append(f"| {kind} | {n} | {what} | {metric}{'' if higher else ' (lower is better)'} "
                     f"| {off['name']}: {_fmt(a, 2)} | {on['name']}: {_fmt(b, 2)} | {lift:+.2f} | {verdict} |")
    return lines


def category_table(data: dict[str, Any], picks: list[str]) -> list[str]:
    """LoCoMo: per category, node and block MRR / R@5 for a few configs."""
    kinds = list(data.get("kinds", {}))
    names = data.get("level_names", {})
    n_of = {k: data["configs"][0]["kinds"].get(k, {}).get("n", "") for k in kinds}
    head = ["config"] + [f"{k} ({n_of[k]})" for k in kinds]
    lines = [f"cells: {names.get('node')} MRR / R@5 · {names.get('block')} MRR / R@5", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for suffix in picks:
        cfg = find_config(data, suffix)
        if cfg is None:
            continue
        cells = [cfg["name"]]
        for kind in kinds:
            vals = [_kind_value(cfg, kind, lvl, m) for lvl in ("node", "block") for m in ("mrr", "r@5")]
            cells.append(f"{_fmt(vals[0], 2)} / {_fmt(vals[1], 2)} · {_fmt(vals[2], 2)} / {_fmt(vals[3], 2)}")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def targets_table(results: list[dict[str, Any]]) -> list[str]:
    main = {d["dataset"]: d for d in results if d.get("embedder") == "use"}
    lines = ["| dataset | level | metric | target | default search() | best config | best | met? |",
             "|---|---|---|---|---|---|---|---|"]
    for dataset, level, metric, threshold in TARGETS:
        data = main.get(dataset)
        if data is None:
            lines.append(f"| {dataset} | {level} | {metric} | ≥ {threshold} | not run | | | |")
            continue
        default = find_config(data, "default search()")
        best = best_config(data, level, metric)
        dv = _metric(default, level, metric) if default else None
        bv = _metric(best, level, metric)
        met = "yes" if dv is not None and dv >= threshold else (
            "best only" if bv is not None and bv >= threshold else "no")
        name = data["level_names"].get(level, level.removeprefix("kind:"))
        lines.append(f"| {dataset} | {name} | {metric} | ≥ {threshold} | {_fmt(dv)} | {best['name']} "
                     f"| {_fmt(bv)} | {met} |")
    syn = main.get("synthetic")
    if syn is not None:
        lifts = kind_lifts(syn)
        good = sum(1 for _, lift in lifts if lift > 0.02)
        lines.append(f"| synthetic | note | each kind's designed lift | > 0 | | "
                     f"{', '.join(f'{k} {v:+.2f}' for k, v in lifts)} | {good}/{len(lifts)} | "
                     f"{'yes' if lifts and good == len(lifts) else 'no'} |")
    return lines


def kind_lifts(data: dict[str, Any]) -> list[tuple[str, float]]:
    """(kind, lift) of the part built for each synthetic kind, switched on alone."""
    out = []
    for kind in data.get("kinds", {}):
        if kind not in KIND_LIFT:
            continue
        source, metric, higher = KIND_METRIC[kind]
        off, on = (find_config(data, s) for s in KIND_LIFT[kind])
        if off is None or on is None:
            continue
        a, b = _kind_value(off, kind, source, metric), _kind_value(on, kind, source, metric)
        if a is not None and b is not None:
            out.append((kind, (b - a) if higher else (a - b)))
    return out


def embedder_table(results: list[dict[str, Any]]) -> list[str]:
    """One block per dataset that was also run with another embedder than USE."""
    datasets = sorted({d["dataset"] for d in results if d.get("embedder") != "use"})
    if not datasets:
        return []
    lines = ["| dataset | embedder | config | node MRR | node R@5 | block MRR | block R@5 "
             "| index blocks/s | query p50 ms |", "|---|---|---|---|---|---|---|---|---|"]
    for dataset in datasets:
        group = sorted((d for d in results if d["dataset"] == dataset),
                       key=lambda d: (d["embedder"] != "use", d["embedder"]))
        for data in group:
            for name in ("BM25 only", "vector only", "rrf w=0.7", "blend w=0.3", "blend w=0.5",
                         "blend w=0.7", "default search()"):
                cfg = next((c for c in data["configs"] if c["name"] == name), None)
                if cfg is None:
                    continue
                lines.append(
                    f"| {dataset} | {data['embedder']} | {name} | {_fmt(_metric(cfg, 'node', 'mrr'))} "
                    f"| {_fmt(_metric(cfg, 'node', 'r@5'))} | {_fmt(_metric(cfg, 'block', 'mrr'))} "
                    f"| {_fmt(_metric(cfg, 'block', 'r@5'))} | {data['index'].get('blocks_per_s') or '–'} "
                    f"| {_fmt(cfg['latency_ms'].get('p50'), 1)} |")
    return lines


# -- chart ------------------------------------------------------------------------------------


def ablation_chart(data: dict[str, Any], path: Path) -> Path:
    """Horizontal bars of MRR (with 95% CI) per config, node and block level."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    configs = data["configs"]
    levels = [lvl for lvl in ("node", "block") if lvl in data["levels"]]
    names = data.get("level_names", {})
    colors = {"text": "#8da0cb", "factors": "#66c2a5", "pipeline": "#fc8d62", "tuning": "#e5c494",
              "experimental": "#b3b3b3", "default": "#e78ac3"}
    fig, axes = plt.subplots(1, len(levels), figsize=(6.5 * len(levels), 0.36 * len(configs) + 1.6),
                             sharey=True, squeeze=False)
    ys = list(range(len(configs)))[::-1]
    for ax, level in zip(axes[0], levels, strict=True):
        means, errs, cols = [], [[], []], []
        for cfg in configs:
            entry = cfg["levels"].get(level, {}).get("mrr") or {"mean": 0.0, "lo": 0.0, "hi": 0.0}
            means.append(entry["mean"])
            errs[0].append(max(0.0, entry["mean"] - entry["lo"]))
            errs[1].append(max(0.0, entry["hi"] - entry["mean"]))
            cols.append(colors.get(cfg["group"], "#b3b3b3"))
        ax.barh(ys, means, xerr=errs, color=cols, capsize=2, height=0.7)
        for y, m, up in zip(ys, means, errs[1], strict=True):
            ax.text(m + up + 0.01, y, f"{m:.3f}", va="center", fontsize=7)
        ax.set_xlim(0, 1.05)
        ax.set_title(f"{data['dataset']} · {names.get(level, level)} MRR ({data['embedder']})")
        ax.grid(axis="x", alpha=0.3)
    axes[0][0].set_yticks(ys)
    axes[0][0].set_yticklabels([c["name"] for c in configs], fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# -- the report -------------------------------------------------------------------------------


def dataset_section(data: dict[str, Any], chart: str | None) -> list[str]:
    from evals import kind_report  # imports this module: loaded lazily

    idx = data["index"]
    out = [f"## {data['dataset']} ({data['embedder']} embedder)", "",
           f"{data['n_queries']} queries over {data['n_notes']} notes in {len(data['vaults'])} "
           f"vault(s), {idx['blocks']} blocks; indexing embedded {idx['embedded']} blocks in "
           f"{idx['seconds']} s ({idx.get('blocks_per_s') or '–'} blocks/s); whole run {data['seconds']} s.", ""]
    out += [f"- {note}" for note in data.get("notes", [])]
    out += ["", *ablation_table(data), ""]
    if chart:
        out += [f"![{data['dataset']} ablation]({chart})", ""]
    if data["dataset"] == "synthetic":
        out += ["### Per query kind", "", *kind_table(data), ""]
    elif data["dataset"] in kind_report.DATASETS:
        out += kind_report.section(data)
        if chart:
            out += [f"![{data['dataset']} per kind]({chart.removesuffix('.png')}.kinds.png)", ""]
    elif data["dataset"].startswith("locomo"):
        picks = ["BM25 only", "vector only", "rrf w=0.7", "(chosen, text only)", "+ recency",
                 "+ all factors", "+ all + node grouping", "default search()"]
        out += ["### Per category", "", *category_table(data, picks), ""]
    return out


def build_report(folder: Path = RESULTS_DIR, charts: bool = True) -> Path:
    """Regenerate `report.md` (and one PNG per main dataset run) from the JSON in `folder`."""
    from evals import kind_report

    results = load_results(folder)
    order = {"synthetic": 0, "locomo": 1, "locomo+obs": 2, "cmrc": 3, "cmrc-chunk": 4,
             "kvault": 5}
    main = sorted((d for d in results if d.get("embedder") == "use" or not d.get("comparison")),
                  key=lambda d: (order.get(d["dataset"], 9), d["dataset"], d["embedder"]))
    lines = ["# reme-agent recall evals", "",
             "Generated by `reme-agent eval` (evals/report.py) from the JSON files next to this "
             "report. Metrics at node level unless named otherwise; MRR is MRR@10; brackets are "
             "95% bootstrap intervals (1000 resamples, seeded); ΔMRR is paired against the "
             "chosen fusion with no factors. See evals/README.md for what each row means.", "",
             "## Targets (issue #5; kvault: G2, #15)", "", *targets_table(results), ""]
    for data in main:
        chart = None
        if charts:
            stem = data["_file"].removesuffix(".json")
            chart = ablation_chart(data, folder / f"{stem}.png").name
            if data["dataset"] in kind_report.DATASETS:
                kind_report.kind_chart(data, folder / f"{stem}.kinds.png")
        lines += dataset_section(data, chart)
    emb = embedder_table(results)
    skipped = _skipped(folder)
    if emb or skipped:
        lines += ["## Embedder comparison", "",
                  "Same harness and vaults, one collection per embedder; index blocks/s is the "
                  "embedding throughput of a fresh index on this 2-core machine.", "", *emb, ""]
        lines += [f"- {name}: skipped ({why})" for name, why in skipped.items()]
        lines.append("")
    path = folder / "report.md"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


SKIPPED_FILE = "skipped_embedders.txt"


def _skipped(folder: Path) -> dict[str, str]:
    path = folder / SKIPPED_FILE
    if not path.is_file():
        return {}
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        name, _, why = line.partition("\t")
        if name.strip():
            out[name.strip()] = why.strip()
    return out


def record_skipped(folder: Path, skipped: dict[str, str]) -> None:
    """Remember embedders the comparison could not run (and how to get them)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / SKIPPED_FILE
    if skipped:
        path.write_text("".join(f"{k}\t{v}\n" for k, v in sorted(skipped.items())), encoding="utf-8")
    else:
        path.unlink(missing_ok=True)


def json_name(data: dict[str, Any]) -> str:
    """`<dataset>.json` for the reference (USE) run, `<dataset>.<embedder>.json` otherwise."""
    return f"{data['dataset']}.json" if data.get("embedder") == "use" \
        else f"{data['dataset']}.{data['embedder']}.json"


def write_json(data: dict[str, Any], folder: Path = RESULTS_DIR) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / json_name(data)
    path.write_text(json.dumps(_clean(data), ensure_ascii=False, indent=1, default=str) + "\n",
                    encoding="utf-8")
    return path


def _clean(value: Any) -> Any:
    """NaN -> None (strict JSON), floats rounded to 5 digits (readable diffs)."""
    if isinstance(value, float):
        return None if math.isnan(value) else round(value, 5)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value
