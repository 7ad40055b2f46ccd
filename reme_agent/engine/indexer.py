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
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from reme_agent.engine.links import Link, LinkResolver
from reme_agent.engine.parser import parse_note
from reme_agent.engine.projections.graph import GraphProjection
from reme_agent.engine.projections.keyword import KeywordProjection
from reme_agent.engine.projections.vector import VectorProjection
from reme_agent.engine.state import BlockRow, FileRow, IndexState
from reme_agent.engine.store import FileStore, decode_text, stamp_of
from reme_agent.errors import IndexLocked, NotText

log = logging.getLogger("reme_agent.index")


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


def note_title(path: str, frontmatter: dict[str, Any], body: str) -> str:
    """Display title: frontmatter title/name, else the first H1, else the file stem."""
    for key in ("title", "name"):
        value = frontmatter.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    for line in body.splitlines()[:40]:
        if line.startswith("# "):
            return line[2:].strip()
    return PurePosixPath(path).stem


def note_aliases(frontmatter: dict[str, Any]) -> list[str]:
    raw = frontmatter.get("aliases") or []
    if isinstance(raw, str):
        raw = [raw]
    names = [str(a) for a in raw if isinstance(a, str | int | float) and str(a).strip()]
    for key in ("title", "name"):
        if isinstance(frontmatter.get(key), str) and frontmatter[key].strip():
            names.append(frontmatter[key].strip())
    return names


def block_document(title: str, text: str) -> str:
    """What gets embedded and BM25-indexed: the block, prefixed by its note's title."""
    if title and title not in text[: len(title) + 4]:
        return f"{title}\n{text}"
    return text


def block_id(path: str, document: str, occurrence: int) -> str:
    digest = hashlib.sha1(f"{path}\x00{document}\x00{occurrence}".encode()).hexdigest()
    return digest[:24]


def _link_dict(link: Link) -> dict[str, Any]:
    return {"target": link.target, "alias": link.alias, "predicate": link.predicate, "line": link.line}


