"""One tokenizer for Chinese and English text (DESIGN §6, keyword projection).

Why one tokenizer for both languages: vault notes mix zh and en freely, and the measured
"en+" setup (notes/embedder_quality.md §5) gets identical results to per-language tokenizers
while being simpler. The pipeline is:

1. NFKC-normalise (full-width ``ＡＢＣ１２３`` becomes ``ABC123``) so documents and queries agree.
2. ``jieba.lcut`` with HMM on: it segments Chinese into words and keeps ASCII words, numbers
   (``3.14``) and ``c++`` whole. Pure-ASCII text without jieba's few ASCII dictionary words
   (``c++``, ``AT&T``...) takes a regex that gives the same tokens, without jieba.
3. Re-join runs jieba breaks apart only because they contain non-ASCII letters (``café`` comes
   back from jieba as ``caf`` + ``é``).
4. Keep tokens with a word character, lower-case them, drop zh + en stopwords (function words
   otherwise dominate BM25 on queries that share no content word with a note).
5. Light English suffix stemming (-s/-es/-ies/-ed/-ing) for ASCII words, so ``runs``,
   ``running`` and ``run`` share a term. Measured +0.03 MRR on LoCoMo.

jieba prints four lines to stderr while it loads and, with some setuptools versions, a
``pkg_resources`` deprecation warning on import. Both are silenced, and the 0.7 s
dictionary load happens lazily on the first call that needs jieba, once, under a lock.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import unicodedata
import warnings
from collections.abc import Callable
from typing import Any

from reme_agent.engine.imports import without_pkg_resources

__all__ = ["STOPWORDS", "stem", "tokenize", "warm_up"]

# --- stopwords ------------------------------------------------------------------------------


def _words(text: str) -> frozenset[str]:
    """Whitespace-separated word list -> set (keeps the lists below readable)."""
    return frozenset(text.split())


_ZH_STOPWORDS = _words(
    """
的 地 得 了 着 过 是 在 有 和 与 及 或 而 且 并 也 都 就 还 又 再 才 只 却 但 则
我 你 您 他 她 它 我们 你们 他们 她们 它们 咱们 自己 大家 别人 人家
这 那 这个 那个 这些 那些 这里 那里 这儿 那儿 这样 那样 这么 那么 这种 那种 此 其 该 某
哪 哪里 哪儿 哪个 哪些 什么 怎么 怎样 怎么样 如何 为什么 为何 谁 多少 几 啥
吗 呢 吧 啊 呀 哦 噢 嗯 哈 嘛 么 啦 哎 喔 呗 罢了 而已
一 一个 一些 一下 一点 一种 一样 一直 个 些 每 各 所有 任何
很 太 更 最 挺 非常 比较 十分 特别 极 越 越来越
不 没 没有 不是 别 无 非 未
会 能 能够 可以 可能 要 想 应该 应当 需要 得以 必须 肯定
就是 还是 或者 或是 而且 并且 但是 可是 不过 然而 因为 所以 因此 于是 如果 假如 要是
虽然 尽管 即使 即 既 既然 只要 只有 除了 除非 然后 接着 之后 以后 之前 以前 以来
被 把 给 让 使 叫 将 从 自 对 对于 向 往 到 为 为了 以 之 于 由 关于 根据 通过 按照 跟 同 比 像
上 下 里 中 内 外 前 后 时 时候 的话 等 等等 之类 方面 来 去
已经 曾经 正在 正 在于 刚 刚才 常常 经常 总是 往往 其实 其中 其他 其它 另外 别的 另
"""
)

_EN_STOPWORDS = _words(
    """
