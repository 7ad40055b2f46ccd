"""File store over a vault folder: the single source of truth (DESIGN §1, §5).

Every path is vault-relative and POSIX-style. `..`, absolute paths, Windows drive paths and
symlinks leading outside the vault are refused. Writes go to a temp file in the same folder,
are fsynced and renamed over the target, so a crash leaves the old or the new file, never a
torn one. CAS (`read_stamped` / `write_if_unchanged`) compares a sha256 stamp of the bytes
under a per-file lock, so concurrent writers (threads or processes) never lose an update.

This is the only module that opens vault files for writing.
"""

from __future__ import annotations

import contextlib
import difflib
import fcntl
import fnmatch
import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from reme_agent.errors import NoteExists, NoteNotFound, NotText, PathEscape, StampChanged

INTERNAL_DIR = ".reme"
DEFAULT_IGNORED = (INTERNAL_DIR, ".git", ".obsidian", ".trash")


def stamp_of(data: bytes) -> str:
    """The CAS stamp: sha256 of the file's bytes."""
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class FileStat:
    path: str
    size: int
    mtime: float
    mtime_ns: int
    stamp: str


class FileStore:
    """Safe file operations inside one vault folder."""

    def __init__(self, root: Path | str, ignored: tuple[str, ...] = DEFAULT_IGNORED,
                 max_read_bytes: int = 64_000_000) -> None:
        self.root = Path(root).resolve()
        self.ignored = ignored
        self.max_read_bytes = max_read_bytes
        self._lock_dir = self.root / INTERNAL_DIR / "locks"

    # -- paths -------------------------------------------------------------------------
    def normalize(self, rel: str) -> str:
        """Validate a vault-relative path and return its canonical POSIX form."""
        if not isinstance(rel, str) or not rel.strip():
            raise PathEscape(str(rel), "the path is empty")
        raw = rel.strip().replace("\\", "/")
        if "\x00" in raw:
            raise PathEscape(rel, "it contains a NUL byte")
        if raw.startswith("/") or (len(raw) > 1 and raw[1] == ":"):
            raise PathEscape(rel, "absolute paths are not allowed")
        parts = [p for p in PurePosixPath(raw).parts if p not in ("", ".")]
        if any(p == ".." for p in parts):
            raise PathEscape(rel, "'..' is not allowed")
        if not parts:
            raise PathEscape(rel, "the path names the vault itself")
        if parts[0] == INTERNAL_DIR:
            raise PathEscape(rel, f"{INTERNAL_DIR}/ holds the index, not notes")
        return "/".join(parts)

    def resolve(self, rel: str) -> Path:
        """Absolute path for a vault-relative one; symlinks leading outside are refused."""
        norm = self.normalize(rel)
        target = self.root / norm
        real = target.resolve()
        if real != self.root and self.root not in real.parents:
            raise PathEscape(rel, "it resolves (through a symlink) outside the vault")
        return target

    def relpath(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    # -- reading -----------------------------------------------------------------------
    def exists(self, rel: str) -> bool:
        return self.resolve(rel).is_file()

    def is_dir(self, rel: str) -> bool:
        return self.resolve(rel).is_dir()

    def read_bytes(self, rel: str) -> bytes:
        path = self.resolve(rel)
        if not path.is_file():
            raise NoteNotFound(self.normalize(rel), self.suggest(rel))
        size = path.stat().st_size
        if size > self.max_read_bytes:
            raise NotText(self.normalize(rel), f"it is {size} bytes (limit {self.max_read_bytes})")
        return path.read_bytes()

    def read_text(self, rel: str) -> str:
        return self.read_stamped(rel)[0]

    def read_stamped(self, rel: str) -> tuple[str, str]:
        """Text and its CAS stamp, read from one snapshot of the bytes."""
        data = self.read_bytes(rel)
        return decode_text(data, self.normalize(rel)), stamp_of(data)

    def stamp(self, rel: str) -> str | None:
        path = self.resolve(rel)
        try:
            return stamp_of(path.read_bytes())
        except FileNotFoundError:
            return None

    def stat(self, rel: str) -> FileStat:
        path = self.resolve(rel)
        if not path.is_file():
            raise NoteNotFound(self.normalize(rel), self.suggest(rel))
        st = path.stat()
        return FileStat(self.normalize(rel), st.st_size, st.st_mtime, st.st_mtime_ns,
                        stamp_of(path.read_bytes()))

    def list(self, prefix: str = "", recursive: bool = True, pattern: str | None = None) -> list[str]:
        """Files under `prefix` (vault-relative, sorted), skipping internal folders."""
        base = self.resolve(prefix) if prefix else self.root
        if not base.exists():
            return []
        if base.is_file():
            return [self.relpath(base)]
        out: list[str] = []
        for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if d not in self.ignored and not d.startswith(".tmp-"))
            if not recursive:
                dirnames[:] = []
            for name in filenames:
                if name.startswith(".tmp-"):
                    continue
                rel = self.relpath(Path(dirpath) / name)
                if pattern and not (fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(name, pattern)):
                    continue
                out.append(rel)
        return sorted(out)

    def scan(self, extensions: tuple[str, ...]) -> Iterator[tuple[str, int, int]]:
        """(path, size, mtime_ns) of every file with one of `extensions`, in one fast walk.

        Uses scandir's cached stat; symlinks are followed only when they stay in the vault.
        """
        stack = [self.root]
        while stack:
            folder = stack.pop()
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                name = entry.name
                if name.startswith(".tmp-"):
                    self._sweep_temp(entry)
                    continue
                if entry.is_symlink():
                    real = Path(entry.path).resolve()
                    if real != self.root and self.root not in real.parents:
                        continue
                if entry.is_dir():
                    if name not in self.ignored:
                        stack.append(Path(entry.path))
                    continue
                if not name.lower().endswith(extensions):
                    continue
                try:
                    st = entry.stat()
                except OSError:
                    continue
                yield self.relpath(Path(entry.path)), st.st_size, st.st_mtime_ns

    @staticmethod
    def _sweep_temp(entry: os.DirEntry[str], max_age: float = 600.0) -> None:
        """Remove a temp file a killed writer left behind (only when clearly stale)."""
        with contextlib.suppress(OSError):
            if entry.is_file(follow_symlinks=False) and \
                    time.time() - entry.stat(follow_symlinks=False).st_mtime > max_age:
                os.unlink(entry.path)

    def suggest(self, rel: str, limit: int = 5) -> list[str]:
        """Close matches for a missing path, by file name then whole path."""
        try:
            wanted = PurePosixPath(rel.replace("\\", "/")).name.lower()
            names = self.list()
        except (PathEscape, OSError):
            return []
        by_name = {PurePosixPath(p).name.lower(): p for p in names}
        close = difflib.get_close_matches(wanted, list(by_name), n=limit, cutoff=0.6)
        hits = [by_name[c] for c in close]
        hits += [p for p in difflib.get_close_matches(rel, names, n=limit, cutoff=0.6) if p not in hits]
        return hits[:limit]

    # -- writing -----------------------------------------------------------------------
    @contextlib.contextmanager
    def lock(self, rel: str) -> Iterator[None]:
        """Exclusive per-file lock (flock) shared by threads and processes using this vault."""
        self._lock_dir.mkdir(parents=True, exist_ok=True)
        name = hashlib.sha1(self.normalize(rel).encode()).hexdigest()
        fd = os.open(self._lock_dir / f"{name}.lock", os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def write(self, rel: str, text: str) -> str:
        """Create or replace a file atomically; returns the new stamp."""
        with self.lock(rel):
            return self._atomic_write(self.resolve(rel), text.encode("utf-8"))

    def write_bytes(self, rel: str, data: bytes) -> str:
        with self.lock(rel):
            return self._atomic_write(self.resolve(rel), data)

    def create(self, rel: str, text: str) -> str:
        """Create a new file with O_EXCL; NoteExists if it is already there (a lost race)."""
        path = self.resolve(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = text.encode("utf-8")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError as exc:
            raise NoteExists(self.normalize(rel)) from exc
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        return stamp_of(data)

    def write_if_unchanged(self, rel: str, text: str, stamp: str | None) -> str:
        """CAS write: replace only if the file still has `stamp` (None = must not exist yet)."""
        norm = self.normalize(rel)
        with self.lock(rel):
            path = self.resolve(rel)
            current = stamp_of(path.read_bytes()) if path.is_file() else None
            if current != stamp:
                raise StampChanged(norm, stamp or "absent", current)
            return self._atomic_write(path, text.encode("utf-8"))

    def delete(self, rel: str) -> None:
        path = self.resolve(rel)
        if not path.is_file():
            raise NoteNotFound(self.normalize(rel), self.suggest(rel))
        with self.lock(rel):
            path.unlink()
        self._prune_empty_dirs(path.parent)

    def move(self, src: str, dst: str, overwrite: bool = False) -> None:
        source, target = self.resolve(src), self.resolve(dst)
        if not source.is_file():
            raise NoteNotFound(self.normalize(src), self.suggest(src))
        if target.exists() and not overwrite:
            raise NoteExists(self.normalize(dst))
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(source, target)
        self._prune_empty_dirs(source.parent)

    def copy(self, src: str, dst: str, overwrite: bool = False) -> str:
        source, target = self.resolve(src), self.resolve(dst)
        if not source.is_file():
            raise NoteNotFound(self.normalize(src), self.suggest(src))
        if target.exists() and not overwrite:
            raise NoteExists(self.normalize(dst))
        return self.write_bytes(dst, source.read_bytes())

    def _atomic_write(self, path: Path, data: bytes) -> str:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            if path.exists():
                shutil.copymode(path, tmp)
            else:
                os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        _fsync_dir(path.parent)
        return stamp_of(data)

    def _prune_empty_dirs(self, folder: Path) -> None:
        while folder != self.root and self.root in folder.parents:
            try:
                folder.rmdir()
            except OSError:
                return
            folder = folder.parent


def decode_text(data: bytes, path: str = "") -> str:
    """UTF-8 text or NotText for binary / non-UTF-8 content."""
    if b"\x00" in data[:8192]:
        raise NotText(path, "it looks binary (NUL bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotText(path, f"it is not valid UTF-8 ({exc.reason} at byte {exc.start})") from exc
    return text[1:] if text.startswith("\ufeff") else text


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
