"""`reme-agent serve`: keep one vault warm for `reme-agent search` and the hooks (G6).

A small long-running process: the vault's projections, the embedding model and jieba stay
loaded, and `reme-agent search` / `reme-agent hook` in other processes are answered over a
Unix socket in the vault's internal folder (cli/warm.py) instead of loading all of that each
time. `watch` and `mcp` serve the same way while they run; `serve` is for when neither does.
"""

from __future__ import annotations

import time

import click

from reme_agent.cli.context import Ctx, common, sigterm_stops


@click.command("serve")
@common
@click.option("--seconds", default=0.0, help="Stop after this many seconds (0 = until Ctrl-C).")
def serve(c: Ctx, seconds: float) -> None:
    """Answer `search` and `hook` commands from a warm process (Unix socket, this user only).

    \b
    Example:
      reme-agent serve --vault ./vault &
      reme-agent search "who owns the payment gateway" --vault ./vault   # answered warm
    """
    from reme_agent.cli.warm import start_server

    v = c.open()
    try:
        with sigterm_stops():  # SIGTERM stops it like Ctrl-C: the socket is removed
            warm_up(v)
            server = start_server(v, c.configs, echo=lambda m: click.echo(m, err=True))
            if server is None:
                raise click.ClickException(f"another process already serves {v.root} warm")
            try:
                deadline = time.monotonic() + seconds if seconds else None
                while deadline is None or time.monotonic() < deadline:
                    time.sleep(0.2)
            finally:
                server.close()
    except KeyboardInterrupt:
        pass  # Ctrl-C or SIGTERM (while warming up too): the normal way to stop, exit 0
    finally:
        v.close()


def warm_up(v: object) -> None:
    """Load what the first answer needs (projections, model, jieba, names) before serving."""
    v.ready()  # type: ignore[attr-defined]
    load = getattr(v.embedder, "load", None)  # type: ignore[attr-defined]
    if load is not None:
        load()
