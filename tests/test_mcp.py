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

ATOMIC = {"search", "graph_traverse", "list", "read", "stat", "property_read", "write",
          "property_update", "property_delete", "tags_list", "tags_stat", "move", "copy",
          "delete", "upload", "download", "daily_read", "daily_list", "daily_write",
          "daily_status", "lint_dangling", "lint_orphans", "lint_collisions", "lint_schema",
          "lint_alias_links"}


def server_env() -> dict[str, str]:
    env = dict(os.environ)
    env["REME_EMBEDDER__NAME"] = "hash"
    return env


async def _stdio_session(vault: Path, tier: str, body):  # type: ignore[no-untyped-def]
    params = StdioServerParameters(command=sys.executable, env=server_env(), args=[
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


def test_service_tier_adds_job_tools_to_the_atomic_ones(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()

    async def body(session: ClientSession) -> set[str]:
        synced = await session.call_tool("synchronizer", {
            "messages": [{"role": "user", "content": "We picked BM25 with jieba."}],
            "mode": "transcript", "session_id": "mcp-1"})
        assert not synced.is_error, synced.content[0].text
        distilled = await session.call_tool("distiller", {"daily_paths": ["daily/x.md"]})
        assert distilled.is_error  # no model configured: a clear error, the server lives on
        return {t.name for t in (await session.list_tools()).tools}

    names = asyncio.run(_stdio_session(vault, "service", body))
    assert names == ATOMIC | {"synchronizer", "distiller"}
    notes = list((vault / "daily").rglob("session-mcp-1.md"))
    assert notes and "We picked BM25 with jieba." in notes[0].read_text()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def http_server(tmp_path: Path):  # type: ignore[no-untyped-def]
    vault = tmp_path / "vault"
    vault.mkdir()
    port = _free_port()
    env = server_env() | {"TEST_MCP_TOKEN": "s3cret"}
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
        client = httpx2.AsyncClient(headers={"authorization": "Bearer s3cret"}, timeout=30)
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
