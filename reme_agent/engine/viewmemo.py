"""What one process learned about each note between views, keyed by its size and mtime.

Move speed (session 7): a `move` built a whole `VaultView` (every folder listed, every
index row decoded, every note's links converted, a resolver over every file) and read every
note for embeds, twice-ish per call: ~2 s at 10k notes, linear. Between two tool calls
almost nothing changes, so a `Vault` keeps one `ViewMemo`, and a view built with it costs
what changed since the last one:

- the folder walk keeps the indexer's folder listings (`FileStore.scan_cached`: a stat per
  folder and per file, no listing of an unchanged folder);
- per note, what a plan asks of every note: its link names (for the resolver), the keys of
  its links and references (`VaultView.names_any`) and its embeds and Markdown links
  (`VaultView.refs`). Kept small on purpose (no links, no frontmatter: ~25 MB at 100k);
- the resolver over every file, derived from the last one (`LinkResolver.derive`) with the
  files added and removed and the notes whose names changed.

Everything is keyed by (size, mtime_ns), the key the index rows are trusted by, so a hand
edit (the stat moves) is read again from its file whatever the index says, and an index run
in another process changes nothing here. An entry is kept only once its mtime is
`RACY_SECONDS` old: a write in the same clock tick as the read would not move the mtime.
A note's full `NoteMeta` is made only when something asks for it (`VaultView.notes`).
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from reme_agent.engine.links import Link, LinkResolver
from reme_agent.engine.names import LinkNames, link_names
from reme_agent.engine.store import RACY_SECONDS

if TYPE_CHECKING:
    from reme_agent.engine.state import FileRow
    from reme_agent.engine.store import FileStore, FolderListing
    from reme_agent.engine.view import NoteMeta

__all__ = ["MEMO_FILE", "SAVE_EVERY", "Known", "LazyNotes", "ViewMemo"]

log = logging.getLogger("reme_agent.engine")

MEMO_FILE = "viewmemo.json"
"""In the vault's internal folder (`.reme/`, or a read-only vault's cache)."""
SAVE_EVERY = 60.0
_VERSION = 3   # 2: keys include reference definitions and property links; 3: definitions
#   after a thematic break, a setext heading or a callout line (sweep, session 8)
_NO_NAMES = LinkNames([], [])


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(x, str) for x in value)


@dataclass(slots=True)
class Known:
    """One note at one (size, mtime_ns): what later views reuse instead of reading it."""

    size: int
    mtime_ns: int
    names: LinkNames
    keys: tuple[str, ...] | None | bool = False   # False: not yet; None: a key no name says
    refs: list[Link] | None = None                # None: not read yet


class LazyNotes(Mapping[str, "NoteMeta"]):
    """`VaultView.notes` when a memo answered for most notes: each `NoteMeta` is made on
    first access (index row if it still matches the stat, else the file); a whole
    iteration fetches the missing rows in one query."""

    def __init__(self, paths: list[str], made: dict[str, NoteMeta],
                 make: Callable[[list[str]], dict[str, NoteMeta]]) -> None:
        self._paths = paths
        self._set = frozenset(paths)
        self._made = made
        self._make = make

    def __getitem__(self, path: str) -> NoteMeta:
        meta = self._made.get(path)
        if meta is None:
            if path not in self._set:
                raise KeyError(path)
            meta = self._made[path] = self._make([path])[path]
        return meta

    def __contains__(self, path: object) -> bool:
        return path in self._set

    def __iter__(self) -> Iterator[str]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)

    def _all(self) -> dict[str, NoteMeta]:
        missing = [p for p in self._paths if p not in self._made]
        if missing:
            self._made.update(self._make(missing))
        return self._made

    def items(self):  # type: ignore[override]
        made = self._all()
        return [(p, made[p]) for p in self._paths]

    def values(self):  # type: ignore[override]
        made = self._all()
        return [made[p] for p in self._paths]


class ViewMemo:
    """Per `Vault`: the folder listings, the notes as last seen, and the resolver over them.

    Views are built one at a time through it (its lock), so the resolver it keeps always
    matches the files and names it keeps. With `load`/`save` (the Vault wires
    `<internal>/viewmemo.json`), the notes' entries outlive the process: a one-shot CLI call
    starts from what the last process saw (`save` on close, and at most every
    `SAVE_EVERY` seconds while views are built). Entries are keyed by stat, so one saved by
    any process is valid for any other; a file that cannot be read or parsed is ignored.
    """

    def __init__(self, load: Callable[[], bytes | None] | None = None,
                 save: Callable[[bytes], object] | None = None) -> None:
        self.lock = threading.Lock()
        self.listings: dict[str, FolderListing] = {}
        self.notes: dict[str, Known] = {}
        self._resolver: LinkResolver | None = None
        self._files: frozenset[str] = frozenset()
        self._names: dict[str, LinkNames] = {}     # notes with names, as in `_resolver`
        self._load, self._save = load, save
        self._restored = load is None
        self._dirty = False      # entries came or went since the last save
        self._keyed = 0          # entries with keys at the last save (or restore)
        self._saved_at = time.monotonic()

    def clear(self) -> None:
        """Forget everything (the saved file is not read again by this memo)."""
        with self.lock:
            self.listings, self.notes, self._resolver = {}, {}, None
            self._restored = True

    def save(self) -> None:
        """Write the entries for the next process, if a view was built since the last save
        (a failure is logged: it is a cache)."""
        with self.lock:
            self._write()

    def _write(self) -> None:
        # Written only when entries came or went, or keys were filled in since the last save:
        # a call that changed nothing costs no write (~45 ms at 10k notes).
        keyed = sum(1 for e in self.notes.values() if e.keys is not False)
        if not self._dirty and keyed == self._keyed:
            return
        if self._save is None:
            return
        self._keyed = keyed
        rows = [[p, e.size, e.mtime_ns, e.names.aliases, e.names.redirects,
                 list(e.keys) if isinstance(e.keys, tuple) else e.keys]
                for p, e in self.notes.items()]
        try:
            self._save(json.dumps({"version": _VERSION, "notes": rows}, ensure_ascii=False,
                                  separators=(",", ":")).encode("utf-8"))
        except Exception as exc:   # a read-only cache folder, a full disk: next time
            log.info("view memo not saved: %s", exc)
        self._dirty = False
        self._saved_at = time.monotonic()

    def _restore(self) -> None:
        self._restored = True
        try:
            raw = self._load() if self._load is not None else None
            if not raw:
                return
            data = json.loads(raw)
            if not isinstance(data, dict) or data.get("version") != _VERSION:
                return
            notes: dict[str, Known] = {}
            for path, size, mtime, aliases, redirects, keys in data["notes"]:
                if not (isinstance(path, str) and type(size) is int and type(mtime) is int
                        and _strings(aliases) and _strings(redirects)
                        and (keys is None or keys is False or _strings(keys))):
                    return   # not what this code writes: use none of it
                names = LinkNames(aliases, redirects) if aliases or redirects else _NO_NAMES
                notes[path] = Known(size, mtime, names, keys if keys is None or keys is False
                                    else tuple(sys.intern(k) for k in keys))
        except Exception as exc:   # unreadable, truncated, another format: start empty
            log.info("view memo not read: %s", exc)
            return
        self.notes = notes
        self._keyed = sum(1 for e in notes.values() if e.keys is not False)

    def refresh(self, store: FileStore, exts: tuple[str, ...],
                rows: Callable[[list[str]], Mapping[str, FileRow]],
                make: Callable[[str, FileRow | None, tuple[int, int] | None], NoteMeta],
                ) -> tuple[list[str], LazyNotes, LinkResolver, dict[str, Known]]:
        """(files, notes, resolver, known) of the vault as it is now."""
        with self.lock:
            try:
                return self._refresh(store, exts, rows, make)
            except BaseException:
                self.listings, self.notes, self._resolver = {}, {}, None
                raise

    def _refresh(self, store: FileStore, exts: tuple[str, ...],
                 rows: Callable[[list[str]], Mapping[str, FileRow]],
                 make: Callable[[str, FileRow | None, tuple[int, int] | None], NoteMeta],
                 ) -> tuple[list[str], LazyNotes, LinkResolver, dict[str, Known]]:
        if not self._restored:
            self._restore()
        if time.monotonic() - self._saved_at > SAVE_EVERY:
            self._write()   # what earlier views learned (keys are filled in after a view)
        found, self.listings = store.scan_cached(("",), self.listings, None)
        files = sorted(p for p, _, _ in found)
        stats = {p: (size, mtime) for p, size, mtime in found if p.lower().endswith(exts)}
        paths = [p for p in files if p in stats]
        old = self.notes
        known: dict[str, Known] = {}
        misses: list[str] = []
        for p in paths:
            entry = old.get(p)
            if entry is not None and (entry.size, entry.mtime_ns) == stats[p]:
                known[p] = entry
            else:
                misses.append(p)

        def build(wanted: list[str]) -> dict[str, NoteMeta]:
            got = rows(wanted)
            return {p: make(p, got.get(p), stats.get(p)) for p in wanted}

        made = build(misses) if misses else {}
        settled = time.time_ns() - int(RACY_SECONDS * 1e9)
        names = {p: e.names for p, e in known.items() if e.names is not _NO_NAMES}
        for p, meta in made.items():
            n = link_names(meta.frontmatter if isinstance(meta.frontmatter, dict) else {})
            n = n if n.aliases or n.redirects else _NO_NAMES
            if n is not _NO_NAMES:
                names[p] = n
            size, mtime = stats[p]
            if mtime < settled and meta.stamp is not None:
                known[p] = Known(size, mtime, n)
        file_set = frozenset(files)
        resolver = self._resolver
        if resolver is None:
            resolver = LinkResolver(files, {p: n.aliases for p, n in names.items()},
                                    {p: n.redirects for p, n in names.items() if n.redirects})
        else:
            changed = (self._files ^ file_set) | {
                p for p in made if names.get(p, _NO_NAMES) != self._names.get(p, _NO_NAMES)}
            resolver = resolver.derive(changed, {
                p: (n.aliases, n.redirects) for p in changed if p in file_set
                for n in [names.get(p, _NO_NAMES)]}, remember=False)
        self._resolver, self._files, self._names = resolver, file_set, names
        if len(known) != len(old) or any(old.get(p) is not e for p, e in known.items()):
            self._dirty = True
        self.notes = known
        return files, LazyNotes(paths, dict(made), build), resolver, known
