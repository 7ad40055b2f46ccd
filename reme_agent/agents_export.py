"""`export-agents`: the expert tier's subagents, reme-distiller and reme-curator, for MCP hosts.

Seed architecture L2: in the expert tier the host's model runs the jobs, as subagents whose
only actions are this server's atomic tools. Each agent's system prompt is the host prompt of
its job (jobs/host.py: the job YAML with {protocol} filled, then the host note), rendered once
for a standing definition: {today} and {hint} get the `unbound` phrases of prompts/host.yaml.

Targets:
- `claude-code`: `<dir>/.claude/agents/<name>.md` (YAML frontmatter `name`, `description`,
  `tools` = the MCP tool names as Claude Code exposes them, `mcp__<server>__<tool>`, optional
  `model`; the body is the system prompt) and `<dir>/.mcp.json` with the server under
  `mcpServers.<server>`, merged into an existing file (its other keys and servers kept).
- `generic`: `<dir>/reme-agents.json`: the server command and, per agent, its description,
  system prompt and bare MCP tool names, for any host to load.

Nothing is written unless every file can be: a file that exists with other content is
refused (OutputExists) unless `force`; an identical one is left alone. Each file is replaced
atomically (`engine.store.replace_file`).
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from reme_agent.engine.store import replace_file
from reme_agent.errors import ConfigError, OutputExists
from reme_agent.jobs.host import host_prompt, unbound_values

AGENTS: tuple[tuple[str, str], ...] = (("reme-distiller", "distiller"),
                                       ("reme-curator", "curator"))
"""(agent name, job) of every exported agent."""
TARGETS = ("claude-code", "generic")
GENERIC_FILE = "reme-agents.json"
GENERIC_FORMAT = "reme-agent/agents@1"

Status = Literal["created", "updated", "replaced", "unchanged"]


@dataclass(frozen=True)
class AgentDef:
    """One exported agent: what any host needs to run it."""

    name: str
    job: str
    description: str
    system_prompt: str
    tools: list[str]
    """Bare MCP tool names, as the server's `tools/list` gives them."""


@dataclass(frozen=True)
class Planned:
    """A file to write: its new bytes, and what writing it does to what is there."""

    path: Path
    """Absolute, under the export directory."""
    data: bytes
    status: Status
    """created; updated (`.mcp.json` gained the server); replaced; unchanged (not written)."""
    conflict: bool = False
    """It exists with other content: written only with `force`."""
    seen: bytes | None = None
    """The bytes read while planning (None: absent); the write checks they are still there."""


def claude_tool_name(server: str, tool: str) -> str:
    """The name Claude Code gives an MCP tool: `mcp__<server>__<tool>`, where characters of the
    server name outside [A-Za-z0-9_-] become `_`."""
    return f"mcp__{re.sub(r'[^A-Za-z0-9_-]', '_', server)}__{tool}"


def build_agents(vault_dir: Path, *, language: str, split_tokens: int,
                 tool_name: Callable[[str], str] = str) -> list[AgentDef]:
    """The agent definitions, their prompts rendered for a standing (undated) definition."""
    values = {"vault_dir": str(vault_dir), "language": language, "split_tokens": split_tokens,
              **unbound_values(language)}
    out = []
    for name, job in AGENTS:
        prompt = host_prompt(job, values, language=language, tool_name=tool_name)
        out.append(AgentDef(name=name, job=job, description=prompt.description,
                            system_prompt=prompt.instructions, tools=prompt.tools))
    return out


def server_command(vault_dir: Path, configs: Sequence[Path] = (),
                   command: str | None = None) -> tuple[str, list[str]]:
    """How a host starts the expert-tier server over stdio: (program, arguments)."""
    args = ["mcp", "--tier", "expert", "--vault", str(vault_dir)]
    for cfg in configs:
        args += ["--config", str(Path(cfg).resolve())]
    return command or default_command(), args


def default_command() -> str:
    """The `reme-agent` beside the running Python (its venv), else on PATH, else the bare name:
    hosts start servers without activating a venv."""
    here = shutil.which("reme-agent", path=str(Path(sys.executable).parent))
    return str(Path(here).absolute()) if here else (shutil.which("reme-agent") or "reme-agent")


