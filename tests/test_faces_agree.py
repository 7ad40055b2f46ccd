"""One `search` call through every face returns the same answer (STYLE §2, issue G2).

Faces: the Python tool function, the AgentScope Toolkit, the MCP server (stdio, a real
client), `reme-agent tool search` and `reme-agent search`. They take the same parameters
under the same names and return the same JSON (MCP's structured content, the CLIs' --json)
and the same text (what a model reads).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from reme_agent.config import Settings
from reme_agent.toolkit import build_toolkit
from reme_agent.toolkit.registry import get_tool
from reme_agent.vault import open_vault
from tests.toolkit.conftest import call_toolkit

# Recency off: every face logs its hits, and a flushed access log would move recency.
ENV = {"REME_EMBEDDER__NAME": "hash", "REME_SEARCH__USE_RECENCY": "false",
       "REME_INDEX__PROGRESS": "false"}
SETTINGS = Settings(embedder={"name": "hash"}, index={"progress": False},
                    search={"use_recency": False})
ARGS: dict[str, Any] = {"query": "who owns the payment gateway", "limit": 5,
                        "path_prefix": "", "layers": ["knowledge", "daily"],
                        "include_archived": True, "expand_depth": 2,
                        "top_chunks_per_path": 1, "query_rewrite": "gateway owner"}
NOTES = {
    "knowledge/pgw/pgw.md": "---\ntitle: 支付网关\naliases: [Payment gateway]\n---\n"
                            "owner:: [[王芳]]\n\n统一对接各家支付渠道的网关服务。\n",
    "knowledge/王芳/王芳.md": "---\naliases: [Wang Fang]\n---\n支付团队的技术负责人。\n",
    "daily/2026-11-30/standup/standup.md": "Talked about the payment gateway roadmap.\n",
}


def _cli_args(command: list[str]) -> list[str]:
    out = list(command)
    for name, value in ARGS.items():
        if name == "query":
            continue
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            out.append(flag if value else f"--no-{name.replace('_', '-')}")
        elif isinstance(value, list):
            for item in value:
                out += [flag, str(item)]
        else:
            out += [flag, str(value)]
    return out


def _comparable(data: dict[str, Any]) -> dict[str, Any]:
    """The answer without `signals_freshness`: each face flushes the access log it wrote,
    which moves that timestamp between calls by design."""
    assert "signals_freshness" in data
    return {k: v for k, v in data.items() if k != "signals_freshness"}


def test_search_agrees_across_function_toolkit_mcp_and_both_clis(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    for rel, text in NOTES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    with open_vault(root, SETTINGS, create=True) as vault:
        vault.index()
        direct = get_tool("search").fn(vault, **ARGS)
        _, toolkit_text = call_toolkit(build_toolkit(vault, only=["search"]), "search", **ARGS)
    assert direct["results"][0]["path"] == "knowledge/王芳/王芳.md"   # the owner, via owner::

    async def over_mcp() -> Any:
        params = StdioServerParameters(command=sys.executable, env={**os.environ, **ENV},
                                       args=["-m", "reme_agent", "mcp", "--vault", str(root),
                                             "--tier", "expert"])
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            return await s.call_tool("search", ARGS)

    mcp = asyncio.run(over_mcp())
    assert not mcp.is_error

    from reme_agent.cli import cli

    runner = CliRunner()
    outputs = {}
    for name, command in (("tool", ["tool", "search", "--query", ARGS["query"]]),
                          ("search", ["search", ARGS["query"]])):
        base = [*command, "--vault", str(root)]
        as_json = runner.invoke(cli, [*_cli_args(base), "--json"], env=ENV)
        as_text = runner.invoke(cli, _cli_args(base), env=ENV)
        assert as_json.exit_code == 0 and as_text.exit_code == 0, as_json.output
        outputs[name] = (json.loads(as_json.output), as_text.output.rstrip("\n"))

    reference = _comparable(json.loads(json.dumps(dict(direct), ensure_ascii=False)))
    assert _comparable(mcp.structured_content) == reference
    assert _comparable(outputs["tool"][0]) == reference
    assert _comparable(outputs["search"][0]) == reference
    assert toolkit_text == direct.text
    assert mcp.content[0].text == direct.text
    assert outputs["tool"][1] == direct.text
    assert outputs["search"][1] == direct.text
