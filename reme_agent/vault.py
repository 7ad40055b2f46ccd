"""The Vault handle: one folder of notes wired to its store, index state and projections.

`open_vault()` is cheap: the embedder, chromadb and the in-memory BM25/graph are created on
first use, so a CLI `read` never pays for a model load. Python callers pass the vault
explicitly everywhere; two Vault objects share nothing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import uuid
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reme_agent.config import Settings, VectorSettings
from reme_agent.engine.indexer import (
    COLLECTION_KEY,
    DOCUMENTS_KEY,
    DOCUMENTS_VERSION,
    Indexer,
    IndexReport,
    indexed_ref_keys,
)
from reme_agent.engine.projections.graph import GraphProjection
from reme_agent.engine.projections.keyword import KeywordProjection
from reme_agent.engine.queue import QUEUE_FILE, WorkQueue
from reme_agent.engine.state import IndexState
from reme_agent.engine.store import FileStore
from reme_agent.engine.transaction import Recovery, recover
from reme_agent.engine.vaultroot import unusable_root
from reme_agent.engine.view import NoteMeta, VaultView, note_meta, safe_rows
from reme_agent.engine.viewmemo import MEMO_FILE, ViewMemo
from reme_agent.engine.workdir import internal_dir
from reme_agent.errors import VaultError, VaultNotFound
from reme_agent.schema.obsidian import link_style

if TYPE_CHECKING:
    from reme_agent.engine.embedders import Embedder
    from reme_agent.engine.progress import Progress
    from reme_agent.engine.projections.vector import VectorProjection
    from reme_agent.engine.state import FileRow
    from reme_agent.recall.access_log import AccessLog
    from reme_agent.recall.signals import SignalStore

log = logging.getLogger("reme_agent")

_DEFAULT_PREFIX = VectorSettings.model_fields["collection_prefix"].default
VAULT_ID_FILE = "vault-id"
JIEBA_WARM_DELAY = 3.0   # seconds after open before the warm-up loads jieba's full dictionary


def _vault_id(internal: Path) -> str:
    """This vault's id from ``.reme/vault-id``, created (a UUID4) on first use.

    Written to a temp file and hard-linked into place, so processes racing on a fresh vault
    all end up with the one id that won, never a half-written file.
    """
    target = internal / VAULT_ID_FILE
    with contextlib.suppress(FileNotFoundError):
        text = target.read_text(encoding="utf-8").strip()
        if text:
            return text
    internal.mkdir(parents=True, exist_ok=True)
    tmp = internal / f".{VAULT_ID_FILE}.{uuid.uuid4().hex}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)  # internal, not a note
    try:
        os.write(fd, f"{uuid.uuid4()}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        try:
            os.link(tmp, target)
        except FileExistsError:
            if not target.read_text(encoding="utf-8").strip():
                os.replace(tmp, target)  # an emptied file holds no id: replace it
    finally:
        tmp.unlink(missing_ok=True)
    return target.read_text(encoding="utf-8").strip()


class Vault:
    """Everything needed to read, write and search one vault."""

    def __init__(self, root: Path, settings: Settings | None = None) -> None:
        why = unusable_root(Path(root).expanduser())
        if why is not None:  # before `internal_dir` makes `.reme/` there
            raise VaultError(f"Refused vault folder {str(root)!r}: it is {why}, where a "
                             "vault's index (.reme/) and notes would go; nothing was created.",
                             "Pass the folder that holds your notes with --vault (or "
                             "REME_VAULT), e.g. ~/notes.")
        self.root = Path(root).resolve()
        self.settings = _with_obsidian_links(self.root, settings or Settings())
        self.internal = internal_dir(self.root)
        self.store = FileStore(self.root, ignored=tuple(self.settings.index.ignore_dirs),
                               internal=self.internal)
        self._lock = threading.RLock()
        self._vector_client: Any | None = None
        self._warming = False
        self._closing = threading.Event()
        self._queue: WorkQueue | None = None
        self._queue_lock = threading.Lock()
        self._on_close: list[Callable[[], object]] = []
        # what earlier views (in this process or the last one) read, by (size, mtime) (G6)
        self._view_memo = ViewMemo(self._read_view_memo,
                                   lambda data: self.store.write_internal(MEMO_FILE, data))

    # -- lazily built parts ------------------------------------------------------------
    @cached_property
    def state(self) -> IndexState:
        return IndexState(self.internal / "index.sqlite")

    @property
    def queue(self) -> WorkQueue:
        """The vault's durable follow-up queue, `<internal>/queue.sqlite` (DESIGN §9): every
        Vault object and process on this folder sees the same items. Who drains it is wired
        in `jobs/followups.py`."""
        with self._queue_lock:  # not the index lock: a long index run must not hold it up
            if self._queue is None:
                self._queue = WorkQueue(self.internal / QUEUE_FILE)
            return self._queue

    @cached_property
    def embedder(self) -> Embedder:
        from reme_agent.engine.embedders import make_embedder

        cfg = self.settings.embedder
        return make_embedder(cfg.name, threads=cfg.threads)

    @cached_property
    def vector(self) -> VectorProjection:
        """The vector projection (not cached while opening fails, so the next use retries).

        A store several vaults can reach (a server, or a configured ``vector.path``) gets this
        vault's id, so two vaults never share a collection (BUG-13); on a server the default
        prefix becomes ``reme-<id[:8]>``. The derived ``.reme/chroma`` is rebuilt if its
        SQLite file is corrupt (BUG-4): the next whole-vault index run re-embeds into it.
        """
        from reme_agent.engine.projections.vector import VectorProjection

        cfg = self.settings.vector
        client = None
        prefix = cfg.collection_prefix
        vault_id = None
        if cfg.backend == "http":
            from reme_agent.engine.projections.vector import http_client

            client = http_client(cfg.host, cfg.port)
            vault_id = _vault_id(self.internal)
            if prefix == _DEFAULT_PREFIX:
                prefix = f"{_DEFAULT_PREFIX}-{vault_id[:8]}"
        elif cfg.path:
            vault_id = _vault_id(self.internal)
        path = Path(cfg.path) if cfg.path else self.internal / "chroma"
        return VectorProjection(self.embedder, path if client is None else None, client=client,
                                prefix=prefix, batch_size=self.settings.embedder.batch_size,
                                vault_id=vault_id,
                                rebuild_if_corrupt=client is None and not cfg.path,
                                current_name=lambda: self.state.get_meta(COLLECTION_KEY))

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
    def index(self, full: bool = False, progress: Progress | None = None) -> IndexReport:
        """Bring every projection in step with the files (after rolling any multi-file
        change a killed process left half done). `progress`: see `Indexer.run`."""
        with self._lock:
            self.recover()
            return self.indexer.run(full=full, progress=progress)

    def refresh(self, paths: list[str]) -> IndexReport:
        """Re-index just these paths, so search sees the change (raises on failure)."""
        with self._lock:
            return self.indexer.run(paths=paths)

    def try_refresh(self, paths: list[str]) -> str | None:
        """Re-index paths after a write; a failure is a warning to report, never raised.

        The file write already succeeded, so an index problem must not make its caller
        (a tool, a job, maintenance) report a failure; `reme-agent index` catches up.
        """
        try:
            self.refresh(list(dict.fromkeys(paths)))
        except Exception as exc:
            log.warning("re-indexing %s failed: %s", paths, exc)
            return f"written, but re-indexing failed ({exc}); run `reme-agent index`"
        return None

    def recover(self) -> list[Recovery]:
        """Roll forward or back every multi-file change a killed process left half done
        (DESIGN §5; `engine.transaction`). Cheap when there is none: one listdir."""
        try:
            return recover(self.store)
        except OSError as exc:  # e.g. a read-only vault: reading still works
            log.warning("could not roll back interrupted changes: %s", exc)
            return []

    def index_rows(self) -> dict[str, FileRow]:
        """The index state's row per file ({} when the index cannot be read)."""
        return safe_rows(lambda: self.state.files())

    def view(self) -> VaultView:
        """The vault as it is now (files, notes' names and links, a resolver): what a
        tool, a lint or a multi-file change plans against."""
        return VaultView(self.store, self._rows_at, self.settings.index.extensions,
                         self.settings.index.max_file_bytes, memo=self._view_memo,
                         ref_keys=self._indexed_ref_keys)

    def _indexed_ref_keys(self, paths: list[str]
                          ) -> dict[str, tuple[int, int, tuple[str, ...] | None]]:
        """The index's reference keys of these notes, for the view's key filter (a note is
        not read to learn them), or none when the index was built before they were kept
        (DOCUMENTS_VERSION 4: its rows hold none until the next whole-vault run re-reads
        every note, which writes the version last). Checked when the view asks, once."""
        if not self._refs_indexed():
            return {}
        return indexed_ref_keys(self.state, paths)

    def notes_naming(self, keys: set[str]) -> set[str] | None:
        """Notes with an embed, Markdown link or property link whose key is one of `keys`,
        as last indexed; None when the index was built before it kept them (the caller then
        reads every note)."""
        return self.state.ref_sources(keys) if self._refs_indexed() else None

    def _refs_indexed(self) -> bool:
        return self.state.get_meta(DOCUMENTS_KEY) == DOCUMENTS_VERSION

    def _read_view_memo(self) -> bytes | None:
        path = self.internal / MEMO_FILE
        return path.read_bytes() if path.is_file() else None

    def _rows_at(self, paths: list[str]) -> dict[str, FileRow]:
        """The index rows of these paths ({} when the index cannot be read)."""
        return safe_rows(lambda: self.state.files_at(paths))

    def note_meta(self, path: str, row: FileRow | None = None,
                  stat: tuple[int, int] | None = None) -> NoteMeta:
        """One note's frontmatter and links as `view()` sees them (from its index `row`
        while the file is unchanged; a note over `index.max_file_bytes` is not read)."""
        return note_meta(self.store, path, row, stat, self.settings.index.max_file_bytes)

    def ready(self) -> None:
        """Load projections from the saved state (cold open) or pick up another process's run."""
        with self._lock:
            self._warm_up()
            self.indexer.ensure_fresh()

    def _warm_up(self) -> None:
        """On the first `ready`, load what the first search needs in a background thread
        while this one loads the projections, in the order the search needs them (G6):
        the embedding model, search's name index, then jieba's full dictionary. (The vector
        index warms itself: `VectorProjection.warm` from `Indexer.load`.) The name index is
        a file (`names.sqlite`): opening it takes milliseconds; it is built here only when
        missing or out of date, and caught up here after another process's run."""
        if self._warming:
            return
        self._warming = True

        from reme_agent.engine.tokenize import warm_up
        from reme_agent.recall.names import index_for

        # The model first (the first answer embeds its query), names (ms; a build: ~1.3 s
        # at 10k), then jieba's full dictionary, which a query does not wait for (a mapped
        # copy cuts short texts) but bulk tokenising wants. It loads a few seconds later:
        # its 0.3 s of GIL-bound work slowed a one-shot search's own first answer.
        def full_dictionary() -> None:
            if not self._closing.wait(JIEBA_WARM_DELAY):
                warm_up()

        steps = (lambda: self.embedder.embed_query("warm up"), lambda: index_for(self),
                 full_dictionary)

        def warm() -> None:
            try:
                for step in steps:
                    if self._closing.is_set():
                        return
                    step()
            except Exception as exc:  # the real call will raise it again, with context
                log.debug("warm-up failed: %s", exc)

        threading.Thread(target=warm, name="reme-warm-up", daemon=True).start()

    def on_close(self, fn: Callable[[], object]) -> None:
        """Call `fn` first thing in `close()`, so a background thread using this vault (a
        follow-up worker) stops before the stores it uses are closed."""
        self._on_close.append(fn)

    def close(self) -> None:
        """Stop what `on_close` registered, flush the access log, write the cold-open
        snapshot if runs postponed it, close."""
        while self._on_close:
            try:
                self._on_close.pop()()
            except Exception as exc:  # closing must go on
                log.warning("a close callback failed: %s", exc)
        self._closing.set()   # the warm-up thread stops before its next step
        self._view_memo.save()   # a cache for the next process; never raises
        if "indexer" in self.__dict__:
            try:
                self.indexer.save_snapshot()
            except Exception as exc:  # a cache: closing must not fail over it
                log.warning("could not write the index snapshot: %s", exc)
        if "access_log" in self.__dict__:
            self.access_log.close()
        if "vector" in self.__dict__:
            self.vector.close()
        if "state" in self.__dict__:
            self.state.close()
        if self._queue is not None:
            self._queue.close()
            self._queue = None

    def __enter__(self) -> Vault:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _with_obsidian_links(root: Path, settings: Settings) -> Settings:
    """`links.style` from Obsidian's "New link format" when the config does not set it: a
    vault kept in Obsidian gets from our tools the links Obsidian would write there."""
    if "style" in settings.links.model_fields_set:
        return settings
    style = link_style(root)
    if style is None or style == settings.links.style:
        return settings
    return settings.model_copy(update={"links": settings.links.model_copy(
        update={"style": style})})


def open_vault(root: Path | str, settings: Settings | None = None, *, create: bool = False) -> Vault:
    """Open a vault folder; with create=True make it (and `.reme/`) if missing. The file
    system's root, system folders and the home folder are refused (`engine.vaultroot`)."""
    path = Path(root).expanduser()
    if path.exists() and not path.is_dir():
        raise VaultError(f"{str(path)!r} is a file, not a vault folder.",
                         "Pass the vault's folder with --vault (or REME_VAULT).")
    if not path.is_dir():
        if not create:
            raise VaultNotFound(str(path))
        try:
            path.mkdir(parents=True)
        except OSError as exc:  # a parent is a file, or no permission: the user's to fix
            raise VaultError(f"Cannot create the vault folder {str(path)!r}: "
                             f"{exc.strerror or exc}.", "Pass a folder you can write.") from exc
    vault = Vault(path, settings)
    vault.recover()
    return vault