def plan_export(target: str, directory: Path, *, vault_dir: Path, language: str,
                split_tokens: int, configs: Sequence[Path] = (), command: str | None = None,
                server: str = "reme", model: str | None = None) -> list[Planned]:
    """The files `target` needs under `directory`, compared with what is there."""
    if target not in TARGETS:
        raise ConfigError(f"Unknown export target {target!r}.", f"Use one of {TARGETS}.")
    program, args = server_command(vault_dir, configs, command)
    if target == "generic":
        agents = build_agents(vault_dir, language=language, split_tokens=split_tokens)
        doc = {"format": GENERIC_FORMAT, "language": language,
               "mcp_server": {"name": server, "transport": "stdio", "command": program,
                              "args": args},
               "agents": [{"name": a.name, "job": a.job, "description": a.description,
                           "tools": a.tools, "system_prompt": a.system_prompt}
                          for a in agents]}
        return [_plan(directory / GENERIC_FILE, _json_bytes(doc))]
    agents = build_agents(vault_dir, language=language, split_tokens=split_tokens,
                          tool_name=lambda t: claude_tool_name(server, t))
    planned = [_plan(directory / ".claude" / "agents" / f"{a.name}.md",
                     _agent_markdown(a, server, model)) for a in agents]
    entry = {"type": "stdio", "command": program, "args": args}
    planned.append(_plan_mcp_json(directory / ".mcp.json", server, entry))
    return planned


def write_planned(planned: Sequence[Planned], force: bool = False) -> list[dict[str, str]]:
    """Write every planned file (all or none of the conflicting ones); what happened to each."""
    conflicts = [str(p.path) for p in planned if p.conflict]
    if conflicts and not force:
        raise OutputExists(conflicts)
    for p in planned:
        if p.status == "unchanged":
            continue
        now = p.path.read_bytes() if p.path.exists() else None
        if now != p.seen:  # someone wrote it meanwhile: do not lose their edit
            raise ConfigError(f"{p.path} changed while exporting; nothing more was written.",
                              "Run the command again.")
        replace_file(p.path, p.data)
    return [{"path": str(p.path), "status": p.status} for p in planned]


def _plan(path: Path, data: bytes) -> Planned:
    if not path.exists():
        return Planned(path, data, "created")
    seen = path.read_bytes()
    if seen == data:
        return Planned(path, data, "unchanged", seen=seen)
    return Planned(path, data, "replaced", conflict=True, seen=seen)


def _plan_mcp_json(path: Path, server: str, entry: dict[str, Any]) -> Planned:
    """`.mcp.json` with `entry` under mcpServers.<server>; every other key and server kept."""
    if not path.exists():
        return Planned(path, _json_bytes({"mcpServers": {server: entry}}), "created")
    seen = path.read_bytes()
    try:
        data = json.loads(seen)
    except ValueError as exc:
        raise ConfigError(f"{path} is not valid JSON ({exc}); nothing was written.",
                          "Fix or remove it, then run the command again.") from exc
    servers = data.get("mcpServers", {}) if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise ConfigError(f"{path} has no `mcpServers` object; nothing was written.",
                          'Give it the form {"mcpServers": {...}} or remove it.')
    old = servers.get(server)
    if old == entry:
        return Planned(path, seen, "unchanged", seen=seen)
    data["mcpServers"] = {**servers, server: entry}
    return Planned(path, _json_bytes(data), "updated" if old is None else "replaced",
                   conflict=old is not None, seen=seen)


def _agent_markdown(agent: AgentDef, server: str, model: str | None) -> bytes:
    """A Claude Code subagent file: YAML frontmatter, then the system prompt."""
    meta: dict[str, Any] = {"name": agent.name, "description": agent.description,
                            "tools": ", ".join(claude_tool_name(server, t) for t in agent.tools)}
    if model:
        meta["model"] = model
    front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=10_000)
    return f"---\n{front}---\n\n{agent.system_prompt.strip()}\n".encode()


def _json_bytes(data: Any) -> bytes:
    return (json.dumps(data, ensure_ascii=False, indent=2) + "\n").encode()
