"""A note's names: its display title, the aliases links may use, and the old names it took
over in a merge (DESIGN §4 resolution).

One home for what a note is called, read from its frontmatter (and, for the title, its first
H1): the indexer, the link resolver's alias tier, search results, lint, merge and auto-link
all agree on it.

`merged_from` is the record a merge leaves in the note that was kept: one entry per note
merged into it, ``{path, title, aliases, date}`` (a plain path string is an older entry).
Those old paths and names are *redirects*: the resolver's last tier, after every real file,
name, alias and title (`link_names`), so a note that later takes an old path or name wins.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import PurePosixPath
from typing import Any, NamedTuple

from reme_agent.engine.links import LinkResolver

__all__ = ["MERGED_FROM", "LinkNames", "link_names", "merged_records", "note_aliases",
           "note_title", "record_names", "resolver_over"]

MERGED_FROM = "merged_from"
"""The frontmatter key of the merge record (written by maintenance's merge)."""


def note_title(path: str, frontmatter: dict[str, Any], body: str) -> str:
    """Display title: frontmatter title/name, else the first H1, else the file stem."""
    for key in ("title", "name"):
        value = frontmatter.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    for line in body.splitlines()[:40]:
        if line.startswith("# "):
            return line[2:].strip()
    return PurePosixPath(path).stem


def note_description(frontmatter: dict[str, Any]) -> str:
    """The frontmatter `description` (the note's one-line summary), "" when absent or not text."""
    value = frontmatter.get("description")
    return " ".join(value.split()) if isinstance(value, str) else ""


def note_aliases(frontmatter: dict[str, Any]) -> list[str]:
    """`aliases` (one string or a list) plus the title/name: every name a link may use."""
    raw = frontmatter.get("aliases") or []
    if isinstance(raw, str):
        raw = [raw]
    names = [str(a) for a in raw if isinstance(a, str | int | float) and str(a).strip()]
    for key in ("title", "name"):
        if isinstance(frontmatter.get(key), str) and frontmatter[key].strip():
            names.append(frontmatter[key].strip())
    return names


class LinkNames(NamedTuple):
    """What the resolver indexes for one note: names for the alias tier, and the old paths
    and names of notes merged into it for the redirect tier."""

    aliases: list[str]
    redirects: list[str]


def merged_records(frontmatter: dict[str, Any]) -> list[dict[str, Any]]:
    """The `merged_from` entries as mappings with at least a `path` (strings become
    ``{"path": ...}``); malformed entries are skipped, never an error."""
    raw = frontmatter.get(MERGED_FROM)
    items = raw if isinstance(raw, list) else [raw] if raw else []
    out = []
    for item in items:
        if isinstance(item, str) and item.strip():
            out.append({"path": item.strip()})
        elif isinstance(item, dict) and isinstance(item.get("path"), str) and item["path"].strip():
            out.append(item)
    return out


def record_names(record: dict[str, Any]) -> list[str]:
    """The title and aliases a merged note had (from its `merged_from` entry)."""
    names = [record.get("title")]
    raw = record.get("aliases")
    names += [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
    return [str(n).strip() for n in names if isinstance(n, str | int | float) and str(n).strip()]


def link_names(frontmatter: dict[str, Any]) -> LinkNames:
    """The note's alias-tier names and its redirects (see the module docstring).

    A name that only came from a merged note (it is in a `merged_from` entry and is not
    this note's own title) is a redirect, not an alias: it still resolves here, but a real
    note with that title or alias, made later, takes it over instead of colliding with it.
    """
    records = merged_records(frontmatter)
    aliases = note_aliases(frontmatter)
    if not records:
        return LinkNames(aliases, [])
    old_names = [n for r in records for n in record_names(r)]
    own = {n.casefold() for key in ("title", "name")
           if isinstance(frontmatter.get(key), str) and (n := frontmatter[key].strip())}
    demoted = {n.casefold() for n in old_names} - own
    kept = [a for a in aliases if a.strip().casefold() not in demoted]
    return LinkNames(kept, [*(r["path"].strip() for r in records), *old_names])


def resolver_over(files: Iterable[str], frontmatters: Mapping[str, dict[str, Any]]) -> LinkResolver:
    """A resolver over every file, with each note's aliases and redirects (`link_names`)."""
    names = {p: link_names(fm if isinstance(fm, dict) else {}) for p, fm in frontmatters.items()}
    return LinkResolver(files, {p: n.aliases for p, n in names.items()},
                        {p: n.redirects for p, n in names.items() if n.redirects})
