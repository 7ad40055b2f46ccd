"""The zh + en tokenizer (DESIGN §6): real jieba, no mocks."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from reme_agent.engine.tokenize import STOPWORDS, stem, tokenize


def test_chinese_sentence_gives_words_without_function_words() -> None:
    toks = tokenize("我们今天在公园里讨论了向量数据库的设计。")
    assert "公园" in toks
    assert "讨论" in toks
    assert "设计" in toks
    for stop in ("我们", "在", "了", "的", "。"):
        assert stop not in toks


def test_english_stopwords_dropped_and_lowercased() -> None:
    toks = tokenize("How do I configure MY Vector Index?")
    assert toks == ["configur", "vector", "index"]
    assert {"how", "my", "i", "do"} <= STOPWORDS


def test_stopword_lists_are_substantial() -> None:
    zh = [w for w in STOPWORDS if not w.isascii()]
    en = [w for w in STOPWORDS if w.isascii()]
    assert len(zh) >= 100
    assert len(en) >= 150


@pytest.mark.parametrize(
    "words",
    [
        ("run", "runs", "running"),
        ("study", "studies", "studied", "studying"),
        ("create", "created", "creates", "creating"),
        ("hope", "hoped", "hoping"),
        ("box", "boxes"),
        ("watch", "watches", "watched", "watching"),
        ("stop", "stopped", "stopping"),
        ("play", "played", "playing"),
        ("class", "classes"),
        ("movie", "movies"),
        ("add", "added", "adding"),
        ("embed", "embedding", "embedded", "embeddings"),
    ],
)
def test_inflections_share_one_stem(words: tuple[str, ...]) -> None:
    assert len({stem(w) for w in words}) == 1, {w: stem(w) for w in words}


@pytest.mark.parametrize(
    "word", ["string", "thing", "bring", "need", "speed", "boss", "bus", "analysis", "status"]
)
def test_words_that_only_look_inflected_are_kept(word: str) -> None:
    assert stem(word) == word


def test_stem_is_idempotent_and_leaves_non_words_alone() -> None:
    for w in ["running", "studies", "created", "boxes", "movies", "notes", "played", "caches"]:
        assert stem(stem(w)) == stem(w)
    assert stem("2024") == "2024"
    assert stem("c++") == "c++"
    assert stem("naïve") == "naïve"
    assert stem("向量") == "向量"


def test_mixed_zh_en_numbers_and_symbols() -> None:
    toks = tokenize("我用Python写了3个脚本，版本3.14，C++ 也可以。Running tests!")
    assert "python" in toks
    assert "脚本" in toks
    assert "3.14" in toks
    assert "c++" in toks
    assert "run" in toks and "test" in toks
    assert all(t == t.lower() for t in toks)


def test_full_width_and_accented_text_normalised() -> None:
    assert tokenize("ＡＢＣ１２３") == ["abc123"]
    assert "café" in tokenize("a café in Paris")


def test_empty_and_punctuation_only() -> None:
    assert tokenize("") == []
    assert tokenize("   \n ") == []
    assert tokenize("，。！？--__") == []


def test_concurrent_calls_agree() -> None:
    texts = ["今天天气很好，我们去公园散步", "Vector databases index embeddings"] * 20
    expected = [tokenize(t) for t in texts]
    with ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(tokenize, texts))
    assert got == expected


def test_jieba_is_silent_on_first_use() -> None:
    """jieba's four loading lines and the pkg_resources warning must not reach stderr."""
    code = "from reme_agent.engine.tokenize import tokenize; print(tokenize('研究生命起源'))"
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert proc.stderr == ""
    assert "研究" in proc.stdout or "研究生" in proc.stdout
