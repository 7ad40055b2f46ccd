"""Wikilinks: forms, edges, resolution and the conservation diff (DESIGN §4, §5 E-1).

Pure functions over strings, no I/O. The graph projection, the E-1 check in the store and the
`move`/merge retargeting all read links through this one module, so every part of reme-agent
agrees on what counts as an edge.

Forms (DESIGN §4), parsed from a note's body:

- ``[[target]]``, ``[[target|shown text]]``, ``[[target#heading]]``, ``[[target#^block]]``;
- line predicate ``predicate:: [[A]], [[B]]`` at the start of a line (after optional indentation,
  ``>`` quote markers, a bullet ``-``/``*``/``+``/``1.``/``1)`` and a task box ``[ ]``): every
  link on that line gets the predicate;
- inline predicate ``[predicate:: [[A]]]`` anywhere in a line (the innermost one wins);
- ``![[embed.png]]`` is an embed, not an edge; links in code spans, fenced code blocks and
  indented code blocks are not edges; ``[[]]`` and same-note ``[[#heading]]`` are ignored.

References that are not edges (``extract_links(..., refs=True)``): embeds ``![[x]]`` and
Markdown links and images ``[text](folder/x%20y.md#h)``, ``![alt](<x y.png>)`` and reference
definitions ``[id]: folder/x.md "title"`` to a vault path (a URL with a scheme, ``//host`` or
a bare ``#fragment`` is not one); and links in frontmatter values (`property_links`). A
`move` or merge keeps them pointing at their file, as Obsidian does when it renames (its
metadata cache lists embeds, Markdown links and frontmatter links, and a rename rewrites
what the cache lists); the graph does not hold them (DESIGN §4 names only the wikilink
forms in the body as edges).

Comments, as Obsidian's metadata cache reads them: a link inside an HTML comment
(``<!-- [[x]] -->``, inline or a whole ``<!--`` block, which per CommonMark ends with the
line holding ``-->``) is no link, no reference and never rewritten; a link inside
``%% ... %%`` is an ordinary link (Obsidian lists it, and renames it).

Decisions where DESIGN is silent:

- Markdown structure is read line by line with a small CommonMark approximation (fences,
  indented code, list nesting, block quotes); it never recurses, so deep nesting is safe.
- In tables ``[[target\\|alias]]`` is the escaped alias form; the backslash is not part of the
  target.
- Resolution tiers: exact path, ``+ .md``, folder note, then *file names before aliases*: a
  target that names exactly one file resolves to it even if another note carries the same
  string as an alias or title (file names are identifiers, titles are prose). Comparisons in
  the fuzzy tier are case-insensitive and Unicode-NFC-normalised; a target with folders
  (``rrf/rrf``) matches by path suffix.
- Merge redirects come last: the old path (as written, without ``.md``, as its folder, or
  its file name) or an old name of a note merged away resolves to the note that holds its
  `merged_from` record (`engine.names.link_names`). Last, so a real file or name always
  wins; the holder is an existing note, so a redirect never points at another redirect
  (merge carries the loser's own records over, flattening chains) and cannot loop.
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any
from urllib.parse import quote, unquote

__all__ = [
    "EMBED",
    "FENCE",
    "INDENTED",
    "LINK",
    "MARKDOWN",
    "PREDICATE_RE",
    "Edge",
    "Link",
    "LinkResolver",
    "NewTarget",
    "changed_keys",
    "edges_of",
    "extract_links",
    "file_keys",
    "line_kinds",
    "link_key",
    "markdown_destination",
    "missing_edges",
    "name_key",
    "not_prose",
    "property_links",
    "prose_chunks",
    "rewrite_targets",
    "target_key",
]

PREDICATE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""Predicate ids (open vocabulary); use ``PREDICATE_RE.fullmatch(s)`` to validate one."""

Edge = tuple[str, str | None]
"""``(target, predicate)``: the identity of an edge inside one source note (DESIGN §4)."""


LINK, EMBED, MARKDOWN = "link", "embed", "markdown"
"""`Link.kind`: a wikilink (an edge), an embed ``![[x]]``, a Markdown link or image."""


@dataclass(frozen=True)
class Link:
    """One ``[[...]]`` occurrence; offsets and lines refer to the text that was parsed.

    For a MARKDOWN reference, `target` is the decoded path (``x y.md`` for ``x%20y.md``),
    `anchor` the fragment as written and `start`/`end` span the destination as written
    (``<...>`` included): the only bytes a rewrite changes.
    """

    target: str
    alias: str | None
    predicate: str | None
    line: int
    start: int
    end: int
    anchor: str | None = None
    kind: str = LINK


# -- block structure -------------------------------------------------------------------------
# Line kinds returned by line_kinds(). TEXT continues the paragraph of the line above; START
# begins a new inline block (paragraph, list item, heading). Code spans never cross a START.
TEXT, START, BLANK, FENCE, INDENTED = range(5)

_WS_RE = re.compile(r"[ \t]*+")
_QUOTE_RE = re.compile(r"[ \t]{0,3}>[ \t]?")
_LIST_RE = re.compile(r"(?:[-*+]|[0-9]{1,9}[.)])(?=[ \t]|$)")
_FENCE_OPEN_RE = re.compile(r"(`{3,}|~{3,})(.*)")
_FENCE_CLOSE_RE = re.compile(r"(`{3,}|~{3,})[ \t]*$")
_HEADING_START_RE = re.compile(r"#{1,6}(?:[ \t]|$)")
# First characters after which a line is plain paragraph text at column 0 (the fast path).
_SPECIAL_FIRST = frozenset(" \t>-*+0123456789`~#")
_MARKER_FIRST = frozenset("-*+0123456789")
_BLOCK_FIRST = frozenset("`~#")
_MAX_MARKERS_PER_LINE = 16  # `- - - ...`: bounded so a pathological line stays linear


def _col(s: str, end: int) -> int:
    """Display column of offset `end` in `s` (tabs stop every 4 columns, as in CommonMark)."""
    if "\t" not in s[:end]:
        return end
    col = 0
    for ch in s[:end]:
        col = col + 4 - col % 4 if ch == "\t" else col + 1
    return col


