"""`reme-agent init | index | watch | demo | config`: the vault itself and its configuration."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from reme_agent.cli.context import Ctx, common


@click.command("init")
@common
def init(c: Ctx) -> None:
    """Create a vault folder with the standard layout.

    \b
    Example:
      reme-agent init --vault ./vault
    """
    from reme_agent.schema.layout import init_layout

    v = c.open(create=True)
    try:
        made = init_layout(v.root)
    finally:
        v.close()
    c.emit({"vault": str(v.root), "created": made}, f"vault ready at {v.root}")


@click.command("index")
@common
@click.option("--full", is_flag=True, help="Drop the projections and rebuild them from the files.")
def index(c: Ctx, full: bool) -> None:
    """Index the vault: embed only new or changed blocks.

    The summary (or --json) goes to stdout; each skipped file or bad frontmatter is a
    warning on stderr (logged by the indexer), so piped output stays clean.

    \b
    Example:
      reme-agent index --vault ./vault --json
    """
    v = c.open()
    try:
        data = v.index(full=full).as_dict()
    finally:
        v.close()
    text = (f"{data['files']} files, {data['blocks']} blocks; embedded {data['embedded']}, "
            f"deleted {data['deleted']} in {data['seconds']} s")
    if data["skipped"] or data["errors"]:
        text += (f" ({len(data['skipped'])} skipped, {len(data['errors'])} with frontmatter "
                 "errors: see the warnings on stderr)")
    c.emit(data, text)


@click.command("watch")
@common
@click.option("--debounce", default=0.5, show_default=True, help="Seconds of quiet before re-indexing.")
@click.option("--seconds", default=0.0, help="Stop after this many seconds (0 = until Ctrl-C).")
def watch(c: Ctx, debounce: float, seconds: float) -> None:
    """Re-index whenever files in the vault change (edits in any editor show up in search).

    \b
    Example:
      reme-agent watch --vault ./vault
    """
    from reme_agent.engine.watcher import VaultWatcher

    v = c.open()
    try:
        first = v.index()
        click.echo(f"watching {v.root} ({first.files} files indexed); Ctrl-C to stop", err=True)

        def on_change(paths: list[str] | None) -> None:
            report = v.index() if paths is None else v.refresh(paths)
            if report.changed_files or report.deleted_files:
                click.echo(json.dumps({"changed": report.changed_files,
                                       "deleted": report.deleted_files,
                                       "embedded": report.embedded}, ensure_ascii=False), err=True)

        with VaultWatcher(v.root, on_change, debounce=debounce):
            deadline = time.monotonic() + seconds if seconds else None
            try:
                while deadline is None or time.monotonic() < deadline:
                    time.sleep(0.2)
            except KeyboardInterrupt:
                pass
    finally:
        v.close()  # writes the cold-open snapshot the path-limited runs postponed


@click.command("demo")
@common
@click.option("--fresh", is_flag=True, help="Rebuild the demo vault from the shipped samples.")
def demo(c: Ctx, fresh: bool) -> None:
    """Build the bilingual sample vault, index it and run a few searches.

    \b
    Example:
      reme-agent demo --vault ./demo-vault
    """
    from reme_agent.demo import run_demo

    path = Path(c.vault_arg) if c.vault_arg else Path("demo-vault")
    run_demo(path, c.settings(), fresh=fresh, echo=click.echo)


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
