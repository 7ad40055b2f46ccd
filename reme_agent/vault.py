"""The Vault handle: one folder of notes wired to its store, index state and projections.

`open_vault()` is cheap: the embedder, chromadb and the in-memory BM25/graph are created on
first use, so a CLI `read` never pays for a model load. Python callers pass the vault
explicitly everywhere; two Vault objects share nothing.
"""

from __future__ import annotations

import logging
import threading
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reme_agent.config import Settings
from reme_agent.engine.indexer import Indexer, IndexReport
from reme_agent.engine.projections.graph import GraphProjection
from reme_agent.engine.projections.keyword import KeywordProjection
from reme_agent.engine.state import IndexState
from reme_agent.engine.store import INTERNAL_DIR, FileStore
from reme_agent.errors import VaultNotFound

if TYPE_CHECKING:
    from reme_agent.engine.embedders import Embedder
    from reme_agent.engine.projections.vector import VectorProjection
    from reme_agent.recall.access_log import AccessLog
    from reme_agent.recall.signals import SignalStore

log = logging.getLogger("reme_agent")


class Vault:
    """Everything needed to read, write and search one vault."""

    def __init__(self, root: Path, settings: Settings | None = None) -> None:
        self.root = Path(root).resolve()
        self.settings = settings or Settings()
        self.internal = self.root / INTERNAL_DIR
        self.store = FileStore(self.root, ignored=tuple(self.settings.index.ignore_dirs))
        self._lock = threading.RLock()
        self._vector_client: Any | None = None

    # -- lazily built parts ------------------------------------------------------------
    @cached_property
    def state(self) -> IndexState:
        return IndexState(self.internal / "index.sqlite")

    @cached_property
    def embedder(self) -> Embedder:
        from reme_agent.engine.embedders import make_embedder

        cfg = self.settings.embedder
        return make_embedder(cfg.name, threads=cfg.threads)

    @cached_property
    def vector(self) -> VectorProjection:
        from reme_agent.engine.projections.vector import VectorProjection

        cfg = self.settings.vector
        client = None
        if cfg.backend == "http":
            from reme_agent.engine.projections.vector import http_client

            client = http_client(cfg.host, cfg.port)
        path = Path(cfg.path) if cfg.path else self.internal / "chroma"
        return VectorProjection(self.embedder, path if client is None else None, client=client,
                                prefix=cfg.collection_prefix,
                                batch_size=self.settings.embedder.batch_size)

    @cached_property
    def keyword(self) -> KeywordProjection:
        return KeywordProjection()

    @cached_property
    def graph(self) -> GraphProjection:
        return GraphProjection()

    @cached_property
    def signals(self) -> SignalStore:
        """Maintenance signals from meta/*.json (lazy, cached, mtime-invalidated)."""
        from reme_agent.recall.signals import SignalStore

        return SignalStore(self.store, max_age_days=self.settings.search.signals_max_age_days)

    @cached_property
    def access_log(self) -> AccessLog:
        """Ring buffer of search hits, flushed to meta/access_log.json (recall's only write)."""
        from reme_agent.recall.access_log import AccessLog

        return AccessLog(self.store)

    @cached_property
    def indexer(self) -> Indexer:
        cfg = self.settings.index
        return Indexer(self.store, self.state, self.vector, self.keyword, self.graph,
                       extensions=cfg.extensions, max_file_bytes=cfg.max_file_bytes,
                       progress=cfg.progress)

    # -- operations --------------------------------------------------------------------
    def index(self, full: bool = False) -> IndexReport:
        """Bring every projection in step with the files."""
        with self._lock:
            return self.indexer.run(full=full)

    def refresh(self, paths: list[str]) -> IndexReport:
        """Re-index just these paths (after a tool wrote them), so search sees the change."""
        with self._lock:
            return self.indexer.run(paths=paths)

    def ready(self) -> None:
        """Load projections from the saved state (cold open) or pick up another process's run."""
        with self._lock:
            self.indexer.ensure_fresh()

    def close(self) -> None:
        if "access_log" in self.__dict__:
            self.access_log.close()
        if "vector" in self.__dict__:
            self.vector.close()
        if "state" in self.__dict__:
            self.state.close()


def open_vault(root: Path | str, settings: Settings | None = None, *, create: bool = False) -> Vault:
    """Open a vault folder; with create=True make it (and `.reme/`) if missing."""
    path = Path(root).expanduser()
    if not path.is_dir():
        if not create:
            raise VaultNotFound(str(path))
        path.mkdir(parents=True)
    (path / INTERNAL_DIR).mkdir(exist_ok=True)
    return Vault(path, settings)
