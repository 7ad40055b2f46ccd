"""Face 3: the tools on the command line (`reme-agent tools|tool|read|traverse|lint`).

`reme-agent tool <name> --arg value ... [--json]` reaches every tool: its options are derived
from the same signature + docstring the model sees (lists repeat the option, objects take
JSON). Errors are converted once, by the root group (`reme_agent.cli.main`).
"""

from __future__ import annotations

import inspect
import json
import types
from typing import Annotated, Any, Union, get_args, get_origin

import click

from reme_agent.cli.context import Ctx, common, shared_option_objects, with_ctx


def _run_tool(c: Ctx, name: str, **kwargs: Any) -> dict[str, Any]:
    from reme_agent.toolkit.actor import acting_as
    from reme_agent.toolkit.registry import get_tool

    spec = get_tool(name)
    vault = c.open()
    try:
        with acting_as("cli"):
            result = spec.fn(vault, **kwargs)
    finally:
        vault.close()
    c.emit(dict(result), getattr(result, "text", None))
    return dict(result)


# -- listing ------------------------------------------------------------------------------
@click.command("tools")
@common
def tools_cmd(c: Ctx) -> None:
    """List the memory tools with their groups, flags and JSON schemas.

    \b
    Example:
      reme-agent tools --json
    """
    from reme_agent.toolkit.registry import TOOLS

    data = [{"name": s.name, "group": s.group, "read_only": s.read_only,
             "destructive": s.destructive, "description": s.description,
             "parameters": s.input_schema()} for s in TOOLS]
    text = "\n".join(f"{d['name']:<16} {d['group']:<9} "
                     f"{'read' if d['read_only'] else 'write!' if d['destructive'] else 'write':<7}"
                     f"{d['description'].splitlines()[0]}" for d in data)
    c.emit({"tools": data}, text)


# -- convenience commands -----------------------------------------------------------------
@click.command("read")
@common
@click.argument("path")
@click.option("--start", "start_line", type=int, default=None, help="First line (1-based).")
@click.option("--end", "end_line", type=int, default=None, help="Last line (inclusive).")
def read_cmd(c: Ctx, path: str, start_line: int | None, end_line: int | None) -> None:
    """Print a note (or a line range) with its stamp.

    \b
    Example:
      reme-agent read knowledge/bm25/bm25.md --start 1 --end 20
    """
    _run_tool(c, "read", path=path, start_line=start_line, end_line=end_line)


@click.command("traverse")
@common
@click.argument("paths", nargs=-1, required=True)
@click.option("--direction", type=click.Choice(["out", "in", "both"]), default="out",
              show_default=True, help="Follow links, backlinks, or both.")
@click.option("--depth", type=int, default=1, show_default=True, help="Hops to walk (1-5).")
@click.option("--predicate", "predicates", multiple=True,
              help="Only links with this predicate (repeatable; '' = bare links).")
@click.option("--exclude-archived/--include-archived", "exclude_archived", default=True,
              show_default=True,
              help="Skip archived notes (status: archived), as the graph_traverse tool does.")
def traverse_cmd(c: Ctx, paths: tuple[str, ...], direction: str, depth: int,
                 predicates: tuple[str, ...], exclude_archived: bool) -> None:
    """Walk the link graph from one or more notes (archived notes left out unless
    --include-archived).

    \b
    Example:
      reme-agent traverse knowledge/bm25/bm25.md --direction both --depth 2
      reme-agent traverse knowledge/bm25/bm25.md --direction in --include-archived
    """
    _run_tool(c, "graph_traverse", seeds=list(paths), direction=direction, depth=depth,
              predicates=list(predicates) or None, include_archived=not exclude_archived)


@click.command("lint")
@common
@click.option("--folder", default="", help="Only check notes under this folder.")
@click.option("--strict", is_flag=True, help="Exit with code 1 when anything is reported.")
@click.option("--fix", is_flag=True, help="Apply the safe fixes first (see above), then report.")
def lint_cmd(c: Ctx, folder: str, strict: bool, fix: bool) -> None:
    """Report dangling links, orphans, name collisions, links Obsidian cannot resolve, links
    to merged notes and schema problems (schema strictness per folder: the lint.strictness
    setting).

    --fix applies only fixes that are safe and reversible: a link that resolves here only
    through an alias, a title or a folder note ([[Wang Fang]]) is rewritten to name its file
    and keep its text as shown text ([[王芳|Wang Fang]]): same target, same sentence, and
    Obsidian resolves it too. A link naming a note that was merged away ([[LLM]], reaching
    the kept note through its merge record) is rewritten to name the kept note
    ([[large-language-model|LLM]]). Nothing else is changed (a missing key or a dangling
    link needs a person's choice).

    \b
    Example:
      reme-agent lint --json
      reme-agent lint --fix --strict
    """
    from reme_agent.toolkit import lint

    v = c.open()
    try:
        fixed = _fix_links(v, folder) if fix else None
        results = {"dangling": lint.lint_dangling(v, folder=folder),
                   "orphans": lint.lint_orphans(v, folder=folder or "knowledge"),
                   "collisions": lint.lint_collisions(v, folder=folder),
                   "alias_links": lint.lint_alias_links(v, folder=folder),
                   "redirect_links": lint.lint_redirect_links(v, folder=folder),
                   "schema": lint.lint_schema(v, folder=folder)}
    finally:
        v.close()
    data = {k: dict(r) for k, r in results.items()}
    text = "\n\n".join(f"== {k} ==\n{r.text}" for k, r in results.items())
    if fixed is not None:
        data["fixed"] = dict(fixed)
        text = f"== fixed ==\n{fixed.text}\n\n{text}"
    c.emit(data, text)
    if strict and any(r["count"] for r in results.values()):
        raise click.exceptions.Exit(1)


