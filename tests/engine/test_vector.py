"""Vector projection (DESIGN §6): real chromadb PersistentClient in tmp_path; no mocks."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from reme_agent.engine.embedders import HashEmbedder, normalize_rows
from reme_agent.engine.projections.vector import (
    EF_NAME,
    SYNC_THRESHOLD,
    VectorProjection,
    _ef_class,
    http_client,
)
from reme_agent.errors import BackendError, ConfigError

TEXTS = {
    "a.md#0": ("vector database indexing for semantic search", "a.md"),
    "a.md#1": ("the cat sat on the warm windowsill", "a.md"),
    "b.md#0": ("apple pie recipe with cinnamon and butter", "b.md"),
    "b.md#1": ("向量数据库的索引与检索", "b.md"),
    "c.md#0": ("weekly team meeting notes about the roadmap", "c.md"),
}


def _fill(vp: VectorProjection) -> None:
    ids = list(TEXTS)
    vp.upsert(ids, [TEXTS[i][0] for i in ids], [{"path": TEXTS[i][1]} for i in ids])


class TinyEmbedder:
    """A 4-d embedder whose id we control, to provoke a dimension clash."""

    def __init__(self, dim: int) -> None:
        self.id = "tiny"
        self.dim = dim

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return normalize_rows(np.ones((len(texts), self.dim), dtype=np.float32))

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


def test_upsert_query_count_ids(tmp_path: Path) -> None:
    vp = VectorProjection(HashEmbedder(), tmp_path / "chroma", batch_size=2)
    seen: list[int] = []
    ids = list(TEXTS)
    n = vp.upsert(
        ids, [TEXTS[i][0] for i in ids], [{"path": TEXTS[i][1]} for i in ids], progress=seen.append
    )
    assert n == 5 and sum(seen) == 5 and seen == [2, 2, 1]
    assert vp.count() == 5
    assert vp.ids() == set(ids)
    hits = vp.query("semantic search over a vector database", 3)
    assert hits[0][0] == "a.md#0"
    assert len(hits) == 3
    assert all(-1.0 <= s <= 1.0 for _, s in hits)
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    assert len(vp.query("anything", 50)) == 5  # k > count is fine
    only_b = vp.query("vector database", 5, where={"path": "b.md"})
    assert {i for i, _ in only_b} == {"b.md#0", "b.md#1"}


def test_upsert_replaces_and_empty_metadata_ok(tmp_path: Path) -> None:
    vp = VectorProjection(HashEmbedder(), tmp_path / "chroma")
    vp.upsert(["x"], ["apple pie recipe"], [{}])
    vp.upsert(["x", "x"], ["old text", "quantum physics lecture"], [{}, {"path": "x.md"}])
    assert vp.count() == 1
    (hit,) = vp.query("quantum physics", 1)
    assert hit[0] == "x" and hit[1] > 0.5


def test_empty_collection_and_k_zero(tmp_path: Path) -> None:
    vp = VectorProjection(HashEmbedder(), tmp_path / "chroma")
    assert vp.query("anything", 5) == []
    assert vp.ids() == set() and vp.count() == 0
    _fill(vp)
    assert vp.query("anything", 0) == []


def test_delete_and_delete_where_path(tmp_path: Path) -> None:
    vp = VectorProjection(HashEmbedder(), tmp_path / "chroma")
    _fill(vp)
    vp.delete(["a.md#1", "nope"])
    assert vp.ids() == set(TEXTS) - {"a.md#1"}
    vp.delete_where_path("b.md")
    assert vp.ids() == {"a.md#0", "c.md#0"}
    assert all(i not in ("b.md#0", "b.md#1") for i, _ in vp.query("向量数据库", 5))


def test_reset_empties_collection(tmp_path: Path) -> None:
    vp = VectorProjection(HashEmbedder(), tmp_path / "chroma")
    _fill(vp)
    vp.reset()
    assert vp.count() == 0
    _fill(vp)
    assert vp.count() == 5


def test_reopen_in_new_process_gives_same_results(tmp_path: Path) -> None:
    path = tmp_path / "chroma"
    vp = VectorProjection(HashEmbedder(), path)
    _fill(vp)
    before = dict(vp.query("vector database search", 5))
    code = textwrap.dedent(
        f"""
        import json
        from pathlib import Path
        from reme_agent.engine.embedders import HashEmbedder
        from reme_agent.engine.projections.vector import VectorProjection
        vp = VectorProjection(HashEmbedder(), Path({str(path)!r}))
        print(json.dumps({{"count": vp.count(), "hits": vp.query("vector database search", 5)}}))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["count"] == 5
    after = dict(got["hits"])
    assert got["hits"][0][0] == "a.md#0"
    assert set(after) == set(before)  # ties may come back in another order
    assert np.allclose([after[i] for i in before], list(before.values()), atol=1e-5)


