"""Incremental indexer: files -> parser -> block-hash diff -> projections (DESIGN §6).

A block's id is derived from its path, the hash of the text that is embedded (note title +
block) and its occurrence, so an unchanged block keeps its id (and its vector) even when it
moves lines; only new ids are embedded and vanished ids are deleted from every projection.
Files whose size and mtime match the last run are not even read. The graph is re-resolved
when the set of notes or their aliases change, because a new note can resolve old dangling
links. One indexer at a time per vault: a lock file guards the projections.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from reme_agent.engine.idmap import BlockPaths
from reme_agent.engine.links import (
    Link,
    LinkResolver,
    file_keys,
    link_key,
    property_links,
)
from reme_agent.engine.locks import flock_until
from reme_agent.engine.names import (
    LinkNames,
    link_names,
    note_description,
    note_title,
    resolver_over,
)
from reme_agent.engine.parser import ParsedNote, parse_note
from reme_agent.engine.pipeline import EmbedPipeline, Mode
from reme_agent.engine.progress import SILENT, Progress, auto
from reme_agent.engine.projections.graph import GraphProjection
from reme_agent.engine.projections.keyword import KeywordProjection
from reme_agent.engine.projections.vector import VectorProjection
from reme_agent.engine.snapshot import (
    DELTA_NAME,
    SNAPSHOT_NAME,
    append_delta,
    capture,
    gc_paused,
    read_delta,
    read_snapshot,
    restore,
    write_snapshot,
)
from reme_agent.engine.state import BlockRow, FileRow, IndexState
from reme_agent.engine.store import (
    NOT_UTF8_NAME,
    FileStore,
    FolderListing,
    decode_text,
    is_utf8,
    printable,
    stamp_of,
)
from reme_agent.errors import IndexLocked, NotText, PathEscape, ReMeError, StorageError

log = logging.getLogger("reme_agent.index")

COLLECTION_KEY = "vector_collection"
"""State meta: the vector collection readers use (published by a full rebuild)."""
GENERATION_KEY = "vector_generation"
"""State meta: the number of the last full rebuild (its collection is `<base>-g<N>`)."""
DOCUMENTS_KEY = "block_documents"
DOCUMENTS_VERSION = "5"
"""State meta: how a note is read into what is indexed ("2": the first block carries the
description; "3": a link inside an HTML comment is no link, `engine.links`; "4": the
reference keys of embeds, Markdown links and property links, `state.refkeys`, and a row
holds the body's inline `#tags`, `engine.tags`; "5": tags read by Obsidian's stop set,
none in math, `#a#b` two). A whole-vault
run over an index built another way re-reads every file once; block ids follow the
document, so only blocks whose document changed are embedded again."""


@dataclass
class IndexReport:
    files: int = 0
    blocks: int = 0
    embedded: int = 0
    deleted: int = 0
    seconds: float = 0.0
    changed_files: list[str] = field(default_factory=list)
    deleted_files: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def block_document(title: str, text: str, description: str = "") -> str:
    """What gets embedded and BM25-indexed: the block, prefixed by its note's title, and the
    note's first block also by its frontmatter `description` (`first_block_description`).

    Why the description: it is the note's summary (the synchronizer writes one for every
    note, people write them in Obsidian) and search shows it beside every result, yet a word
    only it held found nothing ("Okapi" against `description: Okapi BM25 ...`)."""
    head = title if title and title not in text[: len(title) + 4] else ""
    parts = [part for part in (head, description) if part]
    return "\n".join([*parts, text]) if parts else text


def first_block_description(frontmatter: dict[str, Any], block_index: int) -> str:
    """What `block_document` adds to a block besides the title: the description, for the
    note's first block only (one block per note changes when the description does)."""
    return note_description(frontmatter) if block_index == 0 else ""


def block_id(path: str, document: str, occurrence: int) -> str:
    digest = hashlib.sha1(f"{path}\x00{document}\x00{occurrence}".encode()).hexdigest()
    return digest[:24]


_ANY_KEY = "\0any"
"""The link-key index's entry for notes with a link no file name can say (`[[../]]`,
`[[x/.]]`: `links.link_key` is None): any change of names may change where it points."""
_NO_NAMES = LinkNames([], [])


def _name_keys(path: str, names: LinkNames = _NO_NAMES) -> set[str]:
    """Every key a link resolving to (or competing for) this file can have (`file_keys`,
    the same answer `retarget` gets), plus the entry of links no key can say."""
    return file_keys(path, names.aliases, names.redirects) | {_ANY_KEY}


def _names_of(row: FileRow | None) -> LinkNames:
    """A note's aliases and redirects: what decides which links resolve to it."""
    if row is None:
        return _NO_NAMES
    return link_names(row.frontmatter if isinstance(row.frontmatter, dict) else {})


