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
``pkg_resources`` deprecation warning on import. Both are silenced, and the 0.2-2.6 s
dictionary load happens lazily on the first call that needs jieba, once, under a lock.

Short texts do not wait for that load (G6): while the full dictionary is not loaded, jieba's
own ``Tokenizer`` cuts them with a read-only ``FREQ`` looked up in a memory-mapped copy of
the dictionary (`engine/jieba_dict.py`), so the tokens are jieba's. After `LAZY_BUDGET`
characters the full dictionary is loaded (from that copy, in chunks that let other threads
run) and takes over: bulk tokenising keeps dict lookups. The first process of a user (or of
a new jieba) loads jieba's way and writes the copy in a background thread.
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

from reme_agent.engine import jieba_dict
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

log = logging.getLogger(__name__)

LAZY_BUDGET = 20_000
"""Characters a process cuts with the mapped dictionary before it loads the full one. On
CMRC text the mapped path cuts ~180k characters/s against ~240k with the dict, so this costs
at most ~0.04 s more than the full dictionary would, a fraction of loading it; bulk text
goes to the dict."""

_lock = threading.Lock()         # the full load
_lcut: Callable[..., list[str]] | None = None          # jieba.dt.lcut, once loaded
_import_lock = threading.Lock()  # warnings.catch_warnings is not thread-safe
_quick_lock = threading.Lock()
_quick_tried = False
_quick: Callable[..., list[str]] | None = None         # cuts with the mapped dictionary
_mapped: jieba_dict.CompactDict | None = None
_lazy_left = LAZY_BUDGET
WRITE_DELAY = 10.0
"""Seconds a long-running first process waits before it writes the compact dictionary."""


def _jieba() -> Any:
    """jieba, imported quietly (no pkg_resources, no deprecation warnings)."""
    with _import_lock:
        with warnings.catch_warnings(), without_pkg_resources():  # G6: ~0.1 s
            warnings.filterwarnings(
                "ignore", message=".*pkg_resources is deprecated.*", category=UserWarning
            )
            warnings.filterwarnings("ignore", category=DeprecationWarning)
            import jieba  # type: ignore[import-untyped]

        jieba.setLogLevel(logging.WARNING)
    return jieba


def _load() -> Callable[..., list[str]]:
    """Load jieba's full dictionary once. Why lazily: it costs 0.2-2.6 s. From the compact
    copy when there is a sound one (same pairs, chunked); else jieba's own load, after which
    the copy is written in a background thread for the next process."""
    global _lcut
    with _lock:
        if _lcut is None:
            jieba = _jieba()
            dt: Any = jieba.dt
            with dt.lock:
                if not dt.initialized and dt.dictionary is None:
                    compact = _compact()
                    try:
                        if compact is not None:
                            dt.FREQ, dt.total = compact.full(), compact.total
                            dt.initialized = True
                    except (ValueError, UnicodeDecodeError) as exc:  # then jieba's own load
                        log.debug("compact jieba dictionary unusable: %s", exc)
                if not dt.initialized:
                    dt.initialize()  # cache file: tempfile.gettempdir()/jieba.cache (jieba's)
                    if dt.dictionary is None:  # the default dictionary, untouched: copy it
                        _write_compact(dict(dt.FREQ), dt.total)
            _lcut = dt.lcut
            _drop_quick()
        return _lcut


def _drop_quick() -> None:
    """The full dictionary has taken over: free the mapped one's remembered lookups."""
    global _quick, _mapped
    with _quick_lock:
        _quick = _mapped = None


def _compact() -> jieba_dict.CompactDict | None:
    """The mapped dictionary of this jieba, opened once per process, if a sound one exists."""
    _quick_lcut()
    return _mapped


def _write_compact(freq: dict[str, int], total: int) -> None:
    """Write the compact copy (0.4 s of CPU) in a thread that waits until the main thread has
    finished or `WRITE_DELAY` has passed, so it does not compete for the GIL with the first
    process's own work. Not a daemon: a short process writes the file as it exits."""

    def write() -> None:
        threading.main_thread().join(WRITE_DELAY)
        jieba_dict.write_cache(freq, total)

    threading.Thread(target=write, name="reme-jieba-dict", daemon=False).start()


def _quick_lcut() -> Callable[..., list[str]] | None:
    """jieba's ``lcut`` on a ``Tokenizer`` whose FREQ is the mapped dictionary, or None when
    there is none (first run, read-only or damaged cache) or jieba's default tokenizer is
    already loaded or was given another dictionary (its FREQ is the truth then)."""
    global _quick, _quick_tried, _mapped
    if not _quick_tried:
        with _quick_lock:
            if not _quick_tried:
                try:
                    jieba = _jieba()
                    dt: Any = jieba.dt
                    if not dt.initialized and dt.dictionary is None:
                        _mapped = jieba_dict.open_cached()
                    if _mapped is not None:
                        _quick = _mapped_tokenizer(_mapped).lcut
                except Exception as exc:  # never worse than jieba's own load
                    log.debug("no quick jieba tokenizer: %s", exc)
                _quick_tried = True
    return _quick


def _mapped_tokenizer(compact: jieba_dict.CompactDict) -> Any:
    """A ``jieba.Tokenizer`` that looks words up in `compact`: jieba's own cutting code."""
    tokenizer: Any = _jieba().Tokenizer()
    tokenizer.FREQ = jieba_dict.LazyFreq(compact)
    tokenizer.total = compact.total
    tokenizer.initialized = True  # never load a dictionary of its own
    return tokenizer


def _cutter(size: int) -> Callable[..., list[str]]:
    """The full dictionary if loaded; else the mapped one while the budget lasts."""
    global _lazy_left
    if _lcut is not None:
        return _lcut
    if size <= _lazy_left:
        quick = _quick_lcut()
        if quick is not None and _lcut is None:
            _lazy_left -= size
            return quick
    return _load()


def warm_up() -> None:
    """Load the full jieba dictionary now (e.g. in a background thread at start-up)."""
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
    faster on English blocks (PERF-1), and no dictionary load. Anything else goes through
    jieba: with the mapped dictionary while the full one is not loaded (`LAZY_BUDGET`).
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
    raw = _cutter(len(text))(text, cut_all=False, HMM=True)
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
