"""`reme-agent init | index | watch | demo | config`: the vault itself and its configuration.

`index` and `watch` also feed the notes a run changed to the D3 overload check
(`maintenance.health.queue_overloaded`): a knowledge note grown past the split threshold by
hand gets a `split` item in the follow-up queue and a line in today's health report. The
engine stays domain-agnostic; the check is composed here.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from reme_agent.cli.context import Ctx, common, no_progress_option, sigterm_stops, warm_option

if TYPE_CHECKING:
    from reme_agent.vault import Vault


def queue_overloaded(v: Vault, changed: list[str], source: str) -> list[dict[str, Any]]:
    """The D3 check on an index run's changed notes (thresholds from `jobs.*`)."""
    if not changed:
        return []
    from reme_agent.maintenance.health import queue_overloaded as check
    from reme_agent.maintenance.split import SplitParams

    cfg = v.settings.jobs
    return check(v, changed, SplitParams(token_threshold=cfg.split_token_threshold,
                                         block_threshold=cfg.split_block_threshold),
                 source=source)


@click.command("init")
@common
@click.option("--obsidian-exclude/--no-obsidian-exclude", default=None,
              help="When the vault has a .obsidian/ folder, add audit/ and meta/ to Obsidian's "
                   "Excluded files (userIgnoreFilters in .obsidian/app.json). Default: ask on "
                   "a terminal (yes if you just press Enter), yes otherwise.")
def init(c: Ctx, obsidian_exclude: bool | None) -> None:
    """Create a vault folder with the standard layout.

    A vault whose Obsidian day notes live elsewhere (the folder of Daily notes or of the
    Periodic Notes plugin) gets no daily/ folder: the daily tools write into those notes.

    In a vault Obsidian already opened (a .obsidian/ folder exists), reme-agent's own
    records (audit/) and derived signals (meta/) would show in Obsidian's search, graph and
    link suggestions: `init` offers to add them to Obsidian's "Excluded files". The two
    entries are merged into .obsidian/app.json (other settings untouched, the file replaced
    atomically); remove them in Settings -> Files and links to undo.

    \b
    Example:
      reme-agent init --vault ./vault
      reme-agent init --vault ~/Obsidian/Work --no-obsidian-exclude
    """
    import sys

    from reme_agent.schema.layout import AUDIT, DAILY, META, init_layout
    from reme_agent.schema.obsidian import (
        OBSIDIAN_DIR,
        add_excluded_folders,
        detect_daily_layout,
        excluded_folders,
    )

    v = c.open(create=True)
    try:
        day_notes = detect_daily_layout(v.root)
        elsewhere = day_notes is not None and day_notes.folder != DAILY
        made = init_layout(v.root, daily=not elsewhere)
    finally:
        v.close()
    data: dict[str, object] = {"vault": str(v.root), "created": made}
    text = f"vault ready at {v.root}"
    if day_notes is not None and elsewhere:
        data["daily_notes"] = {"folder": day_notes.folder, "format": day_notes.format,
                               "source": day_notes.source}
        text += (f"; day notes go to {day_notes.folder or 'the vault root'} as "
                 f"{day_notes.format}.md (from {day_notes.source}), so no daily/ folder")
    if (v.root / OBSIDIAN_DIR).is_dir():
        wanted = [f"{AUDIT}/", f"{META}/"]
        missing = [f for f in wanted if f.strip("/") not in
                   {x.strip("/") for x in excluded_folders(v.root)}]
        if missing and obsidian_exclude is None and sys.stdin.isatty() and not c.as_json:
            obsidian_exclude = click.confirm(
                f"Hide {' and '.join(missing)} from Obsidian (add them to its Excluded files)?",
                default=True, err=True)
        added = add_excluded_folders(v.root, missing) if missing and obsidian_exclude is not False \
            else []
        data["obsidian_excluded"] = added
        if added:
            text += f"; added {', '.join(added)} to Obsidian's Excluded files"
    c.emit(data, text)


@click.command("index")
@common
@click.option("--full", is_flag=True, help="Drop the projections and rebuild them from the files.")
@no_progress_option
def index(c: Ctx, full: bool, no_progress: bool) -> None:
    """Index the vault: embed only new or changed blocks.

    The summary (or --json) goes to stdout; each skipped file or bad frontmatter is a
    warning on stderr (logged by the indexer), and on a terminal a progress bar shows the
    files read and the blocks embedded, so piped output stays clean.

    \b
    Example:
      reme-agent index --vault ./vault --json
    """
    v = c.open()
    try:
        report = v.index(full=full, progress=c.progress(no_progress, v.settings))
        queued = queue_overloaded(v, report.changed_files, "index")
    finally:
        v.close()
    data = {**report.as_dict(), "split_queued": queued}
    text = (f"{data['files']} files, {data['blocks']} blocks; embedded {data['embedded']}, "
            f"deleted {data['deleted']} in {data['seconds']} s")
    if queued:
        text += f"; {len(queued)} overloaded note(s) queued for a split"
    if data["skipped"] or data["errors"]:
        text += (f" ({len(data['skipped'])} skipped, {len(data['errors'])} with frontmatter "
                 "errors: see the warnings on stderr)")
    c.emit(data, text)


