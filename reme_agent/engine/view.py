"""A consistent view of the vault: every file, every note's names and links, a resolver.

DESIGN §4 (resolution over every file), §5 (a multi-file plan is made against one view and
every stamp it read is checked before anything is written).

Tools, lint, maintenance, auto-link and the transaction plan against the files as they are
*now*, not as the index last saw them: a note whose size and mtime still match its index
row is taken from the row (cheap on an indexed vault), any other note is read and parsed.
The resolver knows every file (a link to an image or a PDF is not dangling) plus the notes'
aliases; `after` gives the resolver a planned rename or removal would leave behind.
A note's embeds and Markdown links (`refs`) are not edges and not in the index rows: they
are read from the file the first time a plan asks (measured in `bench/bench_move_refs.py`).
Which notes a change may touch (`names_any`) needs only their keys, which the index keeps
(`refkeys`): a note whose row still matches its stat is not read for them.
Links in its frontmatter values (`props`) come from its frontmatter, with no read.
Built with a `ViewMemo` (`Vault.view`), a view reads only the notes changed since the
process's last view, and makes a note's `NoteMeta` only when asked (`engine.viewmemo`).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from reme_agent.engine.codec import HANDLER
from reme_agent.engine.links import (
    LINK,
    MARKDOWN,
    Link,
    LinkResolver,
    extract_links,
    line_kinds,
    link_key,
    property_links,
)
from reme_agent.engine.names import LinkNames, link_names, note_title, resolver_over
from reme_agent.engine.parser import normalize_eol, split_note
from reme_agent.engine.store import decode_text, stamp_of
from reme_agent.engine.tags import body_tags
from reme_agent.errors import NoteNotFound, NotText, PathEscape

if TYPE_CHECKING:
    from reme_agent.engine.state import FileRow
    from reme_agent.engine.store import FileStore
    from reme_agent.engine.viewmemo import Known, ViewMemo

log = logging.getLogger("reme_agent.engine")

__all__ = ["LinkRef", "NoteMeta", "RefKeys", "VaultView", "note_meta", "safe_rows"]

RefKeys = Callable[[list[str]], Mapping[str, tuple[int, int, "tuple[str, ...] | None"]]]
"""Paths -> (size, mtime_ns, reference keys) as indexed (`indexer.indexed_ref_keys`)."""


@dataclass(frozen=True)
class LinkRef:
    """One link of a note, as the index stores it (file line, no offsets)."""

    target: str
    alias: str | None
    predicate: str | None
    line: int


@dataclass
class NoteMeta:
    """What a plan needs of one note: frontmatter, links, and the stamp it was read at."""

    path: str
    frontmatter: dict[str, Any]
    links: list[LinkRef] = field(default_factory=list)
    error: str | None = None
    stamp: str | None = None      # sha256 of the bytes these values come from (None: unread)
    size: int = 0
    mtime_ns: int = 0
    body_tags: list[str] = field(default_factory=list)   # inline `#tags` (`engine.tags`)

    @property
    def title(self) -> str:
        return note_title(self.path, self.frontmatter, "")


def safe_rows(rows: Callable[[], Mapping[str, FileRow]]) -> dict[str, FileRow]:
    """The index rows, or {} when the index cannot be read: a broken index only costs
    speed here (every note is parsed), never correctness."""
    try:
        return dict(rows())
    except Exception as exc:
        log.warning("index state unavailable (%s); parsing every note", exc)
        return {}


def note_meta(store: FileStore, path: str, row: FileRow | None = None,
              stat: tuple[int, int] | None = None, max_bytes: int | None = None) -> NoteMeta:
    """One note: from its index `row` while size and mtime still match, else parsed.

    `stat` is (size, mtime_ns) when the caller already has it (a scan); else the file is
    stat'ed here when there is a row to compare. A file over `max_bytes` (the indexer's
    `max_file_bytes`) is not read: the indexer skips it too, so it is no link source
    anywhere, and parsing a 50 MB note took ~25 s on every call that built a view.
    """
    if stat is None and (row is not None or max_bytes is not None):
        stat = _stat(store, path)   # one stat serves both checks
    if max_bytes is not None and stat is not None and stat[0] > max_bytes:
        return NoteMeta(path, {}, [], f"{stat[0]} bytes is over the {max_bytes}-byte limit "
                        "for notes (index.max_file_bytes); not read", None, stat[0], stat[1])
    if row is not None and stat == (row.size, row.mtime_ns):
        return NoteMeta(path, row.frontmatter,
                        [LinkRef(d["target"], d.get("alias"), d.get("predicate"),
                                 d.get("line", 0)) for d in row.links],
                        row.error, row.stamp, row.size, row.mtime_ns, row.tags)
    try:
        data = store.read_bytes(path)
        text = decode_text(data, path)
    except (NotText, NoteNotFound, PathEscape) as exc:
        return NoteMeta(path, {}, [], str(exc))
    parts = split_note(text, path)
    kinds = line_kinds(parts.body.split("\n"))   # one structure scan for links and tags
    links = [LinkRef(x.target, x.alias, x.predicate, x.line)
             for x in extract_links(parts.body, parts.body_start, kinds=kinds)]
    size, mtime = stat if stat is not None else (len(data), 0)
    return NoteMeta(path, parts.frontmatter, links, str(parts.error) if parts.error else None,
                    stamp_of(data), size, mtime, body_tags(parts.body, kinds))


def _refs_of(store: FileStore, meta: NoteMeta | None) -> tuple[list[Link], bool]:
    """(refs, whether they come from the bytes `meta` describes: its stamp)."""
    if meta is None or meta.stamp is None:   # unreadable, or over the size limit: not read
        return [], True
    try:
        data = store.read_listed(meta.path)   # a path the view's listing holds
        if data is None:
            return [], False
        current = stamp_of(data) == meta.stamp
        if b"![[" not in data and b"](" not in data and b"]:" not in data:   # most notes
            return [], current
        text = normalize_eol(decode_text(data, meta.path).removeprefix("\ufeff"))
    except (OSError, NotText, NoteNotFound, PathEscape):
        return [], False
    # The body as `split_note` cuts it, without loading the YAML again: a note whose
    # frontmatter was refused (`meta.error`) is all body, as the indexer reads it.
    found = None if meta.error else HANDLER.locate(text)
    body = text[found[2]:] if found is not None else text
    first = text.count("\n", 0, found[2]) + 1 if found is not None else 1   # file lines
    return [x for x in extract_links(body, first, refs=True) if x.kind != LINK], current


def _keys_of(targets: Iterable[str]) -> tuple[str, ...] | None:
    """The `link_key`s of these targets (interned: a memo holds them for every note), or
    None when one has none (such a note is checked always)."""
    keys = set()
    for target in targets:
        key = link_key(target)
        if key is None:
            return None
        keys.add(sys.intern(key))
    return tuple(keys)


def _stat(store: FileStore, path: str) -> tuple[int, int] | None:
    try:
        st = store.resolve(path).stat()
    except (OSError, PathEscape):
        return None
    return st.st_size, st.st_mtime_ns


class VaultView:
    """Every file, every note's frontmatter and links, and a resolver over them, as of now.

    `notes` holds the files with one of `extensions` (the ones the indexer parses); a note
    over `max_bytes` is listed without frontmatter or links, as the indexer skips it.
    """

    def __init__(self, store: FileStore,
                 rows: Mapping[str, FileRow] | Callable[[list[str]], Mapping[str, FileRow]],
                 extensions: Iterable[str], max_bytes: int | None = None, *,
                 memo: ViewMemo | None = None, ref_keys: RefKeys | None = None) -> None:
        """`rows`: the index rows, or a function giving the rows of the paths it is asked
        for; `memo`: what this process saw in earlier views (`engine.viewmemo`), so only
        the notes changed since are read; `ref_keys`: the keys of the notes' references as
        indexed, asked once for the notes whose keys no memo holds (None: read them)."""
        self.store = store
        self._ref_keys = ref_keys
        self._indexed: Mapping[str, tuple[int, int, tuple[str, ...] | None]] | None = None
        exts = tuple(e.lower() for e in extensions)
        self._known: dict[str, Known] = {}
        self.notes: Mapping[str, NoteMeta]
        if memo is not None:
            fetch = rows if callable(rows) else lambda paths: {
                p: r for p in paths if (r := rows.get(p)) is not None}

            def make(p: str, row: FileRow | None, stat: tuple[int, int] | None) -> NoteMeta:
                return note_meta(store, p, row, stat, max_bytes)

            self.files, self.notes, resolver, self._known = memo.refresh(store, exts, fetch, make)
            self.__dict__["resolver"] = resolver
        else:
            self.files = store.list()
            every = rows(self.files) if callable(rows) else rows
            stats = {p: (size, mtime) for p, size, mtime in store.scan(exts, skipped=[])}
            self.notes = {p: note_meta(store, p, every.get(p), stats.get(p), max_bytes)
                          for p in self.files if p.lower().endswith(exts)}
        self._refs: dict[str, list[Link]] = {}
        self._props: dict[str, list[Link]] = {}
        self._keys: dict[str, tuple[str, ...] | None] = {}

    def refs(self, path: str) -> list[Link]:
        """The embeds and Markdown links of a note's body, read from its file once per view
        ([] for a file that could not be read or is over the size limit, as for links)."""
        found = self._refs.get(path)
        if found is None:
            known = self._known.get(path)
            if known is not None and known.refs is not None:
                found = known.refs
            else:
                found, current = _refs_of(self.store, self.notes.get(path))
                if known is not None and current:
                    known.refs = found   # read from the bytes this entry describes
            self._refs[path] = found
        return found

    def props(self, path: str) -> list[Link]:
        """The wikilinks and embeds in a note's frontmatter values (`links.property_links`):
        no edges, but a move keeps them on their file. Read from the note's frontmatter as
        the view has it (the index row while it matches): no file read."""
        found = self._props.get(path)
        if found is None:
            meta = self.notes.get(path)
            fm = meta.frontmatter if meta is not None else {}
            found = self._props[path] = property_links(fm) if isinstance(fm, dict) else []
        return found

    def names_any(self, path: str, keys: set[str]) -> bool:
        """Whether a link, reference or property link of the note at `path` has a
        `link_key` in `keys`, or one no key can say (`[[../]]`): the notes a change of
        those names may touch."""
        if not keys:
            return False
        found = self._keys.get(path, False)
        if found is False:
            known = self._known.get(path)
            if known is not None and known.keys is not False:
                found = known.keys
            else:
                meta = self.notes.get(path)
                found = _keys_of([x.target for x in meta.links] if meta else [])
                # Embeds, Markdown links and property links: as indexed while the row is
                # the file's (`_indexed_keys`), else from the frontmatter and the file.
                indexed = self._indexed_keys(meta) if found is not None else False
                more = indexed
                if found is not None and indexed is False:
                    more = _keys_of([x.target for x in self.props(path)])
                    if more is not None:
                        refs = _keys_of([x.target for x in self.refs(path)])
                        more = None if refs is None else (*more, *refs)
                if found is not None:
                    found = None if more is None else tuple({*found, *more})
                if known is not None and (found is None or indexed is not False
                                          or known.refs is not None):
                    known.keys = found   # refs of the bytes the entry describes
            self._keys[path] = found
        return found is None or not keys.isdisjoint(found)

    def _indexed_keys(self, meta: NoteMeta | None) -> tuple[str, ...] | None | bool:
        """The note's reference keys as indexed, when its row's size and mtime are the
        file's as this view found it (the rule a row is trusted by: the keys were taken
        from these bytes); False when the index cannot say. The first call asks the index
        once for every note whose keys the memo lacks."""
        if self._ref_keys is None or meta is None or meta.stamp is None:
            return False
        if self._indexed is None:
            wanted = [p for p in self.notes
                      if (k := self._known.get(p)) is None or k.keys is False]
            try:
                self._indexed = self._ref_keys(wanted)
            except Exception as exc:   # a broken index costs speed here, not correctness
                log.warning("indexed reference keys unavailable (%s); reading notes", exc)
                self._indexed = {}
        got = self._indexed.get(meta.path)
        if got is None or (got[0], got[1]) != (meta.size, meta.mtime_ns):
            return False
        return got[2]

    @cached_property
    def resolver(self) -> LinkResolver:
        return resolver_over(self.files, {p: m.frontmatter for p, m in self.notes.items()})

    def resolve(self, link: LinkRef | str, source: str) -> str | None:
        """The path a link (or a raw target) in `source` names now, or None (dangling)."""
        return self.resolver.resolve(link if isinstance(link, str) else link.target, source)

    def title(self, path: str) -> str:
        meta = self.notes.get(path)
        return note_title(path, meta.frontmatter if meta else {}, "")

    def inbound(self, target: str) -> list[tuple[str, LinkRef]]:
        """(source, link) for every link in another note that resolves to `target`."""
        return [(src, link) for src, meta in self.notes.items() if src != target
                for link in meta.links if self.resolve(link, src) == target]

    def references_to(self, target: str) -> list[tuple[str, Link, str | None]]:
        """(source, reference, property key or None) for every embed, Markdown link and
        frontmatter-value link in another note that names `target` now: what `inbound`
        (edges only) leaves out. Only notes naming one of `target`'s keys are read."""
        keys = self.resolver.keys_of(target)
        found: list[tuple[str, Link, str | None]] = []
        for source in self.notes:
            if source == target or not self.names_any(source, keys):
                continue
            for ref in self.refs(source):
                if self.resolver.resolve(ref.target, source,
                                         markdown=ref.kind == MARKDOWN) == target:
                    found.append((source, ref, None))
            if self.props(source):
                fm = self.notes[source].frontmatter
                for key, value in fm.items():
                    found += [(source, x, key) for x in property_links({key: value})
                              if self.resolver.resolve(x.target, source) == target]
        return found

    def after(self, path_map: Mapping[str, str],
              aliases: Mapping[str, Iterable[str]] | None = None,
              added: Mapping[str, Iterable[str]] | None = None,
              removed: Iterable[str] = (),
              frontmatters: Mapping[str, dict[str, Any]] | None = None) -> LinkResolver:
        """The resolver once a planned change is applied: `path_map` renames (old -> new; a
        target already present means the old file is merged into it), `aliases` replace
        some notes' aliases, `added` are new files (path -> aliases), `removed` are gone,
        `frontmatters` replace some notes' frontmatter (their aliases and redirects).

        Derived from `resolver` (`LinkResolver.derive`): only the paths the change names
        are written, so its cost follows the change, not the vault."""
        gone = set(removed)
        renamed = {p: t for p, t in path_map.items() if p in self._file_set}
        touched = set(path_map) | set(path_map.values()) | gone | set(aliases or {}) | set(
            added or {}) | set(frontmatters or {})
        into: dict[str, list[str]] = {}    # new path -> notes whose names go there
        for p, t in renamed.items():
            if p in self.notes:
                into.setdefault(t, []).append(p)
        order = self._order(into)
        add: dict[str, tuple[list[str], list[str]]] = {}
        for x in touched:
            present = x not in gone and (
                x in (added or {}) or x in into or any(t == x for t in renamed.values())
                or (x in self._file_set and renamed.get(x, x) == x))
            if not present:
                continue
            sources = into.get(x, [])
            if x in self.notes and renamed.get(x, x) == x:
                sources = [x, *sources]
            names = (link_names(self.notes[max(sources, key=order)].frontmatter)
                     if sources else None)
            if frontmatters and x in frontmatters:
                names = link_names(frontmatters[x])
            if aliases and x in aliases:
                names = LinkNames(list(aliases[x]), names.redirects if names else [])
            if added and x in added:
                names = LinkNames(list(added[x]), [])
            add[x] = (names.aliases, names.redirects) if names else ([], [])
        return self.resolver.derive(touched, add)

    def rebuilt_after(self, path_map: Mapping[str, str],
                      aliases: Mapping[str, Iterable[str]] | None = None,
                      added: Mapping[str, Iterable[str]] | None = None,
                      removed: Iterable[str] = (),
                      frontmatters: Mapping[str, dict[str, Any]] | None = None
                      ) -> LinkResolver:
        """What `after` returns, built over every file as `after` did before session 7: the
        slow, plainly correct form `after` is checked against (tests, `bench_move_refs`)."""
        gone = set(removed)
        names: dict[str, LinkNames] = {}
        for p, m in self.notes.items():
            names[path_map.get(p, p)] = link_names(m.frontmatter)
        for p, fm in (frontmatters or {}).items():
            names[p] = link_names(fm)
        for p, a in (aliases or {}).items():
            names[p] = LinkNames(list(a), names[p].redirects if p in names else [])
        for p, a in (added or {}).items():
            names[p] = LinkNames(list(a), [])
        files = ({path_map.get(p, p) for p in self.files} | set(added or {})) - gone
        return LinkResolver(sorted(files), {p: names[p].aliases for p in files if p in names},
                            {p: names[p].redirects for p in files if p in names})

    def _order(self, into: Mapping[str, list[str]]) -> Callable[[str], int]:
        """Where each note sits in `notes`: when several notes' names land on one path (a
        merge), the one listed last gives them, as the whole rebuild did."""
        if not any(len(v) > 1 or t in self.notes for t, v in into.items()):
            return lambda p: 0
        where = {p: i for i, p in enumerate(self.notes)}
        return where.__getitem__

    @cached_property
    def _file_set(self) -> frozenset[str]:
        return frozenset(self.files)
