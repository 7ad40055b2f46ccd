"""The embedded chroma store through chromadb's Rust bindings, without its Python client (G6).

Why: ``import chromadb`` costs 0.7-1.2 s (pydantic models, the API types, telemetry, httpx,
the embedding-function registry) before a new ``reme-agent search`` can answer, while the
engine underneath is Rust: ``chromadb_rust_bindings`` imports in ~0.05 s, and chromadb's own
``chromadb/api/rust.py`` is a thin shim over it. This module is that shim cut down to what
``VectorProjection`` calls, with the same arguments and answers, so both paths read and
write the same files (``<path>/chroma.sqlite3`` + HNSW segments).

- **Same store, same answers:** the bindings are built exactly as chromadb 1.5's
  ``RustBindingsAPI.start`` builds them for a ``PersistentClient`` (md5 migration hashes,
  migrations applied, ``hnsw_cache_size`` from the open-files limit). A collection is created
  with the configuration JSON chroma's client would write for our embedding function
  (``configuration_json``; a test compares it with chroma's own converter).
- **Checks the client did in Python are done here:** ids must be a non-empty list of unique
  strings (the bindings would silently keep one of two equal ids).
- **One set of bindings per store per process**, shared and counted like chroma's
  ``SharedSystemClient``: :func:`forget` drops the entry so the next open starts fresh (after
  another process wrote the store), and the last :meth:`RustStore.close` releases it.
- **Only the versions it was checked against** (:data:`VERIFIED`): for anything else, or if
  the bindings refuse a call at open (``ImportError``/``AttributeError``/``TypeError``),
  :func:`open_store` raises :class:`BindingsMismatch` and the projection uses the full
  client. No telemetry: the bindings send none (chroma's telemetry is Python code).
- Errors raised by the bindings are chroma's own classes (``chromadb.errors``, imported by
  the bindings when they raise), so a failing call pays for that import; a missing
  collection is found by listing instead (:class:`CollectionNotFound`), as rebuilds and
  fresh stores meet one routinely.
"""

from __future__ import annotations

import json
import os
import resource
import threading
from collections import Counter
from collections.abc import Sequence
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

__all__ = ["VERIFIED", "BindingsMismatch", "CollectionNotFound", "RustCollection", "RustStore",
           "configuration_json", "forget", "is_mismatch", "open_store", "verified_version"]

TENANT = "default_tenant"
DATABASE = "default_database"
VERIFIED = ((1, 5, 9), (1, 5, 10))
"""chromadb versions [low, high) whose bindings this adapter was checked against (the
``pyproject.toml`` pin); any other version opens the store with chromadb's client."""
_MISMATCH = (ImportError, AttributeError, TypeError)

_stores: dict[str, RustStore] = {}
_stores_lock = threading.Lock()


class BindingsMismatch(Exception):
    """The installed bindings are not the API this adapter speaks: use the full client."""


class CollectionNotFound(ValueError):
    """The collection asked for is not in the store (chroma's client says it the same way)."""


