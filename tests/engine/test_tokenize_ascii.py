"""The ASCII fast path of `tokenize` (PERF-1) must give exactly the jieba path's tokens."""

from __future__ import annotations

import string
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from reme_agent.engine import tokenize as tk
from reme_agent.engine.tokenize import JIEBA_ASCII_WORDS, _tokenize_jieba, tokenize

PARAGRAPHS = [
    "How do I configure MY Vector Index? Running tests, studies, and the 3.14% case.",
    "We moved the index to C++ and C# last year; AT&T's network was the bottleneck.",
    "Version 2.0.1 ships on 2024-05-01 at 10:30am; latency dropped 35.5% (p99: 120ms).",
    "e-mail foo_bar@example.com, see https://example.org/a/b?x=1&y=2#frag for the details.",
    "It's the users' choice: don't re-run `make test` unless CI fails... 1,000,000 rows!",
    "def tokenize(text: str) -> list[str]:\n    return [t.lower() for t in text.split()]",
    "x+=1; y-=2.5e-3; z = a*b/c % 7 && !flag || c++ ; i++; ++j; c#sharp AT&Tx",
    "Q3 revenue: $4.5M (+12%), EBITDA 1.2%% and .5 or 5. or 0.0.0.0 or 1.2.3%4",
]

ASCII_ALPHABET = "aZ19.%&#+-_@' cCAT\n\t"


def _same(text: str) -> None:
    assert tokenize(text) == _tokenize_jieba(text), text


def test_the_ascii_word_list_is_jiebas() -> None:
    """The constant stands in for jieba's dictionary so ASCII text never loads it."""
    tk.warm_up()
    import jieba  # type: ignore[import-untyped]

    found = sorted(w for w, f in jieba.dt.FREQ.items() if f and len(w) > 1 and w.isascii())
    assert found == sorted(JIEBA_ASCII_WORDS)


def test_paragraphs_agree() -> None:
    for text in PARAGRAPHS:
        _same(text)
    assert tokenize(PARAGRAPHS[0]) == ["configur", "vector", "index", "run", "test",
                                       "studi", "3.14%", "case"]
    assert "c++" in tokenize(PARAGRAPHS[1]) and "at&t" in tokenize(PARAGRAPHS[1])


def test_real_ascii_text_from_the_repo_agrees() -> None:
    """Source and docs of this repo: code, prose, Markdown tables, numbers."""
    root = Path(__file__).resolve().parents[2]
    files = sorted((root / "reme_agent").rglob("*.py")) + sorted(root.glob("*.md"))
    blocks = [b for f in files for b in f.read_text(encoding="utf-8").split("\n\n")
              if b.strip() and b.isascii()]
    assert len(blocks) > 200
    for text in blocks:
        _same(text)


@settings(max_examples=1500, deadline=None)
@given(st.text(alphabet=ASCII_ALPHABET, max_size=40))
def test_symbol_heavy_ascii_agrees(text: str) -> None:
    _same(text)


@settings(max_examples=1500, deadline=None)
@given(st.text(alphabet=string.printable, max_size=80))
def test_printable_ascii_agrees(text: str) -> None:
    _same(text)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=ASCII_ALPHABET + "ＡＴＣｃ＋＃＆．％０９　ﬁ²", max_size=30))
def test_text_that_nfkc_turns_into_ascii_agrees(text: str) -> None:
    """Full-width and compatibility characters become ASCII first, then take the fast path."""
    _same(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([*JIEBA_ASCII_WORDS, "C+", "c+", "AT&", "AT", "T", "#", "+",
                                 "1.5%", "x", " ", ".", "_", "-"]), max_size=12))
def test_near_misses_of_jieba_ascii_words_agree(parts: list[str]) -> None:
    _same("".join(parts))


def test_ascii_text_does_not_load_jieba() -> None:
    """Cold open: indexing English notes must not pay for jieba's dictionary."""
    code = ("import sys; from reme_agent.engine import tokenize as tk; "
            "print(tk.tokenize('Running vector tests at 3.14%')); "
            "print(tk._lcut is None, 'jieba' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert proc.stdout.splitlines() == ["['run', 'vector', 'test', '3.14%']", "True False"]
