"""Cold-open snapshot of the in-memory projections: BM25, block paths and the link graph.

Opening a vault used to rebuild BM25 from every block's tokens in SQLite and re-resolve every
link: 3.3 s at 10k notes, 37 s at 100k. The snapshot (`.reme/snapshot.bin`) holds the same
data as flat arrays plus one JSON header, no pickle, laid out so that a reader *maps* the
file instead of reading it (G6): the arrays stay on disk, in the page cache, and only the
pages a search touches (the postings of its terms, the blocks it returns) become part of
the process. At 100k notes that is the difference between a cold-open process holding its
BM25 index (~600 MB of Python objects before) and holding a few pages of it.

It records the content stamp of every file it covers, so it never has to match the index
state exactly: on open, files whose stamp changed since are patched in from SQLite (see
`Indexer.load`). A snapshot that is missing, unreadable or of another format is ignored
and the projections are rebuilt.

Layout: 8-byte magic, the header's offset and length (two little-endian u64), the arrays
(each 64-byte aligned, C order), then the header: UTF-8 JSON naming each array's dtype,
shape and offset. Only plain numeric and fixed-width byte dtypes are accepted when reading.
"""

from __future__ import annotations

import gc
import json
import logging
import mmap
import os
import struct
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from reme_agent.engine.chunked import Chunked
from reme_agent.engine.idmap import BlockPaths, SortedIds

if TYPE_CHECKING:
    from reme_agent.engine.projections.graph import GraphProjection
    from reme_agent.engine.projections.keyword import KeywordProjection

log = logging.getLogger("reme_agent.index")

# Bump when the tokenizer, the block documents or the array layout change.
SNAPSHOT_FORMAT = 3
SNAPSHOT_NAME = "snapshot.bin"
OLD_SNAPSHOT_NAMES = ("snapshot.npz",)
"""Snapshots of earlier formats: removed when a new one is written."""
DELTA_NAME = "snapshot.delta"
"""What runs changed since the snapshot: one JSON line per run (see `append_delta`)."""

