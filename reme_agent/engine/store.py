"""File store over a vault folder: the single source of truth (DESIGN §1, §5).

Every path is vault-relative and POSIX-style. `..`, absolute paths, Windows drive paths and
symlinks leading outside the vault are refused, and so is text that cannot be a file name
(a lone surrogate, a name over 255 bytes), so the OS never raises past the store. Hidden
names (any path component starting with `.`, any case: `.git/`, `.obsidian/`, `.reme/`,
`.trash/`) belong to other programs: they are refused, never listed and never indexed, also
when a symlink inside the vault leads there; so are names with control characters (a
newline forges lines in a listing, ESC reaches the terminal). A rewrite never keeps an
executable bit (DESIGN §2). Writes go
to a temp file in the same folder, are fsynced and renamed (or, for a create, hard-linked)
onto the target, so a crash leaves the old or the new file, never a torn one. CAS (`read_stamped` / `write_if_unchanged`) compares a sha256 stamp of the bytes
under a per-file lock, so concurrent writers (threads or processes) never lose an update.

This is the only module that opens vault files for writing.
"""

from __future__ import annotations

import contextlib
import difflib
import errno
import fcntl
import fnmatch
import hashlib
import logging
import os
import stat
import tempfile
import time
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from reme_agent.engine.cas import MAX_REDOS, redo_on_stamp_change
from reme_agent.engine.latewrites import LateAppendWatcher, pread_all
from reme_agent.engine.workdir import INTERNAL_DIR
from reme_agent.errors import (
    FolderNotNote,
    NoteExists,
    NoteNotFound,
    NotText,
    PathEscape,
    StampChanged,
    StorageError,
)

DEFAULT_IGNORED = (INTERNAL_DIR, ".git", ".obsidian", ".trash")
NAME_MAX = 255  # bytes in one file or folder name (ext4, APFS, NTFS in UTF-16 units)
PATH_MAX = 4096  # bytes in a whole absolute path (Linux)
NOT_UTF8_NAME = "the file name is not valid UTF-8; rename it"
NOT_REGULAR = "not a regular file (a FIFO, socket or device)"
RACY_SECONDS = 3.0
"""A folder changed this recently is listed again by the next `scan_cached` (mtime ticks are
coarse: a change in the same tick as a listing leaves the mtime as it was)."""

log = logging.getLogger("reme_agent.store")


def stamp_of(data: bytes) -> str:
    """The CAS stamp: sha256 of the file's bytes."""
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class FolderListing:
    """What `FileStore.scan_cached` saw in one folder: its mtime then (0: list it again),
    its wanted files and the sub-folders it walked, by name, in listing order."""

    mtime_ns: int
    files: tuple[str, ...]
    folders: tuple[str, ...]


@dataclass(frozen=True)
class FileStat:
    path: str
    size: int
    mtime: float
    mtime_ns: int
    stamp: str


@dataclass(frozen=True)
class CasResult:
    """What `FileStore.cas_edit` did.

    status: "written", "unchanged" (the edit returned None or the same text) or "dry_run"
    (planned, not written). `stamp` is the file's stamp now (None: it still does not
    exist); `text` the text written (or planned), else the text as read; `redos` how many
    times a concurrent writer made the edit start over.
    """

    status: Literal["written", "unchanged", "dry_run"]
    stamp: str | None
    text: str | None
    redos: int = 0


