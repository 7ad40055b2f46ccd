"""A note's names: its display title and the aliases links may use (DESIGN §4 resolution).

One home for what a note is called, read from its frontmatter (and, for the title, its first
H1): the indexer, the link resolver's alias tier, search results, lint, merge and auto-link
all agree on it.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

__all__ = ["note_aliases", "note_title"]


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
