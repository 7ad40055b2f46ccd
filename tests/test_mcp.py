"""The MCP face: a real server process on stdio and on loopback HTTP, a real `mcp` client."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from reme_agent import __version__

ATOMIC = {"search", "graph_traverse", "list", "read", "stat", "property_read", "recent", "write",
          "property_update", "property_delete", "link_remove", "tags_list", "tags_stat", "move",
          "copy",
          "delete", "upload", "download", "daily_read", "daily_list", "daily_write", "daily_attach",
          "daily_status", "lint_dangling", "lint_orphans", "lint_collisions", "lint_schema",
          "lint_alias_links", "lint_redirect_links"}


TOKEN = "t0k-Jq9vX2mLr8sWc4Zp"


def server_env() -> dict[str, str]:
    env = dict(os.environ)
    env["REME_EMBEDDER__NAME"] = "hash"
    return env


async def _stdio_session(vault: Path, tier: str, body, **env: str):  # type: ignore[no-untyped-def]
    """A stdio server with no model configured unless `env` configures one."""
    base = {k: v for k, v in server_env().items() if not k.startswith("REME_MODEL__")}
    params = StdioServerParameters(command=sys.executable, env=base | env, args=[
        "-m", "reme_agent", "mcp", "--vault", str(vault), "--tier", tier])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return await body(session)


def test_stdio_expert_tier_lists_atomic_tools_and_round_trips_a_note(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()

    async def body(session: ClientSession) -> None:
        names = {t.name for t in (await session.list_tools()).tools}
        assert names == ATOMIC
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert tools["read"].annotations.read_only_hint is True
        assert tools["delete"].annotations.destructive_hint is True
        wrote = await session.call_tool("write", {"path": "knowledge/otter/otter.md",
                                                  "body": "Sea otters hold hands while asleep."})
        assert not wrote.is_error
        assert wrote.structured_content["path"] == "knowledge/otter/otter.md"
        found = await session.call_tool("search", {"query": "otters asleep"})
        assert "knowledge/otter/otter.md" in found.content[0].text
        read = await session.call_tool("read", {"path": "knowledge/otter/otter.md"})
        assert "hold hands" in read.content[0].text
        bad = await session.call_tool("read", {"path": "../../etc/passwd"})
        assert bad.is_error and "Refused path" in bad.content[0].text
        again = await session.call_tool("read", {"path": "knowledge/otter/otter.md"})
        assert not again.is_error  # the server keeps serving after a bad call

    asyncio.run(_stdio_session(vault, "expert", body))
    assert "hold hands" in (vault / "knowledge/otter/otter.md").read_text()


def test_service_tier_without_a_model_offers_only_the_synchronizer(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    chat = [{"role": "user", "content": "We picked BM25 with jieba."}]

    async def body(session: ClientSession) -> set[str]:
        assert session.initialize_result.server_info.version == __version__
        synced = await session.call_tool("synchronizer", {"messages": chat,
                                                          "session_id": "mcp-1"})
        assert not synced.is_error, synced.content[0].text
        assert synced.structured_content["mode"] == "transcript"  # auto: no model
        again = await session.call_tool("synchronizer", {"messages": chat,
                                                         "session_id": "mcp-1"})
        assert again.structured_content["turns"] == {"new": 0, "already_synced": 1}
        missing = await session.call_tool("distiller", {"daily_paths": ["daily/x.md"]})
        assert missing.is_error  # not offered: the server answers and lives on
        return {t.name for t in (await session.list_tools()).tools}

    names = asyncio.run(_stdio_session(vault, "service", body))
    assert names == ATOMIC | {"synchronizer"}
    notes = list((vault / "daily").rglob("session-mcp-1.md"))
    assert notes and notes[0].read_text().count("We picked BM25 with jieba.") == 1


def test_service_tier_with_a_model_configured_adds_the_distiller(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()

    async def body(session: ClientSession) -> dict[str, str]:
        return {t.name: t.description for t in (await session.list_tools()).tools}

    tools = asyncio.run(_stdio_session(vault, "service", body, REME_MODEL__PROVIDER="openai",
                                       REME_MODEL__MODEL="gpt-x"))
    assert set(tools) == ATOMIC | {"synchronizer", "distiller"}
    assert "skipped" in tools["synchronizer"]  # resending a conversation is safe


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def http_server(tmp_path: Path):  # type: ignore[no-untyped-def]
    vault = tmp_path / "vault"
    vault.mkdir()
    port = _free_port()
    env = server_env() | {"TEST_MCP_TOKEN": TOKEN}
    proc = subprocess.Popen([sys.executable, "-m", "reme_agent", "mcp", "--vault", str(vault),
                             "--transport", "http", "--port", str(port), "--tier", "expert",
                             "--token-env", "TEST_MCP_TOKEN"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=1)
            break
        except httpx.HTTPError:
            if proc.poll() is not None:
                raise RuntimeError(proc.stderr.read().decode()) from None
            time.sleep(0.2)
    yield url, vault
    proc.terminate()
    proc.wait(timeout=10)


def test_http_requires_the_bearer_token(http_server) -> None:  # type: ignore[no-untyped-def]
    url, _ = http_server
    payload = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"accept": "application/json, text/event-stream"}
    assert httpx.post(url, json=payload, headers=headers, timeout=10).status_code == 401
    wrong = httpx.post(url, json=payload, headers=headers | {"authorization": "Bearer nope"},
                       timeout=10)
    assert wrong.status_code == 401


def test_http_client_with_token_writes_the_vault(http_server) -> None:  # type: ignore[no-untyped-def]
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    url, vault = http_server

    async def go() -> None:
        client = httpx2.AsyncClient(headers={"authorization": f"Bearer {TOKEN}"}, timeout=30)
        async with client, streamable_http_client(url, http_client=client) as streams, \
                ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            assert {t.name for t in (await session.list_tools()).tools} == ATOMIC
            result = await session.call_tool("write", {"path": "knowledge/h/h.md",
                                                       "body": "over http"})
            assert not result.is_error

    asyncio.run(go())
    assert (vault / "knowledge/h/h.md").read_text().strip().endswith("over http")


def test_binding_off_loopback_without_a_token_is_refused(tmp_path: Path) -> None:
    from reme_agent.cli import main

    (tmp_path / "v").mkdir()
    code = main(["mcp", "--vault", str(tmp_path / "v"), "--transport", "http",
                 "--host", "0.0.0.0"])
    assert code == 1


@pytest.mark.parametrize(("value", "why"), [
    (None, "unset"), ("", "empty"), ("   \t ", "empty"), ("short-token", "characters"),
    (f" {TOKEN} ", "spaces around")])
@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0"])
def test_a_named_token_that_is_missing_or_weak_stops_the_server(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        value: str | None, why: str, host: str) -> None:
    """Fail closed (G1): on loopback too, `--token-env` means "serve with auth"."""
    from reme_agent.cli import main

    (tmp_path / "v").mkdir()
    if value is None:
        monkeypatch.delenv("WEAK_MCP_TOKEN", raising=False)
    else:
        monkeypatch.setenv("WEAK_MCP_TOKEN", value)
    code = main(["mcp", "--vault", str(tmp_path / "v"), "--transport", "http", "--host", host,
                 "--token-env", "WEAK_MCP_TOKEN"])
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith("Error:") and why in err and "WEAK_MCP_TOKEN" in err


def test_agentscope_mcp_client_example_runs_against_the_stdio_server(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    monkeypatch.setenv("REME_EMBEDDER__NAME", "hash")
    spec = importlib.util.spec_from_file_location(
        "mcp_example", Path(__file__).resolve().parents[1] / "examples" / "mcp_agentscope_client.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    vault = tmp_path / "vault"
    vault.mkdir()
    answer = asyncio.run(example.run(str(vault)))
    assert answer == "Saved and found the MCP demo note."
    assert "share one memory vault" in (vault / "knowledge/mcp-demo/mcp-demo.md").read_text()
