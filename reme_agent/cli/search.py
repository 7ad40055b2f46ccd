"""`reme-agent search`: the `search` tool on the command line (DESIGN §7; STYLE §2).

The options are the search tool's own parameters (`toolkit/retrieve.py`: `--limit`,
`--path-prefix`, `--layers`, `--include-archived`, `--expand-depth`,
`--top-chunks-per-path`, `--query-rewrite`), made by looping over its signature and
docstring, and the answer is the tool's (`run_search`): `reme-agent search --json` prints
the same JSON as the tool through AgentScope, MCP or `reme-agent tool search`
(tests/test_faces_agree.py). Command-line extras: `--fusion` and `--vector-weight` override
the config for this run, `--no-log` skips the access log.
"""

from __future__ import annotations

from typing import Any

import click

from reme_agent.cli.context import Ctx, common


class _ToolOptionsCommand(click.Command):
    """Adds the search tool's parameters as options when they are first needed (parsing or
    this command's help), so `reme-agent --help` does not import the toolkit."""

    _added = False

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        if not self._added:
            from reme_agent.cli.tools import _option

            self.params.extend(_option(p) for p in _search_params())
            self._added = True
        return super().get_params(ctx)


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
    from reme_agent.cli.tools import _value
    from reme_agent.toolkit.retrieve import run_search

    update = {k: val for k, val in (("fusion", fusion), ("vector_weight", vector_weight))
              if val is not None}
    v = c.open()
    try:
        if update:
            v.settings = v.settings.model_copy(
                update={"search": v.settings.search.model_copy(update=update)})
        args = {p.name: _value(p, kwargs[p.name]) for p in _search_params()
                if kwargs.get(p.name) is not None and kwargs.get(p.name) != ()}
        result = run_search(v, query, **args, log_access=not no_log)
        c.emit(dict(result), result.text)
    finally:
        v.close()   # flushes the access log
