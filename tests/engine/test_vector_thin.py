"""The embedded store through chromadb's Rust bindings (`chroma_rust.py`, issue G6).

Both ways of opening a store must read and write the same files identically, a process that
only searches must never import chromadb's Python client, and a bindings API that does not
fit must fall back to that client instead of failing.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from reme_agent.engine.embedders import HashEmbedder
from reme_agent.engine.projections import chroma_rust
from reme_agent.engine.projections import vector as vector_mod
from reme_agent.engine.projections.vector import (
    CLIENT_ENV,
    EF_NAME,
    SYNC_THRESHOLD,
    VectorProjection,
    _ef_class,
)
from reme_agent.engine.projections.vector_flat import FlatIndex
from reme_agent.errors import BackendError

DIM = 512   # USE-sized vectors, from the hash embedder


def _corpus(n: int = 300) -> tuple[list[str], list[str], list[dict]]:
    rng = np.random.default_rng(7)
    words = ["vector", "index", "latency", "memory", "budget", "owner", "roadmap", "检索", "向量", "融合", "主题", "笔记", "cat", "windowsill", "apple", "cinnamon", "butter", "meeting", "weekly", "search", "block"]
    ids = [f"n{i // 5}.md#{i % 5}" for i in range(n)]
    texts = [" ".join(rng.choice(words, size=8)) for _ in range(n)]
    metas = [{"path": f"n{i // 5}.md", "line": i % 5} for i in range(n)]
    return ids, texts, metas


QUERIES = ["vector index", "检索 融合", "apple butter", "weekly meeting roadmap", "主题"]


def _full(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CLIENT_ENV, "client")


def _thin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CLIENT_ENV, raising=False)


def _answers(vp: VectorProjection, ids: list[str]) -> tuple[list, dict, int, set]:
    vp.flat = FlatIndex(max_vectors=0)   # chroma's own answers, not the exact copy's
    emb = vp.embedder
    top = [vp.query_embedding(emb.embed_query(q), 20) for q in QUERIES]
    filtered = vp.query_embedding(emb.embed_query("vector"), 5, where={"path": "n3.md"})
    vp.cache.clear()
    vecs = vp.embeddings(ids[::7] + ["missing#0"])
    return [*top, filtered], vecs, vp.count(), vp.ids()


def _ranked(top: list[tuple[str, float]]) -> list[tuple[float, frozenset[str] | int]]:
    """Groups of equal similarity, best first; HNSW orders ties (and picks which of the
    last group make the cut) arbitrarily, so the last group counts only by size."""
    groups: dict[float, set[str]] = {}
    for i, sim in top:
        groups.setdefault(sim, set()).add(i)
    ranked: list[tuple[float, frozenset[str] | int]] = [
        (sim, frozenset(ids)) for sim, ids in sorted(groups.items(), reverse=True)]
    if ranked:
        ranked[-1] = (ranked[-1][0], len(groups[ranked[-1][0]]))
    return ranked


def _same(a: tuple, b: tuple) -> None:
    (tops_a, vecs_a, n_a, ids_a), (tops_b, vecs_b, n_b, ids_b) = a, b
    assert (n_a, ids_a) == (n_b, ids_b)
    for qa, qb in zip(tops_a, tops_b, strict=True):
        assert _ranked(qa) == _ranked(qb)   # same ids, same float similarities
    assert vecs_a.keys() == vecs_b.keys() and "missing#0" not in vecs_a
    for k in vecs_a:
        assert vecs_a[k].dtype == vecs_b[k].dtype == np.float32
        assert np.array_equal(vecs_a[k], vecs_b[k])


@pytest.mark.parametrize("writer", ["thin", "full"])
def test_a_store_written_one_way_reads_the_same_both_ways(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str) -> None:
    ids, texts, metas = _corpus()
    path = tmp_path / "chroma"
    (_thin if writer == "thin" else _full)(monkeypatch)
    vp = VectorProjection(HashEmbedder(DIM), path, vault_id="v1")
    assert isinstance(vp._client, chroma_rust.RustStore) == (writer == "thin")
    vp.upsert(ids, texts, metas)
    vp.delete(ids[:3])
    vp.delete_where_path("n9.md")
    written = _answers(vp, ids)
    vp.close()

    _thin(monkeypatch)
    thin = VectorProjection(HashEmbedder(DIM), path, vault_id="v1")
    assert isinstance(thin._client, chroma_rust.RustStore)
    from_thin = _answers(thin, ids)
    thin.close()
    _full(monkeypatch)
    full = VectorProjection(HashEmbedder(DIM), path, vault_id="v1")
    assert not isinstance(full._client, chroma_rust.RustStore)
    from_full = _answers(full, ids)
    full.close()
    _same(written, from_thin)
    _same(from_thin, from_full)
    assert from_thin[2] == len(ids) - 3 - 5


def test_the_collection_configuration_is_the_one_chromas_client_writes() -> None:
    from chromadb.api.collection_configuration import (
        create_collection_configuration_to_json_str,
    )

    emb = HashEmbedder(DIM)
    vector_mod._LIVE[emb.id] = emb   # as a live projection registers it (else chroma: legacy)
    hnsw = {"space": "cosine", "sync_threshold": SYNC_THRESHOLD}
    metadata = {"embedder_id": emb.id, "dim": DIM, "created_by": "reme-agent"}
    theirs = create_collection_configuration_to_json_str(
        {"hnsw": dict(hnsw), "embedding_function": _ef_class()(emb)}, metadata)
    ours = chroma_rust.configuration_json(
        {"name": EF_NAME, "config": vector_mod._ef_config(emb)}, hnsw)
    assert json.loads(ours) == json.loads(theirs)


def test_a_searching_process_never_imports_chromas_python_client(tmp_path: Path) -> None:
    path = tmp_path / "chroma"
    ids, texts, metas = _corpus(40)
    with VectorProjection(HashEmbedder(DIM), path) as vp:
        vp.upsert(ids, texts, metas)
        expected = vp.query("vector index", 5)
    code = textwrap.dedent(f"""
        import json, sys
        from pathlib import Path
        from reme_agent.engine.embedders import HashEmbedder
        from reme_agent.engine.projections.vector import VectorProjection
        vp = VectorProjection(HashEmbedder({DIM}), Path({str(path)!r}))
        top = vp.query("vector index", 5)
        vecs = vp.embeddings({ids[:3]!r})
        print(json.dumps({{"top": top, "n": len(vecs),
                          "chromadb": sorted(m for m in sys.modules
                                             if m.split(".")[0] in ("chromadb", "posthog"))}}))
    """)
    env = {k: v for k, v in __import__("os").environ.items() if k != CLIENT_ENV}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env=env, check=True)
    got = json.loads(out.stdout)
    assert got["chromadb"] == []
    assert [tuple(t) for t in got["top"]] == expected and got["n"] == 3


def test_unverified_version_uses_the_full_client(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    _thin(monkeypatch)
    monkeypatch.setattr(vector_mod, "_thin_failed", False)
    monkeypatch.setattr(chroma_rust, "VERIFIED", ((0, 1), (0, 2)))
    with caplog.at_level(logging.DEBUG, logger="reme_agent"):
        vp = VectorProjection(HashEmbedder(DIM), tmp_path / "chroma")
    assert not isinstance(vp._client, chroma_rust.RustStore)
    assert "using chromadb's client" in caplog.text
    ids, texts, metas = _corpus(20)
    vp.upsert(ids, texts, metas)
    assert vp.count() == 20
    vp.close()


def test_bindings_refusing_the_first_call_fall_back_to_the_full_client(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _thin(monkeypatch)
    path = tmp_path / "chroma"
    ids, texts, metas = _corpus(30)
    with VectorProjection(HashEmbedder(DIM), path) as vp:
        vp.upsert(ids, texts, metas)
        before = _answers(vp, ids)

    def other_api(self: chroma_rust.RustStore, name: str) -> None:
        raise TypeError("get_collection() takes 2 positional arguments but 4 were given")

    monkeypatch.setattr(vector_mod, "_thin_failed", False)
    monkeypatch.setattr(chroma_rust.RustStore, "get_collection", other_api)
    vp = VectorProjection(HashEmbedder(DIM), path)
    assert not isinstance(vp._client, chroma_rust.RustStore)
    _same(before, _answers(vp, ids))
    vp.close()
    # the process stays on the full client: never both kinds on one store
    vp2 = VectorProjection(HashEmbedder(DIM), path)
    assert not isinstance(vp2._client, chroma_rust.RustStore)
    vp2.close()


def test_duplicate_ids_are_refused_as_by_chromas_client(tmp_path: Path) -> None:
    vp = VectorProjection(HashEmbedder(DIM), tmp_path / "chroma")
    vecs = np.asarray([HashEmbedder(DIM).embed_query("x")] * 2)
    with pytest.raises(BackendError, match="unique"):
        vp.upsert_vectors(["a", "a"], vecs, ["x", "y"], [{}, {}])
    assert vp.count() == 0
    vp.close()


def test_projections_on_one_store_share_its_bindings_until_the_last_closes(
        tmp_path: Path) -> None:
    path = tmp_path / "chroma"
    a = VectorProjection(HashEmbedder(DIM), path)
    b = VectorProjection(HashEmbedder(DIM), path)
    assert a._client is b._client and a._client.refs == 2
    ids, texts, metas = _corpus(20)
    a.upsert(ids, texts, metas)
    assert b.count() == 20   # the same bindings: no stale HNSW in between
    a.close()
    assert b.query("vector", 3) and b.count() == 20
    b.close()
    c = VectorProjection(HashEmbedder(DIM), path)
    assert c._client is not a._client and c.count() == 20
    c.close()


def test_a_reopen_sees_another_processes_writes(tmp_path: Path) -> None:
    path = tmp_path / "chroma"
    reader = VectorProjection(HashEmbedder(DIM), path)
    assert reader.count() == 0
    ids, texts, metas = _corpus(25)
    code = textwrap.dedent(f"""
        from pathlib import Path
        from reme_agent.engine.embedders import HashEmbedder
        from reme_agent.engine.projections.vector import VectorProjection
        with VectorProjection(HashEmbedder({DIM}), Path({str(path)!r})) as vp:
            vp.upsert({ids!r}, {texts!r}, {metas!r})
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    reader.reopen()
    assert reader.count() == 25
    assert reader.query(texts[4], 1)[0][0] == ids[4]
    reader.close()


