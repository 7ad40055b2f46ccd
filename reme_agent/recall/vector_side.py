"""The vector side of a search on a worker thread: embed the query, then the ANN call.

Why: embedding the query (~3 ms of numpy with USE) and chroma's ANN call (~1 ms, most of it
waiting on chroma's own threads) need nothing the keyword side computes, and the keyword
side (tokenising, names, phrases, relations, BM25, the stored vectors of keyword-only
candidates) needs nothing from them. Started first and collected when the fusion needs it,
the vector side overlaps the keyword side instead of adding to it. The results are the same
values the sequential order gives; only the wall time changes.

The embedders that cost nothing (`hash`) run inline: a thread hand-off would cost more than
it saves. One small process-wide pool serves every vault; a search never waits on another
search's task except through the embedder's own lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

import numpy as np

from reme_agent.recall.timings import active, stage

if TYPE_CHECKING:
    from reme_agent.vault import Vault

__all__ = ["VectorSide", "start_vector_side"]

INLINE_KINDS = frozenset({"hash"})
"""Embedders fast enough that overlapping them is not worth a thread hand-off."""
OVERLAP = True
"""Switch for the bench and the tests: False runs every vector side inline (sequential)."""
_WORKERS = 2
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()

Result = tuple[np.ndarray, list[tuple[str, float]]]


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(_WORKERS, thread_name_prefix="reme-vector-side")
        return _pool


class VectorSide:
    """A started vector side: `result()` gives (query vector, ANN top ids with cosines)."""

    def __init__(self, run: Callable[[], tuple[np.ndarray, list[tuple[str, float]],
                                               float, float]], overlap: bool) -> None:
        self._run = run
        self._future: Future | None = None
        self._timings = active()
        if overlap:
            try:
                self._future = _executor().submit(run)
            except RuntimeError:   # the interpreter is shutting down: run it inline
                self._future = None
        self._done: Result | None = None

    def result(self) -> Result:
        if self._done is not None:
            return self._done
        if self._future is None:
            qvec, top, embed_s, ann_s = self._run()
            overlapped = False
        else:
            with stage("waiting for vectors"):
                qvec, top, embed_s, ann_s = self._future.result()
            overlapped = True
        if self._timings is not None:
            self._timings.add("embed query", embed_s, overlapped=overlapped)
            self._timings.add("ANN", ann_s, overlapped=overlapped)
        self._done = (qvec, top)
        return self._done


def start_vector_side(vault: Vault, text: str, want: int, *,
                      overlap: bool | None = None) -> VectorSide:
    """Embed `text` and ask the vector projection for its `want` nearest blocks, on a worker
    thread unless `overlap` is False (or the embedder is one that costs nothing)."""
    embedder, vector = vault.embedder, vault.vector

    def run() -> tuple[np.ndarray, list[tuple[str, float]], float, float]:
        t0 = time.perf_counter()
        qvec = embedder.embed_query(text)
        t1 = time.perf_counter()
        top = vector.query_embedding(qvec, want)
        return qvec, top, t1 - t0, time.perf_counter() - t1

    if overlap is None:
        overlap = OVERLAP and getattr(embedder, "kind", "") not in INLINE_KINDS
    return VectorSide(run, overlap)
