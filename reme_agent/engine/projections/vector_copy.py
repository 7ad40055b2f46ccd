"""Every stored block vector again, as float16 in a small SQLite file beside the chroma store.

Why: recall scores the keyword-only candidates of a query by their stored vectors (the
blend fusion needs every candidate on both sides). chroma hands stored vectors back slowly,
~50-120 µs a vector (Python floats through its bindings), and holds the GIL meanwhile: at 10k
notes (57k vectors) these reads took 3.5-4.5 ms a search on the worker and stalled the main
thread. One SQLite read of the same ids costs a fraction of a millisecond: a whole search went
20.4 → 18.2 ms p50 and 30.6 → 25.7 ms p95 (`bench/ab_search.py`, old and new code in one
process, 600 queries, ABBA order).

What it holds and why it cannot go stale: a block id is derived from the block's path and
embedded text (`engine.indexer.block_id`), and a collection belongs to one embedder, so the
vector of (collection, id) never changes. A row is written after chroma took the vector
(`put`), removed when chroma's is (`delete`, `delete_path`, `drop`); a crash in between
leaves a missing row (the reader asks chroma, the next whole-vault index run copies it) or an
orphan (never asked for: ids are looked up only for live blocks; the next whole-vault run
removes it). Rows hold the vector at unit length (chroma's cosine index stores it so) in
float16: 1 KB a 512-d vector, half of float32, and a cosine off by ~1e-4 at most, far below
what reorders candidates.

chroma stays the vector projection (DESIGN §6) and the only thing queried for neighbours;
this copy only answers "what is the stored vector of these ids". Only for a store this
process opened on disk: a chroma server's collections can be written by anyone.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from reme_agent.engine.perprocess import PerProcess

__all__ = ["SCHEMA_VERSION", "VectorCopy"]

log = logging.getLogger("reme_agent.engine")

SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors (
    collection TEXT NOT NULL,
    id TEXT NOT NULL,
    path TEXT NOT NULL,
    vec BLOB NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS vectors_id ON vectors (collection, id);
CREATE INDEX IF NOT EXISTS vectors_path ON vectors (collection, path);
"""
"""A rowid table, not WITHOUT ROWID: a 1 KB row overflows a WITHOUT ROWID page (its local
payload limit is ~1,000 bytes on 4 KB pages), which made the file 4.8 KB a vector and 60
random reads 2.4 ms; as a rowid table 1.4 KB a vector and 0.28 ms (57k vectors)."""
_CHUNK = 500
"""Ids per statement (SQLite's variable limit is 32,766 here, 999 on old builds)."""