def line_kinds(lines: Sequence[str]) -> bytearray:
    """Classify each line as TEXT/START/BLANK/FENCE/INDENTED (a CommonMark approximation).

    Shared by the link extractor (code is not a link source) and the block splitter (fences are
    never split on blank lines). Linear, no recursion: list nesting is a stack of content
    columns, so a 50 MB note or a 10,000-level list is fine.
    """
    kinds = bytearray(len(lines))
    fence_char, fence_len, fence_col, fence_q = "", 0, 0, 0
    stack: list[int] = []  # content columns of the open list items, innermost last
    para = False  # the previous line was paragraph text (lazy continuation; no indented code)
    prev_q = 0
    for i, line in enumerate(lines):
        if line.endswith("\r"):  # CRLF text passed without normalising
            line = line[:-1]
        first = line[:1]
        if fence_char and not fence_q and first not in (">", " ", "\t") and fence_char not in line:
            kinds[i] = FENCE  # fast path: fence content (a blank line is content too)
            continue
        if not first and not fence_char:
            kinds[i] = BLANK
            para = False
            prev_q = 0
            continue
        if not fence_char and first not in _SPECIAL_FIRST:
            # Fast path: plain text at column 0, outside any quote or fence.
            if not para:
                kinds[i] = START
                stack.clear()
            para = True
            prev_q = 0
            continue
        q, rest = 0, line
        if first == ">" or (first in (" ", "\t") and ">" in line[:5] and _QUOTE_RE.match(line)):
            pos = 0
            while m := _QUOTE_RE.match(line, pos):
                q += 1
                pos = m.end()
            rest = line[pos:]
        tabs = "\t" in rest
        if fence_char:
            if q >= fence_q:
                kinds[i] = FENCE
                if fence_char in rest:
                    ws = _WS_RE.match(rest).end()
                    close = _FENCE_CLOSE_RE.match(rest, ws)
                    if (close and close.group(1)[0] == fence_char
                            and len(close.group(1)) >= fence_len
                            and (_col(rest, ws) if tabs else ws) < fence_col + 4):
                        fence_char = ""
                continue
            fence_char = ""  # the block quote holding the fence ended, and the fence with it
        ws = _WS_RE.match(rest).end()
        if ws == len(rest):
            kinds[i] = BLANK
            para = False
            prev_q = q
            continue
        if q != prev_q and not para:
            stack.clear()
        prev_q = q
        col = _col(rest, ws) if tabs else ws
        marker = _LIST_RE.match(rest, ws) if rest[ws] in _MARKER_FIRST else None
        if stack and (marker or not para):
            while stack and col < stack[-1]:
                stack.pop()
        base = stack[-1] if stack else 0
        if not para and col >= base + 4:
            kinds[i] = INDENTED
            continue
        is_start = not para
        pos = ws
        nested = 0
        while marker:
            is_start = True
            mend = marker.end()
            after = _WS_RE.match(rest, mend).end()
            mcol = _col(rest, mend) if tabs else mend
            acol = _col(rest, after) if tabs else after
            # An empty item, or indented code right after the marker: content starts 1 past it.
            content = mcol + 1 if after == len(rest) or acol - mcol > 4 else acol
            stack.append(content)
            pos = after
            nested += 1
            marker = (_LIST_RE.match(rest, pos) if nested < _MAX_MARKERS_PER_LINE
                      and after < len(rest) and rest[after] in _MARKER_FIRST else None)
        lead = rest[pos:pos + 1]
        if lead in _BLOCK_FIRST and (pos > ws or col - base < 4):  # not indented code
            if lead != "#":
                fm = _FENCE_OPEN_RE.match(rest, pos)
                if fm and (fm.group(1)[0] == "~" or "`" not in fm.group(2)):
                    fence_char, fence_len = fm.group(1)[0], len(fm.group(1))
                    fence_col, fence_q = (_col(rest, pos) if tabs else pos), q
                    kinds[i] = FENCE
                    para = False
                    continue
            elif _HEADING_START_RE.match(rest, pos):
                kinds[i] = START
                para = False
                continue
        kinds[i] = START if is_start else TEXT
        para = True
    return kinds


# -- link extraction --------------------------------------------------------------------------
_LINK_RE = re.compile(r"\[\[([^\[\]\n]*)\]\]")
_TICKS_RE = re.compile(r"`+")
_LINE_PRED_RE = re.compile(
    r"(?:[ \t]*+>)*+[ \t]*+"
    r"(?:(?:[-*+]|[0-9]{1,9}[.)])[ \t]++(?:\[.\][ \t]++)?)?"
    r"([A-Za-z_][A-Za-z0-9_]*+)[ \t]*+::"
)
_INLINE_PRED_RE = re.compile(r"\[[ \t]*+([A-Za-z_][A-Za-z0-9_]*+)[ \t]*+::")
_BRACKET_RE = re.compile(r"[\[\]]")
_INNER_SPECIAL_RE = re.compile(r"[|#^]|^\s|\s$")


def _code_spans(chunk: str) -> list[tuple[int, int]]:
    """Inline code spans of one paragraph: a run of n backticks up to the next run of exactly n.

    Linear: one backward pass finds each run's next run of the same length.
    """
    runs = [m.span() for m in _TICKS_RE.finditer(chunk)]
    n = len(runs)
    nxt = [-1] * n
    last: dict[int, int] = {}
    for i in range(n - 1, -1, -1):
        length = runs[i][1] - runs[i][0]
        nxt[i] = last.get(length, -1)
        last[length] = i
    spans: list[tuple[int, int]] = []
    i = 0
    while i < n:
        j = nxt[i]
        if j < 0:
            i += 1  # no closer: the run is literal backticks
        else:
            spans.append((runs[i][0], runs[j][1]))
            i = j + 1
    return spans


def _parse_inner(inner: str) -> tuple[int, int, str | None, str | None] | None:
    """Split the text between ``[[`` and ``]]`` into (target start, target end, anchor, alias).

    Returns None for an empty target (``[[]]``, ``[[|x]]``, same-note ``[[#heading]]``).
    """
    if not _INNER_SPECIAL_RE.search(inner):  # fast path: plain `[[target]]`
        return (0, len(inner), None, None) if inner else None
    head, bar, rest = inner.partition("|")
    alias = rest.strip() if bar else None
    if bar and head.endswith("\\"):
        head = head[:-1]
    anchor = None
    if "#" in head or "^" in head:
        h, c = head.find("#"), head.find("^")
        cut = h if c < 0 or 0 <= h < c else c
        anchor = (head[cut + 1:] if h == cut else head[cut:]).strip() or None
        head = head[:cut]
    target = head.strip()
    if not target:
        return None
    t0 = len(head) - len(head.lstrip())
    return t0, t0 + len(target), anchor, alias


