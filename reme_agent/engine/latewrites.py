"""Appends that reach a file after a CAS write has replaced it, carried over to the new file.

A CAS write replaces a note by rename. A writer that opened the old file before the rename
(`echo >> note.md`, a logger, an editor appending in place) and writes a moment later writes
into the old inode, which nothing can see any more. `FileStore.write_if_unchanged` compares
the old file right after the rename and once more after a short grace period; on a loaded
machine a writer can be descheduled between its `open` and its `write` for longer than that
(1 of 2,930 lines was lost in a test at load average 8). This watcher keeps the replaced
file open for `WINDOW` seconds more, off the write's path, and appends whatever lands in it
to the file now at that path, as the late writer meant to. A late write that is not an
append (the old text itself changed) cannot be placed and is logged instead.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("reme_agent.engine")

WINDOW = 2.0
"""How long a replaced file is watched after the write returned (seconds)."""
POLL = 0.005

__all__ = ["WINDOW", "LateAppendWatcher", "pread_all"]


@dataclass
class _Watched:
    fd: int
    path: Path
    lock: Callable[[], AbstractContextManager[object]]
    seen: bytes          # what the replaced file held when the write was done with it
    until: float


class LateAppendWatcher:
    """One daemon thread per store, running only while something is watched."""

    def __init__(self) -> None:
        self._items: list[_Watched] = []
        self._mutex = threading.Lock()
        self._thread: threading.Thread | None = None

    def watch(self, fd: int, path: Path, seen: bytes,
              lock: Callable[[], AbstractContextManager[object]]) -> None:
        """Watch the replaced file open as `fd` (a duplicate is kept; the caller closes its
        own) whose content was `seen`; late appends go to `path` under `lock()`."""
        item = _Watched(os.dup(fd), path, lock, seen, time.monotonic() + WINDOW)
        with self._mutex:
            self._items.append(item)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="reme-late-appends",
                                                daemon=True)
                self._thread.start()

    def drain(self, timeout: float = WINDOW + 1) -> None:
        """Wait until nothing is watched (tests, and a process that is about to exit)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._mutex:
                if not self._items:
                    return
            time.sleep(POLL)

    def _run(self) -> None:
        while True:
            with self._mutex:
                items = list(self._items)
                if not items:
                    self._thread = None
                    return
            now = time.monotonic()
            for item in items:
                try:
                    self._check(item)
                except OSError as exc:
                    log.warning("could not carry a late write over to %s: %s", item.path.name, exc)
                    item.until = 0
                if item.until <= now:
                    self._forget(item)
            time.sleep(POLL)

    def _check(self, item: _Watched) -> None:
        data = pread_all(item.fd)
        if data == item.seen:
            return
        if not data.startswith(item.seen):
            log.warning("%s was rewritten in place just after a write replaced it; that "
                        "version could not be kept", item.path.name)
            item.until = 0
            return
        late = data[len(item.seen):]
        with item.lock():
            fd = os.open(item.path, os.O_WRONLY | os.O_APPEND | getattr(os, "O_CLOEXEC", 0))
            try:
                os.write(fd, late)
                os.fsync(fd)
            finally:
                os.close(fd)
        item.seen = data
        item.until = max(item.until, time.monotonic() + WINDOW)  # the writer is still at it

    def _forget(self, item: _Watched) -> None:
        with self._mutex, contextlib.suppress(ValueError):
            self._items.remove(item)
        os.close(item.fd)


def pread_all(fd: int) -> bytes:
    """The whole file behind `fd` as it is now (from offset 0, whatever the fd position)."""
    size = os.fstat(fd).st_size
    chunks, offset = [], 0
    while True:
        chunk = os.pread(fd, max(size - offset, 65536), offset)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        offset += len(chunk)