def _ref_keys(note: ParsedNote) -> set[str]:
    """The `link_key`s of the note's references that are no edges (embeds, Markdown links,
    reference definitions, links in frontmatter values): what a new file may take over."""
    fm = note.frontmatter if isinstance(note.frontmatter, dict) else {}
    targets = [x.target for x in note.refs]   # read with the links, in one pass
    targets += [x.target for x in property_links(fm)]
    return {link_key(t) or _ANY_KEY for t in targets}


def indexed_ref_keys(state: IndexState, paths: Iterable[str]
                     ) -> dict[str, tuple[int, int, tuple[str, ...] | None]]:
    """path -> (size, mtime_ns of its row, the keys `_ref_keys` stored for it) for each of
    `paths` that is indexed; keys are None when one is `_ANY_KEY` (a reference no name
    says), as `VaultView.names_any` writes it. Only meaningful at the current
    DOCUMENTS_VERSION: an older index has rows without these keys (`Vault.view` checks)."""
    return {path: (size, mtime, None if _ANY_KEY in keys else tuple(map(sys.intern, keys)))
            for path, (size, mtime, keys) in state.ref_keys_at(paths).items()}


def _same_links(old: FileRow | None, new: FileRow) -> bool:
    """Whether two rows of a note hold the same links (targets and predicates; where they
    sit in the text does not change an edge)."""
    if old is None:
        return False
    return ({(link["target"], link["predicate"]) for link in old.links}
            == {(link["target"], link["predicate"]) for link in new.links})


def _os_reason(exc: BaseException) -> str:
    """An OSError's reason without the absolute path the OS puts in its text."""
    return getattr(exc, "strerror", None) or type(exc).__name__


def _link_dict(link: Link) -> dict[str, Any]:
    return {"target": link.target, "alias": link.alias, "predicate": link.predicate, "line": link.line}


