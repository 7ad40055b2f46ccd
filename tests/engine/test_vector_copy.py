"""The float16 copy of every stored vector beside the chroma store (vector_copy.py): what
recall's keyword-only candidates are scored with, without a chroma read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from reme_agent.config import Settings
from reme_agent.engine.embedders import HashEmbedder
from reme_agent.engine.projections.vector import VectorProjection
from reme_agent.engine.projections.vector_copy import VectorCopy
from reme_agent.vault import open_vault

TEXTS = {
    "a.md#0": ("vector database indexing for semantic search", "a.md"),
    "a.md#1": ("keyword scoring with bm25 and jieba", "a.md"),
    "b.md#0": ("graph centrality and communities", "b.md"),
    "b.md#1": ("recency decay of old notes", "b.md"),
}


def _fill(vp: VectorProjection, ids: list[str] | None = None) -> None:
    ids = list(TEXTS) if ids is None else ids
    vp.upsert(ids, [TEXTS[i][0] for i in ids], [{"path": TEXTS[i][1]} for i in ids])


def _chroma_gets(vp: VectorProjection, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every `get` the projection sends chroma, recorded."""
    calls: list[Any] = []
    real = vp._call

    def spy(op: str, /, **kwargs: Any) -> Any:
        if op == "get":
            calls.append(kwargs.get("ids"))
        return real(op, **kwargs)
    monkeypatch.setattr(vp, "_call", spy)
    return calls


def _stored(vp: VectorProjection, ids: list[str]) -> dict[str, np.ndarray]:
    got = vp._col.get(ids=ids, include=["embeddings"])
    return dict(zip(got["ids"], np.asarray(got["embeddings"], dtype=np.float32), strict=True))