def _version(db: sqlite3.Connection) -> int:
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def _create(db: sqlite3.Connection) -> None:
    """A new file, or another layout (a copy only): start over; the next whole-vault index
    run fills it. Checked again under the write lock: two processes may open a new file."""
    db.execute("BEGIN IMMEDIATE")
    try:
        if _version(db) != SCHEMA_VERSION:
            db.execute("DROP TABLE IF EXISTS vectors")
            for statement in filter(str.strip, _SCHEMA.split(";")):
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def _unit_f16(vecs: np.ndarray) -> np.ndarray:
    rows = np.asarray(vecs, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return (rows / np.where(norms > 0, norms, 1.0)).astype("<f2")


class VectorCopy:
    """(collection, block id) -> unit vector; see the module docstring.

    A failure here never fails the caller's write or read: the copy is an accelerator, so a
    write that could not be copied is logged and its ids are asked from chroma later.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._proc = PerProcess(self._open, threading.Lock)   # a forked child opens its own
        self._broken = False

    @property
    def _lock(self) -> threading.Lock:
        return self._proc.lock

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False,
                             isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        if _version(db) != SCHEMA_VERSION:
            _create(db)
        return db

    def _conn(self) -> sqlite3.Connection | None:
        if self._broken:
            return None
        try:
            return self._proc.db
        except sqlite3.Error as exc:
            log.warning("the vector copy at %s cannot be used (%s); stored vectors are "
                        "read from chroma", self.path, exc)
            self._broken = True
            return None

    def close(self) -> None:
        self._proc.close()

    def _run(self, what: str, sql: str, rows: Iterable[tuple]) -> None:
        """`sql` for each of `rows` in one transaction (a failure is logged, rolled back)."""
        with self._lock:
            db = self._conn()
            if db is None:
                return
            try:
                db.execute("BEGIN")
                db.executemany(sql, rows)
                db.execute("COMMIT")
            except sqlite3.Error as exc:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                log.warning("the vector copy could not %s (%s); chroma answers instead",
                            what, exc)

    def _select(self, queries: Iterable[tuple[str, tuple]]) -> list[tuple] | None:
        """The rows of these SELECTs; None when the copy cannot be read (logged)."""
        with self._lock:
            db = self._conn()
            if db is None:
                return None
            try:
                return [row for sql, params in queries for row in db.execute(sql, params)]
            except sqlite3.Error as exc:
                log.warning("the vector copy could not be read (%s); chroma answers instead",
                            exc)
                return None

    # -- writes (after chroma's) ------------------------------------------------------------
    def put(self, collection: str, ids: Sequence[str], vecs: np.ndarray,
            paths: Sequence[str]) -> None:
        """Copy vectors chroma just stored (a repeated id keeps its last)."""
        if not len(ids):
            return
        unit = _unit_f16(vecs)
        self._run("store vectors",
                  "INSERT OR REPLACE INTO vectors (collection, id, path, vec) VALUES (?,?,?,?)",
                  ((collection, i, p, unit[r].tobytes())
                   for r, (i, p) in enumerate(zip(ids, paths, strict=True))))

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        self._run("delete vectors", "DELETE FROM vectors WHERE collection = ? AND id = ?",
                  ((collection, i) for i in ids))

    def delete_path(self, collection: str, path: str) -> None:
        self._run("delete a note's vectors",
                  "DELETE FROM vectors WHERE collection = ? AND path = ?", [(collection, path)])

    def drop(self, collection: str) -> None:
        self._run("drop a collection", "DELETE FROM vectors WHERE collection = ?",
                  [(collection,)])

    # -- reads ------------------------------------------------------------------------------
    def get(self, collection: str, ids: Sequence[str], dim: int) -> dict[str, np.ndarray]:
        """Stored unit vectors (float32) of the `ids` it holds; the others are left out, and
        so is a row that is not `dim` finite numbers (a damaged file must not reach a score:
        one NaN would sort every candidate at random)."""
        parts = [list(ids[s:s + _CHUNK]) for s in range(0, len(ids), _CHUNK)]
        rows = self._select(
            (f"SELECT id, vec FROM vectors WHERE collection = ? AND id IN "
             f"({','.join('?' * len(part))})", (collection, *part)) for part in parts)
        found = [(bid, blob) for bid, blob in rows or ()
                 if isinstance(blob, bytes) and len(blob) == 2 * dim]
        if not found:
            return {}
        matrix = np.frombuffer(b"".join(blob for _, blob in found),
                               dtype="<f2").reshape(len(found), dim).astype(np.float32)
        ok = np.isfinite(matrix).all(axis=1)
        return {bid: matrix[r] for r, (bid, _) in enumerate(found) if ok[r]}

    def count(self, collection: str) -> int | None:
        """Rows held for `collection`; None when the copy cannot be read."""
        rows = self._select([("SELECT count(*) FROM vectors WHERE collection = ?",
                              (collection,))])
        return None if rows is None else int(rows[0][0])

    def ids(self, collection: str) -> set[str] | None:
        """Every id held for `collection`; None when the copy cannot be read."""
        rows = self._select([("SELECT id FROM vectors WHERE collection = ?", (collection,))])
        return None if rows is None else {r[0] for r in rows}