a an the and or but nor if then else so than that this these those there here
i me my mine myself we us our ours ourselves you your yours yourself yourselves
he him his himself she her hers herself it its itself they them their theirs themselves
what which who whom whose when where why how whatever whichever whoever whenever wherever
am is are was were be been being have has had having do does did doing done
will would shall should can could may might must ought
not no nor only own same too very just also even ever still yet already
of at by for with about against between into through during before after above below
to from up down in out on off over under again further once
all any both each few more most other others some such many much lot lots
s t d ll m o re ve y don doesn didn isn aren wasn weren hasn haven hadn won wouldn shan
shouldn cannot couldn mustn needn mightn ain
as until while because since though although unless whether
get gets got getting let lets well really quite rather
yes yeah ok okay oh hi hello hey please thanks thank
something anything nothing everything someone anyone everyone somebody anybody
"""
)

STOPWORDS: frozenset[str] = _ZH_STOPWORDS | _EN_STOPWORDS
"""Chinese + English stopwords, compared against lower-cased tokens before stemming."""

# --- stemming -------------------------------------------------------------------------------

_VOWELS = frozenset("aeiou")
# Words that look inflected but are not; stemming them would only create false matches.
_STEM_EXCEPTIONS = _words(
    """
    embed shed seed need feed speed breed bleed greed hundred naked sacred wicked
    during morning evening ceiling news series species always perhaps
    """
)


def _has_vowel(s: str) -> bool:
    return any(c in _VOWELS for c in s) or "y" in s[1:]


def _is_cvc(s: str) -> bool:
    """Porter's short consonant-vowel-consonant ending (``hop``, ``bas``), last not w/x/y."""
    if len(s) != 3:
        return False
    a, b, c = s
    return a not in _VOWELS and b in _VOWELS and c not in _VOWELS and c not in "wxy"


def _fix_after_strip(s: str) -> str:
    """Undo spelling changes made when -ed/-ing was added (Porter step 1b, simplified)."""
    if len(s) >= 4 and s[-1] == s[-2] and s[-1] not in _VOWELS and s[-1] not in "lsz":
        return s[:-1]  # running -> run, stopped -> stop (but add, fall, miss stay)
    if _is_cvc(s):
        return s + "e"  # hoped -> hope, based -> base
    return s


def stem(word: str) -> str:
    """Light English suffix stemming for lower-case ASCII words; anything else is returned as is.

    Deliberately weaker than Porter: it folds inflections only (-s/-es/-ies/-ed/-ing), which is
    where the measured gain is. Stems are index terms, not words: a final consonant + ``y``
    is spelled ``i`` and a final ``e`` is dropped on longer words, so that ``study``/``studies``/
    ``studied``, ``movie``/``movies``, ``cache``/``caches`` and ``watch``/``watches`` each
    share one term. Deterministic, and idempotent on its own output for ordinary words.
    """
    if len(word) <= 2 or not word.isascii() or not word.isalpha() or word in _STEM_EXCEPTIONS:
        return word
    w = word
    if len(w) > 3:  # step 1: plurals and 3rd person
        if w.endswith("ies") and len(w) > 4:
            w = w[:-2]  # studies -> studi (= study)
        elif w.endswith(("sses", "xes", "ches", "shes", "zzes")):
            w = w[:-2]  # classes -> class, boxes -> box, watches -> watch
        elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
            w = w[:-1]  # runs -> run, notes -> note, embeddings -> embedding
    if len(w) > 3 and w not in _STEM_EXCEPTIONS:  # step 2: past tense, progressive
        if w.endswith("ied") and len(w) > 4:
            w = w[:-2]  # studied -> studi
        elif w.endswith("eed"):
            pass  # agreed, exceed: leave alone rather than guess
        elif w.endswith("ed"):
            s = w[:-2]
            if len(s) >= 3 and _has_vowel(s):
                w = _fix_after_strip(s)  # played -> play, stopped -> stop, hoped -> hope
        elif w.endswith("ing"):
            s = w[:-3]
            if len(s) >= 3 and _has_vowel(s):
                w = _fix_after_strip(s)  # running -> run, making -> make
    if w.endswith("y") and len(w) >= 3 and w[-2] not in _VOWELS:
        w = w[:-1] + "i"  # study -> studi, try -> tri (= tries)
    elif w.endswith("e") and len(w) > 4:
        w = w[:-1]  # cache -> cach (= caches), create -> creat (= created)
    return w


# Why cached: once jieba is skipped, stemming is most of the time left on English text, and a
# vault's vocabulary repeats. `stem` is pure; lru_cache is thread-safe.
_stem = functools.lru_cache(maxsize=1 << 16)(stem)

# --- jieba ----------------------------------------------------------------------------------

_WORDY = re.compile(r"[^\W_]")  # has a letter or digit (underscore alone is not a word)
_PLAIN_RUN = re.compile(r"^[^\W_]+$")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")

