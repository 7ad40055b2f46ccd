"""Helpers shared by the tool families: a fresh view of the vault's notes and links.

Tools that reason about links (move, delete, lint) must see the files as they are now, not as
the index last saw them. `VaultScan` reads the index state for every file whose size and
mtime still match, and parses the rest, so it is exact and, on an indexed vault, cheap.
Its resolver knows every file (an image or PDF link is not dangling), plus note aliases.
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from reme_agent.engine.links import LinkResolver, extract_links
from reme_agent.engine.names import note_aliases, note_title
from reme_agent.engine.parser import split_frontmatter
from reme_agent.errors import InvalidArgument, NoteNotFound, NotText

if TYPE_CHECKING:
    from reme_agent.engine.state import FileRow
    from reme_agent.vault import Vault

log = logging.getLogger("reme_agent.toolkit")


@dataclass(frozen=True)
class LinkRef:
    """One link of a note, as the index stores it (file line, no offsets)."""

    target: str
    alias: str | None
    predicate: str | None
    line: int


@dataclass
class NoteMeta:
    path: str
    frontmatter: dict[str, Any]
    links: list[LinkRef] = field(default_factory=list)
    error: str | None = None

    @property
    def title(self) -> str:
        return note_title(self.path, self.frontmatter, "")


def is_note(vault: Vault, path: str) -> bool:
    """Files the indexer parses (frontmatter + links): .md, .markdown, .txt by default."""
    return path.lower().endswith(tuple(e.lower() for e in vault.settings.index.extensions))


def read_meta(vault: Vault, path: str, row: FileRow | None = None) -> NoteMeta:
    """Frontmatter and links of one note: from the index when still fresh, else parsed."""
    if row is not None:
        try:
            st = os.stat(vault.store.resolve(path))
            if row.size == st.st_size and row.mtime_ns == st.st_mtime_ns:
                return NoteMeta(path, row.frontmatter,
                                [LinkRef(d["target"], d.get("alias"), d.get("predicate"),
                                         d.get("line", 0)) for d in row.links], row.error)
        except OSError:
            pass
    try:
        text = vault.store.read_text(path)
    except (NotText, NoteNotFound) as exc:
        return NoteMeta(path, {}, [], str(exc))
    fm, body, start, error = split_frontmatter(text, path)
    links = [LinkRef(x.target, x.alias, x.predicate, x.line) for x in extract_links(body, start)]
    return NoteMeta(path, fm, links, str(error) if error else None)


class VaultScan:
    """Every file, every note's frontmatter and links, and a resolver over them, as of now."""

    def __init__(self, vault: Vault) -> None:
        self.vault = vault
        self.files: list[str] = vault.store.list()
        rows = index_rows(vault)
        self.notes: dict[str, NoteMeta] = {
            p: read_meta(vault, p, rows.get(p)) for p in self.files if is_note(vault, p)}

    @cached_property
    def resolver(self) -> LinkResolver:
        return LinkResolver(self.files, {p: note_aliases(m.frontmatter)
                                         for p, m in self.notes.items()})

    def resolve(self, link: LinkRef, source: str) -> str | None:
        return self.resolver.resolve(link.target, source)

    def inbound(self, target: str) -> list[tuple[str, LinkRef]]:
        """(source, link) for every link in another note that resolves to `target`."""
        return [(src, link) for src, meta in self.notes.items() if src != target
                for link in meta.links if self.resolve(link, src) == target]


def index_rows(vault: Vault) -> dict[str, FileRow]:
    try:
        return vault.state.files()
    except Exception as exc:  # a broken index only costs speed here, never correctness
        log.warning("index state unavailable (%s); parsing every note", exc)
        return {}


def in_folder(path: str, folder: str) -> bool:
    return not folder or path == folder or path.startswith(folder.rstrip("/") + "/")


def norm_folder(vault: Vault, folder: str) -> str:
    """'' for the whole vault, else a normalised folder that must exist."""
    if not folder.strip() or folder.strip() in ("/", "."):
        return ""
    norm = vault.store.normalize(folder).rstrip("/")
    if not vault.store.is_dir(norm):
        tops = sorted(p.name for p in vault.root.iterdir() if p.is_dir() and
                      not p.name.startswith("."))
        raise InvalidArgument(f"No folder {norm!r} in the vault.",
                              f"Top folders are: {', '.join(tops) or '(none)'}; "
                              "pass '' for the whole vault.")
    return norm


def refresh(vault: Vault, paths: list[str]) -> str | None:
    """Re-index written paths so search sees them; a failure is reported, not raised.

    The file write already succeeded, so an index problem must not tell the model it failed.
    """
    try:
        vault.refresh(paths)
    except Exception as exc:
        log.warning("re-indexing %s failed: %s", paths, exc)
        return f"written, but re-indexing failed ({exc}); run `reme-agent index`"
    return None


def now_iso() -> str:
    return _dt.datetime.now().astimezone().replace(microsecond=0).isoformat()


def parse_day(value: str, name: str) -> _dt.date:
    try:
        return _dt.date.fromisoformat(value.strip())
    except ValueError:
        raise InvalidArgument(f"{name} {value!r} is not a date.",
                              "Use YYYY-MM-DD, e.g. 2026-11-30.") from None


def short(text: str, width: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[:width - 1] + "…"


def stem(path: str) -> str:
    return PurePosixPath(path).stem
