"""Where search's name index lives: SQLite beside the index state (DESIGN §7 "Names are first-class").

Why a file: built in memory from the index state, the index cost every new process ~1.2 s
of CPU at 10k notes (jieba over every name) and 12 s / 600 MB at 100k. Stored, a process
opens it in milliseconds and reads only the rows a query touches, each through an index:
entries by key, by spaced form, by path; token postings; bigram postings per key length.

It is derived data, rebuildable at any time: a missing, corrupt or older-format file is
rebuilt from the index state (logged once). It records the index generation it was synced
to and which state file it came from (inode), and is caught up by stamp, one write
transaction per sync, so a reader in another process (WAL) sees all of a sync or none.
If the file cannot be written at all, the same tables live in memory for this process.

This module is storage only; what a name is and how a query matches is `recall/names.py`.
"""

from __future__ import annotations

import contextlib
import logging
import operator
import os
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reme_agent.engine.perprocess import PerProcess, ProcessBound
from reme_agent.engine.state import is_corruption

log = logging.getLogger("reme_agent.index")

FORMAT = "names-3"      # bump when the tables, or what fills them (names, tokens), change
FILE_NAME = "names.sqlite"
MIN_GRAM_LEN, MAX_GRAM_LEN = 5, 62   # fuzzy lookups: keys of 5+ chars, queries up to 60 (+2)
_CHUNK = 512            # bound parameters per IN (SQLite's cap is higher; keeps plans simple)
_STATEMENTS = 256       # prepared statements kept: every IN size (`padded`) of every lookup
MAX_HEADING_NOTES = 2   # a heading more notes share ("Overview") names no note
BATCH = 4096            # rows a sync holds before writing them


