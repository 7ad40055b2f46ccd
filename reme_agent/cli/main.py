"""`reme-agent`: the root group, the one table of commands, and the exit codes.

Exit codes (README "Command line"):

    0    ok
    1    the command failed: a ReMeError (no vault, bad config value, no model, a refused
         write, ...) printed as one line `Error: <message>` on stderr, or a failure the command
         reports itself (a job that stopped on an error, `lint --strict` with findings)
    2    usage error: unknown command or option, missing argument, bad option value (click)
    3    internal error (a bug): `Error: internal error: <type>: <message>`; REME_DEBUG=1
         adds the traceback
    130  interrupted (Ctrl-C)

ReMeError is converted once, in `ReMeGroup.invoke`, so `main()` and click's test runner see the
same `Error:` line; `main()` turns what click raises into the codes above. Every command is
listed in `COMMANDS`; no module registers anything by being imported. The command modules
import their heavy dependencies inside the command bodies, so `reme-agent --help` stays fast.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from typing import Any

import click

from reme_agent.cli import (
    autolink,
    bench,
    evals,
    export,
    jobs,
    maintain,
    mcp,
    search,
    serve,
    tools,
    vault_cmds,
    worker,
)
from reme_agent.cli.context import Ctx, shared_options
from reme_agent.errors import ReMeError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class ReMeGroup(click.Group):
    """The root group: the single place where a ReMeError becomes click's one-line error."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ReMeError as exc:
            raise click.ClickException(str(exc)) from exc


@click.group(cls=ReMeGroup, context_settings={"help_option_names": ["-h", "--help"]})
@shared_options
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
    ctx.obj = Ctx(vault, configs, as_json)


COMMANDS: tuple[click.Command, ...] = (
    # the vault and its configuration
    vault_cmds.init, vault_cmds.index, vault_cmds.watch, vault_cmds.demo, vault_cmds.config,
    # recall and the atomic tools
    search.search, tools.tools_cmd, tools.read_cmd, tools.traverse_cmd, tools.lint_cmd,
    tools.tool_group,
    # LLM jobs and host hooks
    jobs.sync_cmd, jobs.distill_cmd, jobs.hook_cmd,
    # maintenance, auto-link and the follow-up queue
    maintain.maintain, autolink.autolink, worker.worker,
    # serving (MCP; the warm process for search and hooks), and subagents for hosts
    mcp.mcp, serve.serve, export.export_agents,
    # measuring (need the source checkout)
    bench.bench, evals.eval_cmd,
)
"""Every `reme-agent` command, grouped by family; nothing else registers any."""

for _command in COMMANDS:
    cli.add_command(_command)


def main(argv: list[str] | None = None) -> int:
    """Console entry point: run the command and return the documented exit code."""
    try:
        result = cli.main(args=argv, prog_name="reme-agent", standalone_mode=False)
    except click.UsageError as exc:
        exc.show()
        return EXIT_USAGE
    except click.ClickException as exc:
        exc.show()
        return EXIT_FAILED
    except click.exceptions.Abort:
        click.echo("Aborted!", err=True)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:  # a bug: one line, the traceback only with REME_DEBUG=1
        if os.environ.get("REME_DEBUG", "0") not in ("", "0"):
            traceback.print_exc()
        click.echo(f"Error: internal error: {type(exc).__name__}: {exc} "
                   "(set REME_DEBUG=1 for the traceback)", err=True)
        return EXIT_INTERNAL
    # standalone_mode=False returns a ctx.exit(code) / click.exceptions.Exit code as the result
    return result if isinstance(result, int) else EXIT_OK
