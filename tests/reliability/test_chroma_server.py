"""The vector projection on a real chroma server (`chroma run`), and the server going away.

Promises tested: the projection behaves the same over HTTP as embedded (upsert, query,
delete, reopen from a new client and a new process); a whole index + search runs on it; when
the server is down a tool write still succeeds (the file is the truth), search fails with a
clear BackendError, and the next index run catches the vectors up.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest

from reme_agent.config import Settings
from reme_agent.engine.embedders import HashEmbedder
from reme_agent.engine.projections.vector import VectorProjection, http_client
from reme_agent.errors import BackendError, ConfigError
from reme_agent.recall.search import search, search_blocks
from reme_agent.toolkit.agentscope import build_toolkit
from reme_agent.vault import open_vault
from tests.reliability.conftest import (
    NOTES,
    ChromaServer,
    call_toolkit,
    free_port,
    http_settings,
    make_vault,
    run_py,
)

TEXTS = {
    "a.md#0": ("vector database indexing for semantic search", "a.md"),
    "a.md#1": ("the cat sat on the warm windowsill", "a.md"),
    "b.md#0": ("apple pie recipe with cinnamon and butter", "b.md"),
    "b.md#1": ("向量数据库的索引与检索", "b.md"),
    "c.md#0": ("weekly team meeting notes about the roadmap", "c.md"),
}
NEW_NOTE = "knowledge/wallaby/wallaby.md"
NEW_BODY = "# Wallaby\n\nA wallaby is a marsupial smaller than a kangaroo.\n\nsee [[quokka]]\n"


def _projection(server: ChromaServer, prefix: str) -> VectorProjection:
    return VectorProjection(HashEmbedder(), client=http_client(server.host, server.port),
                            prefix=prefix, batch_size=2)


def _fill(vp: VectorProjection) -> None:
    ids = list(TEXTS)
    vp.upsert(ids, [TEXTS[i][0] for i in ids], [{"path": TEXTS[i][1]} for i in ids])


def test_upsert_query_delete_reopen_on_the_server(chroma_server: ChromaServer) -> None:
    prefix = f"p{uuid.uuid4().hex[:8]}"
    vp = _projection(chroma_server, prefix)
    _fill(vp)
    assert vp.count() == 5 and vp.ids() == set(TEXTS)
    hits = vp.query("semantic search over a vector database", 3)
    assert hits[0][0] == "a.md#0" and len(hits) == 3
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    assert {i for i, _ in vp.query("vector database", 5, where={"path": "b.md"})} == {
        "b.md#0", "b.md#1"}
    vp.upsert(["a.md#1"], ["quantum physics lecture"], [{"path": "a.md"}])  # replace
    assert vp.count() == 5 and vp.query("quantum physics", 1)[0][0] == "a.md#1"
    vp.delete(["c.md#0", "no-such-id"])
    vp.delete_where_path("b.md")
    assert vp.ids() == {"a.md#0", "a.md#1"}
    assert set(vp.embeddings(["a.md#0", "gone"])) == {"a.md#0"}

    reopened = _projection(chroma_server, prefix)  # a new client finds the same collection
    assert reopened.ids() == {"a.md#0", "a.md#1"}
    assert reopened.query("quantum physics", 1)[0][0] == "a.md#1"

    code = ("import sys\nfrom reme_agent.engine.embedders import HashEmbedder\n"
            "from reme_agent.engine.projections.vector import VectorProjection, http_client\n"
            "vp = VectorProjection(HashEmbedder(), client=http_client('127.0.0.1', "
            "int(sys.argv[1])), prefix=sys.argv[2])\n"
            "print(vp.count(), vp.query('semantic search vector database', 1)[0][0])\n")
    out = run_py(code, str(chroma_server.port), prefix)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["2", "a.md#0"]

    reopened.reset()
    assert reopened.count() == 0


def test_index_and_search_end_to_end_on_the_server(tmp_path: Path,
                                                   chroma_server: ChromaServer) -> None:
    settings = http_settings(chroma_server)
    vault = make_vault(tmp_path / "v", settings=settings, index=False)
    report = vault.index()
    assert report.files == len(NOTES) and report.embedded == report.blocks > 0
    assert vault.vector.count() == report.blocks
    assert vault.index().embedded == 0  # no-op
    assert search_blocks(vault, "marsupial on Rottnest Island", 3)[0].path == \
        "knowledge/quokka/quokka.md"
    response = search(vault, "向量", limit=3, log_access=False)
    assert response.results[0].path == "knowledge/向量检索/向量检索.md"
    vault.close()

    # Another process with the same settings sees the same index (no re-embedding).
    code = ("import sys\nfrom reme_agent.config import Settings\n"
            "from reme_agent.recall.search import search_blocks\n"
            "from reme_agent.vault import open_vault\n"
            "s = Settings(embedder={'name': 'hash'}, index={'progress': False}, vector={"
            "'backend': 'http', 'port': int(sys.argv[2]), 'collection_prefix': sys.argv[3]})\n"
            "v = open_vault(sys.argv[1], s)\n"
            "r = v.index()\n"
            "print(r.embedded, search_blocks(v, 'quokka marsupial', 1)[0].path)\n")
    out = run_py(code, str(vault.root), str(chroma_server.port),
                 settings.vector.collection_prefix)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "knowledge/quokka/quokka.md"]


def test_server_down_writes_still_succeed_and_the_index_catches_up(tmp_path: Path) -> None:
    server = ChromaServer(tmp_path / "srv").start()
    try:
        vault = make_vault(tmp_path / "v", settings=http_settings(server))
        toolkit = build_toolkit(vault)
        server.kill()

        started = time.monotonic()
        state, text = call_toolkit(toolkit, "write", path=NEW_NOTE, body=NEW_BODY)
        assert state == "success", text
        assert time.monotonic() - started < 5  # a dead projection does not hold the write
        assert "re-indexing failed" in text and "reme-agent index" in text
        assert (vault.root / NEW_NOTE).read_text(encoding="utf-8").endswith(NEW_BODY)

        state, text = call_toolkit(toolkit, "search", query="wallaby")
        assert state == "error"
        assert "chromadb query failed" in text and "Connection refused" in text
        with pytest.raises(BackendError):
            vault.index()

        server.start()  # same folder, same port: the old vectors are still there
        report = vault.index()
        assert report.embedded >= 1  # the note written while the server was down
        assert vault.vector.count() == vault.state.counts()[1]
        hits = search_blocks(vault, "wallaby marsupial kangaroo", 3)
        assert hits[0].path == NEW_NOTE
        vault.close()
    finally:
        server.stop()


def test_unreachable_server_is_a_clear_backend_error() -> None:
    port = free_port()
    with pytest.raises(BackendError, match=r"Cannot reach the chroma server.*chroma run"):
        http_client("127.0.0.1", port, connect_timeout=0.5)


def test_opening_a_vault_on_a_dead_server_fails_clearly_and_recovers(tmp_path: Path) -> None:
    """Vault.vector is not cached while it fails, so the next call retries the server."""
    server = ChromaServer(tmp_path / "srv")
    vault = make_vault(tmp_path / "v", settings=http_settings(server), index=False)
    with pytest.raises(BackendError, match="Cannot reach the chroma server"):
        vault.index()
    try:
        server.start()
        assert vault.index().files == len(NOTES)
    finally:
        vault.close()
        server.stop()


def test_http_client_retries_with_backoff_while_the_server_starts(tmp_path: Path) -> None:
    server = ChromaServer(tmp_path / "srv")
    timer = threading.Timer(1.0, server.start, kwargs={"wait": False})
    timer.start()
    try:
        client = http_client(server.host, server.port)  # must wait for the server, not fail
        assert client.heartbeat() > 0
    finally:
        timer.join()
        server.stop()


def test_graph_is_right_after_a_run_that_failed_on_the_vector_server(tmp_path: Path) -> None:
    server = ChromaServer(tmp_path / "srv").start()
    try:
        vault = make_vault(tmp_path / "v", settings=http_settings(server))
        server.kill()
        (tmp_path / "v" / NEW_NOTE).parent.mkdir(parents=True)
        (tmp_path / "v" / NEW_NOTE).write_text(NEW_BODY, encoding="utf-8")
        with pytest.raises(BackendError):
            vault.index()
        server.start()
        vault.index()
        fresh = open_vault(vault.root, vault.settings)
        fresh.ready()
        expected = fresh.graph.outbound(NEW_NOTE)
        fresh.close()
        assert expected, "a fresh process sees the new note's link"
        assert vault.graph.outbound(NEW_NOTE) == expected
        vault.close()
    finally:
        server.stop()


def test_two_vaults_on_one_server_keep_their_own_vectors(tmp_path: Path,
                                                         chroma_server: ChromaServer) -> None:
    """BUG-13: with the default prefix each vault gets `reme-<vault id[:8]>-<embedder>`."""
    settings = Settings(embedder={"name": "hash"}, index={"progress": False},
                        vector={"backend": "http", "host": chroma_server.host,
                                "port": chroma_server.port})
    a = make_vault(tmp_path / "a", settings=settings)
    b = make_vault(tmp_path / "b", {"knowledge/zebra/zebra.md": "# Zebra\n\nzebra stripes\n"},
                   settings=settings)
    try:
        a_id = (a.internal / "vault-id").read_text(encoding="utf-8").strip()
        assert a.vector.name == f"reme-{a_id[:8]}-{a.embedder.id}" != b.vector.name
        assert a.index().embedded == 0  # nothing changed in vault a
        assert b.index().embedded == 0
        assert a.vector.count() == a.state.counts()[1]
        assert b.vector.count() == b.state.counts()[1]
    finally:
        a.close()
        b.close()


def test_a_second_vault_on_a_shared_prefix_is_refused(tmp_path: Path,
                                                     chroma_server: ChromaServer) -> None:
    """BUG-13: an explicit prefix two vaults share is refused, never silently shared."""
    settings = http_settings(chroma_server, prefix=f"shared{uuid.uuid4().hex[:6]}")
    a = make_vault(tmp_path / "a", settings=settings)
    b = make_vault(tmp_path / "b", {"knowledge/zebra/zebra.md": "# Zebra\n\nzebra stripes\n"},
                   settings=settings, index=False)
    try:
        with pytest.raises(ConfigError, match="belongs to another vault") as info:
            b.index()
        assert "collection_prefix" in str(info.value)
        assert a.index().embedded == 0  # vault a's vectors are untouched
        assert a.vector.count() == a.state.counts()[1]
        # The same vault from another handle (same .reme/vault-id) is of course accepted.
        again = open_vault(a.root, settings)
        assert again.vector.count() == a.state.counts()[1]
        again.close()
    finally:
        a.close()
        b.close()
