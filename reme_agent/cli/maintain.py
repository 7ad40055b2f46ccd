"""`reme-agent maintain`: the maintainer on the command line (DESIGN §9), a composition root.

It reads Settings, builds the model-backed deciders (jobs/maintainer_job.py) only when a
model is configured and `--no-llm` is not given (so a run without a model never loads
agentscope), hands pending `split` items of the in-process job queue to the split step, and
prints the report (`--json` for the full dict).

Scheduling: `--every 24h` keeps running (Ctrl-C stops it); or use cron, e.g.
`0 2 * * * cd /path && reme-agent maintain --vault ./vault >> maintain.log 2>&1`.
"""

from __future__ import annotations

import re
import time
from typing import Any

import click

from reme_agent.cli.context import Ctx, common
from reme_agent.maintenance.report import STEPS

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNIT = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str) -> float:
    """'24h' -> 86400.0; units s, m, h, d (no unit = seconds)."""
    m = _DURATION.match(text or "")
    if not m or float(m.group(1)) <= 0:
        raise click.BadParameter(f"{text!r} is not a duration; use e.g. 30m, 24h or 7d.",
                                 param_hint="--every")
    return float(m.group(1)) * _UNIT[m.group(2)]


def build_deciders(vault: Any) -> tuple[Any, Any]:
    """(merge judge, split planner) backed by the configured model, or (None, None)."""
    if not vault.settings.model.configured:
        return None, None
    from reme_agent.jobs.maintainer_job import ModelMergeJudge, ModelSplitPlanner

    return ModelMergeJudge(vault), ModelSplitPlanner(vault)


def queued_splits() -> list[str]:
    """Paths the distiller queued for a split in this process (claimed here)."""
    from reme_agent.jobs.queue import default_queue

    items = default_queue().pending("split")
    for item in items:
        item.status = "done"
    return [i.path for i in items]


@click.command("maintain")
@common
@click.option("--only", "only", multiple=True, type=click.Choice(STEPS),
              help="Run only this step (repeatable); the fixed order is kept.")
@click.option("--dry-run", is_flag=True, help="Compute and report, write nothing.")
@click.option("--move-archived", is_flag=True,
              help="Move archived notes to archive/<path> (inbound links rewritten).")
@click.option("--no-llm", is_flag=True,
              help="Do not ask the model even if one is configured (merge/split only report).")
@click.option("--every", default=None, metavar="DURATION",
              help="Run again every DURATION (e.g. 24h, 30m) until Ctrl-C.")
@click.option("--max-runs", type=click.IntRange(1, None), default=None, hidden=True,
              help="With --every: stop after this many runs.")
def maintain(c: Ctx, only: tuple[str, ...], dry_run: bool, move_archived: bool, no_llm: bool,
             every: str | None, max_runs: int | None) -> None:
    """Maintain the vault: access log, communities, decay/archive, merge, split, health.

    Steps 1-3 and 6 and the merge/split candidates need no model; with a model configured
    the maintainer job decides merges and names split children. Reports go to
    audit/<date>/maintain.md (plus duplicates.md and health.md).

    \b
    Example:
      reme-agent maintain --vault ./vault
      reme-agent maintain --only communities --only decay --dry-run --json
      reme-agent maintain --every 24h --move-archived
    """
    from reme_agent.maintenance.maintainer import Maintainer

    interval = parse_duration(every) if every else None
    v = c.open()
    try:
        judge, planner = (None, None) if no_llm else build_deciders(v)
        maintainer = Maintainer(v, v.settings.maintain,
                                split_token_threshold=v.settings.jobs.split_token_threshold,
                                split_block_threshold=v.settings.jobs.split_block_threshold,
                                merge_judge=judge, split_planner=planner)
        runs = 0
        while True:
            report = maintainer.run(list(only) or None, dry_run=dry_run,
                                    move_archived=move_archived, split_requests=queued_splits())
            c.emit(report.as_dict(), report.text())
            runs += 1
            if interval is None or (max_runs is not None and runs >= max_runs):
                return
            try:
                time.sleep(interval)
            except KeyboardInterrupt:
                return
    finally:
        v.close()