class FileStore:
    """Safe file operations inside one vault folder."""

    def __init__(self, root: Path | str, ignored: tuple[str, ...] = DEFAULT_IGNORED,
                 max_read_bytes: int = 64_000_000, internal: Path | None = None) -> None:
        self.root = Path(root).resolve()
        self.ignored = ignored
        self.max_read_bytes = max_read_bytes
        self.internal = internal or self.root / INTERNAL_DIR
        """Derived data (locks, index, journals): `.reme/`, or a cache for a read-only vault."""
        self._lock_dir = self.internal / "locks"
        self.late_appends = LateAppendWatcher()
        """Carries appends that reach a replaced file late over to its successor."""

    # -- paths -------------------------------------------------------------------------
    def normalize(self, rel: str) -> str:
        """Validate a vault-relative path and return its canonical POSIX form."""
        if not isinstance(rel, str) or not rel.strip():
            raise PathEscape(str(rel), "the path is empty")
        raw = rel.strip().replace("\\", "/")
        if "\x00" in raw:
            raise PathEscape(rel, "it contains a NUL byte")
        bad = control_char(raw)
        if bad is not None:
            raise PathEscape(rel, f"it contains the control character U+{ord(bad):04X}")
        try:
            size = len(raw.encode("utf-8"))
        except UnicodeEncodeError:  # a lone surrogate: valid in JSON, not in a file name
            raise PathEscape(printable(rel), "it is not valid Unicode text (a lone "
                             "surrogate such as \\ud800)") from None
        if raw.startswith("/") or (len(raw) > 1 and raw[1] == ":"):
            raise PathEscape(rel, "absolute paths are not allowed")
        parts = [p for p in PurePosixPath(raw).parts if p not in ("", ".")]
        if any(p == ".." for p in parts):
            raise PathEscape(rel, "'..' is not allowed")
        if not parts:
            raise PathEscape(rel, "the path names the vault itself")
        hidden = next((p for p in parts if is_hidden(p)), None)
        if hidden is not None:
            raise PathEscape(rel, hidden_reason(hidden))
        long = next((p for p in parts if len(p.encode("utf-8")) > NAME_MAX), None)
        if long is not None:
            raise PathEscape(_shorten(rel), f"the name {_shorten(long)!r} is over {NAME_MAX} "
                             "bytes, the file-system limit")
        if size + len(os.fsencode(self.root)) + 1 >= PATH_MAX:
            raise PathEscape(_shorten(rel), f"the path is over the {PATH_MAX}-byte "
                             "file-system limit")
        return "/".join(parts)

    def resolve(self, rel: str, *, writing: bool = False) -> Path:
        """Absolute path for a vault-relative one; symlinks leading outside are refused.

        `writing`: the path is about to be created, replaced, moved or deleted, so it must
        not go through a symlink at all. Through a symlinked folder the change lands on a
        file the vault knows by another path (its index row, links and lock stay stale);
        over a symlinked file a rename would replace the link with a copy.
        """
        norm = self.normalize(rel)
        target = self.root / norm
        try:
            real = target.resolve()
        except (OSError, RuntimeError) as exc:  # a symlink loop, a name the OS refuses
            # strerror only: the exception's own text names the absolute vault path.
            reason = getattr(exc, "strerror", None) or "a symlink loop"
            raise PathEscape(norm, f"it cannot be resolved ({reason})") from None
        if not self._inside(real):
            raise PathEscape(rel, "it resolves (through a symlink) outside the vault")
        hidden = next((p for p in real.relative_to(self.root).parts if is_hidden(p)), None)
        if hidden is not None:  # a symlink inside the vault that leads into .reme/, .git/...
            raise PathEscape(rel, "it resolves (through a symlink) into "
                             + hidden_reason(hidden).split(";")[0])
        if writing and real != target:
            raise PathEscape(rel, "it goes through a symlink, so the change would land on "
                             f"{self.relpath(real)!r}; change that path instead")
        if writing:
            folder = target.parent
            while folder != self.root and not os.path.lexists(folder):
                folder = folder.parent
            if not folder.is_dir():  # `a.md/x.md`: the OS says "File exists" or "Not a dir"
                raise PathEscape(rel, f"{self.relpath(folder)!r} is a file, not a folder")
        return target

    def _inside(self, real: Path) -> bool:
        return real == self.root or self.root in real.parents

    def _forbidden_link(self, entry: os.DirEntry[str]) -> bool:
        """A symlink leading outside the vault or into a hidden folder (never listed,
        indexed or followed)."""
        if not entry.is_symlink():
            return False
        try:
            real = Path(entry.path).resolve()
        except (OSError, RuntimeError):
            return True
        return not self._inside(real) or any(
            is_hidden(p) for p in real.relative_to(self.root).parts)

    def lookalike(self, rel: str) -> str | None:
        """An existing path that `rel` (not on disk as written) looks the same as, or None:
        a folder or file whose name differs only in letter case, in Unicode normalisation
        (`Café` composed or decomposed) or in compatibility forms (full-width `ＡＢＣ` and
        `ABC`, `①` and `1`). For the first two, macOS and Windows keep one of the two,
        Obsidian links both as one, and a sync between machines merges them; the last
        a person cannot tell apart in a listing or a link (`fs_fold` tells which).

        Only folders along `rel` that are missing as written are listed, so a new note in
        an existing folder costs one listing of that folder.
        """
        folder, found, twinned = self.root, [], False
        for part in self.normalize(rel).split("/"):
            if not os.path.lexists(folder / part):
                key = _fold(part)
                try:
                    names = os.listdir(folder)
                except OSError:
                    names = []
                twin = next((n for n in names if _fold(n) == key), None)
                if twin is None:
                    break
                part, twinned = twin, True
            found.append(part)
            folder = folder / part
        return "/".join(found) if twinned else None

    def relpath(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    # -- reading -----------------------------------------------------------------------
    def exists(self, rel: str) -> bool:
        return self.resolve(rel).is_file()

    def is_dir(self, rel: str) -> bool:
        return self.resolve(rel).is_dir()

    def read_bytes(self, rel: str) -> bytes:
        data = self.read_if_present(rel)
        if data is None:
            norm = self.normalize(rel)
            if norm and self.resolve(norm).is_dir():
                note = f"{norm}/{PurePosixPath(norm).name}.md"
                raise FolderNotNote(norm, note if self.resolve(note).is_file() else None)
            raise NoteNotFound(norm, self.suggest(rel))
        return data

    def read_if_present(self, rel: str) -> bytes | None:
        """The file's bytes, or None if it is not there (a file that vanished between a
        scan and this read is a deletion, not an error).

        Only regular files are read: the file is opened non-blocking and checked with
        fstat, so a FIFO named `x.md` (which would block a plain open for ever), a socket
        or a device is NotText, also when it replaced a note after the scan.
        """
        return self._read_at(self.resolve(rel), rel)

    def read_listed(self, rel: str) -> bytes | None:
        """`read_if_present` for a path `list` or `scan` just returned, without resolving it
        again: the listing already left out every name and symlink `resolve` refuses, and a
        vault-wide read (a move looking for embeds) paid a realpath per file for nothing.
        A path no listing gives (absolute, ``..``) is resolved as `read_if_present` does."""
        if rel.startswith("/") or ".." in rel.split("/"):
            return self.read_if_present(rel)
        return self._read_at(self.root / rel, rel)

    def _read_at(self, path: Path, rel: str) -> bytes | None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            os.close(fd)
            return None
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(st.st_mode):
                raise NotText(self.normalize(rel), "it is not a regular file (a FIFO, socket "
                              "or device)")
            if st.st_size > self.max_read_bytes:
                raise NotText(self.normalize(rel),
                              f"it is {st.st_size} bytes (limit {self.max_read_bytes})")
            return fh.read(self.max_read_bytes + 1)

    def read_text(self, rel: str) -> str:
        return self.read_stamped(rel)[0]

    def read_stamped(self, rel: str) -> tuple[str, str]:
        """Text and its CAS stamp, read from one snapshot of the bytes."""
        data = self.read_bytes(rel)
        return decode_text(data, self.normalize(rel)), stamp_of(data)

    def stamp(self, rel: str) -> str | None:
        data = self.read_if_present(rel)
        return None if data is None else stamp_of(data)

    def stat(self, rel: str) -> FileStat:
        path = self.resolve(rel)
        data = self.read_bytes(rel)
        st = path.stat()
        return FileStat(self.normalize(rel), st.st_size, st.st_mtime, st.st_mtime_ns,
                        stamp_of(data))

    def list(self, prefix: str = "", recursive: bool = True, pattern: str | None = None) -> list[str]:
        """Files under `prefix` (vault-relative, sorted), skipping internal folders.

        Every listed path can be read: hidden names, symlinks leading outside the vault or
        into a hidden folder, and names that are not UTF-8 or hold control characters are
        left out (one such file must not break `list`, lint or tags for all).
        Symlinked folders are not followed.
        """
        base = self.resolve(prefix) if prefix else self.root
        if not base.exists():
            return []
        if base.is_file():
            return [self.relpath(base)]
        out: list[str] = []
        for entry, rel in self._walk(base, recursive=recursive, follow_dir_links=False):
            if pattern and not (fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(entry.name, pattern)):
                continue
            out.append(rel)
        return sorted(out)

    def scan(self, extensions: tuple[str, ...],
             skipped: list[tuple[str, str]] | None = None) -> Iterator[tuple[str, int, int]]:
        """(path, size, mtime_ns) of every file with one of `extensions`, in one fast walk.

        Uses scandir's cached stat; a symlinked file is followed only when it stays in the
        vault, and a symlinked folder never (as in `list`): it leads to a folder already walked
        at its own path, so its notes would be indexed twice, or to one the index ignores.
        A note or folder whose name is not UTF-8 cannot become a path, so it is skipped (not
        fatal): with `skipped`, (printable path, reason) is appended there for the caller's
        report (filled as the generator runs) and the caller logs it; else it is logged here.
        """
        for entry, rel in self._walk(self.root, want=_wanted(extensions), sweep=True,
                                     skipped=skipped, follow_dir_links=False):
            try:
                st = entry.stat()
            except OSError:
                continue
            yield rel, st.st_size, st.st_mtime_ns

    def scan_cached(self, extensions: tuple[str, ...], listings: dict[str, FolderListing],
                    skipped: list[tuple[str, str]] | None = None, *, stats: bool = True,
                    ) -> tuple[list[tuple[str, int, int]], dict[str, FolderListing]]:
        """What `scan` finds, plus the folder listings to pass next time (G6).

        Creating, deleting or renaming an entry changes its folder's mtime; editing a file
        in place changes only the file's. So a folder whose mtime is the one its kept
        listing recorded is not listed again: its files are stat'ed by name, its sub-folders
        visited from the listing. At 100k notes in 100k folders that is a stat per folder
        and per file instead of a listing per folder and a Python object per entry.

        A listing is kept only for a plain folder: no symlink, hidden-for-a-reason, temp or
        non-regular entry in it (those are re-checked on every scan, as `scan` does), and an
        mtime at least `RACY_SECONDS` old (a change in the same clock tick as the listing
        would not move the mtime). Results and their order are `scan`'s.

        `stats=False` only names the files (size and mtime -1): a kept folder's files are
        not stat'ed (removing or renaming one moves the folder's mtime), temp files are not
        swept — a read-only question ("which notes are there?") costs a stat per folder.
        """
        want = _wanted(extensions)
        cutoff = time.time_ns() - int(RACY_SECONDS * 1e9)
        found: list[tuple[str, int, int]] = []
        add, stat_of, is_reg = found.append, os.stat, stat.S_ISREG
        kept: dict[str, FolderListing] = {}
        root = str(self.root)
        stack = [""]
        while stack:   # the loop runs once per folder: kept lean on purpose
            rel = stack.pop()
            folder = f"{root}{os.sep}{rel}" if rel else root
            try:
                st = stat_of(folder)
            except OSError:
                continue
            prefix = f"{rel}/" if rel else ""
            old = listings.get(rel)
            if old is not None and old.mtime_ns and old.mtime_ns == st.st_mtime_ns:
                kept[rel] = old
                base = folder + os.sep
                if not stats:
                    found.extend((prefix + name, -1, -1) for name in old.files)
                    if old.folders:
                        stack.extend([prefix + name for name in old.folders])
                    continue
                for name in old.files:
                    try:
                        fst = stat_of(base + name)
                    except OSError:
                        continue
                    if is_reg(fst.st_mode):
                        add((prefix + name, fst.st_size, fst.st_mtime_ns))
                if old.folders:
                    stack.extend([prefix + name for name in old.folders])
                continue
            files, folders, plain = self._list_folder(folder, want=want, sweep=stats,
                                                      skipped=skipped, follow_dir_links=False)
            names: list[str] = []
            for entry, path in files:
                if not stats:
                    names.append(entry.name)
                    found.append((path, -1, -1))
                    continue
                try:
                    fst = entry.stat()
                except OSError:
                    plain = False
                    continue
                names.append(entry.name)
                found.append((path, fst.st_size, fst.st_mtime_ns))
            mtime = st.st_mtime_ns if plain and st.st_mtime_ns < cutoff else 0
            kept[rel] = FolderListing(mtime, tuple(names),
                                      tuple(os.path.basename(f) for f in folders))
            stack.extend(prefix + os.path.basename(f) for f in folders)
        return found, kept

    def _walk(self, base: Path, *, recursive: bool = True, follow_dir_links: bool = True,
              want: Callable[[str], bool] | None = None, sweep: bool = False,
              skipped: list[tuple[str, str]] | None = None,
              ) -> Iterator[tuple[os.DirEntry[str], str]]:
        """(entry, vault-relative path) of every file under `base` that `want`s its name.

        One scandir walk for `list` and `scan`: internal folders, temp files (swept when
        `sweep` and stale), symlinks leading outside and names that are not UTF-8 are left
        out; relative paths are sliced from the entry's path (Path objects were half the cost
        of a no-op index run).
        """
        stack = [str(base)]
        while stack:
            files, folders, _ = self._list_folder(stack.pop(), want=want, sweep=sweep,
                                                  skipped=skipped,
                                                  follow_dir_links=follow_dir_links)
            yield from files
            if recursive:
                stack.extend(folders)

    def _list_folder(self, folder: str, *, want: Callable[[str], bool] | None, sweep: bool,
                     skipped: list[tuple[str, str]] | None, follow_dir_links: bool = True,
                     ) -> tuple[list[tuple[os.DirEntry[str], str]], list[str], bool]:
        """One folder of `_walk`: (wanted files with their vault paths, sub-folders to walk,
        plain), where plain means no entry was a symlink, temp file or skipped name."""
        root = str(self.root) + os.sep
        files: list[tuple[os.DirEntry[str], str]] = []
        folders: list[str] = []
        plain = True
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return files, folders, False
        for entry in entries:
            name = entry.name
            if name.startswith(".tmp-"):
                plain = False
                if sweep:
                    self._sweep_temp(entry)
                continue
            if entry.is_symlink():
                plain = False
            if is_hidden(name) or self._forbidden_link(entry):
                continue
            try:
                is_dir = entry.is_dir()
            except OSError:
                plain = False
                continue
            if is_dir and name in self.ignored:
                continue
            if not is_dir and want is not None and not want(name):
                continue
            problem = name_problem(name)
            if problem is not None:
                plain = False
                _report_skip(_shown(entry.path, self.root), problem, skipped)
                continue
            if is_dir:
                if follow_dir_links or not entry.is_symlink():
                    folders.append(entry.path)
                continue
            try:
                regular = entry.is_file()
            except OSError:
                plain = False
                continue
            if not regular:  # a FIFO, socket or device: reading it could block for ever
                plain = False
                _report_skip(_shown(entry.path, self.root), NOT_REGULAR, skipped)
                continue
            path = entry.path
            files.append((entry, path[len(root):].replace(os.sep, "/") if path.startswith(root)
                          else self.relpath(Path(path))))
        return files, folders, plain

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
        with self._flock(self.normalize(rel)):
            yield

    @contextlib.contextmanager
    def _flock(self, key: str) -> Iterator[None]:
        self._lock_dir.mkdir(parents=True, exist_ok=True)
        name = hashlib.sha1(key.encode()).hexdigest()
        fd = os.open(self._lock_dir / f"{name}.lock", os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def write(self, rel: str, text: str) -> str:
        """Create or replace a file atomically; returns the new stamp."""
        with self._writing(rel), self.lock(rel):
            return self._atomic_write(self.resolve(rel, writing=True), text.encode("utf-8"))

    def write_bytes(self, rel: str, data: bytes) -> str:
        with self._writing(rel), self.lock(rel):
            return self._atomic_write(self.resolve(rel, writing=True), data)

    @contextlib.contextmanager
    def _writing(self, rel: str) -> Iterator[None]:
        """A refusal of the file system (full, read-only, denied) as a StorageError naming
        the vault path, not an OSError with the absolute one."""
        try:
            yield
        except OSError as exc:
            if exc.errno not in _STORAGE_ERRNOS:
                raise
            raise StorageError(printable(rel), exc.strerror or type(exc).__name__) from exc

    def create(self, rel: str, text: str | bytes) -> str:
        """Create a new file; NoteExists if it is already there (a lost race).

        The bytes go to a fsynced temp file first, then `os.link` puts it at the path: atomic,
        and it refuses an existing path like O_EXCL. So a crash leaves no note or the whole
        note (a stale temp file is swept by `scan`), never a torn one a retry can't replace.
        """
        with self._writing(rel):
            return self._create(rel, _bytes(text))

    def _create(self, rel: str, data: bytes) -> str:
        path = self.resolve(rel, writing=True)
        norm = self.normalize(rel)
        if os.path.lexists(path):
            raise NoteExists(norm)  # cheap early refusal; the link below is the real check
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = _fsynced_temp(path.parent, data)
        try:
            os.chmod(tmp, 0o644)
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise NoteExists(norm) from None
            except OSError as exc:
                if exc.errno not in _NO_HARD_LINKS:
                    raise
                self._create_without_link(rel, norm, path, tmp)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        _fsync_dir(path.parent)
        return stamp_of(data)

    def _create_without_link(self, rel: str, norm: str, path: Path, tmp: str) -> None:
        """For file systems without hard links: rename under the per-file lock that every
        store writer takes, after checking the path is still free."""
        with self.lock(rel):
            if os.path.lexists(path):
                raise NoteExists(norm)
            os.replace(tmp, path)

    def write_if_unchanged(self, rel: str, text: str | bytes, stamp: str | None) -> str:
        """CAS write: replace only if the file still has `stamp` (None = must not exist yet).

        Writers outside the store (an editor appending in place, Obsidian truncating and
        rewriting) take no lock: what they write between our check and our rename would
        land in the old inode and vanish with it. So the old file stays open across the
        rename and is compared afterwards; if it changed, the other writer's version is put
        back (`_keep_late_writes`) and the write reports StampChanged, to be redone.
        """
        norm = self.normalize(rel)
        with self._writing(rel), self.lock(rel):
            path = self.resolve(rel, writing=True)
            try:
                old_fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
            except FileNotFoundError:
                old_fd = None
            try:
                checked = pread_all(old_fd) if old_fd is not None else None
                current = stamp_of(checked) if checked is not None else None
                if current != stamp:
                    raise StampChanged(norm, stamp or "absent", current)
                data = encode_like(text, checked)
                new_stamp = self._atomic_write(path, data)
                if old_fd is not None and checked is not None:
                    if self._keep_late_writes(path, old_fd, checked, data):
                        raise StampChanged(norm, stamp or "absent", self.stamp(norm))
                    self.late_appends.watch(old_fd, path, checked, lambda: self.lock(rel))
                return new_stamp
            finally:
                if old_fd is not None:
                    os.close(old_fd)

    def _keep_late_writes(self, path: Path, old_fd: int, checked: bytes, ours: bytes) -> bool:
        """After renaming `ours` over a file we had read as `checked`: if somebody wrote into
        that file meanwhile (it is still open here), rebuild the path as their version plus
        whatever was appended to ours since, and keep doing so while late writes land in
        what we replace. True if our write had to give way (the caller reports a conflict).
        """
        theirs = pread_all(old_fd)
        if theirs == checked:
            time.sleep(LATE_WRITE_GRACE)  # a writer that opened it just before the rename
            theirs = pread_all(old_fd)
        if theirs == checked:
            return False
        cur_fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        watched = [[old_fd, len(theirs)]]     # replaced files and how much of them we used
        fds = [cur_fd]
        try:
            prefix, skip = theirs, len(ours)
            for _ in range(20):
                cur_fd, known, tail_end = self._rebuild(path, prefix, cur_fd, skip)
                fds.append(cur_fd)
                watched.append([fds[-2], tail_end])
                late = b""
                for _pass in range(2):  # the second pass after the grace period
                    for entry in watched:
                        data = pread_all(entry[0])
                        late += data[entry[1]:]
                        entry[1] = max(entry[1], len(data))
                    if late:
                        break
                    time.sleep(LATE_WRITE_GRACE)
                if not late:
                    return True
                prefix, skip = known + late, len(known)
            log.warning("%s kept changing while a write was undone; check it by hand", path.name)
            return True
        finally:
            for fd in fds:
                os.close(fd)

    def _rebuild(self, path: Path, prefix: bytes, cur_fd: int, skip: int) -> tuple[int, bytes, int]:
        """Replace `path` by `prefix` + what the current file (`cur_fd`) holds past `skip`.

        The prefix is written and fsynced first; the tail is read as late as possible, just
        before the rename, so writers appending meanwhile have a window of microseconds (the
        next pass of `_keep_late_writes` catches them). Returns (fd of the new file, its
        content, how far into the replaced file the tail went)."""
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
        try:
            os.write(fd, prefix)
            os.fsync(fd)
            os.chmod(tmp, stat.S_IMODE(os.fstat(cur_fd).st_mode) & 0o666)
            current = pread_all(cur_fd)
            tail = current[skip:]
            os.write(fd, tail)
            os.replace(tmp, path)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        os.fsync(fd)
        _fsync_dir(path.parent)
        return fd, prefix + tail, len(current)

    def cas_edit(self, rel: str, edit: Callable[[Any], str | None],
                 max_redos: int = MAX_REDOS, *, stamp: str | None = None,
                 create: bool = False, dry_run: bool = False) -> CasResult:
        """DESIGN §5 CAS: read + stamp, plan with `edit(text)`, write only if the stamp holds.

        `edit` returns the new text, or None for "nothing to do", and raises to refuse. A
        changed stamp discards the plan and calls `edit` again on the new text, at most
        `max_redos` times; then `StampChanged` (with `redos`) is raised and nothing is
        written. With `stamp` (the caller's own read), the file must still have it and the
        edit is never redone on text the caller has not seen. With `create`, a missing file
        is `edit(None)` and is created with O_EXCL (a lost race becomes an update).
        """
        norm = self.normalize(rel)

        def attempt(redo: int) -> CasResult:
            text, current = self._read_for_edit(norm, create)
            if stamp is not None and current != stamp:
                raise StampChanged(norm, stamp, current)
            new = edit(text)
            if new is None or new == text:
                return CasResult("unchanged", current, text, redo)
            if dry_run:
                return CasResult("dry_run", current, new, redo)
            if current is None:
                try:
                    return CasResult("written", self.create(norm, new), new, redo)
                except NoteExists:
                    raise StampChanged(norm, "absent", self.stamp(norm)) from None
            return CasResult("written", self.write_if_unchanged(norm, new, current), new, redo)

        return redo_on_stamp_change(attempt, 0 if stamp is not None else max_redos)

    def _read_for_edit(self, norm: str, create: bool) -> tuple[str | None, str | None]:
        try:
            return self.read_stamped(norm)
        except NoteNotFound:
            if not create or self.resolve(norm).exists():
                raise
            return None, None

    def write_internal(self, name: str, data: bytes) -> Path:
        """Atomic write of `<internal>/<name>` (derived state such as a journal, never a
        note; the internal folder is `.reme/` or a read-only vault's cache)."""
        path = self.internal / name
        self._atomic_write(path, data)
        return path

    def edit_internal(self, name: str, edit: Callable[[str | None], str | None]) -> str | None:
        """Read-modify-write of `<internal>/<name>` as one atomic step; returns the text now.

        For small bookkeeping files several processes update (the synchronizer's turn
        ledger): the file's lock makes the read, `edit` and the write one compare-and-swap,
        so no update is lost and none is redone. `edit` gets the text (None: no file yet)
        and returns the new text, or None to leave the file as it is.
        """
        path = self.internal / name
        with self._flock(f"internal:{name}"):
            old = path.read_text(encoding="utf-8") if path.is_file() else None
            new = edit(old)
            if new is None or new == old:
                return old
            self._atomic_write(path, new.encode("utf-8"))
            return new

    def delete(self, rel: str, stamp: str | None = None) -> None:
        """Delete a file; with `stamp`, only while it still has those bytes (compare and
        delete under the per-file lock every store writer takes)."""
        path = self.resolve(rel, writing=True)
        if not path.is_file():
            raise NoteNotFound(self.normalize(rel), self.suggest(rel))
        with self._writing(rel), self.lock(rel):
            if stamp is not None:
                current = stamp_of(path.read_bytes()) if path.is_file() else None
                if current != stamp:
                    raise StampChanged(self.normalize(rel), stamp, current)
            path.unlink()
        self._prune_empty_dirs(path.parent)

    def move(self, src: str, dst: str, overwrite: bool = False) -> None:
        source, target = self.resolve(src, writing=True), self.resolve(dst, writing=True)
        if not source.is_file():
            raise NoteNotFound(self.normalize(src), self.suggest(src))
        if target.exists() and not overwrite:
            raise NoteExists(self.normalize(dst))
        with self._writing(dst):
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
        replace_file(path, data)
        return stamp_of(data)

    def _prune_empty_dirs(self, folder: Path) -> None:
        while folder != self.root and self.root in folder.parents:
            try:
                folder.rmdir()
            except OSError:
                return
            folder = folder.parent


def replace_file(path: Path, data: bytes) -> None:
    """Create or replace `path` atomically: a fsynced temp file in the same folder, renamed
    over it. Readers see the old bytes or the new ones, never a torn file. Also the writer of
    files outside a vault that must not be torn (`export-agents`: `.mcp.json`, agent files)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _fsynced_temp(path.parent, data)
    try:
        # Keep the old read/write bits, never an executable one: a tool rewriting a
        # file must not leave behind something the system would run.
        mode = stat.S_IMODE(path.stat().st_mode) & 0o666 if path.exists() else 0o644
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _fsynced_temp(folder: Path, data: bytes) -> str:
    """A new temp file in `folder` holding `data`, fsynced; the caller links or renames it
    into place (and removes it if that fails)."""
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return tmp


def printable(text: str) -> str:
    """`text` with lone surrogates shown as escapes, so a message about it can be encoded."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _wanted(extensions: tuple[str, ...]) -> Callable[[str], bool]:
    return lambda name: name.lower().endswith(extensions)


def is_hidden(name: str) -> bool:
    """A dot name (`.git`, `.Obsidian`, `.REME`): it belongs to another program."""
    return name.startswith(".")


def hidden_reason(name: str) -> str:
    return (f"{name!r} is hidden (a dot name); hidden folders such as .git/, .obsidian/ and "
            ".reme/ belong to other programs, and tools never read or change them")


def _fold(name: str) -> str:
    """A name as a person compares it: letter case, Unicode normalisation and compatibility
    forms (full-width `ＡＢＣ１`, `①`, the `ﬁ` ligature) folded away (NFKC + casefold)."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())


def fs_fold(name: str) -> str:
    """A name as case- and normalisation-insensitive file systems (macOS, Windows) compare it."""
    return unicodedata.normalize("NFC", name).casefold()


def control_char(text: str) -> str | None:
    """The first C0/C1 control character or DEL in `text`, if any."""
    return next((c for c in text if ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0), None)


def name_problem(name: str) -> str | None:
    """Why a file name found on disk cannot become a vault path, or None."""
    if not is_utf8(name):
        return NOT_UTF8_NAME
    bad = control_char(name)
    if bad is not None:
        return f"the file name holds the control character U+{ord(bad):04X}; rename it"
    return None


def is_utf8(name: str) -> bool:
    """False for a name the OS gave back with undecodable bytes (surrogate escapes)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shown(path: str, root: Path) -> str:
    """A vault-relative path with undecodable bytes shown as escapes, e.g. 'caf\\xe9/n.md'."""
    rel = os.path.relpath(path, root)
    text = os.fsencode(rel).decode("utf-8", "backslashreplace").replace(os.sep, "/")
    return "".join(f"\\x{ord(c):02x}" if control_char(c) else c for c in text)


def _shorten(text: str, limit: int = 60) -> str:
    text = printable(text)
    return text if len(text) <= limit else text[:limit - 3] + "..."


_NO_HARD_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.EXDEV}
_STORAGE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM,
                   errno.EIO, errno.EFBIG, errno.ENOTDIR, errno.EISDIR}


LATE_WRITE_GRACE = 0.003
"""Seconds a CAS write waits before its last look at the file it replaced (see
`FileStore._keep_late_writes`): a writer that opened it just before the rename is caught."""


def _report_skip(shown: str, why: str, skipped: list[tuple[str, str]] | None) -> None:
    """A file a listing leaves out: into `skipped` when the caller collects them, else logged."""
    if skipped is None:
        log.warning("skipped %s: %s", shown, why)
    else:
        skipped.append((shown, why))


def _bytes(content: str | bytes) -> bytes:
    return content.encode("utf-8") if isinstance(content, str) else content


UTF8_BOM = b"\xef\xbb\xbf"


def encode_like(content: str | bytes, old: bytes | None) -> bytes:
    """The bytes of a rewrite of a file that held `old`: text that was read without the
    file's UTF-8 byte-order mark (`decode_text` drops it) gets it back, so an edit does not
    change a byte the writer never saw. Bytes are written as given."""
    data = _bytes(content)
    if isinstance(content, str) and old is not None and old.startswith(UTF8_BOM) \
            and not data.startswith(UTF8_BOM):
        return UTF8_BOM + data
    return data


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
