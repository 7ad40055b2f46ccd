"""Where a vault's derived data lives: `<vault>/.reme/`, or a user cache for a read-only vault.

Everything in the internal folder (index state, vectors, snapshot, locks, journals) is
derived from the notes; the one exception, the follow-up queue (`queue.sqlite`), holds work
not yet done that the batch runs would find again. So a vault that cannot be written (a
read-only mount, a folder of another user) can still be indexed and searched: its internal
folder moves to `$REME_CACHE_DIR` (default `$XDG_CACHE_HOME/reme-agent`, else
`~/.cache/reme-agent`), one sub-folder per vault path. An existing `.reme/` is copied there
once, so nothing is re-embedded; tool writes to the notes themselves then fail with a clear
StorageError.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import shutil
import tempfile
from pathlib import Path

INTERNAL_DIR = ".reme"
CACHE_ENV = "REME_CACHE_DIR"
_READ_ONLY = {errno.EROFS, errno.EACCES, errno.EPERM}

log = logging.getLogger("reme_agent")


def internal_dir(root: Path) -> Path:
    """`root/.reme` if it can be written (created if missing), else this vault's cache folder."""
    local = root / INTERNAL_DIR
    if _writable(local):
        return local
    cache = cache_dir_of(root)
    fresh = not (cache / "index.sqlite").exists()
    cache.mkdir(parents=True, exist_ok=True)
    if fresh and local.is_dir():
        with contextlib.suppress(OSError, shutil.Error):  # a cache: a partial copy re-indexes
            shutil.copytree(local, cache, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("locks", "*.lock", "*.corrupt-*"))
    log.info("the vault %s is read-only; keeping its index in %s", root, cache)
    return cache


def cache_dir_of(root: Path) -> Path:
    """Where the internal folder of the read-only vault at `root` goes (nothing is made)."""
    return cache_root() / hashlib.sha256(str(root).encode("utf-8", "surrogateescape")) \
        .hexdigest()[:16]


def cache_root() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "reme-agent"


def _writable(folder: Path) -> bool:
    """True if a file can be created in `folder` (made if missing). A real probe: root ignores
    permission bits, but not a read-only mount."""
    try:
        folder.mkdir(exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".probe-", dir=folder)
    except OSError as exc:
        if exc.errno in _READ_ONLY or isinstance(exc, PermissionError):
            return False
        raise
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return True
