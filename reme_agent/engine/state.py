"""The indexer's memory of what it last indexed, in SQLite under `<vault>/.reme/` (DESIGN §6).

Per file: size, mtime, stamp, frontmatter, raw links and parse error; per block: id, lines,
hash, text and BM25 tokens. The vector store holds only embeddings keyed by block id, so
opening a vault rebuilds BM25 and the graph from here without re-tokenising or re-parsing.
Deleting `.reme/` loses nothing: everything here is derived from the files.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reme_agent.engine.perprocess import PerProcess, ProcessBound
from reme_agent.errors import StorageError

log = logging.getLogger("reme_agent.index")

SCHEMA_VERSION = 2

_STATUS = """json_extract(frontmatter, '$."status"')"""
"""The indexed expression; a query must spell it the same way for SQLite to use the index."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, stamp TEXT NOT NULL,
    frontmatter TEXT NOT NULL, links TEXT NOT NULL, error TEXT, indexed_at REAL NOT NULL,
    tags TEXT NOT NULL DEFAULT '[]'
);
CREATE TABLE IF NOT EXISTS blocks (
    id TEXT PRIMARY KEY, path TEXT NOT NULL, idx INTEGER NOT NULL, start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL, hash TEXT NOT NULL, heading TEXT, text TEXT NOT NULL, tokens TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS blocks_path ON blocks(path);
"""

# What the last whole-vault scan saw in each folder (`FileStore.scan_cached`): a cache of the
# folders' contents, checked against their mtimes, so it needs no schema version of its own.
_FOLDERS = """
CREATE TABLE IF NOT EXISTS folders (
    path TEXT PRIMARY KEY, mtime_ns INTEGER NOT NULL, files TEXT NOT NULL, folders TEXT NOT NULL
);
"""


# Per note, the `links.link_key`s of what names a file without being an edge (embeds,
# Markdown links, reference definitions, links in frontmatter values), so a new file's
# cheap "which notes may it take links from" asks one lookup (`IndexState.ref_sources`).
_REFKEYS = """
CREATE TABLE IF NOT EXISTS refkeys (
    key TEXT NOT NULL, path TEXT NOT NULL, PRIMARY KEY (key, path)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS refkeys_path ON refkeys(path);
"""


@dataclass
class FileRow:
    path: str
    size: int
    mtime_ns: int
    stamp: str
    frontmatter: dict[str, Any]
    links: list[dict[str, Any]]
    error: str | None
    indexed_at: float
    tags: list[str] = field(default_factory=list)   # inline `#tags` of the body


@dataclass
class BlockRow:
    id: str
    path: str
    idx: int
    start_line: int
    end_line: int
    hash: str
    heading: str | None
    text: str
    tokens: list[str] = field(default_factory=list)


class IndexState(ProcessBound):
    """Thread-safe access to the index database (one connection, serialised)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._proc = PerProcess(self._reconnect)   # a forked child opens its own connection
        self._pin = threading.local()   # generation() read once per pinned() span, per thread
        try:
            self._open()
        except sqlite3.DatabaseError as exc:
            if not is_corruption(exc):  # a full disk or a locked file is not a broken index
                with contextlib.suppress(Exception):
                    self._db.close()
                raise StorageError(path.name, str(exc)) from exc
            # Derived data only: move the broken file aside and rebuild from the vault.
            self._db.close()
            aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
            os.replace(path, aside)
            for extra in ("-wal", "-shm"):
                Path(f"{path}{extra}").unlink(missing_ok=True)
            log.warning("%s is corrupt (%s); moved it to %s and rebuilding the index from "
                        "the vault", path, exc, aside.name)
            self._open()

    def _open(self) -> None:
        """Open, writing only what is missing: a current database opens without a write, so
        a full disk or a read-only copy can still be searched."""
        self._proc.adopt(sqlite3.connect(self.path, check_same_thread=False, timeout=30))
        if self._db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        try:
            version = self.get_meta("schema_version")
        except sqlite3.OperationalError:  # a new file: no tables yet
            version = None
        if version == str(SCHEMA_VERSION):
            self._ensure_folders()
            self._ensure_tags_column()
            self._ensure_refkeys()
            self._ensure_status_index()
            return
        self._db.executescript(_SCHEMA + _FOLDERS + _REFKEYS)
        self._ensure_status_index()
        if version is not None:
            self.clear()
        self.set_meta("schema_version", str(SCHEMA_VERSION))

    def _reconnect(self) -> sqlite3.Connection:
        """A forked child's own connection to the file the parent opened and checked."""
        db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        db.execute("PRAGMA synchronous=NORMAL")
        return db

    def _ensure_status_index(self) -> None:
        """An index on the frontmatter `status`, so the notes with one status are a lookup
        (recall's archived set), added to databases made before it (0.18 s at 100k notes,
        once); a read-only copy goes without (`paths_with_status` then answers None)."""
        try:
            if not self._db.execute("SELECT 1 FROM sqlite_master WHERE name='files_status'"
                                    ).fetchone():
                with self._db:
                    self._db.execute(f"CREATE INDEX files_status ON files({_STATUS})")
            self.status_indexed = True
        except sqlite3.OperationalError as exc:
            log.debug("no frontmatter status index: %s", exc)
            self.status_indexed = False

    def _ensure_tags_column(self) -> None:
        """The `tags` column (inline `#tags`); rows from before hold `[]` until the next
        whole-vault run re-reads every note (the indexer's DOCUMENTS_VERSION moved with it).
        A read-only copy goes without (rows read `[]`)."""
        self._add_missing("tags column", lambda: "tags" in {
            r[1] for r in self._db.execute("PRAGMA table_info(files)")},
            "ALTER TABLE files ADD COLUMN tags TEXT NOT NULL DEFAULT '[]'")

    def _ensure_folders(self) -> None:
        """The folder listings table (a read-only copy goes without: whole-vault scans then
        list every folder)."""
        self._add_missing("folder listings table", lambda: self._has_table("folders"), _FOLDERS)

    def _ensure_refkeys(self) -> None:
        """The reference-key table; its rows come with the next whole-vault run
        (`indexer.DOCUMENTS_VERSION` re-reads every note once). A read-only copy goes
        without (it takes no writes, so no create asks it)."""
        self._add_missing("reference key table", lambda: self._has_table("refkeys"), _REFKEYS)

    def _has_table(self, name: str) -> bool:
        return self._db.execute("SELECT 1 FROM sqlite_master WHERE name=?",
                                (name,)).fetchone() is not None

    def _add_missing(self, what: str, present: Callable[[], bool], ddl: str) -> None:
        """Run `ddl` on a database made before it, unless `present()`: one place for the
        in-place upgrades, which a read-only copy simply goes without."""
        try:
            if not present():
                with self._db:
                    self._db.executescript(ddl)
        except sqlite3.OperationalError as exc:
            log.debug("no %s: %s", what, exc)

    # -- meta --------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self._lock, self._db:
            self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def set_meta_many(self, values: dict[str, str]) -> None:
        """Several meta keys in one commit (readers see all of them or none)."""
        with self._lock, self._db:
            self._db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", values.items())

    def generation(self, *, fresh: bool = False) -> int:
        """Bumped on every committed index run, so other processes can notice changes.
        `fresh`: the committed value even inside `pinned()` (what an index run must see)."""
        pin = self._pin
        if not fresh and getattr(pin, "depth", 0):
            if pin.value is None:
                pin.value = int(self.get_meta("generation") or 0)
            return pin.value
        return int(self.get_meta("generation") or 0)

    def bump_generation(self) -> int:
        pin = self._pin
        gen = self.generation(fresh=True) + 1
        self.set_meta("generation", str(gen))
        if getattr(pin, "depth", 0):
            pin.value = gen
        return gen

    @contextmanager
    def pinned(self) -> Iterator[None]:
        """Within it (on this thread), `generation()` is read once: a search asks it from
        ~14 places (row cache, node catalog, freshness, names), one SQL read each. A bump
        made here (a search re-indexing a changed note) is seen at once; one made by another
        thread or process is seen by the next span, as if this one had run just before it."""
        pin = self._pin
        depth = getattr(pin, "depth", 0)
        if not depth:
            pin.value = None
        pin.depth = depth + 1
        try:
            yield
        finally:
            pin.depth = depth

    @contextmanager
    def reading(self) -> Iterator[None]:
        """One read transaction: the queries inside see a single committed state (WAL),
        even while another process's indexer commits."""
        with self._lock:
            self._db.execute("BEGIN")
            try:
                yield
            finally:
                self._db.execute("COMMIT")

    # -- files -------------------------------------------------------------------------
    def files(self) -> dict[str, FileRow]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM files").fetchall()
        return {r[0]: _file_row(r) for r in rows}

    def iter_links(self) -> Iterator[tuple[str, list[dict[str, Any]]]]:
        """(path, raw links) of every file that has links, decoded page by page: what the
        link-key index needs, without decoding every frontmatter (100k rows: ~300 MB)."""
        with self._lock:
            cursor = self._db.execute("SELECT path, links FROM files WHERE links != '[]'")
            while rows := cursor.fetchmany(4096):
                for path, links in rows:
                    yield path, json.loads(links)

    def _where_in(self, sql: str, values: Iterable[str], params: tuple[Any, ...] = ()
                  ) -> Iterator[tuple[Any, ...]]:
        """Rows of `sql` (holding `{marks}` where the IN list goes) for `values` without
        repeats, 500 per query (SQLite's variable limit); the caller holds the lock."""
        wanted = list(dict.fromkeys(values))
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            yield from self._db.execute(sql.format(marks=",".join("?" * len(chunk))),
                                        [*params, *chunk])

    def file_stats(self, paths: Iterable[str] | None = None) -> dict[str, tuple[int, int, str]]:
        """path -> (size, mtime_ns, stamp), without decoding JSON: what a re-index compares."""
        sql = "SELECT path, size, mtime_ns, stamp FROM files"
        with self._lock:
            if paths is None:
                return {r[0]: (r[1], r[2], r[3]) for r in self._db.execute(sql)}
            return {r[0]: (r[1], r[2], r[3])
                    for r in self._where_in(sql + " WHERE path IN ({marks})", paths)}

    def file_stamps(self) -> dict[str, str]:
        """path -> content stamp of every indexed file (what a snapshot is checked against)."""
        with self._lock:
            return dict(self._db.execute("SELECT path, stamp FROM files"))

    def frontmatter_values(self, paths: Iterable[str], key: str) -> dict[str, Any]:
        """path -> the value of top-level frontmatter `key` (None when absent; a list or
        mapping as its JSON text) for each of `paths` that is indexed; read in SQLite, so
        no frontmatter is decoded here."""
        with self._lock:
            return dict(self._where_in(
                "SELECT path, json_extract(frontmatter, ?) FROM files WHERE path IN ({marks})",
                paths, ("$." + json.dumps(key),)))

    def paths_with_status(self, value: str) -> set[str] | None:
        """Paths whose frontmatter `status` is `value`, through the status index (a lookup,
        not a scan of every frontmatter); None when the database has no such index."""
        if not self.status_indexed:
            return None
        with self._lock:
            return {r[0] for r in self._db.execute(
                f"SELECT path FROM files WHERE {_STATUS} = ?", (value,))}

    def first_block_texts(self, paths: Iterable[str]) -> dict[str, str]:
        """path -> the text of its first block (`blocks_of(path)[0].text`), for many paths
        in one query per 500; paths without blocks are left out."""
        with self._lock:
            return dict(self._where_in("SELECT path, text FROM blocks WHERE path IN ({marks}) "
                                       "AND idx = (SELECT MIN(idx) FROM blocks b "
                                       "WHERE b.path = blocks.path)", paths))

    def frontmatters_of(self, paths: Iterable[str]) -> dict[str, tuple[int, dict[str, Any]]]:
        """path -> (mtime_ns, frontmatter) of those `paths` that are indexed (a frontmatter
        that is not a mapping reads as {}), in one query per 500; links are not decoded."""
        with self._lock:
            rows = list(self._where_in(
                "SELECT path, mtime_ns, frontmatter FROM files WHERE path IN ({marks})", paths))
        out: dict[str, tuple[int, dict[str, Any]]] = {}
        for path, mtime_ns, raw in rows:
            fm = json.loads(raw)
            out[path] = (mtime_ns, fm if isinstance(fm, dict) else {})
        return out

    def files_at(self, paths: Iterable[str]) -> dict[str, FileRow]:
        """The rows of these paths (the indexed ones), 500 per query: what a view that
        knows most notes already still needs."""
        with self._lock:
            return {r[0]: _file_row(r) for r in self._where_in(
                "SELECT * FROM files WHERE path IN ({marks})", paths)}

    def file(self, path: str) -> FileRow | None:
        with self._lock:
            row = self._db.execute("SELECT * FROM files WHERE path=?", (path,)).fetchone()
        return _file_row(row) if row else None

    def touch(self, path: str, size: int, mtime_ns: int) -> None:
        with self._lock, self._db:
            self._db.execute("UPDATE files SET size=?, mtime_ns=? WHERE path=?", (size, mtime_ns, path))

    def replace_file(self, row: FileRow, blocks: Iterable[BlockRow],
                     ref_keys: Iterable[str] = ()) -> None:
        """Replace a file's row, all its blocks and its reference keys in one transaction."""
        with self._lock, self._db:
            self._db.execute("DELETE FROM blocks WHERE path=?", (row.path,))
            self._db.execute("DELETE FROM refkeys WHERE path=?", (row.path,))
            self._db.executemany("INSERT OR IGNORE INTO refkeys VALUES (?, ?)",
                                 [(k, row.path) for k in ref_keys])
            self._db.execute(
                "INSERT OR REPLACE INTO files VALUES (?,?,?,?,?,?,?,?,?)",
                (row.path, row.size, row.mtime_ns, row.stamp,
                 json.dumps(row.frontmatter, ensure_ascii=False, default=str),
                 json.dumps(row.links, ensure_ascii=False), row.error, row.indexed_at,
                 json.dumps(row.tags, ensure_ascii=False)))
            self._db.executemany(
                "INSERT OR REPLACE INTO blocks VALUES (?,?,?,?,?,?,?,?,?)",
                [(b.id, b.path, b.idx, b.start_line, b.end_line, b.hash, b.heading, b.text,
                  json.dumps(b.tokens, ensure_ascii=False)) for b in blocks])

    def delete_file(self, path: str) -> None:
        with self._lock, self._db:
            self._db.execute("DELETE FROM blocks WHERE path=?", (path,))
            self._db.execute("DELETE FROM refkeys WHERE path=?", (path,))
            self._db.execute("DELETE FROM files WHERE path=?", (path,))

    # -- folder listings (scan cache) --------------------------------------------------
    def folder_listings(self) -> dict[str, tuple[int, list[str], list[str]]]:
        """folder -> (mtime_ns, file names, sub-folder names) as the last scan saved them."""
        try:
            with self._lock:
                rows = self._db.execute("SELECT path, mtime_ns, files, folders FROM folders"
                                        ).fetchall()
        except sqlite3.OperationalError:
            return {}
        return {path: (mtime, files.split("\n") if files else [],
                       folders.split("\n") if folders else [])
                for path, mtime, files, folders in rows}

    def save_folder_listings(self, changed: dict[str, tuple[int, Iterable[str], Iterable[str]]],
                             removed: Iterable[str]) -> None:
        """Replace the listings of `changed` folders and forget `removed` ones (names never
        hold a newline: such a name is skipped by the scan)."""
        rows = [(path, mtime, "\n".join(files), "\n".join(folders))
                for path, (mtime, files, folders) in changed.items()]
        gone = [(path,) for path in removed]
        if not rows and not gone:
            return
        try:
            with self._lock, self._db:
                self._db.executemany("INSERT OR REPLACE INTO folders VALUES (?, ?, ?, ?)", rows)
                self._db.executemany("DELETE FROM folders WHERE path=?", gone)
        except sqlite3.OperationalError as exc:  # a cache: a read-only index goes without
            log.debug("could not save folder listings: %s", exc)

    # -- blocks ------------------------------------------------------------------------
    def block_ids(self, path: str) -> list[str]:
        with self._lock:
            return [r[0] for r in self._db.execute("SELECT id FROM blocks WHERE path=?", (path,))]

    def block_ids_of(self, paths: Iterable[str]) -> dict[str, list[str]]:
        """`block_ids` of many paths (each in the same order), in one query per 500;
        paths without blocks are left out."""
        out: dict[str, list[str]] = {}
        with self._lock:
            for path, bid in self._where_in("SELECT path, id FROM blocks WHERE path IN "
                                            "({marks})", paths):
                out.setdefault(path, []).append(bid)
        return out

    def blocks_of(self, path: str) -> list[BlockRow]:
        with self._lock:
            rows = self._db.execute(
                "SELECT * FROM blocks WHERE path=? ORDER BY idx", (path,)).fetchall()
        return [_block_row(r) for r in rows]

    def blocks_by_id(self, ids: Iterable[str], with_tokens: bool = False) -> dict[str, BlockRow]:
        """Rows by id; tokens are decoded only on request (search never needs them)."""
        cols = "*" if with_tokens else "id, path, idx, start_line, end_line, hash, heading, text, '[]'"
        with self._lock:
            return {r[0]: _block_row(r) for r in self._where_in(
                f"SELECT {cols} FROM blocks WHERE id IN ({{marks}})", ids)}

    def iter_block_tokens(self) -> Iterator[tuple[str, str, list[str]]]:
        """(block id, path, tokens) for every block: what a cold open needs for BM25.

        Streamed in pages: decoded all at once, 550k blocks' tokens were ~16M Python strings
        (several GB) before the first one was indexed."""
        with self._lock:
            cursor = self._db.execute("SELECT id, path, tokens FROM blocks")
            while rows := cursor.fetchmany(4096):
                for block_id, path, tokens in rows:
                    yield block_id, path, json.loads(tokens)

    def block_tokens_of(self, paths: Iterable[str]) -> list[tuple[str, str, list[str]]]:
        """(block id, path, tokens) for the blocks of these paths only."""
        with self._lock:
            return [(bid, path, json.loads(tokens)) for bid, path, tokens in self._where_in(
                "SELECT id, path, tokens FROM blocks WHERE path IN ({marks})", paths)]

    def name_sources(self, paths: Iterable[str] | None = None
                     ) -> dict[str, tuple[dict[str, Any], str, list[str]]]:
        """path -> (frontmatter, start of its first block, its headings in order): what a
        note's names are made of, without decoding links or reading whole blocks."""
        files_sql = "SELECT path, frontmatter FROM files"
        blocks_sql = ("SELECT path, idx, heading, CASE WHEN idx = 0 THEN substr(text, 1, 400) "
                      "ELSE '' END FROM blocks WHERE (idx = 0 OR heading IS NOT NULL)")
        with self._lock:
            if paths is None:
                frows = self._db.execute(files_sql).fetchall()
                brows = self._db.execute(blocks_sql + " ORDER BY path, idx").fetchall()
            else:
                wanted = list(dict.fromkeys(paths))
                frows = list(self._where_in(files_sql + " WHERE path IN ({marks})", wanted))
                brows = list(self._where_in(blocks_sql + " AND path IN ({marks}) "
                                            "ORDER BY path, idx", wanted))
        out: dict[str, tuple[dict[str, Any], str, list[str]]] = {
            path: (json.loads(fm), "", []) for path, fm in frows}
        for path, idx, heading, text in brows:
            entry = out.get(path)
            if entry is None:
                continue
            if idx == 0:
                entry = out[path] = (entry[0], text, entry[2])
            heads = entry[2]
            if heading and (not heads or heads[-1] != heading):
                heads.append(heading)
        return out

    def all_block_ids(self) -> set[str]:
        with self._lock:
            return {r[0] for r in self._db.execute("SELECT id FROM blocks")}

    def counts(self) -> tuple[int, int]:
        with self._lock:
            files = self._db.execute("SELECT COUNT(*) FROM files").fetchone()[0]
            blocks = self._db.execute("SELECT COUNT(*) FROM blocks").fetchone()[0]
        return files, blocks

    def prune_orphan_blocks(self) -> int:
        """Delete block rows whose file row is gone (left by an older, buggier run)."""
        with self._lock, self._db:
            cur = self._db.execute("DELETE FROM blocks WHERE path NOT IN (SELECT path FROM files)")
            self._db.execute("DELETE FROM refkeys WHERE path NOT IN (SELECT path FROM files)")
        return cur.rowcount

    def ref_sources(self, keys: Iterable[str]) -> set[str]:
        """Notes with an embed, Markdown link or property link whose `link_key` is one of
        `keys` (as last indexed)."""
        with self._lock:
            try:
                return {path for (path,) in self._where_in(
                    "SELECT DISTINCT path FROM refkeys WHERE key IN ({marks})", sorted(keys))}
            except sqlite3.OperationalError:   # a read-only copy without the table
                return set()

    def ref_keys_at(self, paths: Iterable[str]) -> dict[str, tuple[int, int, list[str]]]:
        """path -> (size, mtime_ns, reference keys) of each of `paths` that is indexed, with
        the row's stat read in the same query, so a caller trusts the keys by the rule it
        trusts the row by. 500 paths per query; raises when the table is missing."""
        out: dict[str, tuple[int, int, list[str]]] = {}
        with self._lock:
            for path, size, mtime_ns, key in self._where_in(
                    "SELECT f.path, f.size, f.mtime_ns, r.key FROM files f LEFT JOIN refkeys r "
                    "ON r.path = f.path WHERE f.path IN ({marks})", paths):
                keys = out.setdefault(path, (size, mtime_ns, []))[2]
                if key is not None:
                    keys.append(key)
        return out

    def clear(self) -> None:
        """Forget every file (a schema change); the run counter and the published vector
        collection stay, so readers keep a consistent view and block ids still match."""
        with self._lock, self._db:
            self._db.execute("DELETE FROM blocks")
            self._db.execute("DELETE FROM refkeys")
            self._db.execute("DELETE FROM files")
            self._db.execute("DELETE FROM meta WHERE key NOT IN ('generation', "
                             "'vector_collection', 'vector_generation')")

    def close(self) -> None:
        self._proc.close()


def is_corruption(exc: sqlite3.DatabaseError) -> bool:
    """A damaged file (SQLITE_CORRUPT / SQLITE_NOTADB), not an I/O refusal: only then is the
    derived database moved aside. "database or disk is full", "disk I/O error", "database is
    locked" and "attempt to write a readonly database" are OperationalErrors about the disk."""
    if isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text


def _file_row(r: tuple[Any, ...]) -> FileRow:
    return FileRow(r[0], r[1], r[2], r[3], json.loads(r[4]), json.loads(r[5]), r[6], r[7],
                   json.loads(r[8]) if len(r) > 8 else [])


def _block_row(r: tuple[Any, ...]) -> BlockRow:
    tokens = r[8]   # '[]' when the caller did not ask for them: no JSON decode per row
    return BlockRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7],
                    [] if tokens == "[]" else json.loads(tokens))