class Indexer:
    """Keeps the vector, keyword and graph projections in step with the files."""

    def __init__(self, store: FileStore, state: IndexState, vector: VectorProjection,
                 keyword: KeywordProjection, graph: GraphProjection, *,
                 extensions: Iterable[str] = (".md", ".markdown", ".txt"),
                 max_file_bytes: int = 8_000_000, progress: bool = True,
                 lock_timeout: float = 120.0) -> None:
        self.store = store
        self.state = state
        self.vector = vector
        self.keyword = keyword
        self.graph = graph
        self.extensions = tuple(e.lower() for e in extensions)
        self.max_file_bytes = max_file_bytes
        self.progress = progress
        self.lock_timeout = lock_timeout
        self.resolver = LinkResolver([])
        self.block_paths: dict[str, str] = {}
        self._loaded = False
        self._generation = -1

    def path_of_block(self, block_id: str) -> str | None:
        return self.block_paths.get(block_id)

    # -- cold open ---------------------------------------------------------------------
    def load(self) -> None:
        """Rebuild in-memory BM25 and graph from the saved state (no parsing, no embedding)."""
        self.keyword.clear()
        self.block_paths = {}
        items = []
        for bid, path, tokens in self.state.iter_block_tokens():
            self.block_paths[bid] = path
            items.append((bid, tokens))
        self.keyword.add_many(items)
        self.graph.clear()
        self._rebuild_graph(self.state.files())
        self._loaded = True
        self._generation = self.state.generation()

    def ensure_fresh(self) -> None:
        """Reload if another process committed an index run since we loaded."""
        if not self._loaded or self.state.generation() != self._generation:
            self.load()

    # -- indexing ----------------------------------------------------------------------
    def run(self, full: bool = False, paths: Iterable[str] | None = None) -> IndexReport:
        """Index the whole vault (or only `paths`), embedding only new or changed blocks."""
        started = time.perf_counter()
        with self._index_lock():
            if not self._loaded or self.state.generation() != self._generation:
                self.load()
            report = self._run_locked(full, None if paths is None else list(paths))
            self._generation = self.state.bump_generation()
        report.seconds = round(time.perf_counter() - started, 3)
        return report

    def _run_locked(self, full: bool, only: list[str] | None) -> IndexReport:
        report = IndexReport()
        if full:
            self.vector.reset()
            self.state.clear()
            self.keyword.clear()
            self.block_paths.clear()
            self.graph.clear()
        known = self.state.files()
        scan = self._scan(only, report)
        wanted = set(scan)
        candidates = known.keys() if only is None else (set(only) & known.keys())
        gone = [p for p in candidates if p not in wanted]

        pending: list[tuple[str, str, dict[str, Any]]] = []   # (id, document, metadata)
        changed_rows: dict[str, FileRow] = {}
        for path, (size, mtime_ns) in scan.items():
            row = known.get(path)
            if row is not None and row.size == size and row.mtime_ns == mtime_ns:
                continue
            try:
                data = self.store.resolve(path).read_bytes()
                text = decode_text(data, path)
            except (NotText, OSError) as exc:
                self._skip(report, path, str(exc))
                if row is not None:
                    gone.append(path)
                continue
            stamp = stamp_of(data)
            if row is not None and row.stamp == stamp:
                self.state.touch(path, size, mtime_ns)
                continue
            new_row, blocks, docs = self._parse(path, text, size, mtime_ns, stamp, report)
            old_ids = set(self.state.block_ids(path))
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
                    pending.append((b.id, docs[b.id], {"path": path}))
                    b.tokens = self.keyword.add(b.id, docs[b.id])
                else:
                    b.tokens = self.keyword.tokens_of(b.id) or self.keyword.add(b.id, docs[b.id])
            self.state.replace_file(new_row, blocks)
            changed_rows[path] = new_row
            report.changed_files.append(path)

        for path in gone:
            ids = self.state.block_ids(path)
            if ids:
                self.vector.delete(ids)
                for block_id_ in ids:
                    self.keyword.remove(block_id_)
                    self.block_paths.pop(block_id_, None)
            self.state.delete_file(path)
            report.deleted += len(ids)
            report.deleted_files.append(path)

        report.embedded = self._embed(pending)
        report.embedded += self._repair_vectors(only is None)
        # A non-note file (an upload) named explicitly can resolve links that dangled.
        other_files = only is not None and any(
            not p.lower().endswith(self.extensions) for p in only)
        self._update_graph(known, changed_rows, gone, force=other_files)
        report.files, report.blocks = self.state.counts()
        return report

    def _scan(self, only: list[str] | None, report: IndexReport) -> dict[str, tuple[int, int]]:
        if only is None:
            found = self.store.scan(self.extensions)
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
                    self._skip(report, path, str(exc))
                    continue
                found.append((path, st.st_size, st.st_mtime_ns))
        out: dict[str, tuple[int, int]] = {}
        for path, size, mtime_ns in found:
            if size > self.max_file_bytes:
                self._skip(report, path, f"{size} bytes is over index.max_file_bytes "
                                         f"({self.max_file_bytes})")
                continue
            out[path] = (size, mtime_ns)
        return out

    def _parse(self, path: str, text: str, size: int, mtime_ns: int, stamp: str,
               report: IndexReport) -> tuple[FileRow, list[BlockRow], dict[str, str]]:
        note = parse_note(path, text)
        if note.error is not None:
            log.warning("%s", note.error)
            report.errors.append({"path": path, "line": note.error.line, "message": str(note.error)})
        title = note_title(path, note.frontmatter, note.body)
        seen: dict[str, int] = {}
        blocks: list[BlockRow] = []
        docs: dict[str, str] = {}
        for block in note.blocks:
            doc = block_document(title, block.text)
            occurrence = seen.get(doc, 0)
            seen[doc] = occurrence + 1
            bid = block_id(path, doc, occurrence)
            docs[bid] = doc
            blocks.append(BlockRow(bid, path, block.index, block.start_line, block.end_line,
                                   block.hash, block.heading, block.text))
        row = FileRow(path, size, mtime_ns, stamp, note.frontmatter,
                      [_link_dict(link) for link in note.links],
                      str(note.error) if note.error else None, time.time())
        return row, blocks, docs

    def _embed(self, pending: list[tuple[str, str, dict[str, Any]]]) -> int:
        if not pending:
            return 0
        bar = self._progress_bar(len(pending), "embedding")
        try:
            return self.vector.upsert([p[0] for p in pending], [p[1] for p in pending],
                                      [p[2] for p in pending],
                                      progress=bar.update if bar is not None else None)
        finally:
            if bar is not None:
                bar.close()

    def _repair_vectors(self, whole_vault: bool) -> int:
        """Re-embed blocks the vector store lost (deleted/corrupt index, new embedder)."""
        if not whole_vault:
            return 0
        expected = self.state.counts()[1]
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
        titles = {path: note_title(path, r.frontmatter, "") for path, r in self.state.files().items()}
        pending = []
        for bid in missing:
            row = rows[bid]
            doc = block_document(titles.get(row.path, ""), row.text)
            pending.append((bid, doc, {"path": row.path}))
        return self._embed(pending)

    # -- graph -------------------------------------------------------------------------
    def _update_graph(self, known: dict[str, FileRow], changed: dict[str, FileRow],
                      gone: list[str], force: bool = False) -> None:
        names_changed = force or bool(gone) or any(
            p not in known or note_aliases(known[p].frontmatter) != note_aliases(r.frontmatter)
            for p, r in changed.items())
        if names_changed:
            self._rebuild_graph(self.state.files())
            return
        for path, row in changed.items():
            self.graph.mark_present(path)
            self.graph.set_links(path, self._edges(path, row))

    def _rebuild_graph(self, files: dict[str, FileRow]) -> None:
        # Links may point at any vault file (an image, a PDF under resource/), not only notes.
        every_file = set(self.store.list()) | files.keys()
        self.resolver = LinkResolver(every_file, {p: note_aliases(r.frontmatter)
                                                  for p, r in files.items()})
        self.graph.clear()
        for path in files:
            self.graph.mark_present(path)
        for path, row in files.items():
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

    def _progress_bar(self, total: int, desc: str) -> Any:
        if not self.progress or total < 200 or not sys.stderr.isatty():
            return None
        from tqdm import tqdm

        return tqdm(total=total, desc=desc, unit="block", file=sys.stderr, leave=False)

    def _index_lock(self) -> _FileLock:
        return _FileLock(self.store.root / ".reme" / "index.lock", self.lock_timeout)


class _FileLock:
    """Blocking flock with a timeout, so two indexers never write the projections at once."""

    def __init__(self, path: Path, timeout: float,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.path = path
        self.timeout = timeout
        self._sleep = sleep
        self._fd: int | None = None
        self._depth = 0

    def __enter__(self) -> _FileLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise IndexLocked(str(self.path)) from None
                self._sleep(0.05)
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
