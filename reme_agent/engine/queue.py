"""A durable work queue in SQLite under the vault's internal folder (DESIGN §9 follow-up jobs).

Items are `(kind, path)` pairs with a reason, a JSON payload and the name of their producer.
The queue stores them and hands them out; it knows nothing of who runs which kind (the
wiring is `jobs/followups.py`), so it sits here, beside the index state, and any layer
that holds a Vault can enqueue (`vault.queue`).

Why SQLite in the internal folder (`.reme/queue.sqlite`, WAL): an item outlives the process
that enqueued it (a hook process ends, a process is killed), and every process and every
Vault object on the same folder sees the same items.

Rules:
- **Dedup**: a pending item with the same kind and path is returned instead of a new one
  (a partial unique index makes this hold across processes). Running, done or failed items
  do not block a new pending one: a note changed while its item ran gets another run.
- **Claim** (`claim`): one `BEGIN IMMEDIATE` transaction takes the oldest claimable item of
  the given kinds, sets it `running`, counts the attempt and gives it a **lease** (owner +
  expiry). Two drainers, threads or processes, never hold the same item at once.
- **Lease**: the drainer renews it while the consumer runs (`heartbeat`). A drainer that was
  killed stops renewing; once the lease has expired the item is claimable again. An item
  whose lease expired `max_attempts` times is set `failed` (a consumer that kills its
  process every time must not loop forever).
- `complete` / `fail` / `release` act only for the lease's owner: a drainer that lost its
  lease (it stalled past the expiry and another drainer took the item) changes nothing.
- **Pruning** (`prune`): done items go after `keep_done` seconds, failed ones after
  `keep_failed`; pending and running items are never pruned.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from reme_agent.engine.perprocess import PerProcess, ProcessBound
from reme_agent.errors import StorageError

__all__ = ["LEASE_SECONDS", "MAX_ATTEMPTS", "QUEUE_FILE", "QueueItem", "Status", "WorkQueue"]

QUEUE_FILE = "queue.sqlite"
LEASE_SECONDS = 60.0
"""How long a claim holds without a heartbeat: the delay before a killed drainer's item runs again."""
MAX_ATTEMPTS = 3
KEEP_DONE = 7 * 86400.0
KEEP_FAILED = 30 * 86400.0

