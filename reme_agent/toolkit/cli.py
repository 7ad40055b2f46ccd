"""Face 3: the tools on the command line (`reme-agent tools|tool|read|traverse|lint`).

`reme-agent tool <name> --arg value ... [--json]` reaches every tool: its options are derived
from the same signature + docstring the model sees (lists repeat the option, objects take
JSON). A ReMeError becomes one line on stderr and exit code 1. `reme_agent.cli` imports this
module, so the commands register themselves on its group.
"""

from __future__ import annotations

import functools
import inspect
import json
import types
from collections.abc import Callable
from typing import Annotated, Any, Union, get_args, get_origin

import click

from reme_agent.cli import _common, _Ctx, _ctx, cli
from reme_agent.errors import ReMeError


def _clean_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """ReMeError -> click's one-line 'Error: ...' on stderr, exit code 1."""
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ReMeError as exc:
            raise click.ClickException(str(exc)) from exc
    return run


def _run_tool(c: _Ctx, name: str, **kwargs: Any) -> dict[str, Any]:
    from reme_agent.toolkit.registry import get_tool

    spec = get_tool(name)
    vault = c.open()
    try:
        result = spec.fn(vault, **kwargs)
    finally:
        vault.close()
    c.emit(dict(result), getattr(result, "text", None))
    return dict(result)


# -- listing ------------------------------------------------------------------------------
@cli.command("tools")
@_common
@click.pass_obj
@_clean_errors
def tools_cmd(obj: _Ctx, vault: str | None, as_json: bool, configs: tuple[str, ...]) -> None:
    """List the memory tools with their groups, flags and JSON schemas.

    \b
    Example:
      reme-agent tools --json
    """
    from reme_agent.toolkit.registry import TOOLS

    c = _ctx(obj, vault, as_json, configs)
    data = [{"name": s.name, "group": s.group, "read_only": s.read_only,
             "destructive": s.destructive, "description": s.description,
             "parameters": s.input_schema()} for s in TOOLS]
    text = "\n".join(f"{d['name']:<16} {d['group']:<9} "
                     f"{'read' if d['read_only'] else 'write!' if d['destructive'] else 'write':<7}"
                     f"{d['description'].splitlines()[0]}" for d in data)
    c.emit({"tools": data}, text)


# -- convenience commands -----------------------------------------------------------------
@cli.command("read")
@_common
@click.argument("path")
@click.option("--start", "start_line", type=int, default=None, help="First line (1-based).")
@click.option("--end", "end_line", type=int, default=None, help="Last line (inclusive).")
@click.pass_obj
@_clean_errors
def read_cmd(obj: _Ctx, vault: str | None, as_json: bool, configs: tuple[str, ...], path: str,
             start_line: int | None, end_line: int | None) -> None:
    """Print a note (or a line range) with its stamp.

    \b
    Example:
      reme-agent read knowledge/bm25/bm25.md --start 1 --end 20
    """
    _run_tool(_ctx(obj, vault, as_json, configs), "read", path=path, start_line=start_line,
              end_line=end_line)


@cli.command("traverse")
@_common
@click.argument("paths", nargs=-1, required=True)
@click.option("--direction", type=click.Choice(["out", "in", "both"]), default="out",
              show_default=True, help="Follow links, backlinks, or both.")
@click.option("--depth", type=int, default=1, show_default=True, help="Hops to walk (1-5).")
@click.option("--predicate", "predicates", multiple=True,
              help="Only links with this predicate (repeatable; '' = bare links).")
@click.pass_obj
@_clean_errors
def traverse_cmd(obj: _Ctx, vault: str | None, as_json: bool, configs: tuple[str, ...],
                 paths: tuple[str, ...], direction: str, depth: int,
                 predicates: tuple[str, ...]) -> None:
    """Walk the link graph from one or more notes.

    \b
    Example:
      reme-agent traverse knowledge/bm25/bm25.md --direction both --depth 2
    """
    _run_tool(_ctx(obj, vault, as_json, configs), "graph_traverse", seeds=list(paths),
              direction=direction, depth=depth, predicates=list(predicates) or None)


