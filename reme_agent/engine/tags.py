"""Tags: `#tag` in a note's body and the `tags` property, as Obsidian reads them.

Obsidian's tag pane counts both, so a vault kept in Obsidian tags most notes inline
(`#project/alpha` in a paragraph). Rules, from Obsidian's help ("Tags") and its behaviour:

- a tag starts with `#` at the start of a line or after whitespace (`a#b`, a URL fragment,
  `[[note#heading]]` are no tags; `# Heading` is a heading);
- it runs over letters and digits of any script, `_`, `-`, `/` (nested tags) and symbols such
  as emoji, and stops at whitespace or other punctuation (`#tag.` is `tag`);
- it holds at least one character that is not a digit (`#1984` is no tag, `#y1984` is);
- none in code (fences, indented code, code spans) or HTML comments; `%% %%` comments count,
  as in Obsidian's metadata cache.

The `tags` (and legacy `tag`) property: a list, or a string of tags separated by commas or
spaces (what Obsidian reads from `tags: a, b`); a leading `#` is dropped.
Matching is case-insensitive everywhere (Obsidian's); the first spelling seen is shown.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any

from reme_agent.engine.links import not_prose, prose_chunks

__all__ = ["body_tags", "merge_tags", "property_tags"]

_CANDIDATE_RE = re.compile(r"(?:^|(?<=\s))#([^\s#]+)", re.MULTILINE)
_SYMBOL_CATEGORIES = frozenset({"So", "Sk", "Mn", "Mc", "Me", "Cf"})   # emoji, marks, ZWJ
_SPLIT_RE = re.compile(r"[,\s]+")


def _tag_prefix(raw: str) -> str:
    """The longest prefix of `raw` made of tag characters, without a trailing `/`."""
    end = 0
    for ch in raw:
        if ch.isalnum() or ch in "_-/" or unicodedata.category(ch) in _SYMBOL_CATEGORIES:
            end += 1
        else:
            break
    return raw[:end].rstrip("/")


def _valid(tag: str) -> bool:
    return bool(tag) and not tag.replace("/", "").isdigit() and not tag.startswith("/")


def body_tags(body: str, kinds: bytearray | None = None) -> list[str]:
    """The distinct inline tags of a Markdown body (without `#`), in order of first use."""
    if "#" not in body:
        return []
    seen: dict[str, str] = {}
    for start, end, _ in prose_chunks(body, kinds):
        if body.find("#", start, end) < 0:
            continue
        chunk = body[start:end]
        skips = not_prose(chunk)
        for m in _CANDIDATE_RE.finditer(chunk):
            if skips and any(s <= m.start() < e for s, e in skips):
                continue
            tag = _tag_prefix(m.group(1))
            if _valid(tag):
                seen.setdefault(tag.casefold(), tag)
    return list(seen.values())


def property_tags(frontmatter: Mapping[str, Any]) -> list[str]:
    """The tags of the `tags` / `tag` properties, without `#`, distinct (case-insensitive)."""
    out: dict[str, str] = {}
    for key in ("tags", "tag"):
        raw = frontmatter.get(key)
        items = [raw] if isinstance(raw, str | int | float) and not isinstance(raw, bool) \
            else raw if isinstance(raw, list) else []
        for item in items:
            if not isinstance(item, str | int | float) or isinstance(item, bool):
                continue
            for part in _SPLIT_RE.split(str(item)):
                tag = part.strip().lstrip("#")
                if tag:
                    out.setdefault(tag.casefold(), tag)
    return list(out.values())


def merge_tags(*groups: Iterable[str]) -> list[str]:
    """The tags of every group, distinct case-insensitively, first spelling kept."""
    out: dict[str, str] = {}
    for group in groups:
        for tag in group:
            out.setdefault(tag.casefold(), tag)
    return list(out.values())