# ASCII fast path. Without Chinese, jieba's DAG only ever picks a multi-character word from
# its dictionary; every other ASCII run goes whole to finalseg, which splits it with exactly
# this pattern (its `re_skip`) and drops nothing else that has a letter or digit. So ASCII
# text containing none of those words tokenizes the same without jieba. The words are
# jieba 0.42.1's multi-character ASCII entries, `[w for w, f in jieba.dt.FREQ.items() if f
# and len(w) > 1 and w.isascii()]`, kept as a constant so ASCII text never loads the
# dictionary (test_tokenize_ascii.py checks it against FREQ).
JIEBA_ASCII_WORDS = ("AT&T", "C#", "C++", "c#", "c++")
_JIEBA_ASCII = re.compile("|".join(re.escape(w) for w in JIEBA_ASCII_WORDS))
_ASCII_TOKEN = re.compile(r"[a-z0-9]+(?:\.\d+)?%?")  # finalseg's re_skip, on lowered text

_lock = threading.Lock()
_lcut: Callable[..., list[str]] | None = None


def _load() -> Callable[..., list[str]]:
    """Import and initialise jieba once, quietly. Why lazily: the dictionary costs ~0.7 s."""
    global _lcut
    with _lock:
        if _lcut is None:
            with warnings.catch_warnings(), without_pkg_resources():  # G6: ~0.1 s
                warnings.filterwarnings(
                    "ignore", message=".*pkg_resources is deprecated.*", category=UserWarning
                )
                warnings.filterwarnings("ignore", category=DeprecationWarning)
                import jieba  # type: ignore[import-untyped]

            jieba.setLogLevel(logging.WARNING)
            jieba.initialize()  # cache file: tempfile.gettempdir()/jieba.cache (jieba's default)
            tokenizer: Any = jieba.dt
            _lcut = tokenizer.lcut
        return _lcut


def warm_up() -> None:
    """Load the jieba dictionary now (e.g. in a background thread at start-up)."""
    _load()


def _merge_foreign_runs(tokens: list[str]) -> list[str]:
    """Re-join letters jieba splits off one by one (``caf`` + ``é``) into the original word."""
    out: list[str] = []
    for tok in tokens:
        if (
            out
            and _PLAIN_RUN.match(tok)
            and _PLAIN_RUN.match(out[-1])
            and not (tok.isascii() and out[-1].isascii())
            and not _CJK.search(tok)
            and not _CJK.search(out[-1])
        ):
            out[-1] += tok
        else:
            out.append(tok)
    return out


def tokenize(text: str) -> list[str]:
    """Split zh/en text into lower-cased, stemmed content tokens (stopwords removed).

    Thread-safe. ASCII text (after NFKC) skips jieba: same tokens, an order of magnitude
    faster on English blocks (PERF-1), and no dictionary load. Anything else loads jieba's
    dictionary on first use (~0.7 s).
    """
    if not text or not text.strip():
        return []
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)  # NFKC leaves ASCII unchanged
    if text.isascii() and not _JIEBA_ASCII.search(text):
        return [_stem(tok) for tok in _ASCII_TOKEN.findall(text.lower()) if tok not in STOPWORDS]
    return _jieba_terms(text)


def _tokenize_jieba(text: str) -> list[str]:
    """`tokenize` always through jieba: the reference the ASCII fast path must equal."""
    if not text or not text.strip():
        return []
    return _jieba_terms(unicodedata.normalize("NFKC", text))


def _jieba_terms(text: str) -> list[str]:
    """Terms of NFKC-normalised text via jieba (steps 2-5 of the module docstring)."""
    lcut = _lcut or _load()
    raw = lcut(text, cut_all=False, HMM=True)
    if not text.isascii():
        raw = _merge_foreign_runs(raw)
    out: list[str] = []
    for tok in raw:
        if not _WORDY.search(tok):
            continue
        tok = tok.strip().lower()
        if not tok or tok in STOPWORDS:
            continue
        out.append(_stem(tok))
    return out


def estimate_tokens(text: str) -> int:
    """Rough LLM token count: 1 per CJK character + 1 per 4 other non-space characters."""
    cjk = len(_CJK.findall(text))
    other = len("".join(text.split())) - cjk
    return cjk + -(-other // 4)