def _inline_fields(line: str) -> list[tuple[int, int, str]]:
    """``[pred:: ...]`` spans in one line as (start, end, predicate), by start; bracket-matched."""
    opens = {m.start(): m.group(1) for m in _INLINE_PRED_RE.finditer(line)}
    if not opens:
        return []
    fields = []
    stack: list[int] = []
    for bm in _BRACKET_RE.finditer(line):
        p = bm.start()
        if line[p] == "[":
            stack.append(p)
        elif stack:
            o = stack.pop()
            if o in opens:
                fields.append((o, p + 1, opens[o]))
    fields.sort()
    return fields


_field_start = itemgetter(0)


def _predicate(fields: list[tuple[int, int, str]], line_pred: str | None, s: int, e: int) -> str | None:
    """Innermost inline field holding [s, e), else the line predicate."""
    k = bisect_left(fields, s, key=_field_start) - 1  # fields starting before the link
    while k >= 0:
        fs, fe, pred = fields[k]
        if fs < s and e <= fe:
            return pred
        k -= 1
    return line_pred


def _inside(spans: list[tuple[int, int]], s: int, e: int) -> bool:
    """Whether [s, e) overlaps one of `spans` (sorted, disjoint)."""
    k = bisect_left(spans, (s + 1,)) - 1   # the last span starting at or before s
    if k >= 0 and spans[k][1] > s:
        return True
    return k + 1 < len(spans) and spans[k + 1][0] < e


def not_prose(chunk: str) -> list[tuple[int, int]]:
    """Code spans and inline HTML comments of one chunk (from `prose_chunks`), sorted: what
    holds no link and no tag."""
    code = _code_spans(chunk) if "`" in chunk else []
    comments = _comment_spans(chunk, code) if "<!--" in chunk else []
    return sorted(code + comments) if comments else code


