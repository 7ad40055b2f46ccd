"""Known node names for auto-link L1: title, aliases and file stem -> knowledge paths.

DESIGN §9 (auto-link L1: "string match on known node titles/aliases"); seed
auto_link_design.md §1.3 and §2.5 ("known node names + simple variants").

Decisions where DESIGN is silent:

- Targets are knowledge nodes only (`.md` notes under `knowledge/`); daily notes and resources
  are never link targets of L1.
- A node's names are its `title` (or `name`), its `aliases`, its file stem and, for a kebab-case
  stem, the stem with spaces (`hybrid-search` -> `hybrid search`). Names shorter than
  `min_chars`, names made only of digits or punctuation, and names holding link syntax
  (``[ ] | `` or a line break) are left out: they cannot be linked safely.
- Matching is case-insensitive, except for names written all in capitals (acronyms such as
  `JWT`, `API`, `IT`), which match only as written, so "it" never links to a node called IT,
  and single words written with a capital (`Go`, `Swift`, `Redis`), whose all-lower-case
  form is most often the common word ("we go live"): an exact match needs a capital letter;
  the lower-case form is only a fuzzy proposal for the judge (`fuzzy.py`).
- A node's names are de-duplicated case-insensitively, its title and aliases first, so the
  file stem `go` of a node titled `Go` does not undo the rule above.
- A name carried by two or more nodes is *ambiguous*; the L1 planner asks the model which
  node a mention means (or skips it without a model).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, Literal

from reme_agent.engine.names import note_aliases, note_title
from reme_agent.schema.layout import KNOWLEDGE, layer_of

__all__ = ["CaseRule", "NameEntry", "NameIndex", "Node", "case_fits", "fold", "is_knowledge_node"]

_FORBIDDEN = frozenset("[]|`\n\r")

CaseRule = Literal["any", "exact", "capital"]


def fold(text: str) -> str:
    """Lower-case `text` without changing its length, so offsets in the folded text stay valid.

    `str.lower()` turns a few characters into two (``İ``); those are kept as they are.
    """
    low = text.lower()
    if len(low) == len(text):
        return low
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


def _clean(name: str) -> str:
    return " ".join(unicodedata.normalize("NFC", name).split())


def _case_rule(name: str) -> CaseRule:
    """"exact" for acronyms (every cased letter upper-case), "capital" for one word with a
    capital (it needs one in the mention too), "any" otherwise."""
    cased = [c for c in name if c.isalpha() and c.lower() != c.upper()]
    if cased and all(c.isupper() for c in cased):
        return "exact"
    if any(c.isupper() for c in cased) and not any(not c.isalnum() for c in name):
        return "capital"
    return "any"


def case_fits(rule: CaseRule, name: str, written: str) -> bool:
    """Does `written` (the text of an exact match) honour the name's case rule?"""
    if rule == "exact":
        return written == name
    if rule == "capital":
        return any(c.isupper() for c in written)
    return True


def _usable(name: str, min_chars: int) -> bool:
    return (len(name) >= max(1, min_chars) and not _FORBIDDEN.intersection(name)
            and any(c.isalpha() for c in name))


def is_knowledge_node(path: str) -> bool:
    """A link target for auto-link: a Markdown note under knowledge/."""
    return layer_of(path) == KNOWLEDGE and path.lower().endswith(".md") \
        and not any(c in path for c in "|#^[]")


@dataclass(frozen=True)
class Node:
    """What the model is shown about a candidate target."""

    path: str
    title: str
    description: str
    names: tuple[str, ...]


@dataclass(frozen=True)
class NameEntry:
    name: str  # as written in the node (NFC, single spaces)
    path: str
    case: CaseRule


class NameIndex:
    """Folded name -> entries; incremental (`add` / `remove`) for the queue consumer."""

    def __init__(self, min_chars: int = 2) -> None:
        self.min_chars = min_chars
        self.nodes: dict[str, Node] = {}
        self._entries: dict[str, list[NameEntry]] = {}
        self._keys_of: dict[str, set[str]] = {}

    def __len__(self) -> int:
        return len(self.nodes)

    def __contains__(self, path: object) -> bool:
        return path in self.nodes

    @classmethod
    def from_frontmatter(cls, notes: Mapping[str, Mapping[str, Any]],
                         min_chars: int = 2) -> NameIndex:
        index = cls(min_chars)
        for path, fm in notes.items():
            if is_knowledge_node(path):
                index.add(path, fm)
        return index

    def add(self, path: str, frontmatter: Mapping[str, Any]) -> None:
        """Add a node (or replace its names)."""
        self.remove(path)
        fm = dict(frontmatter)
        stem = PurePosixPath(path).stem
        raw = [*note_aliases(fm), stem]
        if "-" in stem:
            raw.append(stem.replace("-", " "))
        names: list[str] = []
        folded: set[str] = set()
        for name in raw:
            clean = _clean(str(name))
            if _usable(clean, self.min_chars) and fold(clean) not in folded:
                names.append(clean)
                folded.add(fold(clean))
        desc = fm.get("description")
        self.nodes[path] = Node(path, note_title(path, fm, ""),
                                desc.strip() if isinstance(desc, str) else "", tuple(names))
        keys = set()
        for name in names:
            key = fold(name)
            keys.add(key)
            entry = NameEntry(name, path, _case_rule(name))
            bucket = self._entries.setdefault(key, [])
            if entry not in bucket:
                bucket.append(entry)
        self._keys_of[path] = keys

    def remove(self, path: str) -> None:
        """Forget a node; unknown paths are ignored."""
        self.nodes.pop(path, None)
        for key in self._keys_of.pop(path, ()):
            kept = [e for e in self._entries.get(key, ()) if e.path != path]
            if kept:
                self._entries[key] = kept
            else:
                self._entries.pop(key, None)

    def keys(self) -> Iterable[str]:
        """Every folded name (the matcher's patterns)."""
        return self._entries.keys()

    def entries(self, key: str) -> list[NameEntry]:
        return list(self._entries.get(key, ()))

    def candidates(self, key: str, written: str) -> tuple[str, ...]:
        """Nodes a mention `written` (folded to `key`) may mean, honouring acronym case."""
        hits: list[str] = []
        for e in self._entries.get(key, ()):
            if case_fits(e.case, e.name, written) and e.path not in hits:
                hits.append(e.path)
        return tuple(sorted(hits))

    def own_keys(self, path: str) -> set[str]:
        """Folded names of `path` itself: its self-mentions are never linked."""
        return set(self._keys_of.get(path, ()))

    def ambiguous(self) -> dict[str, list[str]]:
        """Names carried by several nodes: name -> paths (what L1 cannot link without a model)."""
        out: dict[str, list[str]] = {}
        for entries in self._entries.values():
            paths = sorted({e.path for e in entries})
            if len(paths) > 1:
                out[entries[0].name] = paths
        return out