def test_stored_vectors_come_from_the_copy_without_asking_chroma(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    vp = VectorProjection(HashEmbedder(), tmp_path / "chroma")
    _fill(vp)
    stored = _stored(vp, list(TEXTS))
    gets = _chroma_gets(vp, monkeypatch)
    got = vp.embeddings([*TEXTS, "missing"])
    assert set(got) == set(TEXTS)
    assert gets == [["missing"]]   # only the id the copy lacks goes to chroma
    for bid, vec in got.items():
        assert vec.dtype == np.float32
        assert np.abs(vec - stored[bid]).max() < 1e-3   # float16 of chroma's unit vector
    vp.close()


def test_deletes_reach_the_copy(tmp_path: Path) -> None:
    vp = VectorProjection(HashEmbedder(), tmp_path / "chroma")
    _fill(vp)
    assert vp.copy is not None
    vp.delete(["a.md#0"])
    assert "a.md#0" not in vp.copy.get(vp.name, list(TEXTS), vp.embedder.dim)
    vp.delete_where_path("b.md")
    assert set(vp.copy.get(vp.name, list(TEXTS), vp.embedder.dim)) == {"a.md#1"}
    vp.reset()
    assert vp.copy.count(vp.name) == 0
    vp.close()


def test_a_new_generation_has_its_own_rows_and_dropping_one_drops_them(tmp_path: Path) -> None:
    vp = VectorProjection(HashEmbedder(), tmp_path / "chroma")
    _fill(vp)
    old = vp.name
    vp.start_generation(vp.generation_name(1))
    assert vp.copy is not None and vp.copy.count(vp.name) == 0
    assert vp.embeddings(list(TEXTS)) == {}
    _fill(vp, ["a.md#0"])
    assert set(vp.embeddings(list(TEXTS))) == {"a.md#0"}
    assert vp.copy.count(old) == len(TEXTS)
    vp.drop(old)
    assert vp.copy.count(old) == 0
    vp.close()


def test_a_server_store_has_no_copy(tmp_path: Path) -> None:
    """A chroma server's collections can be written by anyone: nothing to follow."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    client = chromadb.EphemeralClient(settings=ChromaSettings(anonymized_telemetry=False,
                                                              allow_reset=True))
    vp = VectorProjection(HashEmbedder(), client=client, prefix="nocopy")
    assert vp.copy is None
    _fill(vp)
    assert set(vp.embeddings(list(TEXTS))) == set(TEXTS)
    vp.close()


def test_an_unusable_copy_file_leaves_chroma_to_answer(tmp_path: Path) -> None:
    (tmp_path / "chroma-vectors.sqlite").write_bytes(b"not a database" * 100)
    vp = VectorProjection(HashEmbedder(), tmp_path / "chroma")
    _fill(vp)   # the write lands in chroma; the copy's failure is only logged
    got = vp.embeddings(list(TEXTS))
    assert set(got) == set(TEXTS)
    stored = _stored(vp, list(TEXTS))
    assert all(np.array_equal(got[i], stored[i]) for i in TEXTS)   # chroma's own values
    vp.close()


def test_copy_round_trip_keeps_unit_length_and_last_write(tmp_path: Path) -> None:
    copy = VectorCopy(tmp_path / "v.sqlite")
    vecs = np.array([[3.0, 4.0], [0.0, 2.0], [1.0, 1.0]], dtype=np.float32)
    copy.put("c", ["x", "y", "x"], vecs, ["p.md", "p.md", "p.md"])
    got = copy.get("c", ["x", "y", "z"], 2)
    assert set(got) == {"x", "y"}
    assert np.allclose(got["x"], [2 ** -0.5, 2 ** -0.5], atol=1e-3)   # the last "x"
    assert np.allclose(got["y"], [0.0, 1.0])
    assert copy.get("other", ["x"], 2) == {}
    assert copy.get("c", ["x"], 3) == {}   # not this dimension: left to chroma
    assert copy.count("c") == 2 and copy.ids("c") == {"x", "y"}
    copy.close()


def _vault(root: Path):
    return open_vault(root, Settings(embedder={"name": "hash"}, index={"progress": False}))


def test_a_whole_vault_run_fills_a_copy_made_before_it_existed(tmp_path: Path) -> None:
    """An index from before the copy (or one a crash left behind) is brought level by the
    next whole-vault run: missing rows copied from chroma, orphans removed."""
    root = tmp_path / "vault"
    (root / "knowledge").mkdir(parents=True)
    for i in range(6):
        (root / "knowledge" / f"n{i}.md").write_text(
            f"# Note {i}\n\nfirst paragraph {i} about topic {i}\n\nsecond paragraph {i}\n",
            encoding="utf-8")
    vault = _vault(root)
    vault.index()
    vp = vault.vector
    assert vp.copy is not None
    ids = vault.indexer.state.all_block_ids()
    assert vp.copy.ids(vp.name) == ids
    lost = sorted(ids)[:5]
    vp.copy.delete(vp.name, lost)
    vp.copy.put(vp.name, ["orphan"], np.ones((1, vp.embedder.dim), dtype=np.float32), ["x.md"])
    vault.refresh(["knowledge/n0.md"])   # a path-limited run leaves the copy alone
    assert vp.copy.count(vp.name) == len(ids) - 4
    vault.index()
    assert vp.copy.ids(vp.name) == ids
    stored = _stored(vp, lost)
    copied = vp.copy.get(vp.name, lost, vp.embedder.dim)
    assert all(np.abs(copied[i] - stored[i]).max() < 1e-3 for i in lost)
    vault.close()


def test_damaged_rows_are_left_to_chroma(tmp_path: Path) -> None:
    """A row of the wrong size or holding NaN never reaches a score: chroma answers it."""
    import sqlite3

    vp = VectorProjection(HashEmbedder(), tmp_path / "chroma")
    _fill(vp)
    assert vp.copy is not None
    db = sqlite3.connect(vp.copy.path)
    db.execute("UPDATE vectors SET vec = ? WHERE id = ?", (b"\x00\x7e" * vp.embedder.dim, "a.md#0"))
    db.execute("UPDATE vectors SET vec = ? WHERE id = ?", (b"\x00" * 7, "b.md#0"))
    db.commit()
    db.close()
    got = vp.embeddings(list(TEXTS))
    stored = _stored(vp, list(TEXTS))
    assert set(got) == set(TEXTS)
    assert all(np.isfinite(v).all() for v in got.values())
    assert np.array_equal(got["a.md#0"], stored["a.md#0"])   # chroma's, not the NaN row
    assert np.array_equal(got["b.md#0"], stored["b.md#0"])
    vp.close()


class _CountingDb:
    """The copy's connection, with the ids of every read it runs recorded."""

    def __init__(self, db: Any) -> None:
        self.db = db
        self.reads: list[list[str]] = []

    def execute(self, sql: str, params: Any = ()) -> Any:
        if sql.startswith("SELECT id, vec"):
            self.reads.append(list(params[1:]))
        return self.db.execute(sql, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)


def _counting(copy: VectorCopy, monkeypatch: pytest.MonkeyPatch) -> _CountingDb:
    db = copy._conn()
    assert db is not None
    spy = _CountingDb(db)
    monkeypatch.setattr(copy, "_conn", lambda: spy)
    return spy


def test_rows_read_once_are_answered_from_memory_until_this_process_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = VectorCopy(tmp_path / "v.sqlite")
    copy.put("c", ["x", "y"], np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32),
             ["p.md", "q.md"])
    db = _counting(copy, monkeypatch)
    first = copy.get("c", ["x", "y"], 2)
    again = copy.get("c", ["y", "x", "z"], 2)
    assert db.reads == [["x", "y"], ["z"]]   # only the id never read goes to SQLite
    assert set(again) == {"x", "y"}
    assert all(np.array_equal(first[i], again[i]) for i in first)
    # a write of this process (a new value, a delete, a drop) is seen at once
    copy.put("c", ["x"], np.array([[0.0, 3.0]], dtype=np.float32), ["p.md"])
    assert np.allclose(copy.get("c", ["x"], 2)["x"], [0.0, 1.0])
    copy.delete("c", ["y"])
    assert copy.get("c", ["x", "y"], 2).keys() == {"x"}
    copy.delete_path("c", "p.md")
    assert copy.get("c", ["x"], 2) == {}
    copy.put("c", ["x"], np.array([[1.0, 0.0]], dtype=np.float32), ["p.md"])
    assert copy.get("c", ["x"], 2).keys() == {"x"}
    copy.drop("c")
    assert copy.get("c", ["x"], 2) == {}
    copy.close()