def test_collection_name_carries_embedder_id(tmp_path: Path) -> None:
    vp = VectorProjection(HashEmbedder(), tmp_path / "chroma", prefix="vault")
    assert vp.name == "vault-hash-1024"
    with pytest.raises(ConfigError):
        VectorProjection(HashEmbedder(), tmp_path / "chroma", prefix="bad prefix!")


def test_dimension_mismatch_raises_config_error(tmp_path: Path) -> None:
    path = tmp_path / "chroma"
    VectorProjection(TinyEmbedder(4), path).upsert(["a"], ["x"], [{}])
    with pytest.raises(ConfigError, match="dim"):
        VectorProjection(TinyEmbedder(8), path)


def test_uses_our_embedding_function_never_chromas_default(tmp_path: Path) -> None:
    vp = VectorProjection(HashEmbedder(), tmp_path / "chroma")
    _fill(vp)
    vp.query("vector", 2)
    cfg = vp._col.configuration_json["embedding_function"]
    assert cfg["type"] == "known" and cfg["name"] == EF_NAME
    assert cfg["config"]["id"] == "hash-1024"
    assert (vp._col.metadata or {})["embedder_id"] == "hash-1024"
    vp.close()
    import chromadb
    from chromadb.config import Settings

    # chroma's own client accepts what we wrote as our EF (it raises on a conflicting one)
    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"),
                                       settings=Settings(anonymized_telemetry=False))
    ef = _ef_class()(HashEmbedder())
    col = client.get_collection(vp.name, embedding_function=ef)
    assert col._embedding_function.name() == EF_NAME
    assert col.configuration_json["embedding_function"] == cfg
    # chroma's default EF needs onnxruntime; it must never have been loaded
    assert "onnxruntime" not in sys.modules


def test_chroma_errors_become_backend_errors(tmp_path: Path) -> None:
    vp = VectorProjection(HashEmbedder(), tmp_path / "chroma")
    with pytest.raises(BackendError, match="chromadb upsert failed"):
        vp.upsert(["a"], ["text"], [{"nested": {"not": "allowed"}}])
    with pytest.raises(BackendError):
        vp.query("text", 3, where={"$bogus": 1})


