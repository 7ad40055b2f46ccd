"""The exact scan over a small collection's stored vectors (`vector_flat.py`, issue G6).

It must answer what chroma answers (the same nearest blocks; exact, so equal to chroma's
HNSW on these small sets), follow this process's writes without a rebuild, and never answer
from a copy that a write, a switch or a close made void.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from reme_agent.engine.embedders import HashEmbedder
from reme_agent.engine.projections.vector import VectorProjection
from reme_agent.engine.projections.vector_flat import FlatIndex

WORDS = ["river", "stone", "maple", "harbor", "lantern", "orbit", "violet", "canyon",
         "meadow", "signal", "检索", "向量", "融合", "主题", "会议", "笔记", "森林", "城市"]
QUERIES = ["river stone", "检索 融合", "maple harbor lantern", "会议 笔记", "orbit"]


def _texts(n: int, seed: int) -> dict[str, tuple[str, dict]]:
    rnd = random.Random(seed)
    return {f"n{i // 4}.md#{i % 4}": (" ".join(rnd.choices(WORDS, k=6)), {"path": f"n{i // 4}.md"})
            for i in range(n)}


def _upsert(vp: VectorProjection, rows: dict[str, tuple[str, dict]]) -> None:
    vp.upsert(list(rows), [t for t, _ in rows.values()], [m for _, m in rows.values()])


def _chroma(vp: VectorProjection, q: np.ndarray, k: int) -> list[tuple[str, float]]:
    res = vp._call("query", query_embeddings=q.reshape(1, -1), n_results=k,
                   include=["distances"])
    return [(i, 1.0 - d) for i, d in zip(res["ids"][0], res["distances"][0], strict=True)]


def _same_answer(flat: list[tuple[str, float]], chroma: list[tuple[str, float]]) -> None:
    """Same similarities in order; the same ids except among (near-)ties at the cut."""
    assert len(flat) == len(chroma)
    assert np.allclose([s for _, s in flat], [s for _, s in chroma], atol=1e-5)
    cut = chroma[-1][1]
    assert {i for i, s in flat if s > cut + 1e-5} == {i for i, s in chroma if s > cut + 1e-5}


@pytest.fixture
def vp(tmp_path: Path):
    proj = VectorProjection(HashEmbedder(64), tmp_path / "chroma")
    yield proj
    proj.close()


def _built(vp: VectorProjection) -> None:
    vp.flat.invalidate()
    vp._build_flat()
    assert vp.flat.ready


def test_the_exact_scan_answers_what_chroma_answers(vp: VectorProjection) -> None:
    _upsert(vp, _texts(300, seed=1))
    _built(vp)
    for text in QUERIES:
        q = vp.embedder.embed_query(text)
        _same_answer(vp.query_embedding(q, 25), _chroma(vp, q, 25))
    some = [f"n{i}.md#1" for i in range(0, 70, 7)]
    stored = vp.flat.vectors(some)
    assert stored is not None and stored.keys() == set(some)
    fetched = vp._call("get", ids=some, include=["embeddings"])
    for bid, vec in zip(fetched["ids"], fetched["embeddings"], strict=True):
        assert np.allclose(stored[bid], vec, atol=1e-6)


def test_own_writes_are_followed_without_a_rebuild(vp: VectorProjection) -> None:
    rows = _texts(200, seed=2)
    _upsert(vp, rows)
    _built(vp)
    matrix_before = vp.flat._ready[2]
    changed = {bid: ("maple harbor lantern " * 3, meta) for bid, (_, meta) in
               list(rows.items())[:10]}
    added = {f"new{i}.md#0": (f"orbit violet {WORDS[i]}", {"path": f"new{i}.md"})
             for i in range(5)}
    _upsert(vp, {**changed, **added})
    dropped = list(rows)[50:60]
    vp.delete(dropped)
    assert vp.flat.ready and vp.flat._ready[2] is not matrix_before   # followed, in place
    for text in QUERIES:
        q = vp.embedder.embed_query(text)
        flat = vp.query_embedding(q, 40)
        assert not {i for i, _ in flat} & set(dropped)
        _same_answer(flat, _chroma(vp, q, 40))
    assert len(vp.flat._ready[0]) == vp.count() == 200 + 5 - 10


def test_a_delete_by_path_or_a_switch_drops_the_copy_and_chroma_answers(
        vp: VectorProjection) -> None:
    _upsert(vp, _texts(120, seed=3))
    _built(vp)
    vp.delete_where_path("n3.md")
    assert not vp.flat.ready
    for t in vp._background():
        t.join()
    q = vp.embedder.embed_query("river stone")
    top = vp.query_embedding(q, 200)     # chroma answers, and a rebuild starts
    assert not any(i.startswith("n3.md#") for i, _ in top)
    for t in vp._background():
        t.join()
    assert vp.flat.ready and not any(i.startswith("n3.md#") for i in vp.flat._ready[0])
    vp.reopen()
    assert not vp.flat.ready


def test_a_build_that_a_write_overtakes_is_thrown_away() -> None:
    flat = FlatIndex()
    pages = [(["a", "b"], np.eye(2, dtype=np.float32))]

    def read(offset: int, limit: int):  # noqa: ANN202
        flat.apply(deleted=["a"])         # a write lands while the copy is being read
        return pages.pop() if pages else ([], np.zeros((0, 2), dtype=np.float32))
    assert not flat.build(lambda: 2, read)
    assert not flat.ready and flat.wanted()


def test_a_collection_over_the_limit_is_never_copied(vp: VectorProjection) -> None:
    _upsert(vp, _texts(40, seed=4))
    vp.flat = FlatIndex(max_vectors=30)
    vp._build_flat()
    assert not vp.flat.ready and not vp.flat.wanted()
    q = vp.embedder.embed_query("orbit")
    assert vp.query_embedding(q, 5) == _chroma_rounded(vp, q, 5)


def _chroma_rounded(vp: VectorProjection, q: np.ndarray, k: int) -> list[tuple[str, float]]:
    return [(i, float(min(1.0, max(-1.0, s)))) for i, s in _chroma(vp, q, k)]


def test_every_process_answers_from_its_first_query_the_same_way(tmp_path: Path) -> None:
    """A fresh process's first answer is the copy's, as a warm process's later ones are:
    no window in which chroma's approximate HNSW answers instead."""
    path = tmp_path / "chroma"
    with VectorProjection(HashEmbedder(64), path) as first:
        _upsert(first, _texts(400, seed=5))
        q = first.embedder.embed_query("orbit violet")
        warm = [first.query_embedding(q, 30) for _ in range(3)][-1]
    cold = VectorProjection(HashEmbedder(64), path)
    assert cold.query_embedding(q, 30) == warm and cold.flat.ready
    cold.close()


def test_a_store_over_the_limit_is_never_copied_in_the_background(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from reme_agent.engine.projections import vector_flat

    monkeypatch.setattr(vector_flat, "MAX_VECTORS", 50)
    path = tmp_path / "chroma"
    with VectorProjection(HashEmbedder(64), path) as first:
        _upsert(first, _texts(400, seed=6))
    again = VectorProjection(HashEmbedder(64), path)
    counted: list[int] = []
    real_count = again.count
    monkeypatch.setattr(again, "count", lambda: (counted.append(1), real_count())[1])
    q = again.embedder.embed_query("orbit")
    for i in range(3):
        again.query_embedding(q, 3)
        _upsert(again, {f"more{i}.md#0": ("orbit violet", {"path": f"more{i}.md"})})
        again.delete([f"n{i}.md#0"])
    assert not again.flat.ready and not again._background()
    assert len(counted) == 1     # known too big: own writes do not make every query count
    again.close()