def tokenised(field: str, notes: int) -> bool:
    """Whether an entry's tokens are posted: a heading many notes share ("Overview") names
    none, so its words do not count (nor weigh on idf). Decided by the notes sharing the key
    *now*, so the store is the same whatever order notes were synced in."""
    return field != "heading" or notes <= MAX_HEADING_NOTES

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE files (path TEXT PRIMARY KEY, stamp TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE keys (kid INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, notes INTEGER NOT NULL);
CREATE TABLE entries (eid INTEGER PRIMARY KEY, path TEXT NOT NULL, name TEXT NOT NULL,
                      field TEXT NOT NULL, kid INTEGER NOT NULL, words TEXT NOT NULL,
                      tokens TEXT NOT NULL);
CREATE INDEX entries_path ON entries(path);
CREATE INDEX entries_kid ON entries(kid);
CREATE INDEX entries_words ON entries(words);
CREATE TABLE postings (token TEXT NOT NULL, eid INTEGER NOT NULL, ntok INTEGER NOT NULL,
                       PRIMARY KEY (token, eid)) WITHOUT ROWID;
CREATE TABLE token_counts (token TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
CREATE INDEX token_counts_n ON token_counts(n);
CREATE TABLE grams (length INTEGER NOT NULL, gram TEXT NOT NULL, kid INTEGER NOT NULL,
                    PRIMARY KEY (length, gram, kid)) WITHOUT ROWID;
CREATE TABLE gram_counts (length INTEGER NOT NULL, gram TEXT NOT NULL, n INTEGER NOT NULL,
                          PRIMARY KEY (length, gram)) WITHOUT ROWID;
"""
_TABLES = ("meta", "files", "keys", "entries", "postings", "token_counts", "grams", "gram_counts")
_SEP = "\x1f"   # between an entry's tokens (jieba and the English tokenizer never emit it)


@dataclass(frozen=True)
class Entry:
    """One name of one note, as a lookup returns it."""
    eid: int          # entry order: the order names were (re)added, title first per note
    path: str
    name: str
    field: str
    key: str
    notes: int        # notes sharing this key
    words: str        # spaced form: the key is this without its spaces


def bigrams(key: str) -> list[str]:
    return list(map(operator.add, key, key[1:]))   # each character + the next (fast path)


def padded(values: list[Any], pad: Any = None) -> tuple[str, list[Any]]:
    """(`?` marks, values) for an IN list, its length rounded up to a power of two (with
    `pad`, else the last value again: IN is a set test). A query's statement is then one of
    a few texts, prepared once and kept by sqlite3's statement cache; each new IN length
    was a new statement to prepare (20-35 us, more than the lookups themselves)."""
    size = 1 << max(0, len(values) - 1).bit_length()
    filler = values[-1] if pad is None and values else pad
    return ",".join("?" * size), [*values, *[filler] * (size - len(values))]


def chunks(values: Iterable[Any], size: int | None = None) -> Iterator[list[Any]]:
    """The distinct values, `size` (default `_CHUNK`) at a time: SQLite caps the number of
    bound parameters."""
    size = max(1, size or _CHUNK)
    wanted = list(dict.fromkeys(values))
    for start in range(0, len(wanted), size):
        yield wanted[start:start + size]


class NameStore(ProcessBound):
    """The tables, a consistent read, and one writer per sync."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._proc = PerProcess(self._connect)   # a forked child opens its own connection
        self._proc.adopt(self._connect())

    # -- opening ------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        """The file if it is current; rebuilt if missing, old or corrupt; memory if the
        file cannot be used at all."""
        if self.path is not None:
            try:
                return self._open_file(self.path)
            except sqlite3.DatabaseError as exc:
                if is_corruption(exc):
                    log.warning("the name index %s is corrupt (%s); rebuilding it from the "
                                "index state", self.path, exc)
                    self.remove_files(self.path)
                    with contextlib.suppress(sqlite3.DatabaseError, OSError):
                        return self._open_file(self.path)
                log.warning("cannot use the name index file %s (%s); keeping it in memory "
                            "for this process", self.path, exc)
            except OSError as exc:
                log.warning("cannot use the name index file %s (%s); keeping it in memory "
                            "for this process", self.path, exc)
        db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None,
                             cached_statements=_STATEMENTS)
        self._create(db)
        return db

    def _open_file(self, path: Path) -> sqlite3.Connection:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path, check_same_thread=False, timeout=120, isolation_level=None,
                             cached_statements=_STATEMENTS)
        try:
            if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            found = _format_of(db)
            if found != FORMAT:
                db.execute("BEGIN IMMEDIATE")
                if _format_of(db) != FORMAT:   # another process may have just done it
                    if found is not None:
                        log.info("the name index %s has format %s, not %s; rebuilding it",
                                 path, found, FORMAT)
                    for table in _TABLES:
                        db.execute(f"DROP TABLE IF EXISTS {table}")
                    self._create(db, in_transaction=True)
                db.execute("COMMIT")
            db.execute("SELECT count(*) FROM entries").fetchone()   # a damaged page shows here
        except BaseException:
            db.close()
            raise
        return db

    @staticmethod
    def _create(db: sqlite3.Connection, in_transaction: bool = False) -> None:
        if not in_transaction:
            db.execute("BEGIN")
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                db.execute(statement)
        db.executemany("INSERT INTO meta VALUES (?, ?)",
                       [("format", FORMAT), ("generation", "-1"), ("source", ""),
                        ("version", "0"), ("entries", "0"), ("max_words", "0")])
        if not in_transaction:
            db.execute("COMMIT")

    @staticmethod
    def remove_files(path: Path) -> None:
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                os.unlink(f"{path}{suffix}")

    def close(self) -> None:
        self._proc.close()

    # -- reading ------------------------------------------------------------------------
    @contextmanager
    def reading(self) -> Iterator[int]:
        """One read transaction (a single committed sync); yields the store's version."""
        with self._lock:
            self._db.execute("BEGIN")
            try:
                yield int(self._meta("version"))
            finally:
                self._db.execute("COMMIT")

    def _meta(self, key: str) -> str:
        return self._db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()[0]

    def synced(self) -> tuple[int, str]:
        """(generation, source) this store was last synced to."""
        with self._lock:
            return int(self._meta("generation")), self._meta("source")

    def count_entries(self) -> int:
        return int(self._meta("entries"))

    def max_words(self) -> int:
        return int(self._meta("max_words"))

    _ENTRY = ("SELECT e.eid, e.path, e.name, e.field, k.key, k.notes, e.words FROM entries e "
              "JOIN keys k ON k.kid = e.kid")

    def iter_entries(self) -> Iterator[Entry]:
        """Every entry in entry order (checks and benches; a query never reads them all)."""
        cursor = self._db.execute(f"{self._ENTRY} ORDER BY e.eid")
        while rows := cursor.fetchmany(4096):
            yield from (Entry(*r) for r in rows)

    def entries_of_path(self, path: str) -> list[Entry]:
        return [Entry(*r) for r in self._db.execute(
            f"{self._ENTRY} WHERE e.path = ? ORDER BY e.eid", (path,))]

    def entries_with_keys(self, keys: Iterable[str], max_notes: int) -> list[Entry]:
        """Entries of these keys, in entry order, leaving out keys more than `max_notes`
        notes share (a heading 5,000 notes share is one row of `keys`, never 5,000)."""
        out: list[Entry] = []
        for chunk in chunks(keys):
            marks, values = padded(chunk)
            out += [Entry(*r) for r in self._db.execute(
                f"{self._ENTRY} WHERE k.key IN ({marks}) AND k.notes <= ?", [*values, max_notes])]
        out.sort(key=lambda e: e.eid)
        return out

    def tokens_of(self, eids: Iterable[int]) -> dict[int, tuple[str, ...]]:
        """eid -> its tokens (one indexed row each, no join: token matches read thousands)."""
        out: dict[int, tuple[str, ...]] = {}
        for chunk in chunks(eids):
            marks, values = padded(chunk)
            for eid, tokens in self._db.execute(
                    f"SELECT eid, tokens FROM entries WHERE eid IN ({marks})", values):
                out[eid] = tuple(tokens.split(_SEP)) if tokens else ()
        return out

    def entries_by_eid(self, eids: Iterable[int]) -> dict[int, Entry]:
        out: dict[int, Entry] = {}
        for chunk in chunks(eids):
            marks, values = padded(chunk)
            for r in self._db.execute(f"{self._ENTRY} WHERE e.eid IN ({marks})", values):
                out[r[0]] = Entry(*r)
        return out

    def gram_counts(self, lengths: Iterable[int], grams: Iterable[str]
                    ) -> dict[tuple[int, str], int]:
        """(length, bigram) -> keys of that length holding it, for every length and bigram
        asked (absent: none), in one indexed read."""
        sizes = list(dict.fromkeys(lengths))
        out: dict[tuple[int, str], int] = {}
        if not sizes:
            return out
        length_marks, length_values = padded(sizes)
        for chunk in chunks(grams, max(1, _CHUNK - len(length_values))):
            marks, values = padded(chunk)
            sql = (f"SELECT length, gram, n FROM gram_counts WHERE length IN ({length_marks}) "
                   f"AND gram IN ({marks})")
            out.update(((n, g), c) for n, g, c in self._db.execute(sql, [*length_values,
                                                                           *values]))
        return out

    def grams_of_length(self, length: int, limit: int) -> dict[str, int]:
        """bigram -> keys of this length holding it, at most `limit` of them."""
        return dict(self._db.execute("SELECT gram, n FROM gram_counts WHERE length = ? LIMIT ?",
                                     (length, limit)))

    def keys_with_grams(self, pairs: Iterable[tuple[int, str]], max_notes: int
                        ) -> list[tuple[int, str, str]]:
        """(length, bigram, key) of every key at most `max_notes` notes share that holds one
        of these (length, bigram) pairs, in one read."""
        out: list[tuple[int, str, str]] = []
        for chunk in chunks(pairs, max(1, _CHUNK // 2)):
            marks, values = padded(chunk, pad=(0, ""))   # a length no key has
            rows = marks.replace("?", "(?, ?)")
            # the pairs drive the join: each is one primary-key search of `grams`
            sql = (f"WITH w(length, gram) AS (VALUES {rows}) SELECT g.length, g.gram, k.key "
                   "FROM w CROSS JOIN grams g ON g.length = w.length AND g.gram = w.gram "
                   "JOIN keys k ON k.kid = g.kid WHERE k.notes <= ?")
            out += self._db.execute(sql, [*(x for pair in values for x in pair), max_notes])
        return out

    def top_counts(self, n: int) -> list[tuple[str, int]]:
        """The `n` tokens the most entries hold, most first."""
        return self._db.execute("SELECT token, n FROM token_counts ORDER BY n DESC LIMIT ?",
                                (n,)).fetchall()

    def token_counts(self, tokens: Iterable[str]) -> dict[str, int]:
        """Entries holding each token (0 for none)."""
        out: dict[str, int] = {}
        wanted = list(dict.fromkeys(tokens))
        for chunk in chunks(wanted):
            marks, values = padded(chunk)
            out.update(self._db.execute(
                f"SELECT token, n FROM token_counts WHERE token IN ({marks})", values))
        return {t: out.get(t, 0) for t in wanted}

    def postings(self, tokens: Iterable[str]) -> dict[str, list[tuple[int, int]]]:
        """token -> (eid, number of tokens of that entry) of every entry holding it, for
        every token asked (empty list: none), in one indexed read."""
        wanted = list(dict.fromkeys(tokens))
        out: dict[str, list[tuple[int, int]]] = {t: [] for t in wanted}
        for chunk in chunks(wanted):
            marks, values = padded(chunk)
            for token, eid, ntok in self._db.execute(
                    f"SELECT token, eid, ntok FROM postings WHERE token IN ({marks})", values):
                out[token].append((eid, ntok))
        return out

    # -- writing ------------------------------------------------------------------------
    @contextmanager
    def writing(self) -> Iterator[Writer]:
        """One write transaction: everything a sync changes lands at once, or not at all."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                writer = Writer(self._db)
                yield writer
                writer.flush()
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise


class Writer:
    """The changes of one sync, written as they come inside its transaction; what depends on
    the final note counts (headings' postings, key rows, bigrams) is settled at `flush`.
    Held in memory meanwhile: key counts, token count deltas and a batch of rows."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self.generation, self.source = (int(_get(db, "generation")), _get(db, "source"))
        self._entries = int(_get(db, "entries"))
        self._max_words = int(_get(db, "max_words"))
        self._first_new = (db.execute("SELECT max(eid) FROM entries").fetchone()[0] or 0) + 1
        self._next_eid = self._first_new
        self._next_kid = (db.execute("SELECT max(kid) FROM keys").fetchone()[0] or 0) + 1
        self._empty = self._entries == 0 and self._next_kid == 1
        self._keys: dict[str, list[int]] = {}   # key -> [kid, notes now, notes in the file]
        self._new_keys: set[str] = set()
        self._counts: dict[str, int] = {}        # token -> change of its entry count
        self._rows: list[tuple[int, str, str, str, int, str, str]] = []   # not yet written
        self._pending: set[str] = set()          # their paths
        self._stamps: list[tuple[str, str]] = []
        self._forget: list[str] = []
        self._changed = False

    def stamps(self) -> dict[str, str]:
        return dict(self._db.execute("SELECT path, stamp FROM files"))

    def _key(self, key: str) -> list[int]:
        slot = self._keys.get(key)
        if slot is None:
            row = None if self._empty else self._db.execute(
                "SELECT kid, notes FROM keys WHERE key = ?", (key,)).fetchone()
            if row is None:
                slot = [self._next_kid, 0, 0]
                self._next_kid += 1
                self._new_keys.add(key)
            else:
                slot = [row[0], row[1], row[1]]
            self._keys[key] = slot
        return slot

    def remove(self, path: str) -> None:
        """Drop a note's names (its stamp row stays until `set_stamp`/`forget`)."""
        if path in self._pending:
            self._write_rows()
        rows = self._db.execute("SELECT e.eid, k.key, e.field, e.tokens FROM entries e "
                                "JOIN keys k ON k.kid = e.kid WHERE e.path = ?",
                                (path,)).fetchall()
        if not rows:
            return
        self._changed = True
        unpost = []
        for eid, key, field, tokens in rows:
            slot = self._key(key)
            slot[1] -= 1
            self._entries -= 1
            # posted by the counts the file held, or (added in this sync) unless a heading
            posted = tokenised(field, slot[2]) if eid < self._first_new else field != "heading"
            if tokens and posted:
                for tok in tokens.split(_SEP):
                    unpost.append((tok, eid))
                    self._counts[tok] = self._counts.get(tok, 0) - 1
        self._db.executemany("DELETE FROM postings WHERE token = ? AND eid = ?", unpost)
        self._db.execute("DELETE FROM entries WHERE path = ?", (path,))

    def add(self, path: str, name: str, field: str, key: str, words: str,
            tokens: tuple[str, ...]) -> None:
        slot = self._key(key)
        slot[1] += 1
        self._entries += 1
        self._changed = True
        self._max_words = max(self._max_words, len(words))
        self._rows.append((self._next_eid, path, name, field, slot[0], words, _SEP.join(tokens)))
        self._pending.add(path)
        self._next_eid += 1
        if len(self._rows) >= BATCH:
            self._write_rows()

    def _write_rows(self) -> None:
        """Write the added rows; a name that is not a heading is posted at once (headings
        wait for the final counts)."""
        if not self._rows:
            return
        self._db.executemany("INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?, ?)", self._rows)
        post = []
        for eid, _, _, field, _, _, tokens in self._rows:
            if tokens and field != "heading":
                toks = tokens.split(_SEP)
                for tok in toks:
                    post.append((tok, eid, len(toks)))
                    self._counts[tok] = self._counts.get(tok, 0) + 1
        self._db.executemany("INSERT INTO postings VALUES (?, ?, ?)", post)
        self._rows = []
        self._pending = set()

    def set_stamp(self, path: str, stamp: str) -> None:
        self._stamps.append((path, stamp))

    def forget(self, path: str) -> None:
        self._forget.append(path)

    def finish(self, generation: int, source: str) -> None:
        self.generation, self.source = generation, source

    def flush(self) -> None:
        db = self._db
        self._write_rows()
        self._post_headings()
        self._flush_counts(self._counts)
        self._flush_keys()
        db.executemany("DELETE FROM files WHERE path = ?", [(p,) for p in self._forget])
        db.executemany("INSERT OR REPLACE INTO files VALUES (?, ?)", self._stamps)
        meta = {"generation": str(self.generation), "source": self.source,
                "entries": str(self._entries), "max_words": str(self._max_words)}
        if self._changed:
            meta["version"] = str(int(_get(db, "version")) + 1)
        db.executemany("UPDATE meta SET value = ? WHERE key = ?",
                       [(v, k) for k, v in meta.items()])

    def _post_headings(self) -> None:
        """Post the headings added in this sync that the final counts leave tokenised, and
        change the postings of the headings that stayed while the notes sharing their key
        crossed `MAX_HEADING_NOTES`."""
        db = self._db
        notes = {kid: now for kid, now, _ in self._keys.values()}
        cursor = db.execute("SELECT eid, kid, tokens FROM entries WHERE eid >= ? AND "
                            "field = 'heading' AND tokens != ''", (self._first_new,))
        while rows := cursor.fetchmany(4096):
            self._repost([(eid, tokens) for eid, kid, tokens in rows
                          if tokenised("heading", notes[kid])], post=True)
        for key, (kid, now, before) in self._keys.items():
            was, is_ = tokenised("heading", before), tokenised("heading", now)
            if key in self._new_keys or was == is_:
                continue
            self._repost(db.execute("SELECT eid, tokens FROM entries WHERE kid = ? AND "
                                    "field = 'heading' AND eid < ? AND tokens != ''",
                                    (kid, self._first_new)).fetchall(), post=is_)

    def _repost(self, rows: list[tuple[int, str]], post: bool) -> None:
        changes = []
        step = 1 if post else -1
        for eid, tokens in rows:
            toks = tokens.split(_SEP)
            for tok in toks:
                changes.append((tok, eid, len(toks)) if post else (tok, eid))
                self._counts[tok] = self._counts.get(tok, 0) + step
        if post:
            self._db.executemany("INSERT INTO postings VALUES (?, ?, ?)", changes)
        else:
            self._db.executemany("DELETE FROM postings WHERE token = ? AND eid = ?", changes)

    def _flush_counts(self, counts: dict[str, int]) -> None:
        changes = [(t, d) for t, d in counts.items() if d]
        self._db.executemany(
            "INSERT INTO token_counts VALUES (?, ?) "
            "ON CONFLICT(token) DO UPDATE SET n = n + excluded.n", changes)
        self._db.executemany("DELETE FROM token_counts WHERE token = ? AND n <= 0",
                             [(t,) for t, d in changes if d < 0])

    def _flush_keys(self) -> None:
        """Key rows and, for keys of fuzzy-matchable length that appear or vanish, their
        bigram postings and counts."""
        added, dropped, counts = [], [], []
        new_grams, gone_grams = [], []
        deltas: dict[tuple[int, str], int] = {}
        for key, (kid, notes, before) in self._keys.items():
            new = key in self._new_keys
            if notes == before and not new:
                continue
            if new and notes > 0:
                added.append((kid, key, notes))
            elif not new and notes <= 0:
                dropped.append((kid,))
            elif not new:
                counts.append((notes, kid))
            if not MIN_GRAM_LEN <= len(key) <= MAX_GRAM_LEN or (new and notes <= 0) or \
                    (not new and notes > 0):
                continue
            step = 1 if new else -1
            for gram in set(bigrams(key)):
                (new_grams if new else gone_grams).append((len(key), gram, kid))
                deltas[len(key), gram] = deltas.get((len(key), gram), 0) + step
        db = self._db
        db.executemany("UPDATE keys SET notes = ? WHERE kid = ?", counts)
        db.executemany("DELETE FROM keys WHERE kid = ?", dropped)
        db.executemany("INSERT INTO keys VALUES (?, ?, ?)", added)
        db.executemany("DELETE FROM grams WHERE length = ? AND gram = ? AND kid = ?",
                       gone_grams)
        db.executemany("INSERT INTO grams VALUES (?, ?, ?)", new_grams)
        db.executemany("INSERT INTO gram_counts VALUES (?, ?, ?) ON CONFLICT(length, gram) "
                       "DO UPDATE SET n = n + excluded.n",
                       [(n, g, d) for (n, g), d in deltas.items() if d])
        db.executemany("DELETE FROM gram_counts WHERE length = ? AND gram = ? AND n <= 0",
                       [(n, g) for (n, g), d in deltas.items() if d < 0])


def _get(db: sqlite3.Connection, key: str) -> str:
    return db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()[0]


def _format_of(db: sqlite3.Connection) -> str | None:
    try:
        row = db.execute("SELECT value FROM meta WHERE key='format'").fetchone()
    except sqlite3.OperationalError:   # no tables yet
        return None
    return row[0] if row else None
