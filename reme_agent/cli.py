"""`reme-agent` command line: a composition root that reads Settings and calls the API.

Exit codes: 0 ok, 1 user error (a ReMeError: one clear line on stderr), 2 internal error.
Heavy imports (chromadb, agentscope) happen inside the commands that need them, so
`reme-agent --help` stays fast.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import click

from reme_agent.config import Settings, load_settings
from reme_agent.errors import ReMeError


class _Ctx:
    def __init__(self, vault: str | None, configs: tuple[str, ...], as_json: bool) -> None:
        self.vault_arg = vault
        self.configs = [Path(c) for c in configs]
        self.as_json = as_json

    @property
    def vault_path(self) -> Path:
        return Path(self.vault_arg or os.environ.get("REME_VAULT") or "./vault")

    def settings(self, **overrides: Any) -> Settings:
        return load_settings(self.configs, vault=self.vault_path, overrides=overrides)

    def open(self, create: bool = False, **overrides: Any) -> Any:
        from reme_agent.vault import open_vault

        return open_vault(self.vault_path, self.settings(**overrides), create=create)

    def emit(self, data: Any, text: str | None = None) -> None:
        if self.as_json or text is None:
            click.echo(json.dumps(data, ensure_ascii=False, indent=2, default=str))
        else:
            click.echo(text)


vault_option = click.option("--vault", "vault", default=None, metavar="PATH",
                            help="Vault folder (default: $REME_VAULT or ./vault).")
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")
config_option = click.option("--config", "configs", multiple=True, metavar="FILE",
                             help="YAML config file(s), e.g. configs/default.yaml.")


def _common(fn: Any) -> Any:
    """Accept --vault/--json/--config on every subcommand as well as before it."""
    fn = vault_option(json_option(config_option(fn)))
    return fn


def _ctx(obj: _Ctx, vault: str | None, as_json: bool, configs: tuple[str, ...]) -> _Ctx:
    return _Ctx(vault or obj.vault_arg, tuple(obj.configs) + configs, as_json or obj.as_json)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@vault_option
@json_option
@config_option
@click.option("-v", "--verbose", is_flag=True, help="Log progress and warnings.")
@click.pass_context
def cli(ctx: click.Context, vault: str | None, as_json: bool, configs: tuple[str, ...],
        verbose: bool) -> None:
    """reme-agent: long-term Markdown memory for AgentScope agents.

    \b
    Example:
      reme-agent init --vault ./vault
      reme-agent index --vault ./vault
      reme-agent search "how do we rotate JWT keys" --vault ./vault
    """
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    ctx.obj = _Ctx(vault, configs, as_json)


@cli.command()
@_common
@click.pass_obj
def init(obj: _Ctx, vault: str | None, as_json: bool, configs: tuple[str, ...]) -> None:
    """Create a vault folder with the standard layout.

    \b
    Example:
      reme-agent init --vault ./vault
    """
    from reme_agent.schema.layout import init_layout

    c = _ctx(obj, vault, as_json, configs)
    v = c.open(create=True)
    made = init_layout(v.root)
    c.emit({"vault": str(v.root), "created": made}, f"vault ready at {v.root}")


@cli.command()
@_common
@click.option("--full", is_flag=True, help="Drop the projections and rebuild them from the files.")
@click.pass_obj
def index(obj: _Ctx, vault: str | None, as_json: bool, configs: tuple[str, ...], full: bool) -> None:
    """Index the vault: embed only new or changed blocks.

    \b
    Example:
      reme-agent index --vault ./vault --json
    """
    c = _ctx(obj, vault, as_json, configs)
    v = c.open()
    report = v.index(full=full)
    data = report.as_dict()
    text = (f"{data['files']} files, {data['blocks']} blocks; embedded {data['embedded']}, "
            f"deleted {data['deleted']} in {data['seconds']} s")
    for skip in data["skipped"]:
        text += f"\n  skipped {skip['path']}: {skip['reason']}"
    for err in data["errors"]:
        text += f"\n  {err['message']}"
    c.emit(data, text)


@cli.command()
@_common
@click.argument("query")
@click.option("--limit", default=10, show_default=True, help="Number of results.")
@click.option("--fusion", type=click.Choice(["rrf", "blend"]), default=None,
              help="Fusion method (default from config).")
@click.option("--vector-weight", type=float, default=None, help="Weight of the vector side.")
@click.option("--prefix", default=None, help="Only paths under this prefix, e.g. knowledge/.")
@click.option("--query-rewrite", default=None, help="Alternative wording for the vector side.")
@click.pass_obj
def search(obj: _Ctx, vault: str | None, as_json: bool, configs: tuple[str, ...], query: str,
           limit: int, fusion: str | None, vector_weight: float | None, prefix: str | None,
           query_rewrite: str | None) -> None:
    """Hybrid search (vector + BM25) over the vault.

    \b
    Example:
      reme-agent search "向量检索" --limit 5 --json
    """
    from reme_agent.recall.search import hit_dict, search_blocks

    c = _ctx(obj, vault, as_json, configs)
    v = c.open()
    hits = search_blocks(v, query, limit, fusion=fusion, vector_weight=vector_weight,
                         prefix=prefix, query_rewrite=query_rewrite)
    results = [hit_dict(h) for h in hits]
    lines = [f"{i}. {r['path']}:{r['start_line']}-{r['end_line']}  score={r['score']:.4f}\n   "
             + r["text"].strip().replace("\n", " ")[:160] for i, r in enumerate(results, 1)]
    c.emit({"query": query, "results": results}, "\n".join(lines) or "no results")


@cli.command()
@_common
@click.option("--debounce", default=0.5, show_default=True, help="Seconds of quiet before re-indexing.")
@click.option("--seconds", default=0.0, help="Stop after this many seconds (0 = until Ctrl-C).")
@click.pass_obj
def watch(obj: _Ctx, vault: str | None, as_json: bool, configs: tuple[str, ...], debounce: float,
          seconds: float) -> None:
    """Re-index whenever files in the vault change (edits in any editor show up in search).

    \b
    Example:
      reme-agent watch --vault ./vault
    """
    from reme_agent.engine.watcher import VaultWatcher

    c = _ctx(obj, vault, as_json, configs)
    v = c.open()
    first = v.index()
    click.echo(f"watching {v.root} ({first.files} files indexed); Ctrl-C to stop", err=True)

    def on_change(paths: list[str] | None) -> None:
        report = v.index() if paths is None else v.refresh(paths)
        if report.changed_files or report.deleted_files:
            click.echo(json.dumps({"changed": report.changed_files, "deleted": report.deleted_files,
                                   "embedded": report.embedded}, ensure_ascii=False), err=True)

    try:
        with VaultWatcher(v.root, on_change, debounce=debounce):
            deadline = time.monotonic() + seconds if seconds else None
            try:
                while deadline is None or time.monotonic() < deadline:
                    time.sleep(0.2)
            except KeyboardInterrupt:
                pass
    finally:
        v.close()  # writes the cold-open snapshot the path-limited runs postponed


@cli.command()
@_common
@click.option("--fresh", is_flag=True, help="Rebuild the demo vault from the shipped samples.")
@click.pass_obj
def demo(obj: _Ctx, vault: str | None, as_json: bool, configs: tuple[str, ...], fresh: bool) -> None:
    """Build the bilingual sample vault, index it and run a few searches.

    \b
    Example:
      reme-agent demo --vault ./demo-vault
    """
    from reme_agent.demo import run_demo

    c = _ctx(obj, vault, as_json, configs)
    path = Path(c.vault_arg) if c.vault_arg else Path("demo-vault")
    run_demo(path, c.settings(), fresh=fresh, echo=click.echo)


@cli.command("config")
@_common
@click.option("--reference", is_flag=True, help="Print the full reference (configs/default.yaml).")
@click.pass_obj
def config_cmd(obj: _Ctx, vault: str | None, as_json: bool, configs: tuple[str, ...],
               reference: bool) -> None:
    """Show the effective configuration, or the generated reference of every key.

    \b
    Example:
      reme-agent config --config configs/local.yaml --json
      reme-agent config --reference > configs/default.yaml
    """
    from reme_agent.config import reference_yaml

    c = _ctx(obj, vault, as_json, configs)
    if reference:
        click.echo(reference_yaml(), nl=False)
        return
    data = c.settings().model_dump(mode="json")
    import yaml

    c.emit(data, yaml.safe_dump(data, allow_unicode=True, sort_keys=False))


# Feature packages add their own commands to `cli` in these modules (one module per family),
# so each face stays a thin layer over its package.
_COMMAND_MODULES = ("reme_agent.toolkit.cli", "reme_agent.recall.cli", "reme_agent.jobs.cli",
                    "reme_agent.maintenance.cli", "reme_agent.autolink.cli", "reme_agent.mcp_cli",
                    "reme_agent.bench_cli", "evals.cli")


def _load_command_modules() -> None:
    import importlib

    for name in _COMMAND_MODULES:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            missing = exc.name or ""
            if not (name == missing or name.startswith(missing + ".")):
                raise


_load_command_modules()


def main(argv: list[str] | None = None) -> int:
    """Console entry point with the documented exit codes."""
    try:
        cli.main(args=argv, prog_name="reme-agent", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 1
    except click.ClickException as exc:
        exc.show()
        return 1
    except ReMeError as exc:
        click.echo(f"error: {exc}", err=True)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # internal error: one line, details only with REME_DEBUG=1
        if os.environ.get("REME_DEBUG"):
            raise
        click.echo(f"internal error: {type(exc).__name__}: {exc} (set REME_DEBUG=1 for details)",
                   err=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
