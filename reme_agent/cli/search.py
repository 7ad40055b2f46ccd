"""`reme-agent search`: the `search` tool on the command line (DESIGN §7; STYLE §2).

The options are the search tool's own parameters (`toolkit/retrieve.py`: `--limit`,
`--path-prefix`, `--layers`, `--include-archived`, `--expand-depth`,
`--top-chunks-per-path`, `--query-rewrite`), and the answer is the tool's (`run_search`):
`reme-agent search --json` prints the same JSON as the tool through AgentScope, MCP or
`reme-agent tool search` (tests/test_faces_agree.py). Command-line extras: `--fusion` and
`--vector-weight` override the config for this run, `--no-log` skips the access log.

The options are declared here (names and types only) so that parsing a search imports no
toolkit: a warm process (cli/warm.py) answers without this process loading anything
heavy (G6). Their help comes from the tool's docstring when help is shown, and
tests/cli/test_search_options.py checks they are the options the tool's signature makes.
"""

from __future__ import annotations

from typing import Any

import click

from reme_agent.cli.context import Ctx, common
from reme_agent.cli.tools import list_values

TOOL_OPTIONS = [
    click.Option(["--limit", "limit"], type=int, default=None),
    click.Option(["--path-prefix", "path_prefix"], type=str, default=None),
    click.Option(["--layers", "layers"], multiple=True),
    click.Option(["--include-archived/--no-include-archived", "include_archived"],
                 default=False),
    click.Option(["--expand-depth", "expand_depth"], type=int, default=None),
    click.Option(["--top-chunks-per-path", "top_chunks_per_path"], type=int, default=None),
    click.Option(["--query-rewrite", "query_rewrite"], type=str, default=None),
]
"""The search tool's parameters after `query`, as `cli.tools._option` would make them (none
is a JSON kind, so a value is used as click parsed it, a tuple as a list, a JSON list among
its values as its items, as `cli.tools._value` reads them)."""


def _tool_options(fn: Any) -> Any:
    """Attach TOOL_OPTIONS to the command callback (click reads `__click_params__`)."""
    fn.__click_params__ = [*getattr(fn, "__click_params__", []), *reversed(TOOL_OPTIONS)]
    return fn


class _ToolOptionsCommand(click.Command):
    """The search command; its help shows the tool's own parameter descriptions."""

    def get_help(self, ctx: click.Context) -> str:
        from reme_agent.cli.tools import _option

        generated = {o.name: o for o in map(_option, _search_params())}
        self.params = [generated.get(p.name or "", p) for p in self.params]
        return super().get_help(ctx)


def _search_params() -> list[Any]:
    from reme_agent.toolkit.registry import get_tool

    return get_tool("search").params()[1:]   # after `query`, the positional argument


@click.command("search", cls=_ToolOptionsCommand)
@common
@click.argument("query")
@click.option("--fusion", type=click.Choice(["rrf", "blend"]), default=None,
              help="Fusion method for this run (default from config).")
@click.option("--vector-weight", type=click.FloatRange(0.0, 1.0), default=None,
              help="Weight of the vector side for this run (default from config).")
@click.option("--no-log", "no_log", is_flag=True, help="Do not record hits in the access log.")
@_tool_options
def search(c: Ctx, query: str, fusion: str | None, vector_weight: float | None, no_log: bool,
           **kwargs: Any) -> None:
    """Search the vault: names, relations and phrases first, then hybrid text relevance
    x graph, community, recency and layer factors. Results below the relevance floor are
    marked weak ("no good match").

    \b
    Example:
      reme-agent search "who owns the payment gateway" --limit 5
      reme-agent search "向量检索" --path-prefix knowledge/ --expand-depth 2 --json
    """
    update = {k: val for k, val in (("fusion", fusion), ("vector_weight", vector_weight))
              if val is not None}
    args = {k: [x for one in val for x in list_values(one)] if isinstance(val, tuple) else val
            for k, val in kwargs.items() if val is not None and val != ()}
    if not update and _warm(c, query, no_log, args):
        return
    from reme_agent.toolkit.retrieve import run_search

    v = c.open()
    try:
        if update:
            v.settings = v.settings.model_copy(
                update={"search": v.settings.search.model_copy(update=update)})
        result = run_search(v, query, **args, log_access=not no_log)
        c.emit(dict(result), result.text)
    finally:
        v.close()   # flushes the access log


def _warm(c: Ctx, query: str, no_log: bool, args: dict[str, Any]) -> bool:
    """Answer from the vault's warm process (`reme-agent serve`/`watch`/`mcp`) if one runs
    with the same settings (cli/warm.py); False: run in this process."""
    from reme_agent.cli.warm import SEARCH_TIMEOUT, ask

    answer = ask(c.vault_path, "search", {"query": query, **args, "log_access": not no_log},
                 c.configs, answer_timeout=SEARCH_TIMEOUT)
    if answer is None or (not answer["ok"] and answer.get("kind") != "ReMeError"):
        return False   # nobody answered, or a bug over there: the in-process answer decides
    if not answer["ok"]:
        raise click.ClickException(answer["error"])
    c.emit(answer["data"], answer["text"])
    return True
