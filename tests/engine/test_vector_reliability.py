"""VectorProjection under faults: reopen after another process wrote, corrupt stores, the
store lock, vault ids, and HTTP retries (BUG-4, 6, 12, 13, 14 in docs/reliability.md)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from reme_agent.engine.embedders import HashEmbedder
from reme_agent.engine.projections import vector as vector_mod
from reme_agent.engine.projections.vector import VectorProjection, http_client
from reme_agent.errors import BackendError, ConfigError
from reme_agent.vault import _vault_id

ROOT = Path(__file__).resolve().parents[2]
WRITE = """
import sys
from pathlib import Path
from reme_agent.engine.embedders import HashEmbedder
from reme_agent.engine.projections.vector import VectorProjection
vp = VectorProjection(HashEmbedder(), Path(sys.argv[1]))
vp.upsert(["new#0"], ["platypus egg laying"], [{"path": "new.md"}])
vp.close()
"""


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_reopen_sees_what_another_process_wrote(tmp_path: Path) -> None:
    path = tmp_path / "chroma"
    vp = VectorProjection(HashEmbedder(), path)
    vp.upsert(["old#0"], ["quokka marsupial"], [{"path": "old.md"}])
    assert vp.query("quokka", 1)[0][0] == "old#0"  # segment state now loaded here
    out = subprocess.run([sys.executable, "-c", WRITE, str(path)], capture_output=True,
                         text=True, timeout=120, cwd=ROOT, check=False,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    vp.reopen()
    assert vp.ids() == {"old#0", "new#0"}
    assert vp.query("platypus egg laying", 1)[0][0] == "new#0"
    vp.close()


def test_reopen_leaves_a_given_client_alone(tmp_path: Path) -> None:
    import chromadb

    client = chromadb.PersistentClient(path=str(tmp_path / "c"))
    vp = VectorProjection(HashEmbedder(), client=client)
    vp.upsert(["a"], ["x"], [{}])
    vp.reopen()
    vp.close()
    assert vp.count() == 1  # the caller's client is still open and in use
    client.close()


def test_queries_during_reopen_wait_instead_of_failing(tmp_path: Path) -> None:
    vp = VectorProjection(HashEmbedder(), tmp_path / "chroma")
    vp.upsert([f"b{i}" for i in range(20)], [f"text {i}" for i in range(20)], [{}] * 20)
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            try:
                assert len(vp.query("text", 3)) == 3
            except BaseException as e:  # noqa: BLE001 - collected for the assert below
                errors.append(e)
                return

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    for _ in range(5):
        vp.reopen()
    stop.set()
    for t in threads:
        t.join(timeout=30)
    vp.close()
    assert not errors, errors[0]


def test_garbage_store_is_moved_aside_and_recreated(tmp_path: Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "chroma"
    VectorProjection(HashEmbedder(), path).close()
    (path / "chroma.sqlite3").write_bytes(b"garbage " * 1000)
    with caplog.at_level("WARNING"):
        vp = VectorProjection(HashEmbedder(), path, rebuild_if_corrupt=True)
    assert vp.count() == 0
    (moved,) = tmp_path.glob("chroma.corrupt-*")
    assert (moved / "chroma.sqlite3").read_bytes().startswith(b"garbage")
    assert "corrupt" in caplog.text and "rebuilding" in caplog.text
    vp.close()


def test_garbage_store_without_rebuild_is_reported_and_the_process_recovers(
        tmp_path: Path) -> None:
    path = tmp_path / "chroma"
    VectorProjection(HashEmbedder(), path).close()
    (path / "chroma.sqlite3").write_bytes(b"garbage " * 1000)
    for _ in range(2):  # the broken system is not cached: the same error each time
        with pytest.raises(BackendError, match=r"Cannot open the chroma store.*not a database"):
            VectorProjection(HashEmbedder(), path)
    assert not list(tmp_path.glob("chroma.corrupt-*"))  # a configured store is never moved
    (path / "chroma.sqlite3").unlink()
    vp = VectorProjection(HashEmbedder(), path)  # fixed by hand: this process opens it
    assert vp.count() == 0
    vp.close()


def test_store_lock_serialises_opens(tmp_path: Path) -> None:
    path = tmp_path / "chroma"
    with vector_mod._store_lock(path):
        assert (tmp_path / "chroma.lock").exists()
        with pytest.raises(BackendError, match="Timed out"), \
                vector_mod._store_lock(path, timeout=0.2):
            pass
    with vector_mod._store_lock(path, timeout=0.2):  # released again
        pass


def test_vault_id_mismatch_is_a_config_error_and_legacy_collections_are_claimed(
        tmp_path: Path) -> None:
    path = tmp_path / "chroma"
    legacy = VectorProjection(HashEmbedder(), path)  # made before vault ids existed
    legacy.upsert(["a"], ["x"], [{}])
    legacy.close()
    mine = VectorProjection(HashEmbedder(), path, vault_id="vault-a")
    assert mine.count() == 1
    mine.close()
    with pytest.raises(ConfigError, match=r"belongs to another vault \(vault id vault-a\)"):
        VectorProjection(HashEmbedder(), path, vault_id="vault-b")
    again = VectorProjection(HashEmbedder(), path, vault_id="vault-a")
    assert again.count() == 1
    again.close()


def test_vault_id_is_created_once_even_by_racing_threads(tmp_path: Path) -> None:
    internal = tmp_path / ".reme"
    got: list[str] = []
    threads = [threading.Thread(target=lambda: got.append(_vault_id(internal)))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got)) == 1 and len(got[0]) == 36
    assert _vault_id(internal) == got[0]
    assert [p.name for p in internal.iterdir()] == ["vault-id"]  # no temp files left


def test_http_client_gives_up_after_the_connect_timeout_with_a_connection_hint() -> None:
    port = _free_port()
    started = time.monotonic()
    with pytest.raises(BackendError) as info:
        http_client("127.0.0.1", port, connect_timeout=0.5)
    assert time.monotonic() - started < 5
    text = str(info.value)
    assert f"127.0.0.1:{port}" in text and "chroma run" in text and "'embedded'" in text
    assert "persistent" not in text and "corrupt" not in text


class _FlakyCollection:
    """Stands in for a chroma collection on a server that refuses `fails` calls."""

    def __init__(self, fails: int) -> None:
        self.fails = fails
        self.calls = 0

    def count(self) -> int:
        self.calls += 1
        if self.calls <= self.fails:
            raise httpx.ConnectError("[Errno 111] Connection refused")
        return 7


def test_http_data_calls_retry_twice_then_fail_fast_while_down(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vector_mod, "HTTP_RETRY_WAITS", (0.01, 0.01))
    vp = VectorProjection(HashEmbedder(), tmp_path / "chroma")
    vp._server = ("127.0.0.1", 9)  # behave as a projection on a chroma server
    vp._col = flaky = _FlakyCollection(fails=2)
    assert vp.count() == 7 and flaky.calls == 3  # two retries absorbed the blip

    vp._col = down = _FlakyCollection(fails=100)
    with pytest.raises(BackendError, match=r"cannot reach the chroma server at 127\.0\.0\.1:9"):
        vp.count()
    assert down.calls == 3
    with pytest.raises(BackendError, match="Connection refused"):
        vp.count()
    assert down.calls == 4  # known down: no retries, so writes stay responsive
    vp._col = _FlakyCollection(fails=0)
    assert vp.count() == 7 and vp._down_at is None  # back up: retries are on again
    vp._server = None
    vp.close()
