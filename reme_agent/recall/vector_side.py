"""The vector side of a search beside the keyword side: embed the query, then the ANN call.

Why: chroma's ANN call (~1 ms on a quiet machine, 3-5 ms under load, most of it waiting on
chroma's own threads with the GIL released) needs only the query vector, and the keyword
side (names, phrases, relations, BM25, rows, the stored vectors of keyword candidates)
needs nothing from it. So the query is embedded on the caller's thread, the ANN call goes to
a worker, and the keyword side runs meanwhile; `result()` collects it when the fusion needs
it. The values are those of the sequential order; only the wall time changes.

Why not embed on the worker too (mode "all"): USE is many small numpy calls that each need
the GIL, and with Python's 5 ms switch interval a busy main thread stalls them (measured:
embedding beside a 1 ms Python loop took 27 ms instead of 4.5 ms in sequence). `run_beside`
puts other GIL-free reads (chroma `get`) on the same pool. Embedders that cost nothing
(`hash`) run inline: a hand-off would cost more than it saves. So does a store whose vectors
are scanned exactly from memory (`engine/projections/vector_flat.py`: 0.4 ms at 5.6k
vectors, stored vectors read for free): waking a worker thread cost more than that. One small process-wide pool
serves every vault; no task waits on another task.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from reme_agent.recall.timings import active, stage

if TYPE_CHECKING:
    from reme_agent.vault import Vault

__all__ = ["VectorSide", "run_beside", "start_vector_side"]

INLINE_KINDS = frozenset({"hash"})
"""Embedders fast enough that overlapping them is not worth a thread hand-off."""
MODE = "ann"
"""What runs on the worker thread: "ann", "all" (embedding too) or "off" (sequential)."""
_WORKERS = 2
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()

Result = tuple[np.ndarray, list[tuple[str, float]]]
T = TypeVar("T")


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(_WORKERS, thread_name_prefix="reme-vector-side")
        return _pool


class VectorSide:
    """A started vector side: `result()` gives (query vector, ANN top ids with cosines)."""

    def __init__(self, embed: Callable[[], np.ndarray],
                 ann: Callable[[np.ndarray], list[tuple[str, float]]], mode: str) -> None:
        self._timings = active()
        self._embed, self._ann = embed, ann
        self._qvec: np.ndarray | None = None
        self._future: Future | None = None
        self._done: Result | None = None
        self._worker_s = (0.0, 0.0)
        if mode == "ann":
            with stage("embed query"):
                self._qvec = embed()
            self._submit(lambda: self._timed_ann(self._qvec))
        elif mode == "all":
            self._submit(self._timed_all)

    @property
    def threaded(self) -> bool:
        """True when the ANN call runs on a worker (then other chroma reads can, too)."""
        return self._future is not None

    def _submit(self, job: Callable[[], Result]) -> None:
        try:
            self._future = _executor().submit(job)
        except RuntimeError:   # the interpreter is shutting down: run it inline
            self._future = None

    def _timed_ann(self, qvec: np.ndarray | None) -> Result:
        assert qvec is not None
        t0 = time.perf_counter()
        top = self._ann(qvec)
        self._worker_s = (0.0, time.perf_counter() - t0)
        return qvec, top

    def _timed_all(self) -> Result:
        t0 = time.perf_counter()
        qvec = self._embed()
        t1 = time.perf_counter()
        top = self._ann(qvec)
        self._worker_s = (t1 - t0, time.perf_counter() - t1)
        return qvec, top

    def result(self) -> Result:
        if self._done is not None:
            return self._done
        if self._future is not None:
            with stage("waiting for vectors"):
                self._done = self._future.result()
            if self._timings is not None:
                embed_s, ann_s = self._worker_s
                if embed_s:
                    self._timings.add("embed query", embed_s, overlapped=True)
                self._timings.add("ANN", ann_s, overlapped=True)
            return self._done
        qvec = self._qvec
        if qvec is None:
            with stage("embed query"):
                qvec = self._embed()
        with stage("ANN"):
            self._done = (qvec, self._ann(qvec))
        return self._done


def run_beside(name: str, fn: Callable[[], T]) -> Callable[[], T]:
    """Run `fn` on the worker pool now; the returned callable waits for its result (and
    books its time as an overlapped stage `name`). Inline when the pool is gone."""
    timings = active()

    def timed() -> tuple[T, float]:
        t0 = time.perf_counter()
        value = fn()
        return value, time.perf_counter() - t0

    try:
        future = _executor().submit(timed)
    except RuntimeError:
        value = fn()
        return lambda: value

    def wait() -> T:
        with stage("waiting for vectors"):
            value, seconds = future.result()
        if timings is not None:
            timings.add(name, seconds, overlapped=True)
        return value
    return wait


def start_vector_side(vault: Vault, text: str, want: int, *,
                      mode: str | None = None) -> VectorSide:
    """Embed `text` and ask the vector projection for its `want` nearest blocks: `mode`
    "ann" embeds now and runs the ANN call on a worker thread, "all" runs both there, "off"
    runs both when `result()` is asked (default: `MODE`, "off" for embedders that cost
    nothing and for a store scanned exactly from memory)."""
    embedder, vector = vault.embedder, vault.vector
    if mode is None:
        inline = (getattr(embedder, "kind", "") in INLINE_KINDS
                  or getattr(getattr(vector, "flat", None), "ready", False))
        mode = "off" if inline else MODE
    return VectorSide(lambda: embedder.embed_query(text),
                      lambda qvec: vector.query_embedding(qvec, want), mode)
