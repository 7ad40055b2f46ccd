"""`reme-agent eval`: run the recall evals and write a report, JSON and charts.

By default into a new run folder `.reme/eval/<UTC time>/` under the current directory: the
committed reference run in evals/results is rewritten only when asked (`--out evals/results`).

The evals live in the checkout's `evals/` folder (not in the wheel); the command loads them by
path (`cli/checkout.py`) and calls `evals.run.run_evals`.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import click

from reme_agent.cli.checkout import load_package
from reme_agent.cli.context import Ctx, common

DATASETS = ("synthetic", "locomo", "cmrc", "kvault", "all")  # the same as evals.run.DATASETS (tested)


@click.command("eval")
@common
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
@click.option("--out", default=None, metavar="DIR",
              help="Results folder (default: a new .reme/eval/<UTC time>/ here; "
                   "`--out evals/results` refreshes the committed reference run).")
@click.option("--work", default=None, metavar="DIR", help="Folder for generated vaults (default evals/work).")
@click.option("--no-progress", is_flag=True, help="No progress bars.")
def eval_cmd(c: Ctx, datasets: tuple[str, ...], data: str | None, limit: int | None,
             embedder: str, compare_embedders: bool, skip_main: bool, observations: bool,
             no_chunk: bool, quick: bool, out: str | None, work: str | None,
             no_progress: bool) -> None:
    """Run recall evals (real vaults, real index, real search) and write a report.

    Needs the source checkout (evals/ is not installed) and the `evals` extra (matplotlib).

    \b
    Example:
      reme-agent eval --dataset synthetic --embedder hash --limit 50
      reme-agent eval --dataset all --compare-embedders
      reme-agent eval --dataset cmrc --compare-embedders --skip-main
      reme-agent eval --dataset all --out evals/results   # refresh the committed results
    """
    from reme_agent.config import load_settings
    from reme_agent.errors import ConfigError

    if skip_main and not compare_embedders:
        raise click.UsageError("--skip-main only makes sense with --compare-embedders")
    load_package("evals", what="eval suite", command="eval")
    try:  # the report's charts need it: say so before the run, not after it
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise ConfigError("`reme-agent eval` needs matplotlib for its charts.",
                          "Install the evals extra: pip install -e '.[evals]'.") from exc
    from evals.report import _clean
    from evals.run import available_embedders, headline, run_evals

    names, skipped = available_embedders()
    if embedder not in names:
        raise click.UsageError(f"embedder {embedder!r} is not available: {skipped.get(embedder)}")
    quiet = logging.getLogger("reme_agent")
    level = quiet.level
    if logging.getLogger().level > logging.INFO:
        quiet.setLevel(logging.ERROR)
    try:   # quiet for this run only: a caller of `main()` in-process keeps its logging
        summaries = run_evals(list(datasets), settings=load_settings(c.configs),
                              embedder=embedder, data=data, limit=limit,
                              compare_embedders=compare_embedders, skip_main=skip_main,
                              observations=observations, chunk=not no_chunk, quick=quick,
                              out_dir=Path(out) if out else None,
                              work_dir=Path(work) if work else None, progress=not no_progress,
                              echo=lambda msg: click.echo(msg, err=True))
    finally:
        quiet.setLevel(level)
    if c.as_json:
        click.echo(json.dumps(_clean(summaries), ensure_ascii=False, indent=1, default=str))
    else:
        for result in summaries:
            click.echo(headline(result))
