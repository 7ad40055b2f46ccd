"""Cold-open snapshot of the in-memory projections: BM25 and the link graph in one file.

Opening a vault used to rebuild BM25 from every block's tokens in SQLite and re-resolve every
link: 3.3 s at 10k notes, 37 s at 100k. The snapshot (`.reme/snapshot.npz`, numpy arrays plus
one JSON header, no pickle) loads in a fraction of that. It records the content stamp of
every file it covers, so it never has to match the index state exactly: on open, files whose
stamp changed since are patched in from SQLite (see `Indexer.load`). A snapshot that is
missing, unreadable or of another format is ignored and the projections are rebuilt.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger("reme_agent.index")

# Bump when the tokenizer, the block documents or the array layout change.
SNAPSHOT_FORMAT = 2
SNAPSHOT_NAME = "snapshot.npz"
_ARRAYS = ("doc_off", "doc_tid", "doc_tf", "dl", "doc_path")


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
    ids: list[str]
    paths: list[str]                 # distinct block paths; arrays["doc_path"] indexes them
    arrays: dict[str, np.ndarray]
    stamps: dict[str, str]           # every indexed file -> content stamp it was built from
    graph: dict[str, Any]

    def block_paths(self) -> dict[str, str]:
        paths = self.paths
        return {bid: paths[i] for bid, i in zip(self.ids, self.arrays["doc_path"].tolist(),
                                                 strict=True)}


def write_snapshot(path: Path, snap: Snapshot) -> int:
    """Write atomically (temp file + rename); returns the size in bytes."""
    header = {"format": SNAPSHOT_FORMAT, "generation": snap.generation, "terms": snap.terms,
              "ids": snap.ids, "paths": snap.paths, "stamps": snap.stamps, "graph": snap.graph}
    blob = np.frombuffer(json.dumps(header, ensure_ascii=False).encode("utf-8"), dtype=np.uint8)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-snapshot-", suffix=".npz", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, header=blob, **{k: snap.arrays[k] for k in _ARRAYS})
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600; the rest of .reme/ is world-readable
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path.stat().st_size


def read_snapshot(path: Path) -> Snapshot | None:
    """The snapshot at `path`, or None (with a log line) if it is missing or unusable."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            header = json.loads(data["header"].tobytes().decode("utf-8"))
            if header.get("format") != SNAPSHOT_FORMAT:
                log.info("ignoring %s: format %s, expected %s", path.name, header.get("format"),
                         SNAPSHOT_FORMAT)
                return None
            arrays = {k: data[k] for k in _ARRAYS}
        snap = Snapshot(int(header["generation"]), header["terms"], header["ids"],
                        header["paths"], arrays, header["stamps"], header["graph"])
        if len(arrays["doc_path"]) != len(snap.ids):
            raise ValueError("doc_path does not match the ids")
        return snap
    except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile,
            json.JSONDecodeError) as exc:
        log.warning("ignoring unreadable %s (%s); rebuilding from the index state", path.name, exc)
        return None
