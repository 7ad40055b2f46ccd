"""`reme-agent autolink`: auto-link L1–L4 on the command line (DESIGN §9).

A composition root: reads Settings, builds the LLM judge only when a model is configured
(so L1/L4 without a model never load agentscope), and calls `AutoLinker.run`.
"""

from __future__ import annotations

import click

from reme_agent.cli.context import Ctx, common, no_progress_option


@click.command("autolink")
@common
@click.option("--levels", default=None, metavar="L1,L2,L3,L4",
              help="Levels to run, comma-separated (default from config: autolink.levels).")
@click.option("--dry-run", is_flag=True, help="Plan and report; write nothing.")
@click.option("--path", "paths", multiple=True, metavar="P",
              help="Only this note or folder (repeatable); default: the whole vault.")
@click.option("--no-refresh", is_flag=True, help="Do not re-index the notes L1 changed.")
@no_progress_option
def autolink(c: Ctx, levels: str | None, dry_run: bool, paths: tuple[str, ...],
             no_refresh: bool, no_progress: bool) -> None:
    """Turn unlinked mentions into [[links]] (L1), add See-also links (L2), upgrade bare
    links to typed ones (L3, audited) and report likely duplicates (L4).

    L1 and L4 run without a model (ambiguous mentions are then skipped and listed); L2 and L3
    need `model.*` configured. Every write is additive and CAS-checked.

    \b
    Example:
      reme-agent autolink --dry-run
      reme-agent autolink --levels L1 --path knowledge/jwt/jwt.md
      reme-agent autolink --levels L1,L4 --json
    """
    from reme_agent.maintenance.autolink.runner import AutoLinker, parse_levels

    v = c.open()
    try:
        wanted = parse_levels(levels, v.settings.autolink.levels)
        judge = None
        if v.settings.model.configured:
            from reme_agent.jobs.autolink_job import JobJudge

            judge = JobJudge(v)
        report = AutoLinker(v, judge=judge).run(wanted, paths=list(paths) or None,
                                                dry_run=dry_run, refresh=not no_refresh,
                                                progress=c.progress(no_progress, v.settings))
        c.emit(report.as_dict(), report.render())
    finally:
        v.close()