def _comment_spans(chunk: str, code: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Inline HTML comments ``<!-- ... -->`` of one paragraph, outside code spans (an
    unclosed ``<!--`` is literal text, as in CommonMark)."""
    spans: list[tuple[int, int]] = []
    pos = chunk.find("<!--")
    while pos >= 0:
        if code and _inside(code, pos, pos + 4):
            pos = chunk.find("<!--", pos + 1)
            continue
        end = chunk.find("-->", pos + 2)   # `<!-->` and `<!--->` are whole comments
        if end < 0:
            break
        spans.append((pos, end + 3))
        pos = chunk.find("<!--", end + 3)
    return spans


def _links_in_chunk(chunk: str, base: int, first_line: int, out: list[Link],
                    refs: bool = False) -> None:
    """Links of one paragraph-like chunk; links come in order, so line and span cursors only
    advance. With `refs`, embeds come as EMBED links and Markdown links are added (in order)."""
    spans = _code_spans(chunk) if "`" in chunk else []
    comments = _comment_spans(chunk, spans) if "<!--" in chunk else []
    n_spans = len(spans)
    sp = 0  # first code span that may still hold or follow the current link
    li = 0  # chunk line of the current link
    ls = 0  # offset of that line
    le = chunk.find("\n")  # end of that line (-1: last line)
    line_pred: str | None = None
    fields: list[tuple[int, int, str]] = []
    line_read = False
    first = len(out)
    for m in _LINK_RE.finditer(chunk):
        s, e = m.span()
        embed = bool(s and chunk[s - 1] == "!")
        if embed and not refs:
            continue
        if n_spans:
            while sp < n_spans and spans[sp][1] <= s:
                sp += 1
            if sp < n_spans and spans[sp][0] < e:
                continue  # inside (or crossing) a code span
        if comments and _inside(comments, s, e):
            continue  # inside an HTML comment: Obsidian lists no link there
        inner = m.group(1)
        parsed = _parse_inner(inner)
        if parsed is None:
            continue
        while 0 <= le < s:
            li += 1
            ls = le + 1
            le = chunk.find("\n", ls)
            line_read = False
        t0, t1, anchor, alias = parsed
        if embed:
            out.append(Link(inner[t0:t1], alias, None, first_line + li, base + s, base + e,
                            anchor, EMBED))
            continue
        if not line_read:
            line = chunk[ls:le] if le >= 0 else chunk[ls:]
            lp = _LINE_PRED_RE.match(line)
            line_pred = lp.group(1) if lp else None
            fields = _inline_fields(line) if "::" in line else []
            line_read = True
        pred = _predicate(fields, line_pred, s - ls, e - ls) if fields else line_pred
        out.append(Link(inner[t0:t1], alias, pred, first_line + li, base + s, base + e, anchor))
    if refs and ("](" in chunk or "]:" in chunk):
        wiki = [(x.start - base, x.end - base) for x in out[first:]]
        md = _markdown_in_chunk(chunk, spans, comments, wiki) if "](" in chunk else []
        if "]:" in chunk:
            md = sorted(md + _definitions(chunk, comments, wiki))
        if md:
            found = out[first:]
            at = line = 0   # md is sorted: count line breaks once, left to right
            for s, e, target, anchor in md:
                line += chunk.count("\n", at, s)
                at = s
                found.append(Link(target, None, None, first_line + line,
                                  base + s, base + e, anchor, MARKDOWN))
            found.sort(key=_link_start)
            out[first:] = found


def _link_start(link: Link) -> int:
    return link.start


# `[text](` or `![alt](`: the text may hold one level of brackets (an image inside a link).
_MD_OPEN_RE = re.compile(r"!?\[(?:[^\[\]\\]|\\.|\[[^\[\]\\]*\])*\]\(")
_SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")


def _markdown_in_chunk(chunk: str, code: list[tuple[int, int]],
                       comments: list[tuple[int, int]],
                       wiki: list[tuple[int, int]]) -> list[tuple[int, int, str, str | None]]:
    """Markdown links and images to a vault path in one paragraph, as (destination start,
    destination end, decoded path, fragment). Every ``[`` is tried, so the image inside
    ``[![alt](a.png)](b.md)`` is found as well as the link around it."""
    found: dict[int, tuple[int, int, str, str | None]] = {}
    m = _MD_OPEN_RE.search(chunk)
    while m is not None:
        s = m.start()
        dest = _destination(chunk, m.end())
        if dest is not None:
            d0, d1, _ = dest
            # Its `[` and its destination must be plain text; the text may hold code.
            if (d0 not in found
                    and not (code and (_inside(code, s, s + 1) or _inside(code, d0, d1)))
                    and not (comments and (_inside(comments, s, s + 1)
                                           or _inside(comments, d0, d1)))
                    and not (wiki and _inside(wiki, d0, d1))):
                parsed = _internal_path(chunk[d0:d1])
                if parsed is not None:
                    found[d0] = (d0, d1, *parsed)
        m = _MD_OPEN_RE.search(chunk, s + 1)
    return sorted(found.values())


# A link reference definition `[id]: dest "title"` (CommonMark 4.7) on one line, after the
# quote and list markers that may open its block; a `[^id]:` label is a footnote, not one.
_DEFINITION_RE = re.compile(
    r"(?:[ \t]*>[ \t]?)*[ ]{0,3}(?:(?:[-*+]|[0-9]{1,9}[.)])[ \t]+)?"
    r"\[(?!\^)(?:[^\[\]\\]|\\.)*[^\s\[\]\\](?:[^\[\]\\]|\\.)*\]:[ \t]*"
    r"(<[^<>\n]*>|[^\s<][^\s]*)"
    r"(?:[ \t]+(?:\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|\((?:[^()\\]|\\.)*\)))?[ \t]*$")


def _definitions(chunk: str, comments: list[tuple[int, int]],
                 wiki: list[tuple[int, int]]) -> list[tuple[int, int, str, str | None]]:
    """Reference definitions opening one paragraph (``[id]: path/x.md "title"``, several in
    a row), as `_markdown_in_chunk` gives links: a definition cannot interrupt a paragraph,
    so the first line that is not one ends them."""
    found: list[tuple[int, int, str, str | None]] = []
    at = _after_own_block(chunk)
    while at <= len(chunk):
        end = chunk.find("\n", at)
        end = len(chunk) if end < 0 else end
        m = _DEFINITION_RE.match(chunk, at, end)
        if m is None or (m.group(1)[0] != "<" and not _balanced(m.group(1))):
            break
        d0, d1 = m.span(1)
        if not (comments and _inside(comments, at, end)) and not (wiki and _inside(wiki, d0, d1)):
            parsed = _internal_path(chunk[d0:d1])
            if parsed is not None:
                found.append((d0, d1, *parsed))
        at = end + 1
    return found


_QUOTES_RE = re.compile(r"(?:[ \t]*>[ \t]?)*")
_BREAK_RE = re.compile(r"[ ]{0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_SETEXT_RE = re.compile(r"[ ]{0,3}(?:=+|-+)[ \t]*$")
_CALLOUT_RE = re.compile(r"\[![^\]\n]+\][-+]?(?:[ \t].*)?$")


def _after_own_block(chunk: str) -> int:
    """Where a chunk's definitions may start: past a first line that is a block of its own
    (a thematic break `***`, a callout's `> [!note]` line, whose body Obsidian reads as a
    new document) or a setext heading (`Title` over `===`), which the line kinds leave
    joined to the lines below them."""
    first_end = chunk.find("\n")
    if first_end < 0:
        return 0
    quotes = _QUOTES_RE.match(chunk).end()
    if _BREAK_RE.match(chunk, quotes, first_end) or \
            (quotes and _CALLOUT_RE.match(chunk, quotes, first_end)):
        return first_end + 1
    second_end = chunk.find("\n", first_end + 1)
    second_end = len(chunk) if second_end < 0 else second_end
    q2 = _QUOTES_RE.match(chunk, first_end + 1).end()
    if chunk[quotes:first_end].strip() and _SETEXT_RE.match(chunk, q2, second_end) \
            and not _DEFINITION_RE.match(chunk, 0, first_end):   # `[a]: x.md` over `---`
        return second_end + 1
    return 0


def _destination(chunk: str, pos: int) -> tuple[int, int, int] | None:
    """(start, end, end of the whole link) of the destination after ``](`` at `pos`, or None
    when no ``)`` closes the link (then it is text, as in CommonMark)."""
    n = len(chunk)
    while pos < n and chunk[pos] in " \t":
        pos += 1
    start = pos
    if pos < n and chunk[pos] == "<":
        end = pos + 1
        while end < n and chunk[end] not in "<>\n":
            end += 1 if chunk[end] != "\\" else 2
        if end >= n or chunk[end] != ">":
            return None
        end += 1
    else:
        depth = 0
        end = pos
        while end < n:
            ch = chunk[end]
            if ch <= " ":
                break
            if ch == "\\":
                end += 2
                continue
            if ch == "(":
                depth += 1
            elif ch == ")":
                if not depth:
                    break
                depth -= 1
            end += 1
        end = min(end, n)
    tail = end
    while tail < n and chunk[tail] in " \t\n":
        tail += 1
    if tail < n and chunk[tail] in "\"'(" and tail > end:
        closer = ")" if chunk[tail] == "(" else chunk[tail]
        tail = chunk.find(closer, tail + 1)
        if tail < 0:
            return None
        tail += 1
        while tail < n and chunk[tail] in " \t\n":
            tail += 1
    if tail >= n or chunk[tail] != ")" or end == start:
        return None
    return start, end, tail + 1


def _internal_path(raw: str) -> tuple[str, str | None] | None:
    """(decoded vault path, fragment) of a destination naming a vault file; None for a URL
    (``http:``, ``mailto:``, ``obsidian:``, ``//host``), a same-note ``#fragment`` or nothing."""
    inner = raw[1:-1] if raw.startswith("<") else raw
    path, hashmark, fragment = inner.partition("#")   # before decoding: %23 is a name's '#'
    if not path.strip() or path.startswith("//") or _SCHEME_RE.match(path):
        return None
    return unquote(path), (fragment if hashmark else None)


def _comment_lines(lines: Sequence[str], kinds: bytearray) -> bytearray | None:
    """Lines inside an HTML comment block (a line starting ``<!--``, through the line that
    holds ``-->``: CommonMark's HTML block kind 2, which ends with that whole line), or None."""
    skip: bytearray | None = None
    i, n = 0, len(lines)
    while i < n:
        if kinds[i] in (START, TEXT) and "<!--" in lines[i]:
            m = _COMMENT_OPEN_RE.match(lines[i])
            if m is not None:
                if skip is None:
                    skip = bytearray(n)
                j, at = i, m.end() - 2   # `<!-->` closes itself
                while j < n and lines[j].find("-->", at) < 0:
                    skip[j] = 1
                    j += 1
                    at = 0
                if j < n:
                    skip[j] = 1
                i = j + 1
                continue
        i += 1
    return skip


_COMMENT_OPEN_RE = re.compile(
    r"(?:[ \t]*>)*[ \t]*(?:(?:[-*+]|[0-9]{1,9}[.)])[ \t]+(?:\[.\][ \t]+)?)*<!--")


def extract_links(text: str, line_offset: int = 1, *, kinds: bytearray | None = None,
                  refs: bool = False) -> list[Link]:
    """All links of a Markdown body, in order. Never raises; code, embeds and HTML comments
    are skipped.

    `line_offset` is the file line of the text's first line (the parser passes the body's start
    line), so ``Link.line`` is a file line while ``start``/``end`` index into `text`. `kinds`
    may pass ``line_kinds(text.split("\\n"))`` when the caller already has it (one scan, not two).
    `refs`: also the references that are not edges (EMBED and MARKDOWN links; see the module
    docstring), in order among the links.
    """
    if "[[" not in text and not (refs and ("](" in text or "]:" in text)):
        return []
    out: list[Link] = []
    for pos, end, i in prose_chunks(text, kinds):
        if text.find("[[", pos, end) >= 0 or (refs and (text.find("](", pos, end) >= 0
                                                         or text.find("]:", pos, end) >= 0)):
            _links_in_chunk(text[pos:end], pos, i + line_offset, out, refs)
    return out


def prose_chunks(text: str, kinds: bytearray | None = None) -> Iterator[tuple[int, int, int]]:
    """(start, end, first line index) of each paragraph-like chunk of `text` that can hold
    links or tags: code blocks and HTML comment blocks are skipped (code spans and inline
    comments are the caller's to mask, per chunk). `kinds` as for `extract_links`."""
    lines = text.split("\n")
    if kinds is None or len(kinds) != len(lines):
        kinds = line_kinds(lines)
    comment = _comment_lines(lines, kinds) if "<!--" in text else None
    n = len(lines)
    i = pos = 0
    while i < n:
        if kinds[i] in (BLANK, FENCE, INDENTED) or (comment is not None and comment[i]):
            pos += len(lines[i]) + 1
            i += 1
            continue
        j = i + 1
        end = pos + len(lines[i])
        while j < n and kinds[j] == TEXT and (comment is None or not comment[j]):
            end += len(lines[j]) + 1
            j += 1
        yield pos, end, i
        pos = end + 1
        i = j


def property_links(frontmatter: Mapping[str, Any]) -> list[Link]:
    """Wikilinks and embeds written in frontmatter text values (``related: "[[x]]"``, list
    items, nested values; never keys), each with offsets into its own value.

    DESIGN §4: frontmatter is no link source, so they are no edges. Obsidian renames
    them, so a `move` or merge keeps them pointing at their file (`retarget`, through
    `fmedit.edit_values`, which walks the same values)."""
    found: list[Link] = []
    todo: list[Any] = list(frontmatter.values())
    while todo:
        value = todo.pop()
        if isinstance(value, str):
            if "[[" in value:
                found += [x for x in extract_links(value, refs=True) if x.kind != MARKDOWN]
        elif isinstance(value, list):
            todo += value
        elif isinstance(value, dict):
            todo += value.values()
    return found


# -- edges and the conservation diff ----------------------------------------------------------
def target_key(target: str) -> str:
    """Spelling-insensitive identity of a link target: NFC, casefolded, without a leading
    ``/`` or ``./``, a trailing ``/`` or ``.md`` (``[[./Foo.md]]`` and ``[[foo]]`` share one).

    The one normalisation of a target's text: the E-1 identity of a dangling link, the
    indexer's link-key index and the transaction's edge check all use it.
    """
    t = unicodedata.normalize("NFC", target.strip().replace("\\", "/"))
    while t.startswith(("/", "./")):
        t = t[1:] if t[0] == "/" else t[2:]
    t = t.casefold().rstrip("/")
    return t[:-3] if t.endswith(".md") else t


def name_key(target: str) -> str:
    """The last segment of `target_key`: what a path, an alias or a link target is matched
    on by name (the resolver's tier 4)."""
    return target_key(target).rsplit("/", 1)[-1]


def edges_of(links: Iterable[Link], resolve: Callable[[str], str | None] | None = None) -> set[Edge]:
    """``(resolved path, or the raw target when unresolved, predicate)`` for each link."""
    edges: set[Edge] = set()
    for link in links:
        hit = resolve(link.target) if resolve is not None else None
        edges.add((hit or link.target, link.predicate))
    return edges


def _keyed_edges(text: str, resolve: Callable[[str], str | None] | None) -> dict[Edge, Edge]:
    keyed: dict[Edge, Edge] = {}
    for link in extract_links(text):
        hit = resolve(link.target) if resolve is not None else None
        key = (hit if hit else "\0" + target_key(link.target), link.predicate)
        keyed.setdefault(key, (hit or link.target, link.predicate))
    return keyed


def missing_edges(old_text: str, new_text: str,
                  resolve: Callable[[str], str | None] | None = None) -> set[Edge]:
    """E-1: edges of `old_text` that `new_text` no longer has (empty set = conserved).

    Edges compare by resolved path, so ``[[rrf]]`` rewritten as ``[[knowledge/rrf/rrf.md|rrf]]``
    is kept, not dropped; without a resolver only spelling variants (case, ``.md``, ``./``)
    compare equal, so callers checking real rewrites should pass one. A predicate change is a
    drop of the old edge. Returned edges use the resolved path when there is one.
    """
    old = _keyed_edges(old_text, resolve)
    if not old:
        return set()
    new = _keyed_edges(new_text, resolve)
    return {shown for key, shown in old.items() if key not in new}


@dataclass(frozen=True)
class NewTarget:
    """A rewrite of one link: its new target text, plus the text to show when the link has
    none yet (``[[Old]]`` -> ``[[New|Old]]``: the sentence keeps reading the same)."""

    target: str
    shown: str | None = None


def rewrite_targets(text: str, mapping: Callable[[Link], str | NewTarget | None], *,
                    refs: bool = False) -> str:
    """Replace the target of each link for which `mapping` returns a new one.

    Only the target characters change, plus an added ``|shown`` text when `mapping` asks
    for one and the link has none (escaped ``\\|`` in a table row): alias, anchor,
    predicate, spacing and every other byte stay as written (`move`, merge, lint --fix).
    With `refs`, embeds and Markdown links are passed to `mapping` too (never given shown
    text: an embed's ``|100`` is its size); a Markdown destination gets the new path
    encoded as the old one was (`markdown_destination`), its fragment and ``<...>`` kept.
    """
    pieces: list[str] = []
    last = 0
    for link in extract_links(text, refs=refs):
        new = mapping(link)
        if isinstance(new, str):
            new = NewTarget(new)
        if new is None or (new.target == link.target and (new.shown is None or link.alias)):
            continue
        if link.kind == MARKDOWN:
            if new.target != link.target:
                pieces += [text[last:link.start],
                           markdown_destination(text[link.start:link.end], new.target)]
                last = link.end
            continue
        inner_at = link.start + 2
        parsed = _parse_inner(text[inner_at:link.end - 2])
        if parsed is None:  # pragma: no cover - extract_links only yields non-empty targets
            continue
        t0, t1 = inner_at + parsed[0], inner_at + parsed[1]
        pieces += [text[last:t0], new.target]
        last = t1
        if new.shown is not None and link.alias is None and link.kind == LINK:
            end = link.end - 2  # after the target and any #anchor, before `]]`
            bar = "\\|" if _in_table_row(text, link.start) else "|"
            pieces += [text[last:end], bar + new.shown]
            last = end
    if not pieces:
        return text
    pieces.append(text[last:])
    return "".join(pieces)


# Characters a bare Markdown destination cannot hold as themselves. Obsidian writes only a
# space as %20 (`Sub/We!rd%20(name)%20[x].md`); a literal '%' or '#' must be escaped too, or
# the name would decode (or split at its fragment) differently. Parentheses stay as written
# while they pair up (CommonMark allows balanced ones).
_MD_ESCAPE = frozenset(" %#<>\t\n\r\\")
_NON_ASCII_ESCAPE_RE = re.compile(r"%[89A-Fa-f][0-9A-Fa-f]")


def _balanced(path: str) -> bool:
    depth = 0
    for ch in path:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


def markdown_destination(old: str, path: str) -> str:
    """The destination text naming `path`, written as `old` was: inside ``<...>`` as plain
    text, else percent-encoded as Obsidian writes it (a space as ``%20``, plus ``%``, ``#``,
    ``<>``, unpaired parentheses; non-ASCII letters only when `old` encoded them); `old`'s
    ``#fragment`` is kept as written."""
    angle = old.startswith("<") and old.endswith(">")
    inner = old[1:-1] if angle else old
    _, hashmark, fragment = inner.partition("#")
    if angle:
        encoded = path.replace("<", "%3C").replace(">", "%3E")
    else:
        ascii_only = bool(_NON_ASCII_ESCAPE_RE.search(inner.partition("#")[0]))
        parens = not _balanced(path)
        encoded = "".join(
            quote(ch, safe="") if ch in _MD_ESCAPE or ord(ch) < 0x20
            or (parens and ch in "()") or (ascii_only and ord(ch) > 0x7E) else ch
            for ch in path)
    out = encoded + hashmark + fragment
    return f"<{out}>" if angle else out


def remove_links(text: str, drop: Callable[[Link], bool]) -> tuple[str, list[Link]]:
    """`text` without the links `drop` selects, and those links (DESIGN §5: the explicit,
    audited removal; every other link and byte stays).

    A bare link becomes its shown text (`[[A|the a]]` -> `the a`), so the sentence still
    reads; a predicate link is metadata and goes with its separator: `p:: [[A]], [[B]]`
    keeps `p:: [[B]]`, a `p::` line left empty is removed, and so is an empty `[p:: ]` field.
    """
    chosen = [link for link in extract_links(text) if drop(link)]
    if not chosen:
        return text, []
    pieces: list[str] = []
    last = 0
    for link in chosen:
        pieces.append(text[last:link.start])
        if link.predicate is None:
            pieces.append(_shown_text(link))
        else:
            pieces.append("\0")  # a hole, cleaned up per line below
        last = link.end
    pieces.append(text[last:])
    out = "".join(pieces)
    if "\0" in out:
        out = "".join(_clean_line(line) for line in out.splitlines(keepends=True))
    return out, chosen


def _shown_text(link: Link) -> str:
    if link.alias is not None:
        return link.alias
    name = link.target.rsplit("/", 1)[-1]
    return name[:-3] if name.lower().endswith(".md") else name


_HOLE_SEP_RE = re.compile(r"[ \t]*,[ \t]*\0|\0[ \t]*,[ \t]*|\0")
_EMPTY_FIELD_RE = re.compile(r"[ \t]?\[[ \t]*[A-Za-z_][A-Za-z0-9_]*[ \t]*::[ \t]*\]")


def _clean_line(line: str) -> str:
    """Remove link holes with their comma, then an inline field or a `p::` line left empty."""
    if "\0" not in line:
        return line
    body = line.rstrip("\r\n")
    end = line[len(body):]
    body = _HOLE_SEP_RE.sub("", body)
    body = _EMPTY_FIELD_RE.sub("", body)
    lp = _LINE_PRED_RE.match(body)
    if lp is not None and not body[lp.end():].strip():
        return ""  # the predicate line named only removed links
    return body.rstrip(" \t") + end


def _in_table_row(text: str, pos: int) -> bool:
    start = text.rfind("\n", 0, pos) + 1
    return text[start:pos].lstrip().startswith("|")


# -- resolution -------------------------------------------------------------------------------
def _nfc(s: str) -> str:
    return unicodedata.normalize("NFC", s)


def _escapes(path: str) -> bool:
    return path == ".." or path.startswith(("../", "/"))


def _path_key(path: str) -> str:
    key = _nfc(path).casefold()
    return key[:-3] if key.endswith(".md") else key


class LinkResolver:
    """Resolves human-written targets to vault paths (DESIGN §4 order); incremental.

    Order: 1 exact path; 2 path + ``.md``; 3 folder note ``X/X.md``; 4 the unique note whose
    file name (case-insensitive, with or without ``.md``; a target with folders must match the
    path's tail) is the target, else the unique note with that alias or title; 5 the unique
    note holding a merge redirect for it (old path or name); 6 None (dangling). Ambiguity
    at tiers 4-5 resolves to None and `ambiguous` lists the candidates.
    A leading ``/`` or ``./`` is accepted; ``./x`` and ``../x`` are first tried against the
    source note's folder, and a target that would leave the vault never resolves. Tiers 1-3
    match the path as written, then its NFC form only when one file has it, so NFC/NFD twins
    (``é.md`` twice) resolve the same in every process, whatever the file order.
    """

    def __init__(self, paths: Iterable[str],
                 aliases: Mapping[str, Iterable[str]] | None = None,
                 redirects: Mapping[str, Iterable[str]] | None = None) -> None:
        self._paths: set[str] = set()
        self._exact: dict[str, set[str]] = {}  # NFC path -> paths as given (NFC/NFD twins)
        self._key: dict[str, str] = {}  # path -> casefolded NFC path without '.md'
        self._names: dict[str, set[str]] = {}  # last segment of the key -> paths
        self._alias_paths: dict[str, set[str]] = {}  # casefolded alias -> paths
        self._aliases_of: dict[str, list[str]] = {}
        self._redirect_paths: dict[str, set[str]] = {}  # key of an old path/name -> holders
        self._redirects_of: dict[str, list[str]] = {}
        self._base: tuple[LinkResolver, frozenset[str]] | None = None   # set by `derive`
        for path in paths:
            self.add(path, (aliases or {}).get(path, ()), (redirects or {}).get(path, ()))

    def __contains__(self, path: object) -> bool:
        return path in self._paths

    def __len__(self) -> int:
        return len(self._paths)

    def add(self, path: str, aliases: Iterable[str] = (), redirects: Iterable[str] = ()) -> None:
        """Add a note (or replace its aliases and redirects if it is known)."""
        if path in self._paths:
            self.remove(path)
        self._paths.add(path)
        self._exact.setdefault(_nfc(path), set()).add(path)
        key = _path_key(path)
        self._key[path] = key
        self._names.setdefault(key.rsplit("/", 1)[-1], set()).add(path)
        keys = _alias_keys(aliases)
        for a in keys:
            self._alias_paths.setdefault(a, set()).add(path)
        self._aliases_of[path] = keys
        old = _redirect_keys_of(redirects)
        for k in old:
            self._redirect_paths.setdefault(k, set()).add(path)
        if old:
            self._redirects_of[path] = old

    def derive(self, remove: Iterable[str] = (),
               add: Mapping[str, tuple[Iterable[str], Iterable[str]]] | None = None,
               *, remember: bool = True) -> LinkResolver:
        """A new resolver: this one without `remove`, plus `add` (path -> (aliases,
        redirects), replacing a known path's names). This one is left as it is.

        Why: a plan needs the resolver before and after its change, and building one walks
        every file (~0.25 s at 10k). The copy shares every index set the change does not
        touch (copied dicts, sets copied only where written), and remembers what changed,
        so `changed_keys` need not compare the two resolvers whole (`remember=False`: a
        resolver kept for later derives must not keep its whole line of bases alive).
        """
        add = dict(add or {})
        new = object.__new__(LinkResolver)
        new._paths = set(self._paths)
        new._exact, new._key, new._names = dict(self._exact), dict(self._key), dict(self._names)
        new._alias_paths, new._aliases_of = dict(self._alias_paths), dict(self._aliases_of)
        new._redirect_paths = dict(self._redirect_paths)
        new._redirects_of = dict(self._redirects_of)
        touched = set(remove) | add.keys()
        # Copy-on-write: every set the removes and adds below write is copied first.
        for path in touched:
            if path in self._paths:
                _own(new._exact, _nfc(path))
                _own(new._names, self._key[path].rsplit("/", 1)[-1])
                for a in self._aliases_of.get(path, ()):
                    _own(new._alias_paths, a)
                for k in self._redirects_of.get(path, ()):
                    _own(new._redirect_paths, k)
        for path, (aliases, redirects) in add.items():
            _own(new._exact, _nfc(path))
            _own(new._names, _path_key(path).rsplit("/", 1)[-1])
            for a in _alias_keys(aliases):
                _own(new._alias_paths, a)
            for k in _redirect_keys_of(redirects):
                _own(new._redirect_paths, k)
        for path in touched:
            new.remove(path)
        for path, (aliases, redirects) in add.items():
            new.add(path, aliases, redirects)
        new._base = (self, frozenset(touched)) if remember else None
        return new

    def keys_of(self, path: str) -> set[str]:
        """`file_keys` of a known path with its names as this resolver holds them; empty
        for an unknown path."""
        key = self._key.get(path)
        if key is None:
            return set()
        return _keys(key, self._aliases_of.get(path, ()), self._redirects_of.get(path, ()))

    def remove(self, path: str) -> None:
        """Forget a note; unknown paths are ignored."""
        if path not in self._paths:
            return
        self._paths.discard(path)
        _discard(self._exact, _nfc(path), path)  # a Unicode twin keeps its own entry
        key = self._key.pop(path)
        _discard(self._names, key.rsplit("/", 1)[-1], path)
        for a in self._aliases_of.pop(path, []):
            _discard(self._alias_paths, a, path)
        for k in self._redirects_of.pop(path, []):
            _discard(self._redirect_paths, k, path)

    def resolve(self, target: str, source: str | None = None, *,
                markdown: bool = False) -> str | None:
        """The vault path `target` names, or None when it is dangling or ambiguous.

        `markdown`: the target of a Markdown link (decoded), which may also be a path
        relative to the source's folder without ``./`` (what Obsidian's "relative path"
        format writes: ``[x](sub/x.md)``); tried after the vault path, before names."""
        return self._lookup(target, source, markdown)[0]

    def resolve_how(self, target: str, source: str | None = None, *,
                    markdown: bool = False) -> tuple[str | None, str | None]:
        """(path, tier) where tier says how it resolved: "path" (exact path, path + .md,
        or relative), "relative" (a Markdown link's path under the source's folder),
        "folder_note" (``X`` -> ``X/X.md``), "name" (unique file name),
        "alias" (an alias or title) or "redirect" (an old path or name of a note merged
        into it); (None, None) when dangling or ambiguous.

        Obsidian resolves only "path", "relative" and "name" links (lint reports the others)."""
        hit, _, tier = self._lookup(target, source, markdown)
        return hit, tier if hit else None

    def ambiguous(self, target: str) -> list[str]:
        """Candidate paths when `target` is an ambiguous file name or alias, else []."""
        return self._lookup(target, None)[1]

    def _lookup(self, target: str, source: str | None,
                markdown: bool = False) -> tuple[str | None, list[str], str | None]:
        # Paths keep the target's own Unicode form, so `_direct` can try the exact file name
        # before its NFC twin; the fuzzy tier compares NFC forms.
        t = target.strip().replace("\\", "/")
        if not t:
            return None, [], None
        if source is not None and t.startswith(("./", "../")):
            folder = posixpath.dirname(source.strip().replace("\\", "/").lstrip("/"))
            joined = posixpath.normpath(posixpath.join(folder, t))
            if _escapes(joined):
                return None, [], None
            hit, tier = self._direct(joined)
            if hit or t.startswith("../"):
                return hit, [], tier
        rel = t
        while rel.startswith(("/", "./")):
            rel = rel[1:] if rel[0] == "/" else rel[2:]
        if not rel:
            return None, [], None
        norm = posixpath.normpath(rel)
        if norm == "." or _escapes(norm):
            return None, [], None
        hit, tier = self._direct(norm)
        if hit:
            return hit, [], tier
        if markdown and source is not None and not t.startswith(("/", "./")):
            if "/" not in norm:   # a bare name is a name first (same result when unique)
                found = self._fuzzy(_nfc(norm), _nfc(t))
                if found[0]:
                    return found
            folder = posixpath.dirname(source.strip().replace("\\", "/").lstrip("/"))
            joined = posixpath.normpath(posixpath.join(folder, norm)) if folder else ""
            if joined and not _escapes(joined):
                hit, tier = self._direct(joined)
                if hit:
                    return hit, [], "relative" if tier == "path" else tier
        return self._fuzzy(_nfc(norm), _nfc(t))

    def _direct(self, p: str) -> tuple[str | None, str | None]:
        """Tiers 1-3. Each candidate is tried as written, then by its NFC form, which counts
        only when one file has it: NFC/NFD twins (`é.md` twice) never resolve by file order."""
        stem = p[:-3] if p.endswith(".md") else p
        for i, cand in enumerate((p, p + ".md", f"{p}/{posixpath.basename(p)}.md",
                                  f"{stem}/{posixpath.basename(stem)}.md")):
            tier = "path" if i < 2 else "folder_note"
            if cand in self._paths:
                return cand, tier
            twins = self._exact.get(_nfc(cand))
            if twins is not None and len(twins) == 1:
                return next(iter(twins)), tier
        return None, None

    def _fuzzy(self, norm: str, raw: str) -> tuple[str | None, list[str], str | None]:
        key = _path_key(norm)
        name = key.rsplit("/", 1)[-1]
        cands: Iterable[str] = self._names.get(name, ())
        if "/" in key:
            folder_note = f"{key}/{name}"
            cands = [c for c in cands
                     if (k := self._key[c]) in (key, folder_note)
                     or k.endswith(("/" + key, "/" + folder_note))]
        found = sorted(cands)
        tier = "name"
        if not found:
            found = sorted(self._alias_paths.get(raw.casefold(), ()))
            tier = "alias"
        if not found and self._redirect_paths:
            found = sorted({p for k in {key, raw.casefold()}
                            for p in self._redirect_paths.get(k, ())})
            tier = "redirect"
        if len(found) == 1:
            return found[0], [], tier
        return None, found, None


def changed_keys(before: LinkResolver, after: LinkResolver) -> set[str]:
    """The `link_key`s whose links may resolve differently (or by another tier) in `after`
    than in `before`: the keys of every path added, removed or given other names. A link
    whose key is not among them, in a note that stays where it is, keeps its meaning.

    Resolution is a function of the paths, aliases and redirects only, and every tier
    finds a path by one of its `keys_of`. When `after` was derived from `before` only the
    paths it touched are compared; else the two are compared whole (O(files))."""
    if after._base is not None and after._base[0] is before:
        paths: Iterable[str] = after._base[1]
    else:
        paths = (before._paths ^ after._paths) | {
            p for p in before._paths & after._paths
            if before._aliases_of.get(p) != after._aliases_of.get(p)
            or before._redirects_of.get(p) != after._redirects_of.get(p)}
    keys: set[str] = set()
    for path in paths:
        if ((path in before) != (path in after)
                or before._aliases_of.get(path) != after._aliases_of.get(path)
                or before._redirects_of.get(path) != after._redirects_of.get(path)):
            keys |= before.keys_of(path) | after.keys_of(path)
    return keys


def file_keys(path: str, aliases: Iterable[str] = (),
              redirects: Iterable[str] = ()) -> set[str]:
    """Every `link_key` a link that resolves to the file at `path` with these names (or
    competes for them) can have: its file name (also without a second ``.md``:
    ``[[x.md]]`` names ``x.md.md``), its aliases' and its redirects' last segments.

    The one answer to "which links can a new, gone or renamed file change": `retarget`
    (through `LinkResolver.keys_of`) and the indexer's incremental graph both ask it."""
    return _keys(_path_key(path), _alias_keys(aliases), _redirect_keys_of(redirects))


def _keys(path_key: str, alias_keys: Iterable[str], redirect_keys: Iterable[str]) -> set[str]:
    name = path_key.rsplit("/", 1)[-1]
    keys = {name, name[:-3]} if name.endswith(".md") else {name}
    keys.update(_key_tail(a) for a in alias_keys)
    keys.update(_key_tail(k) for k in redirect_keys)
    return keys


def link_key(target: str) -> str | None:
    """The key `changed_keys` speaks of for a link's target (`name_key`), or None for a
    target whose last segment is ``.``, ``..`` or empty (``[[../]]`` names a folder note
    that no key can say): such a link is checked whatever changed."""
    key = name_key(target)
    return None if key in ("", ".", "..") else key


def _key_tail(key: str) -> str:
    """`name_key` of an already NFC-casefolded resolver key (an alias or redirect key)."""
    while key.startswith(("/", "./")):
        key = key[1:] if key[0] == "/" else key[2:]
    key = key.rstrip("/")
    key = key[:-3] if key.endswith(".md") else key
    return key.rsplit("/", 1)[-1]


def _alias_keys(aliases: Iterable[str] | str | None) -> list[str]:
    if isinstance(aliases, str):  # `aliases: foo` in YAML is one alias, not three letters
        aliases = [aliases]
    keys: list[str] = []
    for alias in aliases or ():
        if alias is None:
            continue
        a = _nfc(str(alias).strip()).casefold()
        if a and a not in keys:
            keys.append(a)
    return keys


def _redirect_keys_of(redirects: Iterable[str] | None) -> list[str]:
    return sorted({k for r in redirects or () if r is not None for k in _redirect_keys(str(r))})


def _own(index: dict[str, set[str]], key: str) -> None:
    """Give `index` its own copy of the set at `key` (shared with a `derive` base)."""
    paths = index.get(key)
    if paths is not None:
        index[key] = set(paths)


def _redirect_keys(old: str) -> set[str]:
    """The keys an old path or name is found by: a name as itself (casefolded, NFC); a path
    also without ``.md``, by its folder when it was a folder note ``X/X.md``, and by its
    file name (what a short ``[[name]]`` link to it said)."""
    raw = _nfc(old.strip().replace("\\", "/")).lstrip("/")
    if not raw:
        return set()
    keys = {raw.casefold()}
    if "/" in raw or raw.casefold().endswith(".md"):
        key = _path_key(raw)
        folder, _, name = key.rpartition("/")
        keys |= {key, name}
        if folder and folder.rsplit("/", 1)[-1] == name:
            keys.add(folder)
    return keys


def _discard(index: dict[str, set[str]], key: str, path: str) -> None:
    paths = index.get(key)
    if paths is not None:
        paths.discard(path)
        if not paths:
            del index[key]
