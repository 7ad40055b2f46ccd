"""A SQLite connection and its lock that belong to one process: a forked child opens its own.

A worker forked after the parent opened the vault (multiprocessing's 'fork', gunicorn
`--preload`, Celery's prefork pool) inherits the parent's open connections and the locks that
guard them. Using either in the child is what SQLite forbids ("do not carry an open
connection across a fork"): a lock another parent thread held at the fork never comes free in
the child, and a connection shared by two processes corrupts the WAL index. So every holder
of a SQLite file under `.reme/` keeps its connection here, and the first use in another
process (a pid check) lets go of the inherited one and opens a new one.

Letting go: an inherited connection that was idle at the fork is closed in the child. SQLite
keeps per-process lock records per file (its "inode info"); while the child holds any
connection copied from the parent, a new connection to the same file shares those records,
and its locks exist only on paper. The parent's close then checkpoints and deletes the WAL
under the child's feet (tested: the child's last 20 of 30 rows were lost; docs/decisions.md
"Loose ends (session 8)"). Closing an idle connection does not write: its checkpoint-on-close
needs an exclusive lock, which the parent's own connection denies. A connection caught inside
a transaction (another parent thread was writing at the fork) is not closed, since the
rollback would edit the shared WAL index under the parent; it is kept, never freed.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable
from typing import Any

_stranded: list[sqlite3.Connection] = []
"""Inherited connections caught inside a transaction: never closed (not even by the GC)."""

_switching = threading.Lock()
"""Serialises a child's first uses (two threads must not both open a connection)."""


def _fresh_switch_lock() -> None:
    global _switching
    _switching = threading.Lock()   # a parent thread may have held it at the fork


os.register_at_fork(after_in_child=_fresh_switch_lock)


def let_go(db: sqlite3.Connection) -> None:
    """Stop using a connection inherited from the parent (see the module docstring)."""
    if db.in_transaction:
        _stranded.append(db)
    else:
        db.close()


class PerProcess:
    """The connection and lock of the current process; `reopen` makes a child's connection.

    `lock` and `db` are read on every use, so a child switches on its first one. A holder
    that opens its first connection itself (with its own checks) hands it over by `adopt`.
    """

    def __init__(self, reopen: Callable[[], sqlite3.Connection],
                 lock_type: Callable[[], Any] = threading.RLock) -> None:
        self._reopen = reopen
        self._lock_type = lock_type
        self._pid = os.getpid()
        self._lock = lock_type()
        self._db: sqlite3.Connection | None = None
        self._closed = False

    def _switch(self) -> None:
        with _switching:
            if self._pid == os.getpid():
                return
            inherited, self._db = self._db, None
            self._lock = self._lock_type()
            if inherited is not None:
                let_go(inherited)
            self._pid = os.getpid()

    @property
    def lock(self) -> Any:
        if self._pid != os.getpid():
            self._switch()
        return self._lock

    @property
    def db(self) -> sqlite3.Connection:
        if self._pid != os.getpid():
            self._switch()
        if self._db is None:
            if self._closed:   # as a closed sqlite3 connection says, not a silent reopen
                raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
            self._db = self._reopen()
        return self._db

    def adopt(self, db: sqlite3.Connection) -> None:
        """`db`, just opened by this process, is its connection from now on."""
        if self._pid != os.getpid():
            self._switch()
        self._db = db

    def close(self) -> None:
        """Close this process's connection, for good (in a child, the inherited one is let
        go of first, as on any first use)."""
        with self.lock:
            self._closed = True
            if self._db is not None:
                self._db.close()
                self._db = None


class ProcessBound:
    """`_db` and `_lock` of a holder, read through its `_proc` (a `PerProcess`) on every use,
    so each holder of a `.reme/` SQLite file spells the pid switch once, here."""

    _proc: PerProcess

    @property
    def _db(self) -> sqlite3.Connection:
        return self._proc.db

    @property
    def _lock(self) -> Any:
        return self._proc.lock