def test_embedding_function_adapter_embeds_like_the_embedder(tmp_path: Path) -> None:
    emb = HashEmbedder()
    vp = VectorProjection(emb, tmp_path / "chroma")
    (vec,) = vp._ef(["hello world"])
    assert np.allclose(vec, emb.embed_query("hello world"))
    (qvec,) = vp._ef.embed_query(["hello world"])
    assert np.allclose(qvec, emb.embed_query("hello world"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_http_client_against_a_real_chroma_server(tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("chroma")
    if not exe.exists():
        pytest.skip("chroma CLI not installed next to the interpreter")
    port = _free_port()
    server = subprocess.Popen(
        [str(exe), "run", "--path", str(tmp_path / "srv"), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                client = http_client("127.0.0.1", port)
                break
            except BackendError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(0.2)
        vp = VectorProjection(HashEmbedder(), client=client)
        _fill(vp)
        assert vp.count() == 5
        assert vp.query("semantic search over a vector database", 1)[0][0] == "a.md#0"
        assert set(vp.embeddings(["a.md#0", "nope"])) == {"a.md#0"}
        vp.delete_where_path("b.md")
        assert vp.ids() == {"a.md#0", "a.md#1", "c.md#0"}
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_http_client_unreachable_server_is_a_backend_error() -> None:
    with pytest.raises(BackendError, match="Cannot reach the chroma server"):
        http_client("127.0.0.1", _free_port(), connect_timeout=0.5)


def test_embeddings_returns_stored_vectors(tmp_path: Path) -> None:
    emb = HashEmbedder()
    vp = VectorProjection(emb, tmp_path / "chroma")
    _fill(vp)
    got = vp.embeddings(["a.md#0", "b.md#1", "missing"])
    assert set(got) == {"a.md#0", "b.md#1"}
    assert got["a.md#0"].dtype == np.float32
    # from the float16 copy beside the store (vector_copy.py): equal to ~5e-4 a component
    assert np.allclose(got["a.md#0"], emb.embed_query(TEXTS["a.md#0"][0]), atol=1e-3)
    assert vp.embeddings([]) == {}


def test_close_releases_the_store_so_a_deleted_path_can_be_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "chroma"
    with VectorProjection(HashEmbedder(), path) as vp:
        _fill(vp)
    shutil.rmtree(path)
    vp2 = VectorProjection(HashEmbedder(), path)
    assert vp2.count() == 0
    _fill(vp2)
    assert vp2.count() == 5
    vp2.close()
    vp2.close()  # idempotent


# -- stored vectors by id, cached (issue G6) ----------------------------------------------------


def _stored(vp: VectorProjection, ids: list[str]) -> dict[str, np.ndarray]:
    """What chroma itself holds for these ids (no cache in between)."""
    got = vp._col.get(ids=ids, include=["embeddings"])
    return {i: np.asarray(v, dtype=np.float32) for i, v in zip(got["ids"], got["embeddings"],
                                                              strict=True)}


def test_embeddings_from_the_cache_equal_the_stored_vectors(tmp_path: Path) -> None:
    vp = VectorProjection(HashEmbedder(), tmp_path / "chroma")
    vp.copy = None   # the cache serves what the copy lacks: here, everything
    _fill(vp)
    ids = list(TEXTS)
    first = vp.embeddings(ids + ["missing"])   # from chroma, then cached
    stored = _stored(vp, ids)
    assert set(first) == set(ids) and len(vp.cache) == len(ids)
    hits = vp.cache.hits
    again = vp.embeddings(ids)
    assert vp.cache.hits == hits + len(ids)
    # bit for bit what chroma holds (it re-normalises what an upsert sent)
    assert all(np.array_equal(again[i], stored[i]) for i in ids)
    vp.delete(ids[:1])
    assert ids[0] not in vp.embeddings(ids[:1])
    vp.close()


def test_switching_collection_or_reopening_drops_the_cache(tmp_path: Path) -> None:
    vp = VectorProjection(HashEmbedder(), tmp_path / "chroma")
    vp.copy = None
    _fill(vp)
    vp.embeddings(list(TEXTS))
    assert len(vp.cache) == len(TEXTS)
    vp.reopen()
    assert len(vp.cache) == 0
    vp.embeddings(list(TEXTS))
    vp.start_generation(vp.generation_name(1))   # an empty new collection
    assert len(vp.cache) == 0 and vp.embeddings(list(TEXTS)) == {}
    vp.reset()
    assert len(vp.cache) == 0
    vp.close()


def test_vector_cache_is_bounded_and_least_recently_used_goes_first() -> None:
    from reme_agent.engine.projections.vector_cache import VectorCache

    one = np.ones(256, dtype=np.float32)
    cache = VectorCache(max_bytes=3 * (one.nbytes + 200))
    cache.put_many(["a", "b", "c"], [one, 2 * one, 3 * one])
    cache.get_many(["a"])                      # a is now the most recent
    cache.put_many(["d"], [4 * one])
    found, missing = cache.get_many(["a", "b", "c", "d"])
    assert missing == ["b"] and set(found) == {"a", "c", "d"}
    batch = np.stack([one, one])
    cache.put_many(["e", "f"], batch)
    batch[:] = 0                               # the cache holds copies, not views
    assert cache.get_many(["e"])[0]["e"][0] == 1.0
    assert VectorCache(max_bytes=0).get_many(["x"]) == ({}, ["x"])


def _sync_threshold(path: Path, name: str) -> int:
    """The collection's persisted HNSW save interval, as a fresh client reads it."""
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False,
                                                                  allow_reset=True))
    return client.get_collection(name).configuration_json["hnsw"]["sync_threshold"]


def test_collections_save_hnsw_every_sync_threshold_vectors(tmp_path: Path) -> None:
    """A cold open re-inserts every vector logged since the last HNSW save: chroma's 1000
    cost 1.8 s of each open; ours is lower."""
    vp = VectorProjection(HashEmbedder(), tmp_path / "chroma")
    _fill(vp)
    vp.close()
    assert _sync_threshold(tmp_path / "chroma", vp.name) == SYNC_THRESHOLD < 1000


def test_a_collection_made_with_chromas_default_gets_the_lower_threshold(tmp_path: Path) -> None:
    import chromadb
    from chromadb.config import Settings

    path = tmp_path / "chroma"
    emb = HashEmbedder()
    client = chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False,
                                                                  allow_reset=True))
    client.create_collection(f"reme-{emb.id}", configuration={"hnsw": {"space": "cosine"}},
                             metadata={"embedder_id": emb.id, "dim": emb.dim},
                             embedding_function=None)
    assert _sync_threshold(path, f"reme-{emb.id}") == 1000
    vp = VectorProjection(emb, path)
    _fill(vp)
    assert vp.count() == len(TEXTS)
    vp.close()
    assert _sync_threshold(path, vp.name) == SYNC_THRESHOLD


def test_warm_loads_in_the_background_and_close_waits_for_it(tmp_path: Path) -> None:
    import threading

    path = tmp_path / "chroma"
    vp = VectorProjection(HashEmbedder(), path)
    _fill(vp)
    vp.close()
    again = VectorProjection(HashEmbedder(), path)
    again.warm()
    again.close()   # must not pull the store from under the loading thread
    assert not [t for t in threading.enumerate() if t.name == "reme-warm-vectors"]
    third = VectorProjection(HashEmbedder(), path)
    third.warm()
    assert third.query("vector database search", 1)[0][0] == "a.md#0"
    third.close()