def _version() -> tuple[int, ...]:
    raw = importlib_metadata.version("chromadb")
    parts: list[int] = []
    for piece in raw.split(".")[:3]:
        digits = "".join(c for c in piece if c.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def verified_version() -> bool:
    """True if the installed chromadb is one this adapter was checked against."""
    try:
        return VERIFIED[0] <= _version() < VERIFIED[1]
    except (importlib_metadata.PackageNotFoundError, ValueError):
        return False


def configuration_json(ef: dict[str, Any], hnsw: dict[str, Any]) -> str:
    """The collection configuration chroma's client writes for a known embedding function
    (``ef``: name and config) and an HNSW config, as the JSON string the bindings take."""
    return json.dumps({
        "hnsw": hnsw,
        "spann": None,
        "embedding_function": {"name": ef["name"], "type": "known", "config": ef["config"]},
    })


def _check_ids(ids: Sequence[str]) -> list[str]:
    ids = list(ids)
    if not ids:
        raise ValueError("Expected IDs to be a non-empty list, got 0 IDs")
    if not all(isinstance(i, str) for i in ids):
        raise ValueError("Expected IDs to be strings")
    if len(set(ids)) != len(ids):
        dups = sorted(i for i, n in Counter(ids).items() if n > 1)
        raise ValueError(f"Expected IDs to be unique, found duplicates of: {', '.join(dups[:10])}")
    return ids


def _where(where: dict | None) -> str | None:
    return json.dumps(where) if where else None


class RustCollection:
    """One collection: the calls ``VectorProjection`` makes on a chromadb ``Collection``."""

    def __init__(self, store: RustStore, model: Any) -> None:
        self._store = store
        self._b = store.bindings
        self.id = str(model.id)
        self.name: str = model.name
        self.metadata: dict[str, Any] | None = model.metadata
        self.configuration_json: dict[str, Any] | None = model.configuration

    def count(self) -> int:
        return int(self._b.count(self.id, TENANT, DATABASE))

    def query(self, *, query_embeddings: Any, n_results: int = 10, where: dict | None = None,
              include: Sequence[str] = ("distances",)) -> dict[str, Any]:
        r = self._b.query(self.id, None, query_embeddings, int(n_results), _where(where), None,
                          list(include), TENANT, DATABASE)
        return {"ids": r.ids, "distances": r.distances, "embeddings": r.embeddings,
                "documents": r.documents, "metadatas": r.metadatas}

    def get(self, *, ids: Sequence[str] | None = None, where: dict | None = None,
            limit: int | None = None, offset: int | None = None,
            include: Sequence[str] = ("metadatas", "documents")) -> dict[str, Any]:
        if ids is not None:
            ids = _check_ids(ids)
        r = self._b.get(self.id, ids, _where(where), limit, offset or 0, None, list(include),
                        TENANT, DATABASE)
        return {"ids": r.ids, "embeddings": r.embeddings, "documents": r.documents,
                "metadatas": r.metadatas}

    def upsert(self, *, ids: Sequence[str], embeddings: Any, documents: Sequence[str] | None = None,
               metadatas: Sequence[dict | None] | None = None) -> None:
        ids = _check_ids(ids)
        if len(embeddings) != len(ids):
            raise ValueError(f"{len(ids)} ids but {len(embeddings)} embeddings")
        self._b.upsert(self.id, ids, embeddings,
                       list(metadatas) if metadatas is not None else None,
                       list(documents) if documents is not None else None,
                       None, TENANT, DATABASE)

    def delete(self, *, ids: Sequence[str] | None = None, where: dict | None = None) -> None:
        if ids is None and where is None:
            raise ValueError("At least one of ids or where must be provided")
        if ids is not None:
            ids = _check_ids(ids)
        self._b.delete(self.id, ids, _where(where), None, None, TENANT, DATABASE)

    def modify(self, *, metadata: dict | None = None,
               configuration: dict[str, Any] | None = None) -> None:
        cfg = None
        if configuration:
            cfg = json.dumps({"hnsw": configuration.get("hnsw"),
                              "spann": configuration.get("spann"),
                              "embedding_function": None})
        self._b.update_collection(self.id, None, metadata, cfg)
        if metadata is not None:
            self.metadata = metadata


class RustStore:
    """An embedded chroma store (``PersistentClient`` files) opened through the bindings."""

    def __init__(self, path: Path) -> None:
        import chromadb_rust_bindings as rb

        self.key = str(path)
        self.refs = 0
        config = rb.SqliteDBConfig(hash_type=rb.MigrationHash.MD5,
                                   migration_mode=rb.MigrationMode.Apply,
                                   url=f"{path}/chroma.sqlite3")
        self.bindings = rb.Bindings(
            allow_reset=True, sqlite_db_config=config, persist_path=str(path),
            hnsw_cache_size=resource.getrlimit(resource.RLIMIT_NOFILE)[0] // 5)
        self._max_batch = int(self.bindings.get_max_batch_size())

    def get_max_batch_size(self) -> int:
        return self._max_batch

    def _models(self) -> list[Any]:
        return list(self.bindings.list_collections(None, None, TENANT, DATABASE))

    def get_collection(self, name: str) -> RustCollection:
        """Found in the listing (a store holds a few collections): a missing one raises
        :class:`CollectionNotFound` here, not chroma's error, whose import costs 0.7 s."""
        for model in self._models():
            if model.name == name:
                return RustCollection(self, model)
        raise CollectionNotFound(f"Collection [{name}] does not exist")

    def create_collection(self, name: str, *, configuration_json: str,
                          metadata: dict[str, Any] | None = None) -> RustCollection:
        model = self.bindings.create_collection(name, configuration_json, None, metadata, False,
                                                TENANT, DATABASE)
        return RustCollection(self, model)

    def delete_collection(self, name: str) -> None:
        if name not in self.list_collections():
            raise CollectionNotFound(f"Collection [{name}] does not exist")
        self.bindings.delete_collection(name, TENANT, DATABASE)

    def list_collections(self) -> list[str]:
        return [c.name for c in self._models()]

    def close(self) -> None:
        """Drop one reference; the last one releases the bindings (SQLite pool, HNSW cache)."""
        with _stores_lock:
            self.refs -= 1
            if self.refs > 0:
                return
            if _stores.get(self.key) is self:
                del _stores[self.key]
        self.__dict__.pop("bindings", None)


def open_store(path: Path) -> RustStore:
    """The process's store for ``path`` (shared, counted); :class:`BindingsMismatch` when
    the bindings are missing, of an unverified version, or refuse the opening calls."""
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")  # for chromadb imported on an error
    if not verified_version():
        raise BindingsMismatch("chromadb version not verified for the thin path")
    with _stores_lock:
        store = _stores.get(str(path))
        if store is None:
            try:
                store = RustStore(path)
            except _MISMATCH as e:
                raise BindingsMismatch(f"{type(e).__name__}: {e}") from e
            _stores[store.key] = store
        store.refs += 1
        return store


def forget(path: Path) -> None:
    """Next :func:`open_store` of ``path`` builds fresh bindings (holders keep theirs)."""
    with _stores_lock:
        _stores.pop(str(path), None)


def is_mismatch(exc: BaseException) -> bool:
    """True for the errors that mean "another bindings API", not "this store is bad"."""
    return isinstance(exc, _MISMATCH)