Status = Literal["pending", "running", "done", "failed"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS items (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    path TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    payload TEXT NOT NULL DEFAULT '{}',
    source TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'running', 'done', 'failed')),
    attempts INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    lease_owner TEXT,
    lease_until REAL
);
CREATE UNIQUE INDEX IF NOT EXISTS items_one_pending ON items(kind, path) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS items_by_status ON items(status, kind, id);
"""
_COLUMNS = ("id, kind, path, reason, payload, source, status, attempts, error, created_at, "
            "updated_at, lease_owner, lease_until")


@dataclass
class QueueItem:
    """One follow-up job for one note, as stored."""

    id: int
    kind: str
    path: str
    reason: str = ""
    payload: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    status: Status = "pending"
    attempts: int = 0
    error: str | None = None
    created_at: str = ""
    updated_at: str = ""
    lease_owner: str | None = None
    lease_until: str | None = None


def _iso(moment: float | None) -> str | None:
    if moment is None:
        return None
    return _dt.datetime.fromtimestamp(moment, _dt.UTC).isoformat(timespec="seconds")


def _item(row: tuple[Any, ...]) -> QueueItem:
    return QueueItem(id=row[0], kind=row[1], path=row[2], reason=row[3],
                     payload=json.loads(row[4] or "{}"), source=row[5], status=row[6],
                     attempts=row[7], error=row[8], created_at=_iso(row[9]) or "",
                     updated_at=_iso(row[10]) or "", lease_owner=row[11],
                     lease_until=_iso(row[12]))


class WorkQueue(ProcessBound):
    """The durable queue at `path`; one connection, shared by this object's threads."""

    def __init__(self, path: Path, *, max_attempts: int = MAX_ATTEMPTS,
                 clock: Callable[[], float] = time.time) -> None:
        self.path = Path(path)
        self.max_attempts = max_attempts
        self.clock = clock
        self._proc = PerProcess(self._connect, threading.Lock)   # a forked child: its own
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._proc.adopt(self._connect())
            if self._db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise StorageError(self.path.name, str(exc)) from exc

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=30, isolation_level=None,
                               check_same_thread=False)

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken at once (BEGIN IMMEDIATE): check-then-act is atomic
        across processes; a busy database is waited for (`timeout`)."""
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    yield self._db
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise StorageError(self.path.name, str(exc)) from exc

    def _read(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return self._db.execute(sql, args).fetchall()
            except sqlite3.Error as exc:
                raise StorageError(self.path.name, str(exc)) from exc

    # -- producers ---------------------------------------------------------------------
    def enqueue(self, kind: str, path: str, *, reason: str = "",
                payload: dict[str, Any] | None = None, source: str = "") -> tuple[QueueItem, bool]:
        """(item, added): a new pending item, or the pending one of the same kind and path."""
        now = self.clock()
        with self._write() as db:
            row = db.execute(f"SELECT {_COLUMNS} FROM items WHERE kind=? AND path=? AND "
                             "status='pending'", (kind, path)).fetchone()
            if row is not None:
                return _item(row), False
            cur = db.execute(
                "INSERT INTO items (kind, path, reason, payload, source, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (kind, path, reason, json.dumps(payload or {}, ensure_ascii=False, default=str),
                 source, now, now))
            row = db.execute(f"SELECT {_COLUMNS} FROM items WHERE id=?",
                             (cur.lastrowid,)).fetchone()
        return _item(row), True

    # -- drainers ----------------------------------------------------------------------
    def claim(self, kinds: Collection[str], *, owner: str,
              lease: float = LEASE_SECONDS) -> QueueItem | None:
        """The oldest pending (or lease-expired) item of `kinds`, now `running` for `owner`."""
        kinds = sorted(set(kinds))
        if not kinds:
            return None
        now = self.clock()
        marks = ",".join("?" * len(kinds))
        claimable = (f"kind IN ({marks}) AND (status='pending' OR (status='running' AND "
                     "lease_until < ?))")
        if not self._read(f"SELECT 1 FROM items WHERE {claimable} LIMIT 1", (*kinds, now)):
            return None  # an idle poll reads only: no write transaction, no fsync
        with self._write() as db:
            # Trigger: a lease expired max_attempts times. Why: the consumer's process died
            # (or hung) on every try. Outcome: failed, with the reason, never retried blindly.
            db.execute("UPDATE items SET status='failed', lease_owner=NULL, lease_until=NULL, "
                       "updated_at=?, error='gave up after ' || attempts || ' attempts: the "
                       "drainer stopped (killed or hung) before the item finished each time' "
                       "WHERE status='running' AND lease_until < ? AND attempts >= ?",
                       (now, now, self.max_attempts))
            row = db.execute(f"SELECT id FROM items WHERE {claimable} ORDER BY id LIMIT 1",
                             (*kinds, now)).fetchone()
            if row is None:
                return None
            db.execute("UPDATE items SET status='running', attempts=attempts+1, lease_owner=?, "
                       "lease_until=?, updated_at=? WHERE id=?", (owner, now + lease, now, row[0]))
            got = db.execute(f"SELECT {_COLUMNS} FROM items WHERE id=?", (row[0],)).fetchone()
        return _item(got)

    def heartbeat(self, item_id: int, owner: str, lease: float = LEASE_SECONDS) -> bool:
        """Renew `owner`'s lease; False when it lost the item (expired and taken by another)."""
        now = self.clock()
        return self._owned(item_id, owner, "lease_until=?, updated_at=?", (now + lease, now))

    def complete(self, item_id: int, owner: str) -> bool:
        """Mark done (only for the lease's owner)."""
        return self._owned(item_id, owner, "status='done', error=NULL, lease_owner=NULL, "
                           "lease_until=NULL, updated_at=?", (self.clock(),))

    def fail(self, item_id: int, owner: str, error: str) -> bool:
        """Mark failed with the error (only for the lease's owner)."""
        return self._owned(item_id, owner, "status='failed', error=?, lease_owner=NULL, "
                           "lease_until=NULL, updated_at=?", (error, self.clock()))

    def release(self, item_id: int, owner: str) -> bool:
        """Hand a claimed item back (a drainer stopping mid-item on purpose): pending again,
        or dropped when a newer pending item for the same note already covers it."""
        with self._write() as db:
            row = db.execute("SELECT kind, path FROM items WHERE id=? AND status='running' AND "
                             "lease_owner=?", (item_id, owner)).fetchone()
            if row is None:
                return False
            if db.execute("SELECT 1 FROM items WHERE kind=? AND path=? AND status='pending'",
                          row).fetchone():
                db.execute("DELETE FROM items WHERE id=?", (item_id,))
            else:
                db.execute("UPDATE items SET status='pending', lease_owner=NULL, "
                           "lease_until=NULL, updated_at=? WHERE id=?", (self.clock(), item_id))
        return True

    def _owned(self, item_id: int, owner: str, assignments: str, args: tuple[Any, ...]) -> bool:
        with self._write() as db:
            cur = db.execute(f"UPDATE items SET {assignments} WHERE id=? AND status='running' "
                             "AND lease_owner=?", (*args, item_id, owner))
        return cur.rowcount == 1

    # -- housekeeping ------------------------------------------------------------------
    def retry_failed(self, kind: str | None = None) -> int:
        """Put failed items back to pending (attempts reset); those already covered by a
        pending item of the same note are dropped. Returns how many are pending again."""
        where, args = ("status='failed'", ()) if kind is None else \
            ("status='failed' AND kind=?", (kind,))
        with self._write() as db:
            db.execute(f"DELETE FROM items WHERE {where} AND EXISTS (SELECT 1 FROM items p "
                       "WHERE p.kind=items.kind AND p.path=items.path AND p.status='pending')",
                       args)
            # two failed items of one note: keep the newest
            db.execute(f"DELETE FROM items WHERE {where} AND id < (SELECT MAX(f.id) FROM items "
                       "f WHERE f.kind=items.kind AND f.path=items.path AND f.status='failed')",
                       args)
            cur = db.execute(f"UPDATE items SET status='pending', attempts=0, error=NULL, "
                             f"updated_at=? WHERE {where}", (self.clock(), *args))
        return cur.rowcount

    def prune(self, *, keep_done: float = KEEP_DONE, keep_failed: float = KEEP_FAILED) -> int:
        """Delete done items older than `keep_done` seconds, failed ones past `keep_failed`."""
        now = self.clock()
        old = "(status='done' AND updated_at < ?) OR (status='failed' AND updated_at < ?)"
        args = (now - keep_done, now - keep_failed)
        if not self._read(f"SELECT 1 FROM items WHERE {old} LIMIT 1", args):
            return 0
        with self._write() as db:
            cur = db.execute(f"DELETE FROM items WHERE {old}", args)
        return cur.rowcount

    # -- reading -----------------------------------------------------------------------
    def get(self, item_id: int) -> QueueItem | None:
        rows = self._read(f"SELECT {_COLUMNS} FROM items WHERE id=?", (item_id,))
        return _item(rows[0]) if rows else None

    def items(self, status: Status | None = None, kind: str | None = None) -> list[QueueItem]:
        """Stored items, oldest first, optionally of one status and/or kind."""
        where = [w for w, v in (("status=?", status), ("kind=?", kind)) if v is not None]
        args = tuple(v for v in (status, kind) if v is not None)
        sql = f"SELECT {_COLUMNS} FROM items" + (" WHERE " + " AND ".join(where) if where else "")
        return [_item(r) for r in self._read(sql + " ORDER BY id", args)]

    def pending(self, kind: str | None = None) -> list[QueueItem]:
        return self.items("pending", kind)

    def counts(self) -> dict[str, dict[str, int]]:
        """{kind: {status: n}} over the stored items."""
        out: dict[str, dict[str, int]] = {}
        for kind, status, n in self._read("SELECT kind, status, COUNT(*) FROM items "
                                          "GROUP BY kind, status ORDER BY kind, status"):
            out.setdefault(kind, {})[status] = n
        return out

    def close(self) -> None:
        self._proc.close()
