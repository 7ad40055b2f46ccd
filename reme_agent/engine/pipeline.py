"""The indexer's embedding pipeline: blocks are embedded and stored while files are still read.

Before G6 an index run read and parsed every file, then embedded every new block, then wrote
the vectors: the embedder idled while files were parsed and the parser idled while it
embedded. Here the indexer hands each new block to :meth:`EmbedPipeline.add` as soon as it is
parsed; full batches (``batch_size``, the same boundaries as ``VectorProjection.upsert``, so
the vectors are the same) go through a bounded queue to a worker that embeds them and writes
them to the vector store, in order. The reader blocks when the queue is full.

Where the embedding runs:

- **inline**: nothing is started; :meth:`finish` embeds everything at the end with
  ``VectorProjection.upsert``, exactly the old path. Used until ``start_after`` blocks are
  pending, so a tool's one-note refresh or a no-op run never starts anything.
- **process** (large runs on 2+ cores): a child process (`engine/embed_child.py`) embeds;
  a sender thread feeds it and a receiver thread writes its vectors. The child is not
  slowed by this process's GIL, which chroma's writes hold for their whole call.
- **thread**: one worker thread embeds and writes; the fallback when the child cannot be
  started (no ``sys.executable``, an embedder it cannot rebuild) or on one CPU.

An error in the worker is raised by :meth:`finish` (the indexer's graph and state are already
written by then, as before); :meth:`abort` stops everything when the reader fails.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import queue
import select
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from reme_agent.engine.embed_child import read_frame, write_frame
from reme_agent.engine.embedders import usable_cpus
from reme_agent.errors import BackendError

__all__ = ["EmbedPipeline", "Mode"]

log = logging.getLogger("reme_agent.index")

Mode = Literal["auto", "process", "thread", "inline"]
_DONE = None


class _Stop(Exception):
    """The reader gave up (its own error); the worker just stops."""


class EmbedPipeline:
    """Embeds and stores blocks behind the caller's back; see the module docstring.

    ``vector`` is a ``VectorProjection`` (``upsert``, ``upsert_vectors``, ``embedder``).
    ``progress(n)`` is called from the worker after each stored batch; ``mode="auto"`` picks
    process or thread once ``start_after`` blocks are pending (``inline`` never starts one).
    """

    def __init__(self, vector: Any, *, batch_size: int, mode: Mode = "auto",
                 start_after: int = 512, depth: int = 8, write_batch: int = 512,
                 threads: Any = "auto") -> None:
        self.vector = vector
        self.batch_size = max(1, int(batch_size))
        self.mode: Mode = mode
        self.start_after = max(0, int(start_after))
        self.depth = max(1, int(depth))
        self.write_batch = max(self.batch_size, int(write_batch))
        self.threads = threads
        self.progress: Callable[[int], None] | None = None
        self.added = 0
        self.stored = 0
        self._held: list[tuple[str, str, dict[str, Any]]] = []   # not yet handed to a worker
        self._todo: queue.Queue[Any] = queue.Queue(maxsize=self.depth)
        self._inflight: queue.Queue[Any] = queue.Queue(maxsize=self.depth)
        self._threads: list[threading.Thread] = []
        self._child: subprocess.Popen[bytes] | None = None
        self._error: BaseException | None = None
        self._lock = threading.Lock()
        self.started: Literal["", "process", "thread"] = ""

    # -- the reader's side ---------------------------------------------------------------
    def add(self, block_id: str, document: str, metadata: dict[str, Any]) -> None:
        """Queue one block (blocks the caller while the worker is `depth` batches behind)."""
        self._held.append((block_id, document, metadata))
        self.added += 1
        if not self.started:
            if self.mode == "inline" or len(self._held) < max(self.start_after, 1):
                return
            self._start()
        while len(self._held) >= self.batch_size:
            batch, self._held = self._held[:self.batch_size], self._held[self.batch_size:]
            self._put(batch)

    def finish(self, start_bar: Callable[[int], Any] | None = None) -> int:
        """Embed and store what is left, wait for the worker; returns blocks stored.

        ``start_bar(n)`` opens a progress bar for the ``n`` blocks not stored yet (the
        indexer's "embedding" stage once reading is done); the worker updates it from then
        on, so it ends at n. Raises the worker's first error.
        """
        with self._lock:
            left = self.added - self.stored
            bar = start_bar(left) if start_bar is not None and left else None
            self.progress = bar.update if bar is not None else None
        try:
            if not self.started:
                held, self._held = self._held, []
                if not held:
                    return 0
                ids, docs, metas = (list(x) for x in zip(*held, strict=True))
                self.stored = self.vector.upsert(ids, docs, metas, progress=self.progress)
                return self.stored
            for s in range(0, len(self._held), self.batch_size):
                self._put(self._held[s:s + self.batch_size])
            self._held = []
            self._shutdown()
            if self._error is not None:
                raise self._error
            return self.stored
        finally:
            if bar is not None:
                bar.close()

    @property
    def remaining(self) -> int:
        """Blocks added but not stored yet (for the size of the embedding bar)."""
        return self.added - self.stored

    def abort(self) -> None:
        """Stop the worker without storing the rest (the reader failed)."""
        self._held = []
        if self.started:
            self._fail(_Stop("the index run stopped"))
            self._shutdown()

    # -- worker plumbing -----------------------------------------------------------------
    def _put(self, batch: list[tuple[str, str, dict[str, Any]]]) -> None:
        self._todo.put(batch)

    def _start(self) -> None:
        mode = self.mode
        if mode == "auto":
            mode = "process" if usable_cpus() >= 2 else "thread"
        child = self._spawn() if mode == "process" else None
        self.started = "process" if child is not None else "thread"
        if child is not None:
            self._child = child
            self._run_thread(self._drive_child, "reme-embed-send")
        else:
            self._run_thread(self._thread_loop, "reme-embed")

    def _run_thread(self, target: Callable[[], None], name: str) -> None:
        t = threading.Thread(target=target, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def _shutdown(self) -> None:
        self._todo.put(_DONE)
        for t in self._threads:
            t.join()
        self._threads = []
        if self._child is not None:
            child, self._child = self._child, None
            for stream in (child.stdin, child.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()

    def _fail(self, exc: BaseException) -> None:
        with self._lock:
            if self._error is None:
                self._error = exc
        child = self._child
        if child is not None and child.poll() is None:
            child.kill()  # unblocks a sender/receiver stuck on its pipes

    def _store(self, batch: list[tuple[str, str, dict[str, Any]]], vecs: np.ndarray,
               pending: list[Any]) -> None:
        """Buffer a batch's vectors; write to the store every `write_batch` blocks."""
        pending.append((batch, vecs))
        if sum(len(b) for b, _ in pending) >= self.write_batch:
            self._flush(pending)

    def _flush(self, pending: list[Any]) -> None:
        if not pending:
            return
        ids = [b[0] for batch, _ in pending for b in batch]
        docs = [b[1] for batch, _ in pending for b in batch]
        metas = [b[2] for batch, _ in pending for b in batch]
        vecs = np.concatenate([v for _, v in pending])
        pending.clear()
        self.vector.upsert_vectors(ids, vecs, docs, metas)
        with self._lock:
            self.stored += len(ids)
            progress = self.progress
        if progress is not None:
            progress(len(ids))

    def _thread_loop(self) -> None:
        pending: list[Any] = []
        embed = self.vector.embedder.embed_documents
        while (batch := self._todo.get()) is not _DONE:
            if self._error is not None:
                continue  # drain until the reader says it is done
            try:
                self._store(batch, np.asarray(embed([b[1] for b in batch]), np.float32),
                            pending)
            except BaseException as exc:
                self._fail(exc)
        if self._error is None:
            try:
                self._flush(pending)
            except BaseException as exc:
                self._fail(exc)

    # -- the child process ---------------------------------------------------------------
    def _spawn(self) -> subprocess.Popen[bytes] | None:
        """Start `embed_child` (not waiting for it: the reader goes on meanwhile); None if
        it cannot even be started."""
        embedder = self.vector.embedder
        kind = getattr(embedder, "kind", None)
        if not kind or not sys.executable:
            return None
        threads = getattr(embedder, "threads", self.threads)
        cmd = [sys.executable, "-m", "reme_agent.engine.embed_child", str(kind), str(threads)]
        try:
            child = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     close_fds=True)
        except OSError as exc:
            log.info("embedding in a thread: cannot start %s (%s)", cmd[0], exc)
            return None
        _widen_pipe(child.stdout)
        return child

    def _drive_child(self) -> None:
        """Wait for the child's ready frame, then feed it (a receiver thread stores what it
        sends back); if it never gets ready, embed in this thread instead."""
        child = self._child
        assert child is not None and child.stdout is not None
        embedder = self.vector.embedder
        try:
            ready, _, _ = select.select([child.stdout], [], [], READY_TIMEOUT)
            if not ready:
                raise TimeoutError(f"not ready after {READY_TIMEOUT:g} s")
            tag, payload = read_frame(child.stdout)
            dim, ident = payload if tag == b"R" else (0, "")  # type: ignore[misc]
            if (ident, dim) != (embedder.id, int(embedder.dim)):
                raise ValueError(f"it made embedder {ident!r} (dim {dim}), not {embedder.id!r}")
        except Exception as exc:
            log.info("embedding in a thread: the embedding process failed (%s)", exc)
            self._child = None
            child.kill()
            child.wait()
            for stream in (child.stdin, child.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
            self.started = "thread"
            self._thread_loop()
            return
        self._run_thread(self._receive_loop, "reme-embed-store")
        self._send_loop()

    def _send_loop(self) -> None:
        child = self._child
        assert child is not None and child.stdin is not None
        try:
            while (batch := self._todo.get()) is not _DONE:
                if self._error is not None:
                    continue
                try:
                    # ASCII JSON: any string survives, even one a UTF-8 encoder would refuse
                    payload = json.dumps([b[1] for b in batch]).encode("ascii")
                    write_frame(child.stdin, b"T", len(payload), payload)
                except OSError as exc:
                    self._fail(BackendError(f"the embedding process stopped: {exc}"))
                    continue
                except BaseException as exc:  # never leave the reader blocked on a full queue
                    self._fail(exc)
                    continue
                self._inflight.put(batch)
        finally:
            with contextlib.suppress(OSError):
                child.stdin.close()  # EOF: the child exits after its last answer
            self._inflight.put(_DONE)

    def _receive_loop(self) -> None:
        child = self._child
        assert child is not None and child.stdout is not None
        pending: list[Any] = []
        while (batch := self._inflight.get()) is not _DONE:
            if self._error is not None:
                continue
            try:
                tag, payload = read_frame(child.stdout)
                if tag == b"E":
                    raise BackendError(f"embedding failed in the embedding process: {payload}")
                vecs = payload
                if tag != b"V" or not isinstance(vecs, np.ndarray) or len(vecs) != len(batch):
                    raise BackendError("the embedding process answered out of step")
                self._store(batch, vecs, pending)
            except BaseException as exc:
                self._fail(exc if isinstance(exc, BackendError) else
                           BackendError(f"the embedding process failed: {exc}"))
        if self._error is None:
            try:
                self._flush(pending)
            except BaseException as exc:
                self._fail(exc)


READY_TIMEOUT = 300.0
"""Seconds the embedding process may take to load its model before the run embeds here."""
PIPE_BYTES = 1 << 20
"""Pipe buffer asked for the child's answers: ~8 batches of vectors. While chromadb writes
(holding the GIL for the whole call) nobody here reads the pipe; with Linux's default 64 KB
the child would stop after half a batch and wait, instead of embedding on."""


def _widen_pipe(stream: Any) -> None:
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if stream is None or set_size is None:
        return
    for size in (PIPE_BYTES, PIPE_BYTES // 4):  # unprivileged processes may get less
        try:
            fcntl.fcntl(stream.fileno(), set_size, size)
            return
        except OSError:
            continue
