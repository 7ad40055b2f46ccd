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


def test_vectors_read_once_are_answered_from_memory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A search asks again for rows an earlier one read (38% of the bench's at 10k): the
    projection's cache answers them, not the copy's file."""
    vp = VectorProjection(HashEmbedder(), tmp_path / "chroma")
    _fill(vp)
    assert vp.copy is not None
    reads: list[list[str]] = []
    real = vp.copy.get

    def spy(collection: str, ids, dim: int):  # noqa: ANN001
        reads.append(list(ids))
        return real(collection, ids, dim)
    monkeypatch.setattr(vp.copy, "get", spy)
    first = vp.embeddings(["a.md#0", "b.md#1"])
    again = vp.embeddings(["b.md#1", "a.md#0", "a.md#1"])
    assert reads == [["a.md#0", "b.md#1"], ["a.md#1"]]   # only the id never read
    assert set(again) == {"a.md#0", "b.md#1", "a.md#1"}
    assert all(np.array_equal(first[i], again[i]) for i in first)
    vp.delete(["a.md#0"])                       # a delete of this process is seen at once
    assert "a.md#0" not in vp.embeddings(["a.md#0"])
    vp.close()


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