@click.command("watch")
@common
@click.option("--debounce", default=0.5, show_default=True, help="Seconds of quiet before re-indexing.")
@click.option("--seconds", default=0.0, help="Stop after this many seconds (0 = until Ctrl-C).")
@click.option("--worker", "with_worker", is_flag=True,
              help="Also run the follow-up queue (auto-link L1; split with a model) on a thread.")
@warm_option
def watch(c: Ctx, debounce: float, seconds: float, with_worker: bool, warm: bool) -> None:
    """Re-index whenever files in the vault change (edits in any editor show up in search).

    A knowledge note grown past the split threshold is queued for a split (and noted in
    today's health report); --worker runs the queued follow-up jobs as they come. While it
    runs, `reme-agent search` and `hook` in other processes are answered by this one
    (`--no-warm` to stop that; see `reme-agent serve`).

    \b
    Example:
      reme-agent watch --vault ./vault
      reme-agent watch --vault ./vault --worker
    """
    from reme_agent.cli.warm import start_server
    from reme_agent.engine.watcher import VaultWatcher

    v = c.open()
    server = None
    try:
        with sigterm_stops():  # SIGTERM stops it like Ctrl-C: the socket is removed
            first = v.index()
            if warm:
                server = start_server(v, c.configs, echo=lambda m: click.echo(m, err=True))
            queue_overloaded(v, first.changed_files, "watch")
            worker = None
            if with_worker:
                from reme_agent.cli.worker import echo_err
                from reme_agent.jobs.followups import start_followup_worker

                worker = start_followup_worker(v, echo=echo_err)  # stopped by v.close()
            click.echo(f"watching {v.root} ({first.files} files indexed"
                       f"{', follow-up worker on' if worker else ''}); Ctrl-C to stop", err=True)

            def on_change(paths: list[str] | None) -> None:
                report = v.index() if paths is None else v.refresh(paths)
                if report.changed_files or report.deleted_files:
                    click.echo(json.dumps({"changed": report.changed_files,
                                           "deleted": report.deleted_files,
                                           "embedded": report.embedded}, ensure_ascii=False), err=True)
                queued = queue_overloaded(v, report.changed_files, "watch")
                if queued:
                    click.echo(json.dumps({"split_queued": [q["path"] for q in queued]},
                                          ensure_ascii=False), err=True)
                    if worker is not None:
                        worker.wake()

            with VaultWatcher(v.root, on_change, debounce=debounce):
                deadline = time.monotonic() + seconds if seconds else None
                try:
                    while deadline is None or time.monotonic() < deadline:
                        time.sleep(0.2)
                except KeyboardInterrupt:
                    pass  # Ctrl-C or SIGTERM: the normal way to stop
    finally:
        if server is not None:
            server.close()
        v.close()  # writes the cold-open snapshot the path-limited runs postponed


@click.command("demo")
@common
@click.option("--fresh", is_flag=True, help="Rebuild the demo vault from the shipped samples.")
@no_progress_option
def demo(c: Ctx, fresh: bool, no_progress: bool) -> None:
    """Build the bilingual sample vault, index it and run a few searches.

    With --json, one JSON document: the vault, the index run and each query's results.

    \b
    Example:
      reme-agent demo --vault ./demo-vault
      reme-agent demo --json
    """
    from reme_agent.demo import run_demo

    path = Path(c.vault_arg) if c.vault_arg else Path("demo-vault")
    settings = c.settings()
    data = run_demo(path, settings, fresh=fresh, echo=None if c.as_json else click.echo,
                    progress=c.progress(no_progress, settings))
    if c.as_json:
        c.emit(data)


@click.command("config")
@common
@click.option("--reference", is_flag=True, help="Print the full reference (configs/default.yaml).")
def config(c: Ctx, reference: bool) -> None:
    """Show the effective configuration, or the generated reference of every key.

    \b
    Example:
      reme-agent config --config configs/local.yaml --json
      reme-agent config --reference > configs/default.yaml
    """
    import yaml

    from reme_agent.config import reference_yaml

    if reference:
        click.echo(reference_yaml(), nl=False)
        return
    data = c.settings().model_dump(mode="json")
    c.emit(data, yaml.safe_dump(data, allow_unicode=True, sort_keys=False))
