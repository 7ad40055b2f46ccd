"""Tags: `#tag` in a note's body and the `tags` property, as Obsidian reads them.

Obsidian's tag pane counts both, so a vault kept in Obsidian tags most notes inline
(`#project/alpha` in a paragraph). Rules, from Obsidian's help ("Tags") and its behaviour:

- a tag starts with `#` at the start of a line, after whitespace, a `|` (table cells) or
  a blockquote's `>` (`>#x`); `a#b`, a URL fragment, `[[note#heading]]` are no tags, and
  `# Heading` is a heading. A tag that ends at another `#` starts the next (`#a#b`: two);
- it runs until whitespace, ASCII punctuation other than `_-/`, or a character of Unicode's
  General or Supplemental Punctuation blocks (curly quotes, `…`, `—`, the emoji ZWJ): the set
  Obsidian's tag parser stops at. Other punctuation is part of the tag there, CJK `，。`
  included (`#项目，` is the tag `项目，`), and so it is here: the tag pane must agree;
- it holds at least one character other than 0-9 (`#1984` is no tag, `#y1984` and
  `#2024/05` are); a trailing `/` is dropped, a leading one is no tag;
- none in code (fences, indented code, code spans), HTML comments, math (`$...$`,
  `$$...$$`) or wikilinks (`[[note|shown #x]]`); `%% %%` comments count, as in Obsidian's metadata cache.

The `tags` (and legacy `tag`) property: a list, or a string of tags separated by commas or
spaces (what Obsidian reads from `tags: a, b`); a leading `#` is dropped.
Matching is case-insensitive everywhere (Obsidian's); the first spelling seen is shown.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping
from itertools import accumulate
from typing import Any

from reme_agent.engine.links import not_prose, prose_chunks

__all__ = ["body_tags", "merge_tags", "property_tags"]

_QUOTE_RE = re.compile(r"[ \t]{0,3}(?:>[ \t]?)+")
# A `#` opens a tag at a line start, after whitespace or a `|` (table cells; Obsidian reads an
# escaped pipe before a tag too), or right after a blockquote/callout's `>` markers.
_HASH_RE = re.compile(r"(?:^|(?<=[\s|>]))#", re.MULTILINE)
# What a tag runs over: not whitespace, ASCII punctuation but `_-/`, the General and
# Supplemental Punctuation blocks (the ZWJ, curly quotes, `…`), control characters, the BOM:
# Obsidian's stop set (control characters added). CJK `，。` and other marks are part of it.
_BODY_RE = re.compile("[^\\s'!\"#$%&()*+,.:;<=>?@^`{|}~\\[\\]\\\\"
                      "\u2000-\u206f\u2e00-\u2e7f\x00-\x1f\x7f-\x9f\ufeff]*")
_SPLIT_RE = re.compile(r"[,\s]+")
_ALL_DIGITS_RE = re.compile(r"[0-9]+")
_WIKI_RE = re.compile(r"!?\[\[[^\[\]\n]*\]\]")
_MATH_RE = re.compile(r"\$\$.+?\$\$|\$(?=[^\s$])[^$\n]*?(?<=[^\s\\])\$(?!\d)", re.DOTALL)


def _tag_at(text: str, pos: int) -> tuple[str, int]:
    """The tag text after the `#` at `pos` (raw, trailing `/` kept) and where it ends."""
    m = _BODY_RE.match(text, pos + 1)
    assert m is not None   # `*`: always matches
    return m.group(), m.end()


def _valid(tag: str) -> bool:
    return bool(tag) and not tag.startswith("/") and not _ALL_DIGITS_RE.fullmatch(tag)


def _after_quote_marker(chunk: str, pos: int) -> bool:
    """Whether the `>` before `pos` is a blockquote/callout marker (only markers before it
    on its line), not text such as `a>#b`."""
    line_start = chunk.rfind("\n", 0, pos) + 1
    m = _QUOTE_RE.match(chunk, line_start)
    return m is not None and m.end() == pos


def _no_tag_spans(chunk: str) -> list[tuple[int, int]]:
    """Math (`$...$`, `$$...$$`) and wikilinks (`[[note|shown #x]]`) of one chunk: Obsidian
    reads no tags in them."""
    spans = [m.span() for m in _MATH_RE.finditer(chunk)] if "$" in chunk else []
    if "[[" in chunk:
        spans += [m.span() for m in _WIKI_RE.finditer(chunk)]
    return spans


def _span_test(spans: list[tuple[int, int]]) -> Callable[[int], bool] | None:
    """pos -> whether it lies in one of `spans` (which may overlap), by bisection."""
    if not spans:
        return None
    spans.sort()
    starts = [s for s, _ in spans]
    reach = list(accumulate((e for _, e in spans), max))

    def inside(pos: int) -> bool:
        i = bisect_right(starts, pos) - 1
        return i >= 0 and pos < reach[i]
    return inside


def body_tags(body: str, kinds: bytearray | None = None) -> list[str]:
    """The distinct inline tags of a Markdown body (without `#`), in order of first use."""
    if "#" not in body:
        return []
    seen: dict[str, str] = {}
    for start, end, _ in prose_chunks(body, kinds):
        if body.find("#", start, end) < 0:
            continue
        chunk = body[start:end]
        inside: Callable[[int], bool] | None = None
        spans_read = False   # code, comments, math, wikilinks: found once a tag may need them
        for m in _HASH_RE.finditer(chunk):
            pos = m.start()
            if pos + 1 >= len(chunk) or not _BODY_RE.match(chunk, pos + 1).end() > pos + 1:
                continue   # `# Heading`, `##`: nothing after the sign
            if pos and chunk[pos - 1] == ">" and not _after_quote_marker(chunk, pos):
                continue
            if not spans_read:
                inside = _span_test(not_prose(chunk) + _no_tag_spans(chunk))
                spans_read = True
            if inside is not None and inside(pos):
                continue
            while True:   # `#a#b` is two tags, as in Obsidian
                raw, stop = _tag_at(chunk, pos)
                tag = raw.rstrip("/")
                if _valid(tag):
                    seen.setdefault(tag.casefold(), tag)
                if not raw or stop >= len(chunk) or chunk[stop] != "#":
                    break
                pos = stop
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
                tag = part.strip().lstrip("#").rstrip("/")   # as inline: `a/` is `a`
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
