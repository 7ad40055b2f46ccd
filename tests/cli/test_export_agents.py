"""`reme-agent export-agents`: files that parse, name real tools, and never clobber a file.

The round trip starts the server exactly as the exported `.mcp.json` says (its command and
arguments) and asks it, with the official `mcp` client, for the tools the agents name.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from reme_agent.cli import cli
from reme_agent.jobs.base import protocol_text
from tests.host_text import tools_named, without_protocol
from tests.test_mcp import server_env

AGENT_FILES = (".claude/agents/reme-distiller.md", ".claude/agents/reme-curator.md")


@pytest.fixture
def vault(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("REME_EMBEDDER__NAME", "hash")
    root = tmp_path / "vault"
    root.mkdir()
    return root


def export(vault: Path, target: str, directory: Path, *extra: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["export-agents", "--target", target, str(directory),
                                      "--vault", str(vault), *extra])
    return result.exit_code, result.output


def agent_file(path: Path) -> tuple[dict, str]:
    """(frontmatter, body) of a Claude Code subagent file."""
    text = path.read_text(encoding="utf-8")
    assert text.startswith("---\n")
    head, body = text[4:].split("\n---\n", 1)
    return yaml.safe_load(head), body


def prefixed(tools: str, server: str = "reme") -> list[str]:
    names = [t.strip() for t in tools.split(",")]
    assert all(n.startswith(f"mcp__{server}__") for n in names), names
    return [n.removeprefix(f"mcp__{server}__") for n in names]


def test_claude_code_export_writes_two_subagents_and_the_server_entry(vault: Path,
                                                                       tmp_path: Path) -> None:
    project = tmp_path / "project"
    code, out = export(vault, "claude-code", project, "--model", "sonnet")
    assert code == 0, out
    assert [line.split()[0] for line in out.splitlines()] == ["created"] * 3
    for rel, job in zip(AGENT_FILES, ("distiller", "curator"), strict=True):
        meta, body = agent_file(project / rel)
        assert list(meta) == ["name", "description", "tools", "model"]
        assert meta["name"] == Path(rel).stem and meta["model"] == "sonnet"
        assert len(meta["description"]) > 60
        assert protocol_text() in body and f"You are the {job}" in body
        assert str(vault.resolve()) in body and "{" not in without_protocol(body)
    distiller, _ = agent_file(project / AGENT_FILES[0])
    curator, _ = agent_file(project / AGENT_FILES[1])
    assert {"daily_read", "daily_list", "daily_status", "write", "lint_schema"} \
        <= set(prefixed(distiller["tools"]))
    assert {"lint_dangling", "lint_orphans", "lint_collisions", "write", "link_remove"} \
        <= set(prefixed(curator["tools"]))  # a wrong link goes only with a reason (audited)
    assert not {"delete", "move", "daily_status"} & set(prefixed(curator["tools"]))
    entry = json.loads((project / ".mcp.json").read_text())["mcpServers"]["reme"]
    assert entry["type"] == "stdio"
    assert entry["args"] == ["mcp", "--tier", "expert", "--vault", str(vault.resolve())]
    assert Path(entry["command"]).is_absolute() and Path(entry["command"]).name == "reme-agent"

    again_code, again = export(vault, "claude-code", project, "--model", "sonnet")
    assert again_code == 0 and [line.split()[0] for line in again.splitlines()] \
        == ["unchanged"] * 3


def test_existing_files_that_differ_are_refused_whole_unless_forced(vault: Path,
                                                                     tmp_path: Path) -> None:
    project = tmp_path / "project"
    mine = project / AGENT_FILES[0]
    mine.parent.mkdir(parents=True)
    mine.write_text("my own distiller\n")
    code, out = export(vault, "claude-code", project)
    assert code == 1 and "Refusing to overwrite 1 existing file(s)" in out and "--force" in out
    assert mine.read_text() == "my own distiller\n"
    assert not (project / AGENT_FILES[1]).exists() and not (project / ".mcp.json").exists()

    code, out = export(vault, "claude-code", project, "--force", "--json")
    assert code == 0, out
    statuses = {Path(f["path"]).name: f["status"] for f in json.loads(out)["files"]}
    assert statuses == {"reme-distiller.md": "replaced", "reme-curator.md": "created",
                        ".mcp.json": "created"}
    assert agent_file(mine)[0]["name"] == "reme-distiller"
    assert not [p for p in mine.parent.iterdir() if p.name.startswith(".tmp-")]


def test_mcp_json_is_merged_keeping_other_servers_and_keys(vault: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    config = project / ".mcp.json"
    other = {"command": "npx", "args": ["-y", "some-server"], "env": {"TOKEN": "x"}}
    config.write_text(json.dumps({"mcpServers": {"github": other}, "note": "keep me"}))
    assert export(vault, "claude-code", project)[0] == 0
    merged = json.loads(config.read_text())
    assert merged["note"] == "keep me" and merged["mcpServers"]["github"] == other
    assert merged["mcpServers"]["reme"]["args"][-1] == str(vault.resolve())

    second = tmp_path / "vault2"
    second.mkdir()
    code, out = export(second, "claude-code", project)  # `reme` now points elsewhere
    assert code == 1 and ".mcp.json" in out
    assert json.loads(config.read_text()) == merged
    assert export(second, "claude-code", project, "--force")[0] == 0
    forced = json.loads(config.read_text())
    assert forced["mcpServers"]["reme"]["args"][-1] == str(second.resolve())
    assert forced["mcpServers"]["github"] == other and forced["note"] == "keep me"

    config.write_text("{not json")
    code, out = export(vault, "claude-code", project, "--force")
    assert code == 1 and "not valid JSON" in out and config.read_text() == "{not json"


def test_generic_export_is_one_json_file_with_bare_tool_names(vault: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "model.yaml"
    cfg.write_text("jobs:\n  language: zh\n")
    code, out = export(vault, "generic", tmp_path / "out", "--config", str(cfg),
                       "--server-name", "memory")
    assert code == 0, out
    doc = json.loads((tmp_path / "out" / "reme-agents.json").read_text())
    assert doc["format"] == "reme-agent/agents@1" and doc["language"] == "zh"
    assert doc["mcp_server"]["name"] == "memory" and doc["mcp_server"]["transport"] == "stdio"
    assert doc["mcp_server"]["args"] == ["mcp", "--tier", "expert", "--vault",
                                         str(vault.resolve()), "--config", str(cfg.resolve())]
    assert [a["name"] for a in doc["agents"]] == ["reme-distiller", "reme-curator"]
    for agent in doc["agents"]:
        assert not any(t.startswith("mcp__") for t in agent["tools"])
        assert "你是长期记忆库" in agent["system_prompt"]
        assert protocol_text() in agent["system_prompt"]


def test_a_missing_vault_is_one_clear_error(tmp_path: Path) -> None:
    code, out = export(tmp_path / "nope", "generic", tmp_path / "out")
    assert code == 1 and "No vault at" in out and not (tmp_path / "out").exists()


def test_exported_agents_name_only_tools_the_expert_server_lists(vault: Path,
                                                                  tmp_path: Path) -> None:
    """Round trip: start the server from the exported .mcp.json; every tool an agent is
    granted or told to use is one the server lists, and its prompt sends it to no tool it
    was not granted."""
    project = tmp_path / "project"
    assert export(vault, "claude-code", project)[0] == 0
    assert export(vault, "generic", project)[0] == 0
    entry = json.loads((project / ".mcp.json").read_text())["mcpServers"]["reme"]
    assert shutil.which(entry["command"]), entry["command"]

    async def listed() -> tuple[set[str], set[str]]:
        params = StdioServerParameters(command=entry["command"], args=entry["args"],
                                       env=server_env(), cwd=os.fspath(project))
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            return ({t.name for t in (await s.list_tools()).tools},
                    {p.name for p in (await s.list_prompts()).prompts})

    tools, prompts = asyncio.run(listed())
    assert prompts == {"distill", "sync", "maintain", "recall"}  # the slash commands
    generic = {a["name"]: a for a in json.loads((project / "reme-agents.json").read_text())
               ["agents"]}
    for rel in AGENT_FILES:
        meta, body = agent_file(project / rel)
        granted = set(prefixed(meta["tools"]))
        assert granted <= tools, granted - tools
        assert tools_named(body) <= tools, tools_named(body) - tools  # protocol included
        told = tools_named(without_protocol(body))
        assert told <= granted, told - granted
        assert set(generic[meta["name"]]["tools"]) == granted
