"""`reme-agent export-agents`: write the expert tier's subagent definitions for a host."""

from __future__ import annotations

from pathlib import Path

import click

from reme_agent.cli.context import Ctx, common


@click.command("export-agents")
@common
@click.option("--target", type=click.Choice(["claude-code", "generic"]), required=True,
              help="claude-code: .claude/agents/*.md + .mcp.json; generic: reme-agents.json.")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Replace files that exist with other content.")
@click.option("--server-name", default="reme", show_default=True,
              help="Key of the server in .mcp.json; tools are named mcp__<key>__<tool>.")
@click.option("--command", "program", default=None, metavar="PATH",
              help="Program hosts run to start the server (default: this reme-agent).")
@click.option("--model", default=None, metavar="NAME",
              help="claude-code: the subagents' model (e.g. sonnet, haiku, inherit); default: "
                   "not set (the host's choice).")
@click.option("--language", type=click.Choice(["en", "zh"]), default=None,
              help="Language of the agents' prompts (default: jobs.language).")
def export_agents(c: Ctx, target: str, directory: Path, force: bool, server_name: str,
                  program: str | None, model: str | None, language: str | None) -> None:
    """Write the expert tier's subagents (reme-distiller, reme-curator) for an MCP host.

    Their system prompts come from the jobs' YAML prompts and the memory protocol; their
    tools are this server's MCP tools, served by `reme-agent mcp --tier expert` on the vault.
    Existing files with other content are refused unless --force; .mcp.json is merged (other
    servers kept).

    \b
    Example:
      reme-agent export-agents --target claude-code ~/code/myproject --vault ~/vault
      reme-agent export-agents --target generic ./agents --vault ~/vault --json
    """
    from reme_agent.agents_export import plan_export, write_planned
    from reme_agent.errors import VaultNotFound

    vault_dir = c.vault_path.resolve()
    if not vault_dir.is_dir():
        raise VaultNotFound(str(vault_dir))
    jobs = c.settings().jobs
    planned = plan_export(target, directory.expanduser().resolve(), vault_dir=vault_dir,
                          language=language or jobs.language,
                          split_tokens=jobs.split_token_threshold, configs=c.configs,
                          command=program, server=server_name, model=model)
    done = write_planned(planned, force=force)
    c.emit({"target": target, "files": done},
           "\n".join(f"{d['status']:<9} {d['path']}" for d in done))