def _fix_links(vault: Any, folder: str) -> Any:
    """Both safe link fixes, as one answer: redirect links first (a link through a merge
    redirect is never also an alias link), then alias links."""
    from reme_agent.toolkit import lint
    from reme_agent.toolkit.results import ToolResult

    done = [lint.fix_redirect_links(vault, folder=folder), lint.fix_alias_links(vault, folder=folder)]
    files: dict[str, int] = {}
    for result in done:
        for f in result["files"]:
            files[f["path"]] = files.get(f["path"], 0) + f["links"]
    data = {"count": sum(r["count"] for r in done),
            "files": [{"path": p, "links": n} for p, n in sorted(files.items())]}
    text = f"Fixed {data['count']} link(s) in {len(files)} file(s)" + "".join(
        f"\n  {p} ({n})" for p, n in sorted(files.items()))
    return ToolResult(data, text)


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


@click.group("tool", cls=_ToolGroup)
def tool_group() -> None:
    """Run any memory tool: reme-agent tool <name> --arg value ... [--json].

    \b
    Example:
      reme-agent tool list --folder knowledge --where '{"role": "method"}' --json
      reme-agent tool property_update --path knowledge/bm25/bm25.md --properties '{"importance": 7}'
    """


FORCE_TARGET = {"write": "path", "copy": "dst"}
"""Tools whose overwrite needs the stamp of a read, and the argument naming the file."""


def _command_for(spec: Any) -> click.Command:
    params = spec.params()

    @with_ctx
    def callback(c: Ctx, force: bool = False, **kwargs: Any) -> None:
        args = {p.name: _value(p, kwargs[p.name]) for p in params
                if kwargs.get(p.name) is not None and kwargs.get(p.name) != ()}
        if force:
            _force(c, spec.name, args)
        _run_tool(c, spec.name, **args)

    options = [*(_option(p) for p in params), *shared_option_objects()]
    if spec.name in FORCE_TARGET:
        options.append(click.Option(
            ["--force"], is_flag=True, default=False,
            help="Replace an existing file without reading it first (a person's choice at "
                 "the command line; recorded in audit/<date>/forced.md). Links must still be "
                 "kept (E-1)."))
    return click.Command(spec.name, callback=callback, params=options,
                         help=spec.description, short_help=spec.description.splitlines()[0])


def _force(c: Ctx, name: str, args: dict[str, Any]) -> None:
    """`--force`: overwrite with the file's current stamp, as the person at the terminal
    asked, and audit it; agents have no such option (they must read first)."""
    from reme_agent.schema.audit import append_audit

    target = args.get(FORCE_TARGET[name])
    if not target or args.get("stamp"):
        return
    vault = c.open()
    try:
        stamp = vault.store.stamp(vault.store.normalize(target))
        if stamp is None:
            return
        args["overwrite"] = True
        args["stamp"] = stamp
        append_audit(vault, "forced", f"cli: {name} {target}",
                     f"- tool: `{name}`\n- path: `{target}`\n- replaced stamp: {stamp}\n"
                     "- by: cli (`--force`, without a read)")
    finally:
        vault.close()


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
                            help=desc + " (repeat the option for several values, or pass "
                                 "a JSON list)")
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
        return [item for value in raw for item in list_values(value)]
    return raw


def list_values(value: Any) -> list[Any]:
    """One value of a repeatable option; a JSON list counts as its items, as the tool's
    description (written for models) shows them: --seeds '["a.md", "b.md"]'."""
    if isinstance(value, str) and value.lstrip().startswith("["):
        try:
            items = json.loads(value)
        except json.JSONDecodeError:
            return [value]  # a name that starts with "[" stays a name
        if isinstance(items, list) and all(isinstance(i, str) for i in items):
            return items
    return [value]
