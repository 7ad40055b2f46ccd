"""`reme-agent maintain`: the maintainer on the command line (DESIGN §9), a composition root.

It reads Settings and calls `run_maintainer` (jobs/maintainer_job.py): the model-backed
deciders only when a model is configured and `--no-llm` is not given (so a run without a
model never loads agentscope), pending `split` items of the vault's follow-up queue first in
the split step, and, as the last step (`followups`), a drain of the follow-up queue
(auto-link L1; split items only with a model). It prints the report (`--json` for the
full dict).

Scheduling: `--every 24h` keeps running (Ctrl-C stops it); or use cron, e.g.
`0 2 * * * cd /path && reme-agent maintain --vault ./vault >> maintain.log 2>&1`.

SIGTERM (a service manager's stop): between runs it stops at once; during a run, the run
stops at its next safe point (between two steps, actions or queue items), prints its report
(which says where it stopped), logs why, closes the vault and exits 0. A second SIGTERM stops
at once (the action in progress rolls back through its journal).
"""

from __future__ import annotations

import logging
import re
import time

import click

from reme_agent.cli.context import (
    Ctx,
    common,
    no_progress_option,
    sigterm_stops,
    sigterm_winds_down,
)
from reme_agent.maintenance.followups import FOLLOWUPS_STEP
from reme_agent.maintenance.report import STEPS

log = logging.getLogger("reme_agent.cli")

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNIT = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str) -> float:
    """'24h' -> 86400.0; units s, m, h, d (no unit = seconds)."""
    m = _DURATION.match(text or "")
    if not m or float(m.group(1)) <= 0:
        raise click.BadParameter(f"{text!r} is not a duration; use e.g. 30m, 24h or 7d.",
                                 param_hint="--every")
    return float(m.group(1)) * _UNIT[m.group(2)]


@click.command("maintain")
@common
@click.option("--only", "only", multiple=True, type=click.Choice([*STEPS, FOLLOWUPS_STEP]),
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
@no_progress_option
def maintain(c: Ctx, only: tuple[str, ...], dry_run: bool, move_archived: bool, no_llm: bool,
             every: str | None, max_runs: int | None, no_progress: bool) -> None:
    """Maintain the vault: access log, communities, decay/archive, merge, split, health,
    then the follow-up queue.

    Steps 1-3 and 6 and the merge/split candidates need no model; with a model configured
    the maintainer job decides merges and names split children. The last step, followups,
    runs the queued auto-link L1 items (and split items, with a model); --dry-run skips it.
    Reports go to audit/<date>/maintain.md (plus duplicates.md and health.md).

    \b
    Example:
      reme-agent maintain --vault ./vault
      reme-agent maintain --only communities --only decay --dry-run --json
      reme-agent maintain --every 24h --move-archived
    """
    from reme_agent.engine.stop import StopRequest
    from reme_agent.jobs.maintainer_job import run_maintainer

    interval = parse_duration(every) if every else None
    v = c.open()
    try:
        runs = 0
        while True:
            stop = StopRequest()
            with sigterm_winds_down(stop, "the maintenance run"):
                report = run_maintainer(v, list(only) or None, dry_run=dry_run,
                                        move_archived=move_archived,
                                        use_model=False if no_llm else None,
                                        progress=c.progress(no_progress, v.settings), stop=stop)
            c.emit(report.as_dict(), report.text())
            runs += 1
            if stop.is_set():
                cut = [s.step for s in report.steps if s.stopped]
                not_run = [s.step for s in report.steps
                           if (s.skipped or "").startswith("stopped")]
                log.warning("maintain stopped early (%s): cut short: %s; not run: %s; the "
                            "rest runs next time. Closing the vault.", stop.reason,
                            ", ".join(cut) or "-", ", ".join(not_run) or "-")
                return
            if interval is None or (max_runs is not None and runs >= max_runs):
                return
            try:
                with sigterm_stops():  # SIGTERM between runs stops it as Ctrl-C does
                    time.sleep(interval)
            except KeyboardInterrupt:
                return
    finally:
        v.close()