def test_remembered_rows_belong_to_their_collection_and_are_bounded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from reme_agent.engine.projections import vector_copy

    copy = VectorCopy(tmp_path / "v.sqlite")
    vecs = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=np.float32)
    copy.put("c", ["x", "y", "z"], vecs, ["p.md"] * 3)
    copy.put("d", ["x"], vecs[1:2], ["p.md"])
    assert np.allclose(copy.get("c", ["x"], 2)["x"], [1.0, 0.0])
    assert np.allclose(copy.get("d", ["x"], 2)["x"], [0.0, 1.0])   # not c's row
    assert copy.get("e", ["x"], 2) == {}
    monkeypatch.setattr(vector_copy, "MAX_CACHED", 2)
    db = _counting(copy, monkeypatch)
    copy.get("c", ["x", "y", "z"], 2)   # keeps the last two
    copy.get("c", ["y", "z"], 2)
    copy.get("c", ["x"], 2)
    assert db.reads == [["x", "y", "z"], ["x"]]
    copy.close()


def test_a_reopen_forgets_the_rows_kept_in_memory(tmp_path: Path) -> None:
    """Another process's index run makes the projection reopen: rows are read again then."""
    import sqlite3

    vp = VectorProjection(HashEmbedder(), tmp_path / "chroma")
    _fill(vp)
    assert vp.copy is not None
    before = vp.embeddings(["a.md#0"])["a.md#0"]          # from the copy, kept in memory
    db = sqlite3.connect(vp.copy.path)                     # "another process" removes it
    db.execute("DELETE FROM vectors WHERE id = ?", ("a.md#0",))
    db.commit()
    db.close()
    assert np.array_equal(vp.embeddings(["a.md#0"])["a.md#0"], before)
    vp.reopen()
    stored = _stored(vp, ["a.md#0"])["a.md#0"]
    after = vp.embeddings(["a.md#0"])["a.md#0"]            # the file lacks it: chroma's
    assert np.array_equal(after, stored) and not np.array_equal(after, before)
    vp.close()