def test_both_kinds_live_on_one_store_behave_like_two_processes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Never done on purpose (a process uses one kind), but a fallback after a thin open could
    leave both: each has its own SQLite pool and HNSW cache, so the other's writes need a
    reopen, exactly as between processes (BUG-12), and nothing is lost or damaged."""
    path = tmp_path / "chroma"
    ids, texts, metas = _corpus(600)   # > SYNC_THRESHOLD: both save HNSW segments
    _thin(monkeypatch)
    thin = VectorProjection(HashEmbedder(DIM), path)
    _full(monkeypatch)
    full = VectorProjection(HashEmbedder(DIM), path)
    assert isinstance(thin._client, chroma_rust.RustStore)
    assert not isinstance(full._client, chroma_rust.RustStore)
    thin.upsert(ids[:300], texts[:300], metas[:300])
    full.reopen()
    full.upsert(ids[300:], texts[300:], metas[300:])
    _thin(monkeypatch)
    thin.reopen()
    assert isinstance(thin._client, chroma_rust.RustStore)
    assert thin.count() == full.count() == 600
    _same(_answers(thin, ids), _answers(full, ids))
    thin.close()
    full.close()
    _thin(monkeypatch)
    with VectorProjection(HashEmbedder(DIM), path) as again:
        assert again.count() == 600 and again.query(texts[450], 1)[0][0] == ids[450]


def test_a_cold_search_process_answers_the_same_without_chromas_client(tmp_path: Path) -> None:
    """`reme-agent search` in a new process (no warm server): the same JSON as with the full
    client, and chromadb's Python package (and its telemetry) never imported."""
    import os

    from reme_agent.config import load_settings
    from reme_agent.vault import open_vault

    env = {"REME_EMBEDDER__NAME": "hash", "REME_SEARCH__USE_RECENCY": "false",
           "REME_INDEX__PROGRESS": "false", "REME_WARM": "0"}
    root = tmp_path / "vault"
    ids, texts, _ = _corpus(60)
    for i in range(0, 60, 5):
        note = root / "knowledge" / f"n{i}" / f"n{i}.md"
        note.parent.mkdir(parents=True)
        note.write_text("\n\n".join(texts[i:i + 5]) + "\n", encoding="utf-8")
    vault = open_vault(root, load_settings([], vault=root, environ=env), create=True)
    vault.index()
    vault.close()
    args = ["search", "vector index roadmap", "--json", "--no-log", "--vault", str(root)]
    code = ("import sys\nfrom reme_agent.cli import main\n"
            f"try:\n    main({args!r})\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('chromadb', 'posthog')),"
            " file=sys.stderr)")
    base = {k: v for k, v in os.environ.items() if not k.startswith("REME_")}
    runs = {kind: subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 timeout=300, check=True,
                                 env={**base, **env, CLIENT_ENV: kind})
            for kind in ("thin", "client")}
    assert runs["thin"].stderr.strip().splitlines()[-1] == "[]"
    assert runs["client"].stderr.strip().splitlines()[-1] != "[]"   # the check can see it
    assert json.loads(runs["thin"].stdout)["results"]
    assert runs["thin"].stdout == runs["client"].stdout
