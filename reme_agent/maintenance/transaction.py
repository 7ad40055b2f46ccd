"""Multi-file CAS transactions and link retargeting for merge, split and archive moves (DESIGN §5).

DESIGN §5: "Multi-file operations (merge with inbound retargeting, split) check every stamp
first, write all, and roll back what was written if any step fails." `Transaction` does that
on top of the store's `read_stamped` / `write_if_unchanged` / `create` / `delete`: every file
the plan read is re-stamped before the first write (a change anywhere discards the whole
plan, and the caller redoes it from fresh reads), creates go first, then rewrites, then
deletes, and on any failure what was already done is restored byte for byte.

`VaultView` is the snapshot a plan is made against (index rows, every file, a resolver over
them); `retarget` rewrites, inside a transaction, every link whose meaning a rename or a
removal would change, keeping alias, anchor and predicate bytes (`engine.links`).

Decisions where DESIGN is silent:
- A retargeted bare short link (`[[loser]]`) gets the old text as its alias
  (`[[knowledge/winner/winner.md|loser]]`), so the sentence still reads the same; links with
  a path, an anchor or inside a table row keep exactly the bytes they had, as `move` does.
- The store has no compare-and-delete: a delete re-checks the stamp just before unlinking,
  which leaves a window of microseconds in which another writer's edit could be lost.
- Rollback writes the old bytes unconditionally (as the `move` tool does).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reme_agent.engine.links import (
    Link,
    LinkResolver,
    extract_links,
    rewrite_targets,
    target_key,
)
from reme_agent.engine.names import note_aliases, note_title
from reme_agent.engine.parser import split_note
from reme_agent.engine.store import decode_text, stamp_of
from reme_agent.errors import NoteExists, StampChanged, WriteConflict
from reme_agent.schema.layout import AUDIT, META, layer_of

if TYPE_CHECKING:
    from reme_agent.engine.state import FileRow
    from reme_agent.engine.store import FileStore
    from reme_agent.vault import Vault

log = logging.getLogger("reme_agent.maintenance")

__all__ = ["Transaction", "VaultView", "edge_keys", "retarget", "rewrite_links"]


# -- the snapshot a plan is made against ---------------------------------------------------


@dataclass
class VaultView:
    """Index rows of every note, every file path, and a resolver over them (toolkit semantics)."""

    rows: dict[str, FileRow]
    files: list[str]
    resolver: LinkResolver = field(repr=False)

    @classmethod
    def load(cls, vault: Vault) -> VaultView:
        rows = vault.state.files()
        files = vault.store.list()
        resolver = LinkResolver(files, {p: note_aliases(r.frontmatter) for p, r in rows.items()})
        return cls(rows, files, resolver)

    def title(self, path: str) -> str:
        row = self.rows.get(path)
        return note_title(path, row.frontmatter if row else {}, "")

    def links(self, path: str) -> list[dict[str, Any]]:
        row = self.rows.get(path)
        return row.links if row else []

    def inbound(self, target: str) -> list[tuple[str, dict[str, Any]]]:
        """(source, link) for every link in another note that resolves to `target`."""
        return [(src, link) for src, row in self.rows.items() if src != target
                for link in row.links if self.resolver.resolve(link["target"], src) == target]

    def after(self, path_map: Mapping[str, str],
              aliases: Mapping[str, Iterable[str]] | None = None,
              added: Mapping[str, Iterable[str]] | None = None) -> LinkResolver:
        """The resolver once `path_map` is applied (old -> new; a target already present
        means the old file is removed) with `aliases` replacing some notes' aliases and
        `added` new files (path -> aliases)."""
        names: dict[str, list[str]] = {}
        for p, r in self.rows.items():
            names[path_map.get(p, p)] = list(note_aliases(r.frontmatter))
        for p, a in (aliases or {}).items():
            names[p] = list(a)
        for p, a in (added or {}).items():
            names[p] = list(a)
        files = {path_map.get(p, p) for p in self.files} | set(added or {})
        return LinkResolver(sorted(files), {p: names.get(p, []) for p in files})


# -- retargeting ---------------------------------------------------------------------------


def _in_table(text: str, pos: int) -> bool:
    start = text.rfind("\n", 0, pos) + 1
    return text[start:pos].lstrip().startswith("|")


def rewrite_links(body: str, source: str, new_source: str, before: LinkResolver,
                  after: LinkResolver, path_map: Mapping[str, str],
                  force: Iterable[str] = ()) -> tuple[str, int]:
    """`body` with every link whose target's meaning changes rewritten to its full new path.

    A link that resolved (from `source`) to X must resolve (from `new_source`, with
    `after`) to path_map.get(X, X); links to a path in `force` are rewritten even when they
    would still resolve (e.g. through a new alias). Dangling links are left as written.
    """
    forced = set(force)
    count = 0

    def mapping(link: Link) -> str | None:
        nonlocal count
        was = before.resolve(link.target, source)
        if was is None:
            return None
        want = path_map.get(was, was)
        if was not in forced and after.resolve(link.target, new_source) == want:
            return None
        count += 1
        if (link.alias is None and link.anchor is None and "/" not in link.target
                and not _in_table(body, link.start)):
            return f"{want}|{link.target}"
        return want

    return rewrite_targets(body, mapping), count


def retarget(tx: Transaction, view: VaultView, path_map: Mapping[str, str], after: LinkResolver,
             *, force: Iterable[str] = (), exclude: Iterable[str] = (),
             immutable: Callable[[str], bool] | None = None) -> dict[str, int]:
    """Inside `tx`, rewrite the links of every other note that `path_map` would change.

    `exclude`: notes the caller rewrites itself. A note for which `immutable(path)` is true
    is never rewritten; if it needs a rewrite, WriteConflict is raised (nothing written yet).
    Returns {path: links rewritten}.
    """
    forced = frozenset(force)
    skipped = set(exclude)
    changed: dict[str, int] = {}
    for source, row in view.rows.items():
        if source in skipped or not row.links or layer_of(source) in (AUDIT, META):
            continue  # reports and signals are records of the past: never rewritten
        new_source = path_map.get(source, source)
        if not any(_needs(link["target"], source, new_source, view.resolver, after, path_map,
                          forced) for link in row.links):
            continue
        if immutable is not None and immutable(source):
            raise WriteConflict(f"{source!r} links to a file this change renames or removes, "
                                "and it is immutable.", "Leave these notes as they are.")
        text = tx.read(source)
        parts = split_note(text, source)
        head, body = parts.head, parts.body
        new_body, n = rewrite_links(body, source, new_source, view.resolver, after, path_map,
                                    forced)
        if new_body != body:
            tx.write(source, head + new_body)
            changed[source] = n
    return changed


def _needs(target: str, source: str, new_source: str, before: LinkResolver,
           after: LinkResolver, path_map: Mapping[str, str], forced: frozenset[str]) -> bool:
    was = before.resolve(target, source)
    if was is None:
        return False
    if was in forced:
        return True
    return after.resolve(target, new_source) != path_map.get(was, was)


def edge_keys(body: str, source: str, resolver: LinkResolver,
               path_map: dict[str, str] | None = None, *, raw_too: bool = False) -> set[tuple[str, str | None]]:
    """Resolved (target, predicate) edges of a body, mapped through `path_map`.

    Dangling targets are keyed by their normalised raw text; `raw_too` adds that key for
    resolved links as well, so a link dangling before a change and resolving after it
    (or the reverse) still counts as kept.
    """
    keys: set[tuple[str, str | None]] = set()
    for link in extract_links(body):
        hit = resolver.resolve(link.target, source)
        if hit is not None:
            keys.add(((path_map or {}).get(hit, hit), link.predicate))
        if hit is None or raw_too:
            keys.add(("\0" + target_key(link.target), link.predicate))
    return keys


# -- the transaction -----------------------------------------------------------------------


@dataclass
class _Seen:
    old: bytes | None     # None: the file did not exist when planned
    stamp: str | None


class Transaction:
    """A planned multi-file change: reads are stamped; commit checks all, writes all, or none."""

    def __init__(self, store: FileStore) -> None:
        self.store = store
        self._seen: dict[str, _Seen] = {}
        self._ops: dict[str, tuple[str, str | None]] = {}   # path -> (kind, new text)

    # -- planning ------------------------------------------------------------------------
    def read(self, path: str) -> str:
        """The file's text as the plan sees it (its pending new text if already planned)."""
        op = self._ops.get(path)
        if op is not None and op[1] is not None:
            return op[1]
        seen = self._seen.get(path)
        if seen is None:
            data = self.store.read_bytes(path)
            seen = self._seen[path] = _Seen(data, stamp_of(data))
        if seen.old is None:
            raise NoteExists(path)  # pragma: no cover - a planned create was read back
        return decode_text(seen.old, path)

    def stamp(self, path: str) -> str | None:
        seen = self._seen.get(path)
        return seen.stamp if seen else None

    def write(self, path: str, text: str) -> None:
        """Replace a file the plan has read."""
        if path not in self._seen:
            raise ValueError(f"plan error: {path!r} written before it was read")
        kind = "create" if self._seen[path].old is None else "write"
        self._ops[path] = (kind, text)

    def create(self, path: str, text: str) -> None:
        """Create a new file (refused at commit if it appeared meanwhile)."""
        if path in self._seen and self._seen[path].old is not None:
            raise NoteExists(path)
        if path not in self._seen and self.store.exists(path):
            raise NoteExists(path)
        self._seen[path] = _Seen(None, None)
        self._ops[path] = ("create", text)

    def delete(self, path: str) -> None:
        if path not in self._seen:
            self.read(path)
        self._ops[path] = ("delete", None)

    @property
    def planned(self) -> dict[str, str]:
        """path -> 'create' | 'write' | 'delete'."""
        return {p: kind for p, (kind, _) in self._ops.items()}

    def new_text(self, path: str) -> str | None:
        op = self._ops.get(path)
        return op[1] if op else None

    def old_text(self, path: str) -> str | None:
        seen = self._seen.get(path)
        return decode_text(seen.old, path) if seen and seen.old is not None else None

    # -- committing ----------------------------------------------------------------------
    def check(self) -> None:
        """Every file the plan read still has its stamp (and new files are still absent)."""
        for path, seen in self._seen.items():
            current = self.store.stamp(path)
            if current != seen.stamp:
                raise StampChanged(path, seen.stamp or "absent", current)

    def commit(self) -> list[str]:
        """Check every stamp, then create, rewrite and delete; on failure undo, then raise."""
        self.check()
        order = {"create": 0, "write": 1, "delete": 2}
        ops = sorted(self._ops.items(), key=lambda item: order[item[1][0]])
        done: list[tuple[str, str]] = []
        try:
            for path, (kind, text) in ops:
                seen = self._seen[path]
                if kind == "create":
                    assert text is not None
                    self.store.create(path, text)
                elif kind == "write":
                    assert text is not None
                    self.store.write_if_unchanged(path, text, seen.stamp)
                else:
                    current = self.store.stamp(path)
                    if current != seen.stamp:
                        raise StampChanged(path, seen.stamp or "absent", current)
                    self.store.delete(path)
                done.append((path, kind))
        except BaseException:
            self._rollback(done)
            raise
        return [p for p, _ in ops]

    def _rollback(self, done: list[tuple[str, str]]) -> None:
        for path, kind in reversed(done):
            try:
                if kind == "create":
                    self.store.delete(path)
                else:
                    old = self._seen[path].old
                    assert old is not None
                    self.store.write_bytes(path, old)
            except Exception as exc:  # keep undoing the rest; the audit names what is left
                log.error("rollback of %s (%s) failed: %s", path, kind, exc)
