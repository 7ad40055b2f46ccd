"""Watch mode: re-index files as they change on disk (DESIGN §6).

watchdog delivers created/modified/moved/deleted events (plus opened/closed noise, filtered
out). Events are collected and, after `debounce` seconds without new ones, the changed paths
are indexed in one incremental run, so an editor's save-rename-touch burst costs one run.
Folder events (a folder moved or deleted) fall back to an incremental run over the vault.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from reme_agent.engine.store import INTERNAL_DIR, is_hidden

log = logging.getLogger("reme_agent.watch")

_RELEVANT = {"created", "modified", "moved", "deleted"}


class VaultWatcher:
    """Debounced file-event loop that calls `on_change(paths | None)`; None means 'rescan all'."""

    def __init__(self, root: Path, on_change: Callable[[list[str] | None], object],
                 debounce: float = 0.5, ignored: tuple[str, ...] = (INTERNAL_DIR, ".git")) -> None:
        self.root = Path(root).resolve()
        self.on_change = on_change
        self.debounce = debounce
        self.ignored = ignored
        self._pending: set[str] = set()
        self._rescan = False
        self._last_event = 0.0
        self._cv = threading.Condition()
        self._stop = threading.Event()
        self._observer = None
        self._worker: threading.Thread | None = None

    def _rel(self, raw: str | bytes) -> str | None:
        path = Path(raw.decode() if isinstance(raw, bytes) else raw)
        try:
            rel = path.resolve().relative_to(self.root)
        except ValueError:
            return None
        parts = rel.parts
        if not parts or parts[0] in self.ignored or any(is_hidden(p) for p in parts):
            return None
        return rel.as_posix()

    def notify(self, event_type: str, src: str, dest: str | None = None,
               is_directory: bool = False) -> None:
        """Record one file event (called by watchdog, or directly in tests)."""
        if event_type not in _RELEVANT:
            return
        rels = [r for r in (self._rel(src), self._rel(dest) if dest else None) if r]
        if not rels:
            return
        with self._cv:
            if is_directory:
                if event_type != "modified":
                    self._rescan = True
            else:
                self._pending.update(rels)
            self._last_event = time.monotonic()
            self._cv.notify()

    def _drain(self) -> None:
        while not self._stop.is_set():
            with self._cv:
                while not (self._pending or self._rescan) and not self._stop.is_set():
                    self._cv.wait(0.5)
                if self._stop.is_set():
                    return
                quiet = time.monotonic() - self._last_event
                if quiet < self.debounce:
                    self._cv.wait(self.debounce - quiet)
                    continue
                paths, rescan = sorted(self._pending), self._rescan
                self._pending.clear()
                self._rescan = False
            try:
                self.on_change(None if rescan else paths)
            except Exception:  # keep watching: one bad run must not end watch mode
                log.exception("re-index after file changes failed")

    def start(self) -> VaultWatcher:
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer

        watcher = self

        class _Handler(FileSystemEventHandler):
            def on_any_event(self, event) -> None:  # type: ignore[no-untyped-def]
                watcher.notify(event.event_type, event.src_path,
                               getattr(event, "dest_path", None) or None, event.is_directory)

        self._observer = Observer()
        self._observer.schedule(_Handler(), str(self.root), recursive=True)
        self._observer.start()
        self._worker = threading.Thread(target=self._drain, name="reme-watch", daemon=True)
        self._worker.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        with self._cv:
            self._cv.notify_all()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
        if self._worker is not None:
            self._worker.join(timeout=5)

    def __enter__(self) -> VaultWatcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