_MAGIC = b"REMESNAP"
_PREFIX = struct.Struct("<8sQQ")
_ALIGN = 64
_DTYPE_KINDS = frozenset("biufS")   # never "O": a snapshot must not be able to build objects


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while building or loading many small containers.

    Each collection walks the whole heap (every block's arrays, every graph node), and
    allocating ~100k lists triggers several: exporting the 10k-note graph took 0.12 s with
    it and 0.02 s without. Nothing built here forms cycles that need collecting.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@dataclass
class Snapshot:
    generation: int
    terms: list[str]
    files: list[str]                 # every indexed file, in the order `stamps` follows
    stamps: list[str]                # content stamp each file was indexed from
    arrays: dict[str, Any]           # keyword arrays, block paths, graph arrays (or Chunked)
    extra: dict[str, Any]            # small JSON parts: paths that are not files, predicates

    def stamp_map(self) -> dict[str, str]:
        return dict(zip(self.files, self.stamps, strict=True))


def write_snapshot(path: Path, snap: Snapshot) -> int:
    """Write atomically (temp file + rename); returns the size in bytes.

    A process that has the previous snapshot mapped keeps reading its (now unlinked) file.
    """
    table: dict[str, list[Any]] = {}
    fd, tmp = tempfile.mkstemp(prefix=".tmp-snapshot-", suffix=".bin", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(b"\0" * _ALIGN)
            for name, arr in snap.arrays.items():
                offset = fh.tell()
                if isinstance(arr, Chunked):
                    dtype, shape = arr.dtype, [arr.length]
                    written = 0
                    for part in arr.chunks():
                        _write_array(fh, np.ascontiguousarray(part, dtype=dtype))
                        written += len(part)
                    if written != arr.length:
                        raise ValueError(f"snapshot array {name}: {written} of {arr.length}")
                else:
                    arr = np.ascontiguousarray(arr)
                    dtype, shape = arr.dtype, list(arr.shape)
                    _write_array(fh, arr)
                if dtype.kind not in _DTYPE_KINDS:
                    raise TypeError(f"snapshot array {name} has dtype {dtype}")
                table[name] = [dtype.str, shape, offset]
                fh.write(b"\0" * (-fh.tell() % _ALIGN))
            header = {"format": SNAPSHOT_FORMAT, "generation": snap.generation,
                      "terms": snap.terms, "files": snap.files, "stamps": snap.stamps,
                      "extra": snap.extra, "arrays": table}
            blob = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            start = fh.tell()
            fh.write(blob)
            fh.seek(0)
            fh.write(_PREFIX.pack(_MAGIC, start, len(blob)))
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600; the rest of .reme/ is world-readable
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    for old in OLD_SNAPSHOT_NAMES:
        (path.parent / old).unlink(missing_ok=True)
    return path.stat().st_size


def _write_array(fh: Any, arr: np.ndarray, chunk: int = 1 << 24) -> None:
    """Write in slices: `tobytes()` of a whole 100 MB array would copy it first."""
    flat = arr.reshape(-1)
    step = max(1, chunk // max(1, arr.itemsize))
    for start in range(0, len(flat), step):
        fh.write(memoryview(flat[start:start + step]).cast("B"))


def read_snapshot(path: Path) -> Snapshot | None:
    """The snapshot at `path`, mapped read-only, or None (with a log line) if it is missing
    or unusable."""
    if not path.is_file():
        return None
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            magic, start, length = _PREFIX.unpack(fh.read(_PREFIX.size).ljust(_PREFIX.size, b"\0"))
            if magic != _MAGIC or start + length > size or start < _ALIGN:
                raise ValueError("not a reme-agent snapshot")
            fh.seek(start)
            header = json.loads(fh.read(length).decode("utf-8"))
            if header.get("format") != SNAPSHOT_FORMAT:
                log.info("ignoring %s: format %s, expected %s", path.name, header.get("format"),
                         SNAPSHOT_FORMAT)
                return None
            mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        arrays = {name: _view(mapped, dtype, shape, offset, start)
                  for name, (dtype, shape, offset) in header["arrays"].items()}
        snap = Snapshot(int(header["generation"]), header["terms"], header["files"],
                        header["stamps"], arrays, header["extra"])
        if len(snap.files) != len(snap.stamps):
            raise ValueError("files and stamps differ in length")
        return snap
    except (OSError, ValueError, KeyError, TypeError, struct.error, json.JSONDecodeError,
            UnicodeDecodeError) as exc:
        log.warning("ignoring unreadable %s (%s); rebuilding from the index state", path.name, exc)
        return None


def _view(mapped: mmap.mmap, dtype: str, shape: list[int], offset: int, end: int) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt.kind not in _DTYPE_KINDS or dt.hasobject:
        raise ValueError(f"refusing array dtype {dtype!r}")
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if offset < _ALIGN or count < 0 or offset + count * dt.itemsize > end:
        raise ValueError("array outside the file")
    return np.frombuffer(mapped, dtype=dt, count=count, offset=offset).reshape(shape)


# --- the projections <-> a snapshot ---------------------------------------------------------


def capture(generation: int, keyword: KeywordProjection, graph: GraphProjection,
            block_paths: BlockPaths, stamps: dict[str, str]) -> Snapshot:
    """The snapshot of the projections as they are (call under the index lock).

    Paths are written once: `files` (every indexed file, with its stamp), then the block
    paths and graph nodes that are not files (dangling targets, attachments); blocks and
    nodes refer to them by number.
    """
    terms, ids, arrays = keyword.export_arrays(chunked=True)
    files = sorted(stamps)
    code = {f: i for i, f in enumerate(files)}
    others: list[str] = []

    def code_of(path: str | None) -> int:
        if path is None:
            raise ValueError("a block has no path")
        c = code.get(path)
        if c is None:
            c = code[path] = len(files) + len(others)
            others.append(path)
        return c

    arrays["ids"] = ids
    arrays["doc_path"] = np.fromiter((code_of(p) for p in block_paths.paths_of(ids)),
                                     dtype=np.int32, count=len(ids))
    names, preds, graph_arrays = graph.export_arrays()
    arrays["g_node"] = np.fromiter((code_of(n) for n in names), dtype=np.int32, count=len(names))
    arrays.update(graph_arrays)
    return Snapshot(generation, terms, files, [stamps[f] for f in files], arrays,
                    {"other_paths": others, "predicates": preds})


def restore(snap: Snapshot, keyword: KeywordProjection, graph: GraphProjection) -> BlockPaths:
    """Load `snap` into the projections; returns the block -> path map. ValueError (or
    KeyError, IndexError, TypeError) when its parts do not fit together."""
    table = snap.files + list(snap.extra["other_paths"])
    arrays = snap.arrays
    ids, doc_path, nodes = arrays["ids"], arrays["doc_path"], arrays["g_node"]
    for refs in (doc_path, nodes):
        if len(refs) and (int(refs.min()) < 0 or int(refs.max()) >= len(table)):
            raise ValueError("snapshot refers to paths it does not list")
    if len(doc_path) != len(ids):
        raise ValueError("block paths do not match the ids")
    keyword.import_arrays(snap.terms, ids, arrays)
    graph.import_arrays([table[i] for i in nodes.tolist()], snap.extra["predicates"], arrays)
    return BlockPaths(SortedIds(arrays["ids_sorted"], arrays["ids_order"]), doc_path, table)


def append_delta(path: Path, entry: dict[str, Any]) -> None:
    """Append one run's changes as a JSON line (one write; no fsync: a torn or lost line
    only makes the next cold open find files the delta does not cover, and rebuild)."""
    line = json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)


def read_delta(path: Path, base: int) -> list[dict[str, Any]]:
    """The runs recorded on top of the snapshot of generation `base`, oldest first; reading
    stops at the first line that is torn or belongs to another snapshot."""
    try:
        lines = path.read_bytes().splitlines()
    except FileNotFoundError:
        return []
    except OSError as exc:
        log.warning("ignoring unreadable %s (%s)", path.name, exc)
        return []
    out: list[dict[str, Any]] = []
    for raw in lines:
        try:
            entry = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            break
        if not isinstance(entry, dict) or entry.get("base") != base:
            break
        out.append(entry)
    return out