@cli.command("lint")
@_common
@click.option("--folder", default="", help="Only check notes under this folder.")
@click.option("--strict", is_flag=True, help="Exit with code 1 when anything is reported.")
@click.pass_obj
@_clean_errors
def lint_cmd(obj: _Ctx, vault: str | None, as_json: bool, configs: tuple[str, ...],
             folder: str, strict: bool) -> None:
    """Report dangling links, orphans, name collisions and schema problems (never rewrites).

    \b
    Example:
      reme-agent lint --json
    """
    from reme_agent.toolkit import lint

    c = _ctx(obj, vault, as_json, configs)
    v = c.open()
    try:
        results = {"dangling": lint.lint_dangling(v, folder=folder),
                   "orphans": lint.lint_orphans(v, folder=folder or "knowledge"),
                   "collisions": lint.lint_collisions(v, folder=folder),
                   "schema": lint.lint_schema(v, folder=folder)}
    finally:
        v.close()
    c.emit({k: dict(r) for k, r in results.items()},
           "\n\n".join(f"== {k} ==\n{r.text}" for k, r in results.items()))
    if strict and any(r["count"] for r in results.values()):
        raise click.exceptions.Exit(1)


# -- every tool: `reme-agent tool <name> --arg ...` ----------------------------------------
class _ToolGroup(click.Group):
    """Subcommands built from the registry on demand (keeps `reme-agent --help` fast)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        from reme_agent.toolkit.registry import TOOLS

        return [s.name for s in TOOLS]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        from reme_agent.toolkit.registry import BY_NAME

        spec = BY_NAME.get(name)
        return _command_for(spec) if spec else None


@cli.group("tool", cls=_ToolGroup)
def tool_group() -> None:
    """Run any memory tool: reme-agent tool <name> --arg value ... [--json].

    \b
    Example:
      reme-agent tool list --folder knowledge --where '{"role": "method"}' --json
      reme-agent tool property_update --path knowledge/bm25/bm25.md --properties '{"importance": 7}'
    """


def _command_for(spec: Any) -> click.Command:
    params = spec.params()

    @_clean_errors
    def callback(vault: str | None, as_json: bool, configs: tuple[str, ...], **kwargs: Any) -> None:
        obj = click.get_current_context().find_object(_Ctx) or _Ctx(None, (), False)
        args = {p.name: _value(p, kwargs[p.name]) for p in params
                if kwargs.get(p.name) is not None and kwargs.get(p.name) != ()}
        _run_tool(_ctx(obj, vault, as_json, configs), spec.name, **args)

    options = [_option(p) for p in params]
    cmd = click.Command(spec.name, callback=callback, params=options,
                        help=spec.description, short_help=spec.description.splitlines()[0])
    return _common(cmd)


def _base(annotation: Any) -> tuple[Any, str]:
    """(inner type, CLI kind): 'bool', 'choice', 'list', 'json' or 'scalar'."""
    hint = get_args(annotation)[0] if get_origin(annotation) is Annotated else annotation
    options = [a for a in get_args(hint) if a is not type(None)] \
        if get_origin(hint) in (Union, types.UnionType) else [hint]
    if any(get_origin(o) is list for o in options):
        return str, "list"
    hint = options[0] if len(options) == 1 else hint
    if hint is bool:
        return bool, "bool"
    if get_args(hint) and all(isinstance(a, str) for a in get_args(hint)) and get_origin(hint) is not dict:
        return click.Choice(list(get_args(hint))), "choice"
    if hint in (str, int, float):
        return hint, "scalar"
    return str, "json"


def _option(p: inspect.Parameter) -> click.Option:
    kind_type, kind = _base(p.annotation)
    flag = "--" + p.name.replace("_", "-")
    required = p.default is inspect.Parameter.empty
    desc = get_args(p.annotation)[1].description if get_origin(p.annotation) is Annotated else ""
    if kind == "bool":
        return click.Option([f"{flag}/--no-{p.name.replace('_', '-')}", p.name],
                            required=required, help=desc,
                            **({} if required else {"default": p.default}))
    if kind == "list":
        return click.Option([flag, p.name], multiple=True, required=required,
                            help=desc + " (repeat the option for several values)")
    extra = {} if required else {"default": None}  # an explicit default satisfies `required`
    return click.Option([flag, p.name], type=kind_type, required=required,
                        help=desc + (" (JSON)" if kind == "json" else ""), **extra)


def _value(p: inspect.Parameter, raw: Any) -> Any:
    if _base(p.annotation)[1] == "json" and isinstance(raw, str):
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw
    if isinstance(raw, tuple):
        return list(raw)
    return raw
