"""Whole-file replacement for files the vault's `FileStore` does not own (user caches,
Obsidian's settings, a tool's export outside the vault): a temp file beside the target,
written, renamed over it. A crash or a failed write leaves the old file or the new one,
never half of either, and no temp file behind.

Inside the vault every write goes through `FileStore` (CAS, stamps, the journal) instead.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

__all__ = ["replaced"]


@contextmanager
def replaced(target: Path, *, prefix: str, suffix: str = "", text: bool = False,
             fsync: bool = False) -> Iterator[IO[Any]]:
    """A file object whose contents become `target` when the block ends without error.

    The temp file is created before the block runs, so a read-only folder fails before
    any work goes into the contents. `fsync`: the data is on disk before the rename."""
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=target.parent)
    try:
        with (os.fdopen(fd, "w", encoding="utf-8") if text else os.fdopen(fd, "wb")) as fh:
            yield fh
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
