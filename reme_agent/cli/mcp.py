"""`reme-agent mcp`: serve one vault over MCP (stdio or streamable HTTP)."""

from __future__ import annotations

import click

from reme_agent.cli.context import Ctx, common, sigterm_stops, warm_option


@click.command("mcp")
@common
@click.option("--tier", type=click.Choice(["service", "expert"]), default="service",
              show_default=True, help="service = atomic tools + LLM jobs; expert = atomic tools only.")
@click.option("--transport", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP bind address.")
@click.option("--port", default=8765, show_default=True, help="HTTP port.")
@click.option("--token-env", default=None, metavar="NAME",
              help="Environment variable holding the bearer token (required off loopback).")
@click.option("--worker", "with_worker", is_flag=True,
              help="Also run the follow-up queue (auto-link L1; split with a model) on a thread, "
                   "as `watch --worker` does: what the distiller queues runs while you chat.")
@warm_option
def mcp(c: Ctx, tier: str, transport: str, host: str, port: int, token_env: str | None,
        with_worker: bool, warm: bool) -> None:
    """Serve the vault's tools over MCP (and, while it runs, `reme-agent search` and `hook`
    of other processes: see `reme-agent serve`).

    \b
    Example:
      reme-agent mcp --vault ./vault --tier expert
      reme-agent mcp --vault ./vault --worker
      REME_MCP_TOKEN=secret reme-agent mcp --transport http --host 0.0.0.0 --token-env REME_MCP_TOKEN
    """
    from reme_agent.mcp_server import resolve_token, serve

    if transport == "http":
        resolve_token(host, token_env)  # fail fast, before loading the vault
    from reme_agent.cli.warm import start_server

    v = c.open()
    server = start_server(v, c.configs) if warm else None  # stdout is the MCP channel
    if with_worker:
        from reme_agent.cli.worker import echo_err
        from reme_agent.jobs.followups import start_followup_worker

        start_followup_worker(v, echo=echo_err)   # on stderr; stopped by v.close()
    try:
        with sigterm_stops():
            serve(v, tier, "stdio" if transport == "stdio" else "http", host, port, token_env)
    except KeyboardInterrupt:
        pass  # Ctrl-C or SIGTERM is how a server is stopped: exit 0, as `serve` and `watch` do
    finally:
        if server is not None:
            server.close()
        v.close()
