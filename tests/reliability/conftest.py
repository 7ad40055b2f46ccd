"""Fixtures for the reliability suite: small real vaults and a real chroma server.

Everything is real (files, SQLite, chromadb, BM25, networkx, AgentScope's Toolkit); faults
are injected at the OS boundary (kill -9, a dead server, os.replace failing), never by
mocking our own code.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reme_agent.config import Settings
from reme_agent.vault import Vault, open_vault

ROOT = Path(__file__).resolve().parents[2]
HASH = Settings(embedder={"name": "hash"}, index={"progress": False})

NOTES: dict[str, str] = {
    "knowledge/bm25/bm25.md": "---\ntitle: BM25\naliases: [Okapi BM25]\n---\n# BM25\n\n"
    "BM25 ranks blocks by term frequency and inverse document frequency.\n\n"
    "part_of:: [[hybrid-search]]\n",
    "knowledge/hybrid-search/hybrid-search.md": "---\ntitle: Hybrid search\n---\n"
    "# Hybrid search\n\nHybrid search fuses a keyword ranker and a vector ranker.\n\n"
    "uses:: [[bm25]], [[向量检索]]\n",
    "knowledge/向量检索/向量检索.md": "---\ntitle: 向量检索\n---\n# 向量检索\n\n"
    "向量检索把文本编码成向量,按余弦相似度排序。\n\n- related:: [[hybrid-search]]\n",
    "knowledge/quokka/quokka.md": "---\ntitle: Quokka\n---\n# Quokka\n\n"
    "The quokka is a small marsupial living on Rottnest Island.\n",
    "daily/2026-11-28/tuning/tuning.md": "---\ntitle: Tuning\n---\n# Tuning\n\n"
    "Compared RRF and blending; see [[bm25]].\n",
}


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def make_vault(root: Path, notes: dict[str, str] | None = None,
               settings: Settings = HASH, index: bool = True) -> Vault:
    """Write `notes` (default NOTES) under `root` and open (and index) the vault."""
    for rel, text in (NOTES if notes is None else notes).items():
        write(root, rel, text)
    vault = open_vault(root, settings, create=True)
    if index:
        vault.index()
    return vault


@pytest.fixture
def vault(tmp_path: Path) -> Iterator[Vault]:
    v = make_vault(tmp_path / "vault")
    yield v
    v.close()


def call_toolkit(toolkit: Any, name: str, **args: Any) -> tuple[str, str]:
    """One tool call through AgentScope's Toolkit: (state, text) of the final response."""
    return call_toolkit_raw(toolkit, name, json.dumps(args))


def call_toolkit_raw(toolkit: Any, name: str, raw_input: str) -> tuple[str, str]:
    """Like call_toolkit, with the model's raw JSON argument string (may be malformed)."""
    from agentscope.message import ToolCallBlock
    from agentscope.state import AgentState

    async def run() -> Any:
        last = None
        block = ToolCallBlock(id=f"call-{name}", name=name, input=raw_input)
        async for item in toolkit.call_tool(block, AgentState()):
            last = item
        return last

    resp = asyncio.run(run())
    text = "".join(getattr(b, "text", "") or "" for b in resp.content)
    return str(getattr(resp.state, "value", resp.state)), text


def tmp_files(root: Path) -> list[Path]:
    """Leftover atomic-write temp files anywhere in the vault (there must be none)."""
    return [p for p in root.rglob(".tmp-*") if ".reme" not in p.parts]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- chroma server ---------------------------------------------------------------------------
CHROMA_EXE = Path(sys.executable).with_name("chroma")


class ChromaServer:
    """A real `chroma run` process on 127.0.0.1 with its own data folder and a free port."""

    def __init__(self, path: Path, port: int | None = None) -> None:
        self.path = path
        self.port = port or free_port()
        self.host = "127.0.0.1"
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = path.with_suffix(".log")

    def start(self, wait: bool = True) -> ChromaServer:
        if not CHROMA_EXE.exists():
            pytest.skip(f"chroma CLI not found at {CHROMA_EXE} (pip install chromadb)")
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [str(CHROMA_EXE), "run", "--path", str(self.path), "--host", self.host,
                 "--port", str(self.port)], stdout=log, stderr=subprocess.STDOUT)
        if wait:
            self.wait_ready()
        return self

    def alive(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.host}:{self.port}/api/v2/heartbeat",
                                        timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.alive():
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"chroma server exited: {self.log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"chroma server not up after {timeout} s")
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL, like a crash or a pulled cable: no graceful shutdown."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChromaServer]:
    """One chroma server for the session; tests isolate themselves by collection prefix."""
    server = ChromaServer(tmp_path_factory.mktemp("chroma-server") / "data").start()
    yield server
    server.stop()


def http_settings(server: ChromaServer, prefix: str | None = None) -> Settings:
    """Hash-embedder settings on the chroma server, in a collection of this test's own."""
    return Settings(embedder={"name": "hash"}, index={"progress": False},
                    vector={"backend": "http", "host": server.host, "port": server.port,
                            "collection_prefix": prefix or f"t{uuid.uuid4().hex[:10]}"})


def run_py(code: str, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run a Python snippet in a fresh interpreter with the project importable."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT, check=False)