class Indexer:
    """Keeps the vector, keyword and graph projections in step with the files."""

    def __init__(self, store: FileStore, state: IndexState, vector: VectorProjection,
                 keyword: KeywordProjection, graph: GraphProjection, *,
                 extensions: Iterable[str] = (".md", ".markdown", ".txt"),
                 max_file_bytes: int = 8_000_000, progress: bool = True,
                 lock_timeout: float = 120.0, embed_mode: Mode = "auto",
                 pipeline_start_after: int = 512) -> None:
        self.store = store
        self.state = state
        self.vector = vector
        self.keyword = keyword
        self.graph = graph
        self.extensions = tuple(e.lower() for e in extensions)
        self.max_file_bytes = max_file_bytes
        self.progress = progress  # the default for whole-vault runs (bars only on a TTY)
        self._bars: Progress = SILENT
        self.lock_timeout = lock_timeout
        self.embed_mode: Mode = embed_mode   # engine/pipeline.py: where bulk embedding runs
        self.pipeline_start_after = pipeline_start_after
        self.last_embed_mode = ""            # "process", "thread" or "inline": the last run's
        self._reread_all = False   # this run re-read every file for DOCUMENTS_VERSION
        self._lock = _FileLock(store.internal / "index.lock", lock_timeout)
        self._resolver: LinkResolver | None = None
        self._by_key: dict[str, set[str]] | None = None   # see _update_graph
        self._keys_of: dict[str, set[str]] | None = None
        self.block_paths = BlockPaths()
        self.stamps: dict[str, str] = {}   # path -> stamp the in-memory projections reflect
        self._loaded = False
        self._generation = -1
        self._snapshot_generation = -1     # generation of the snapshot on disk (-1: none)
        self._changed_since_snapshot = 0   # files changed in memory since it was written
        self._delta_stamps: dict[str, str | None] = {}   # changed since the last delta line
        self._listings: dict[str, FolderListing] | None = None   # see _scan_vault
        self._known: dict[str, tuple[int, int, str]] | None = None   # see _file_stats
        self._scanned: dict[str, tuple[int, int]] | None = None

    def published_collection(self) -> str | None:
        """The vector collection readers should use (set by the last full rebuild)."""
        return self.state.get_meta(COLLECTION_KEY)

    def path_of_block(self, block_id: str) -> str | None:
        return self.block_paths.get(block_id)

    @property
    def resolver(self) -> LinkResolver:
        """Link resolver over every vault file; built on first use (a cold open from a
        snapshot needs none until something is re-indexed)."""
        if self._resolver is None:
            files = self.state.files()
            every_file = set(self.store.list()) | files.keys()
            self._resolver = resolver_over(every_file, {p: r.frontmatter
                                                        for p, r in files.items()})
        return self._resolver

    @property
    def snapshot_path(self) -> Path:
        return self.store.internal / SNAPSHOT_NAME

    @property
    def delta_path(self) -> Path:
        return self.store.internal / DELTA_NAME

    # -- cold open ---------------------------------------------------------------------
    def load(self, warm_vectors: bool = True) -> None:
        """Load BM25 and the graph: from the snapshot plus the files changed since, or else
        rebuilt from the saved state (no parsing, no embedding either way).

        `warm_vectors`: start loading the vector index too, for a search that will need it.
        An index run passes False: it loads the vector index only when it calls it. A run
        whose files changed only in frontmatter never does (at 100k notes, a new process's
        `refresh` of such an edit: 6.0 s and 1,646 MB peak with the warm-up, 1.0-1.4 s and
        258 MB without), and a full rebuild writes a new collection, so warming the old one
        only adds its 1.4 GB to the rebuild's peak."""
        generation = self.state.generation(fresh=True)
        moved = self._generation >= 0 and generation != self._generation
        # Another process indexed: follow the collection it published (a full rebuild makes a
        # new one) and drop chroma's per-process caches of the embedded store.
        self.vector.use(self.published_collection() or self.vector.base_name, reopen=moved)
        if warm_vectors and self.snapshot_path.exists():   # indexed: a search needs HNSW
            self.vector.warm()
        with gc_paused():
            if not self._load_snapshot():
                self._load_state()
        self._loaded = True
        self._generation = generation
        self._known = None

    def _load_state(self) -> None:
        self.keyword.clear()
        self.block_paths = BlockPaths()
        block_paths = self.block_paths

        def blocks() -> Iterator[tuple[str, list[str]]]:
            for bid, path, tokens in self.state.iter_block_tokens():
                block_paths[bid] = path
                yield bid, tokens

        with self.state.reading():
            self.stamps = self.state.file_stamps()
            self.keyword.add_many(blocks())   # one block's tokens in memory at a time
            files = self.state.files()
        self._rebuild_graph(files)
        self._changed_since_snapshot = max(1, len(self.stamps))
        self._delta_stamps = {}

    def _load_snapshot(self) -> bool:
        """Map the snapshot, replay its delta (the graph changes of runs since), then patch
        in BM25 for the files whose stamp differs from the snapshot's. Only when a file
        changed in a way the delta does not cover (a run that died before writing it) is
        the graph rebuilt from the state."""
        snap = read_snapshot(self.snapshot_path)
        if snap is None:
            return False
        deltas = read_delta(self.delta_path, snap.generation)
        with self.state.reading():
            current = self.state.file_stamps()
            base = snap.stamp_map()
            changed = [p for p, st in current.items() if base.get(p) != st]
            gone = [p for p in base if p not in current]
            if len(changed) + len(gone) > max(200, len(current) // 5):
                return False  # mostly stale: rebuilding is as cheap and simpler
            fresh = self.state.block_tokens_of(changed) if changed else []
            expected = dict(base)
            for entry in deltas:
                for path, stamp in entry["stamps"].items():
                    if stamp is None:
                        expected.pop(path, None)
                    else:
                        expected[path] = stamp
            uncovered = expected != current
            files = self.state.files() if uncovered else None
        try:
            self.block_paths = restore(snap, self.keyword, self.graph)
            for entry in deltas:
                self.graph.apply_changes(entry["graph"])
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            log.warning("ignoring inconsistent %s (%s)", self.snapshot_path.name, exc)
            return False
        self._resolver = None
        self._by_key = self._keys_of = None
        self._snapshot_generation = snap.generation
        self._changed_since_snapshot = len(changed) + len(gone)
        self._delta_stamps = {}
        if changed or gone:
            for bid in self.block_paths.ids_of_paths(set(changed) | set(gone)):
                self.keyword.remove(bid)
                del self.block_paths[bid]
            for bid, path, tokens in fresh:
                self.keyword.add(bid, tokens=tokens)
                self.block_paths[bid] = path
        if files is not None:
            log.info("%s does not cover every change since it was written; rebuilding the "
                     "graph", self.snapshot_path.name)
            self._rebuild_graph(files)
            self._changed_since_snapshot = max(1, len(current))
        self.stamps = current
        return True

    def ensure_fresh(self) -> None:
        """Reload if another process committed an index run since we loaded."""
        if not self._loaded or self.state.generation() != self._generation:
            self.load()

    # -- snapshot ----------------------------------------------------------------------
    def save_snapshot(self, force: bool = False) -> bool:
        """Bring the cold-open snapshot up to date (call with the projections in step with
        the state: after a run, or on close); True if the whole snapshot was written.

        The whole snapshot is written when it is due (`_snapshot_due`) or `force`d;
        otherwise what changed since goes into the delta, one small line. It takes the index
        lock so a concurrent run in this or another process cannot interleave.
        """
        with self._index_lock():
            if not self._loaded or self.state.generation(fresh=True) != self._generation:
                return False
            graph_changes = self.graph.changes()
            if not (force or graph_changes is None or self._snapshot_due()):
                if self._delta_stamps or graph_changes:
                    append_delta(self.delta_path, {
                        "base": self._snapshot_generation, "generation": self._generation,
                        "stamps": self._delta_stamps, "graph": graph_changes})
                    self._delta_stamps = {}
                    self.graph.forget_changes()
                return False
            started = time.perf_counter()
            with gc_paused():
                snap = capture(self._generation, self.keyword, self.graph, self.block_paths,
                               self.stamps)
                size = write_snapshot(self.snapshot_path, snap)
                self.delta_path.unlink(missing_ok=True)
                del snap
                # Continue on the file just written: what was built in memory (all of it,
                # after a first index) is freed, and a long-running process stays small.
                mapped = read_snapshot(self.snapshot_path)
                if mapped is not None:
                    self.block_paths = restore(mapped, self.keyword, self.graph)
            log.info("wrote %s (%.1f MB) in %.2f s", self.snapshot_path.name, size / 1e6,
                     time.perf_counter() - started)
            self.graph.forget_changes()
            self._snapshot_generation = self._generation
            self._changed_since_snapshot = 0
            self._delta_stamps = {}
            return True

    def _snapshot_due(self) -> bool:
        """When there is none, or 1% of the files (at least 50) changed since it was
        written: a whole snapshot costs seconds at 100k notes, so smaller changes (an edit
        found by a whole-vault run, a tool's write) go into the delta instead; a cold open
        patches each changed file in from SQLite, so the delta must stay small too."""
        if not self.snapshot_path.exists() or self._snapshot_generation < 0:
            return True
        return self._changed_since_snapshot >= max(50, len(self.stamps) // 100)

    # -- indexing ----------------------------------------------------------------------
    def run(self, full: bool = False, paths: Iterable[str] | None = None,
            progress: Progress | None = None) -> IndexReport:
        """Index the whole vault (or only `paths`), embedding only new or changed blocks.

        `progress` shows the stages (reading files, embedding blocks); by default a
        whole-vault run shows bars on a terminal when `progress` was enabled at construction,
        and a path-limited run (a tool's write) shows none.
        """
        started = time.perf_counter()
        only = None if paths is None else list(paths)
        self._bars = progress or (auto(self.progress) if only is None else SILENT)
        with self._index_lock():
            if not self._loaded or self.state.generation(fresh=True) != self._generation:
                self.load(warm_vectors=False)
            try:
                report = self._run_full() if full else self._run_locked(False, only)
            except sqlite3.OperationalError as exc:  # the disk refused the state's write
                self._loaded = False
                raise StorageError(".reme/index.sqlite", str(exc)) from exc
            except BaseException:
                # Memory may be half-updated: reload from the state next time, and let the
                # next run re-embed whatever the vector store missed.
                self._loaded = False
                self._known = None
                self.state.set_meta("vectors_dirty", "1")
                raise
            finally:
                self._generation = self.state.bump_generation()
            self._remember_stats(full, only, report)
            if report.changed_files or report.deleted_files:
                self._changed_since_snapshot += len(report.changed_files) + len(
                    report.deleted_files)
                for path in report.changed_files:
                    self._delta_stamps[path] = self.stamps.get(path)
                for path in report.deleted_files:
                    self._delta_stamps[path] = None
            try:
                # After re-reading every file for a new DOCUMENTS_VERSION the contents (and
                # stamps) are the same but the block ids are not: a delta keyed by stamps
                # would let a cold open keep the old BM25 of every file, so write it whole.
                self.save_snapshot(force=self._reread_all)
                self._reread_all = False
            except OSError as exc:  # a cache: never fail the run over it
                log.warning("could not write %s: %s", self.snapshot_path.name, exc)
        report.seconds = round(time.perf_counter() - started, 3)
        return report

    def _run_locked(self, full: bool, only: list[str] | None) -> IndexReport:
        report = IndexReport()
        if only is not None:
            kept = []
            for p in only:
                if not is_utf8(p):  # a watcher batch must not fail over one badly named file
                    self._skip(report, printable(p), NOT_UTF8_NAME)
                    continue
                try:
                    kept.append(self.store.normalize(p))
                except PathEscape as exc:  # a hidden or unusable name: never a note
                    self._skip(report, printable(p), exc.message)
            only = list(dict.fromkeys(kept))
        if full:
            self.keyword.clear()
            self.block_paths.clear()
            self.stamps.clear()
            self.graph.clear()
            self._resolver = None
            self._by_key = self._keys_of = None
            self._listings = {}   # list every folder again
        known = self._file_stats(only)
        old_documents = only is None and self.state.get_meta(DOCUMENTS_KEY) != DOCUMENTS_VERSION
        reread = old_documents and not full and bool(known)
        if reread:
            log.info("re-reading every note once: what is indexed of a block changed "
                     "(the first block holds the description)")
        if full or reread:  # re-read every file; the state keeps serving readers meanwhile
            known = {p: (-1, -1, "") for p in known}
        self._reread_all = reread
        scan = self._scan(only, report)
        self._scanned = scan if only is None else None
        wanted = set(scan)
        gone = [p for p in known if p not in wanted]

        # New blocks are embedded while the next files are read (engine/pipeline.py); a
        # path-limited run (a tool's write) embeds its few blocks inline at the end.
        pending = EmbedPipeline(self.vector, batch_size=self.vector.batch_size,
                                mode="inline" if only is not None else self.embed_mode,
                                start_after=self.pipeline_start_after)
        try:
            self._read_and_link(scan, known, full, only, report, gone, pending)
        except BaseException:
            pending.abort()
            raise
        report.embedded = self._embed(pending)
        self.last_embed_mode = pending.started or "inline"
        if old_documents:   # once: a no-op run writes nothing
            self.state.set_meta(DOCUMENTS_KEY, DOCUMENTS_VERSION)
        if full:
            self.state.prune_orphan_blocks()
            report.files, report.blocks = self.state.counts()
            return report
        dirty = self.state.get_meta("vectors_dirty") == "1"
        report.embedded += self._repair_vectors(only is None or dirty)
        if dirty:
            self.state.set_meta("vectors_dirty", "0")
        report.files, report.blocks = self.state.counts()
        return report

    def _read_and_link(self, scan: dict[str, tuple[int, int]],
                       known: dict[str, tuple[int, int, str]], full: bool,
                       only: list[str] | None, report: IndexReport, gone: list[str],
                       pending: EmbedPipeline) -> None:
        """Read the scanned files (their new blocks go to `pending`), drop the vanished
        ones, bring the graph in step."""
        changed_rows: dict[str, FileRow] = {}
        old_rows: dict[str, FileRow | None] = {}
        bar = self._bars("reading", len(scan), "file")
        try:
            for path, (size, mtime_ns) in scan.items():
                bar.update(1)
                self._read_one(path, size, mtime_ns, known, full, report, gone, pending,
                               changed_rows, old_rows)
        finally:
            bar.close()

        for path in gone:
            old_rows[path] = self.state.file(path)
            ids = self.state.block_ids(path)
            if ids:
                self.vector.delete(ids)
                for block_id_ in ids:
                    self.keyword.remove(block_id_)
                    self.block_paths.pop(block_id_, None)
            self.state.delete_file(path)
            self.stamps.pop(path, None)
            report.deleted += len(ids)
            report.deleted_files.append(path)

        # The graph first: links must show up even if the embedder or the server fails below.
        # A non-note file (an upload) named explicitly can resolve links that dangled.
        uploads = [] if only is None else [p for p in only
                                           if not p.lower().endswith(self.extensions)]
        self._update_graph(old_rows, changed_rows, gone, uploads)

    def _run_full(self) -> IndexReport:
        """Rebuild every projection from the files without dropping what readers use (G1).

        The vectors go into a new collection (the next generation) while other processes
        keep querying the published one; the state is rewritten file by file (block ids are
        content hashes, so a reader's rows stay valid) and never cleared. Only when all is
        embedded is the new name published and the old collections dropped. A crash before
        that leaves the old generation published and `vectors_dirty` set, so the next run
        re-embeds into it whatever changed meanwhile; the half-built collection is dropped by
        the next full run.
        """
        self.state.set_meta("vectors_dirty", "1")
        number = int(self.state.get_meta(GENERATION_KEY) or 0) + 1
        name = self.vector.generation_name(number)
        self.vector.start_generation(name)
        report = self._run_locked(True, None)
        self.state.set_meta_many({GENERATION_KEY: str(number), COLLECTION_KEY: name,
                                  "vectors_dirty": "0"})
        self._generation = self.state.bump_generation()  # readers follow before the drop
        for old in self.vector.generations():
            if old != name:
                try:
                    self.vector.drop(old)
                except ReMeError as exc:  # a leftover costs space, never correctness
                    log.warning("could not drop the old vector collection %s: %s", old, exc)
        return report

    def _read_one(self, path: str, size: int, mtime_ns: int,
                  known: dict[str, tuple[int, int, str]], full: bool, report: IndexReport,
                  gone: list[str], pending: EmbedPipeline,
                  changed_rows: dict[str, FileRow], old_rows: dict[str, FileRow | None]) -> None:
        """One scanned file: skip it if unchanged, else re-parse it and queue new blocks."""
        seen = known.get(path)
        if seen is not None and seen[0] == size and seen[1] == mtime_ns:
            return
        try:
            data = self.store.read_if_present(path)
            text = decode_text(data, path) if data is not None else ""
        except (NotText, OSError) as exc:
            self._skip(report, path, getattr(exc, "message", None) or _os_reason(exc))
            if seen is not None:
                gone.append(path)
            return
        if data is None:  # vanished since the scan: a deletion
            if seen is not None:
                gone.append(path)
            return
        stamp = stamp_of(data)
        if seen is not None and seen[2] == stamp:
            self.state.touch(path, size, mtime_ns)
            return
        new_row, blocks, docs, ref_keys = self._parse(path, text, size, mtime_ns, stamp, report)
        old_rows[path] = self.state.file(path) if seen is not None else None
        old_ids = set() if full else set(self.state.block_ids(path))
        new_ids = {b.id for b in blocks}
        stale = sorted(old_ids - new_ids)
        if stale:
            self.vector.delete(stale)
            for block_id_ in stale:
                self.keyword.remove(block_id_)
                self.block_paths.pop(block_id_, None)
            report.deleted += len(stale)
        for b in blocks:
            self.block_paths[b.id] = path
            if b.id not in old_ids:
                pending.add(b.id, docs[b.id], {"path": path})
                b.tokens = self.keyword.add(b.id, docs[b.id])
            else:
                b.tokens = self.keyword.tokens_of(b.id) or self.keyword.add(b.id, docs[b.id])
        self.state.replace_file(new_row, blocks, ref_keys)
        self.stamps[path] = stamp
        changed_rows[path] = new_row
        report.changed_files.append(path)

    def _scan(self, only: list[str] | None, report: IndexReport) -> dict[str, tuple[int, int]]:
        bad_names: list[tuple[str, str]] = []
        if only is None:
            found = self._scan_vault(bad_names)
        else:
            found = []
            for raw in only:
                path = self.store.normalize(raw)
                if not path.lower().endswith(self.extensions):
                    continue
                try:
                    st = os.stat(self.store.resolve(path))
                except (FileNotFoundError, NotADirectoryError):
                    continue
                except OSError as exc:
                    self._skip(report, path, _os_reason(exc))
                    continue
                found.append((path, st.st_size, st.st_mtime_ns))
        out: dict[str, tuple[int, int]] = {}
        for path, size, mtime_ns in found:
            if size > self.max_file_bytes:
                self._skip(report, path, f"{size} bytes is over index.max_file_bytes "
                                         f"({self.max_file_bytes})")
                continue
            out[path] = (size, mtime_ns)
        for path, reason in bad_names:  # filled as the scan generator ran
            self._skip(report, path, reason)
        return out

    def _file_stats(self, only: list[str] | None) -> dict[str, tuple[int, int, str]]:
        """(size, mtime_ns, stamp) of the indexed files a run compares against: for a
        whole-vault run, what this process's last run left (no other process ran since,
        or `load` dropped it), else read from the state (100k rows: 0.2-0.5 s)."""
        if only is None and self._known is not None:
            return self._known
        return self.state.file_stats(only)

    def _remember_stats(self, full: bool, only: list[str] | None, report: IndexReport) -> None:
        """Keep what the next whole-vault run compares against, as this run left the state."""
        scanned, self._scanned = self._scanned, None
        if full:
            self._known = None
        elif only is None and scanned is not None:
            stamps = self.stamps
            self._known = {p: (size, mtime, stamps[p]) for p, (size, mtime) in scanned.items()
                           if p in stamps}
        elif self._known is not None:
            paths = [*report.changed_files, *report.deleted_files, *(only or ())]
            fresh = self.state.file_stats(paths)
            for p in paths:
                if p in fresh:
                    self._known[p] = fresh[p]
                else:
                    self._known.pop(p, None)

    def _scan_vault(self, bad_names: list[tuple[str, str]]) -> list[tuple[str, int, int]]:
        """Every indexable file with its size and mtime: folders whose mtime did not move
        since the last whole-vault run are not listed again (`FileStore.scan_cached`); their
        listings live in the state and, between runs, in memory."""
        if self._listings is None:
            self._listings = self._saved_listings()
        old = self._listings
        found, kept = self.store.scan_cached(self.extensions, old, skipped=bad_names)
        changed = {p: (v.mtime_ns, v.files, v.folders) for p, v in kept.items()
                   if old.get(p) is not v}   # a folder not listed again keeps its object
        self.state.save_folder_listings(changed, [p for p in old if p not in kept])
        self._listings = kept
        return found

    def _saved_listings(self) -> dict[str, FolderListing]:
        return {path: FolderListing(mtime, tuple(files), tuple(folders))
                for path, (mtime, files, folders) in self.state.folder_listings().items()}

    def indexable_paths(self) -> list[str]:
        """The files a whole-vault run would index now, by name only: the last run's folder
        listings where a folder's mtime did not move (a stat per folder, none per file),
        nothing swept or saved, skipped names left to the runs that report them."""
        listings = self._listings if self._listings is not None else self._saved_listings()
        found, _ = self.store.scan_cached(self.extensions, listings, skipped=[], stats=False)
        return [path for path, _, _ in found]

    def _parse(self, path: str, text: str, size: int, mtime_ns: int, stamp: str,
               report: IndexReport) -> tuple[FileRow, list[BlockRow], dict[str, str], set[str]]:
        note = parse_note(path, text)
        if note.error is not None:
            log.warning("%s", note.error)
            report.errors.append({"path": path, "line": note.error.line, "message": str(note.error)})
        title = note_title(path, note.frontmatter, note.body)
        seen: dict[str, int] = {}
        blocks: list[BlockRow] = []
        docs: dict[str, str] = {}
        for block in note.blocks:
            doc = block_document(title, block.text,
                                 first_block_description(note.frontmatter, block.index))
            occurrence = seen.get(doc, 0)
            seen[doc] = occurrence + 1
            bid = block_id(path, doc, occurrence)
            docs[bid] = doc
            blocks.append(BlockRow(bid, path, block.index, block.start_line, block.end_line,
                                   block.hash, block.heading, block.text))
        row = FileRow(path, size, mtime_ns, stamp, note.frontmatter,
                      [_link_dict(link) for link in note.links],
                      str(note.error) if note.error else None, time.time(), note.tags)
        return row, blocks, docs, _ref_keys(note)

    def _embed(self, pending: EmbedPipeline) -> int:
        """Finish the pipeline's embedding; the "embedding" bar counts the blocks it has left."""
        return pending.finish(lambda left: self._bars("embedding", left, "block"))

    def _repair_vectors(self, check: bool) -> int:
        """Re-embed blocks the vector store lost (deleted/corrupt index, new embedder, a
        failed earlier run), then bring the vector copy (`vector_copy.py`) level with it."""
        if not check:
            return 0
        expected = self.state.counts()[1]
        embedded = self._reembed_lost(expected)
        self.vector.fill_copy(expected, self.state.all_block_ids,
                              lambda n: self._bars("copying vectors", n, "block"))
        return embedded

    def _reembed_lost(self, expected: int) -> int:
        """Embed again the blocks chroma lacks (`expected`: how many it should hold); drop
        the ones it holds for no block."""
        if self.vector.count() == expected:
            return 0
        have = self.vector.ids()
        wanted = self.state.all_block_ids()
        extra = sorted(have - wanted)
        if extra:
            self.vector.delete(extra)
        missing = sorted(wanted - have)
        if not missing:
            return 0
        log.warning("vector store is missing %d blocks; re-embedding them", len(missing))
        rows = self.state.blocks_by_id(missing)
        files = self.state.files()
        titles = {path: note_title(path, r.frontmatter, "") for path, r in files.items()}
        pending = EmbedPipeline(self.vector, batch_size=self.vector.batch_size, mode="inline")
        for bid in missing:
            row = rows[bid]
            file = files.get(row.path)
            described = first_block_description(file.frontmatter, row.idx) if file else ""
            pending.add(bid, block_document(titles.get(row.path, ""), row.text, described),
                        {"path": row.path})
        return self._embed(pending)

    # -- graph -------------------------------------------------------------------------
    def _update_graph(self, old_rows: dict[str, FileRow | None], changed: dict[str, FileRow],
                      gone: list[str], uploads: list[str]) -> None:
        """Bring the graph in step with this run, re-resolving only the links that can change.

        Only a note's *names* (its path and aliases) decide where other notes' links point.
        When they change (a new, deleted or re-aliased note, an upload named explicitly), the
        links that can resolve differently are exactly those whose target has one of those
        names as its last segment: `_sources_by_key` finds their sources without walking the
        vault (PERF-3; a full rebuild per new note was 14 s at 100k notes).
        """
        renamed: dict[str, set[str]] = {}   # path -> name keys, old and new
        for path, row in changed.items():
            old = old_rows.get(path)
            if old is None or _names_of(old) != _names_of(row):
                renamed[path] = _name_keys(path, _names_of(row))
                if old is not None:
                    renamed[path] |= _name_keys(path, _names_of(old))
        for path in gone:
            renamed[path] = _name_keys(path, _names_of(old_rows.get(path)))
        for path in uploads:
            renamed[path] = _name_keys(path)
        if self._resolver is not None or self._by_key is not None:
            self._sync_names(changed, gone, uploads)
        # A note whose links are the ones it had keeps its edges: an edit of its text needs
        # no resolver (building one walks the vault and decodes every row: seconds at 100k).
        affected = {p for p, row in changed.items()
                    if not (_same_links(old_rows.get(p), row) and self.graph.is_note(p))}
        if renamed:
            keys = set().union(*renamed.values())
            by_key = self._sources_index()
            for key in keys:
                affected |= by_key.get(key, set())
        for path in gone:
            self.graph.remove_source(path)
        for source in sorted(affected):
            row = changed.get(source) or self.state.file(source)
            if row is not None:
                self.graph.set_links(source, self._edges(source, row))
        for path in uploads:
            if path not in self.resolver:
                self.graph.remove_source(path)   # a deleted upload nothing links to any more

    def _sync_names(self, changed: dict[str, FileRow], gone: list[str],
                    uploads: list[str]) -> None:
        """Apply this run to the resolver and the link-key index, if they were built (a
        lazily built one already reads the new state)."""
        if self._resolver is not None:
            for path in gone:
                self._resolver.remove(path)
            for path, row in changed.items():
                self._resolver.add(path, *link_names(row.frontmatter))
            for path in uploads:
                if self.store.exists(path):
                    self._resolver.add(path)
                else:
                    self._resolver.remove(path)
        if self._by_key is not None:
            for path in gone:
                self._index_sources(path, None)
            for path, row in changed.items():
                self._index_sources(path, row)

    def sources_naming(self, path: str, aliases: Iterable[str] = (),
                       redirects: Iterable[str] = ()) -> set[str]:
        """Notes (as last indexed) with a link that a file at `path` with these alias-tier
        names could compete for: the only links a new file can change the meaning of."""
        by_key = self._sources_index()
        keys = _name_keys(path, LinkNames(list(aliases), list(redirects)))
        return set().union(*(by_key.get(key, set()) for key in keys),
                           self.state.ref_sources(keys))

    def _sources_index(self) -> dict[str, set[str]]:
        """Link-target key -> notes with such a link; built from the state on first use."""
        if self._by_key is None:
            self._by_key, self._keys_of = {}, {}
            for path, links in self.state.iter_links():   # links only, row by row (G6)
                self._index_sources(path, FileRow(path, 0, 0, "", {}, links, None, 0.0))
        return self._by_key

    def _index_sources(self, source: str, row: FileRow | None) -> None:
        by_key, keys_of = self._by_key, self._keys_of
        assert by_key is not None and keys_of is not None
        for key in keys_of.pop(source, ()):
            sources = by_key.get(key)
            if sources is not None:
                sources.discard(source)
                if not sources:
                    del by_key[key]
        if row is None or not row.links:
            return
        keys = {link_key(link["target"]) or _ANY_KEY for link in row.links}
        keys_of[source] = keys
        for key in keys:
            by_key.setdefault(key, set()).add(source)

    def _rebuild_graph(self, files: dict[str, FileRow]) -> None:
        # Links may point at any vault file (an image, a PDF under resource/), not only notes.
        every_file = set(self.store.list()) | files.keys()
        self._resolver = resolver_over(every_file, {p: r.frontmatter for p, r in files.items()})
        self._by_key, self._keys_of = {}, {}
        self.graph.clear()
        for path in files:
            self.graph.mark_present(path)
        for path, row in files.items():
            self._index_sources(path, row)
            self.graph.set_links(path, self._edges(path, row))

    def _edges(self, source: str, row: FileRow) -> list[tuple[str, str | None, bool]]:
        edges = []
        for link in row.links:
            resolved = self.resolver.resolve(link["target"], source)
            edges.append((resolved or link["target"], link["predicate"], resolved is None))
        return edges

    # -- helpers -----------------------------------------------------------------------
    def _skip(self, report: IndexReport, path: str, reason: str) -> None:
        log.warning("skipped %s: %s", path, reason)
        report.skipped.append({"path": path, "reason": reason})

    def _index_lock(self) -> _FileLock:
        return self._lock


class _FileLock:
    """Blocking flock with a timeout, so two indexers never write the projections at once.

    Re-entrant for the thread holding it (a run that writes the snapshot takes it twice);
    other threads of this process wait on a thread lock first, other processes on the flock.
    """

    def __init__(self, path: Path, timeout: float,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.path = path
        self.timeout = timeout
        self._sleep = sleep
        self._fd: int | None = None
        self._depth = 0
        self._thread_lock = threading.RLock()

    def __enter__(self) -> _FileLock:
        if not self._thread_lock.acquire(timeout=self.timeout):
            raise IndexLocked(str(self.path))
        if self._depth:
            self._depth += 1
            return self
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
            if not flock_until(fd, self.timeout, self._sleep):
                os.close(fd)
                raise IndexLocked(str(self.path))
        except BaseException:
            self._thread_lock.release()
            raise
        self._fd = fd
        self._depth = 1
        return self

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        if self._depth == 0 and self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
        self._thread_lock.release()
