"""Find unlinked mentions of known node names in a note body (auto-link L1, DESIGN §9, §4).

One Aho–Corasick automaton over every folded name (`pyahocorasick`) scans a body once, however
many names there are; one regex per name would not scale to thousands of nodes.

A match counts as a mention only outside *protected* text — the places where wrapping it in
``[[...]]`` would change meaning or break Markdown:

- existing wikilinks and embeds, Markdown links and images, reference definitions;
- inline code, fenced and indented code blocks (DESIGN §4: code is not a link source);
- URLs, e-mail addresses, ``<...>`` autolinks / HTML tags and comments, ``#tags``;
- heading lines (ATX and setext: a heading is an anchor target, so its text must not change);
- tables (an alias ``|`` would split the cell) and predicate keys (``uses::``).

Latin-script names match whole words only ("JWT" not inside "JWTs"); CJK text has no spaces,
so a CJK edge of a name needs no boundary. A mention touching ``[`` or ``]`` is skipped (it may
be a reference link or a task box). Overlapping matches are resolved longest first, then
leftmost, so "JWT rotation" wins over "JWT".
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

import ahocorasick

from reme_agent.engine.links import BLANK, FENCE, INDENTED, START, _code_spans, line_kinds
from reme_agent.maintenance.autolink.names import NameIndex, fold

__all__ = ["Kind", "Matcher", "Mention", "Proposal", "Unprotected", "bounded", "protected_spans",
           "select_longest"]


@dataclass(frozen=True)
class Mention:
    """A name found in unprotected text; `text` is the body's own characters."""

    start: int
    end: int
    text: str
    key: str
    candidates: tuple[str, ...]


Kind = Literal["variant", "near"]


@dataclass(frozen=True)
class Proposal:
    """A fuzzy mention at [start, end) of the body, close to `name` of each candidate node."""

    start: int
    end: int
    text: str
    key: str
    candidates: tuple[str, ...]
    kind: Kind
    name: str
    score: float | None = None  # embedding similarity of the text to the name (near only)


class _Span(Protocol):
    @property
    def start(self) -> int: ...

    @property
    def end(self) -> int: ...


M = TypeVar("M", bound=_Span)


# -- protected text ---------------------------------------------------------------------------
_HEADING_RE = re.compile(r"(?:[ \t]*>)*[ \t]{0,3}(?:(?:[-*+]|\d{1,9}[.)])[ \t]+)?#{1,6}(?:[ \t]|$)")
_SETEXT_RE = re.compile(r"(?:[ \t]*>)*[ \t]{0,3}(?:=+|-+)[ \t]*$")
_TABLE_DELIM_RE = re.compile(r"[ \t]*\|?(?:[ \t]*:?-+:?[ \t]*\|)+(?:[ \t]*:?-+:?[ \t]*)?$")
_REF_DEF_RE = re.compile(r"[ \t]{0,3}\[[^\]\n]+\]:")
_SPAN_RES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("[[", re.compile(r"!?\[\[[^\[\]\n]*\]\]")),
    ("](", re.compile(r"!?\[[^\]\n]*\]\([^)\n]*\)")),
    ("][", re.compile(r"\[[^\]\n]*\]\[[^\]\n]*\]")),
    ("<!--", re.compile(r"<!--.*?-->", re.S)),
    ("<", re.compile(r"<[^<>\n]+>")),
    ("mailto:", re.compile(r"mailto:[^\s<>()\[\]]*")),
    ("www.", re.compile(r"www\.[^\s<>()\[\]]*")),
    ("@", re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")),
    ("::", re.compile(r"(?m)^(?:[ \t]*>)*[ \t]*(?:(?:[-*+]|\d{1,9}[.)])[ \t]+(?:\[.\][ \t]+)?)?"
                      r"[A-Za-z_][A-Za-z0-9_]*[ \t]*::")),
    ("::", re.compile(r"\[[ \t]*[A-Za-z_][A-Za-z0-9_]*[ \t]*::")),
)


_TAG_RE = re.compile(r"#[^\s#\[\](){}<>,.;:!?'\"`]+")
_URL_STOP = frozenset(" \t\r\n<>()[]")
_SCHEME = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")


def _urls(body: str, spans: list[tuple[int, int]]) -> None:
    """``scheme://...`` spans, found from each ``://`` (faster than a regex over every word)."""
    at = body.find("://")
    n = len(body)
    while at >= 0:
        lo = at
        while lo > 0 and body[lo - 1] in _SCHEME:
            lo -= 1
        hi = at + 3
        while hi < n and body[hi] not in _URL_STOP:
            hi += 1
        if lo < at:
            spans.append((lo, hi))
        at = body.find("://", hi)


def protected_spans(body: str, kinds: bytearray | None = None) -> list[tuple[int, int]]:
    """Sorted, merged ``(start, end)`` spans of `body` where no link may be inserted.

    `kinds` may pass ``line_kinds(body.split("\\n"))`` when the caller already has it.
    """
    spans: list[tuple[int, int]] = []
    lines = body.split("\n")
    if kinds is None or len(kinds) != len(lines):
        kinds = line_kinds(lines)
    starts = []
    pos = 0
    for line in lines:
        starts.append(pos)
        pos += len(line) + 1
    n = len(lines)
    i = 0
    while i < n:
        kind = kinds[i]
        if kind == BLANK:
            i += 1
            continue
        if kind in (FENCE, INDENTED):
            spans.append((starts[i], starts[i] + len(lines[i])))
            i += 1
            continue
        # A paragraph-like chunk: this START line plus its continuation lines.
        j = i + 1
        while j < n and kinds[j] not in (BLANK, FENCE, INDENTED, START):
            j += 1
        lo, hi = starts[i], starts[j - 1] + len(lines[j - 1])
        if any("|" in ln and _TABLE_DELIM_RE.match(ln) for ln in lines[i:j]):
            spans.append((lo, hi))  # a table: an alias `|` would split its cell
        else:
            head = lo  # where the text of a setext heading would begin
            for k in range(i, j):
                line = lines[k]
                if k > i and line[:1] in "=- \t>" and _SETEXT_RE.match(line):
                    spans.append((head, starts[k] + len(line)))  # setext heading + underline
                    head = starts[k] + len(line) + 1
                elif ("#" in line and _HEADING_RE.match(line)) or \
                        ("[" in line and _REF_DEF_RE.match(line)):
                    spans.append((starts[k], starts[k] + len(line)))
            if "`" in body[lo:hi]:
                spans.extend((lo + s, lo + e) for s, e in _code_spans(body[lo:hi]))
        i = j
    for trigger, pattern in _SPAN_RES:
        if trigger in body:
            spans.extend(m.span() for m in pattern.finditer(body))
    if "://" in body:
        _urls(body, spans)
    if "#" in body:  # tags: `#word` at the start of a line or after a space
        spans.extend(m.span() for m in _TAG_RE.finditer(body)
                     if m.start() == 0 or body[m.start() - 1].isspace())
    return _merge(spans)


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    if not spans:
        return []
    spans.sort()
    out = [spans[0]]
    for s, e in spans[1:]:
        ls, le = out[-1]
        if s <= le:
            if e > le:
                out[-1] = (ls, e)
        else:
            out.append((s, e))
    return out


# -- word boundaries --------------------------------------------------------------------------
def _spaced_word_char(c: str) -> bool:
    """A letter or digit of a script that separates words with spaces (not CJK / kana)."""
    if not (c.isalnum() or c == "_"):
        return False
    o = ord(c)
    return o < 0x2E80 or 0xAC00 <= o <= 0xD7AF or 0xFF10 <= o <= 0xFF5A


def bounded(body: str, start: int, end: int) -> bool:
    first, last = body[start], body[end - 1]
    if start > 0:
        prev = body[start - 1]
        if prev == "[" or (_spaced_word_char(first) and _spaced_word_char(prev)):
            return False
    if end < len(body):
        nxt = body[end]
        if nxt == "]" or (_spaced_word_char(last) and _spaced_word_char(nxt)):
            return False
    return True


# -- the matcher ------------------------------------------------------------------------------
class Matcher:
    """Multi-pattern matcher over a NameIndex; rebuild it when the names change."""

    def __init__(self, index: NameIndex) -> None:
        self.index = index
        self._automaton: Any = None
        keys = list(index.keys())
        if keys:
            automaton = ahocorasick.Automaton()
            for key in keys:
                automaton.add_word(key, key)
            automaton.make_automaton()
            self._automaton = automaton

    def find(self, body: str, kinds: bytearray | None = None) -> list[Mention]:
        """Non-overlapping mentions in document order (longest first, then leftmost).

        `kinds` may pass ``line_kinds(body.split("\\n"))`` when the caller already has it.
        """
        if self._automaton is None or not body:
            return []
        return select_longest(self.raw(body, lambda: protected_spans(body, kinds)))

    def raw(self, body: str, spans: Callable[[], list[tuple[int, int]]]) -> list[Mention]:
        """Every bounded match outside protected text, overlaps included.

        `spans` is called only when some name occurs at all (the common case is none).
        """
        if self._automaton is None or not body:
            return []
        raw = [(last + 1 - len(key), last + 1, key)
               for last, key in self._automaton.iter(fold(body))]
        raw = [m for m in raw if bounded(body, m[0], m[1])]
        if not raw:
            return []
        free = Unprotected(spans())
        found: list[Mention] = []
        for start, end, key in raw:
            if not free.contains(start, end):
                continue  # starts inside, or overlaps, protected text
            cands = self.index.candidates(key, body[start:end])
            if cands:
                found.append(Mention(start, end, body[start:end], key, cands))
        return found


class Unprotected:
    """Membership test against sorted, merged protected spans."""

    def __init__(self, spans: list[tuple[int, int]]) -> None:
        self.spans = spans
        self.starts = [s for s, _ in spans]

    def contains(self, start: int, end: int) -> bool:
        k = bisect_right(self.starts, end - 1) - 1
        return not (k >= 0 and self.spans[k][1] > start)


def select_longest(found: list[M]) -> list[M]:
    """Non-overlapping mentions in document order: longest first, then leftmost."""
    if not found:
        return []
    ordered = sorted(found, key=lambda m: (m.start - m.end, m.start))
    taken = bytearray(max(m.end for m in found))
    chosen: list[M] = []
    for m in ordered:
        if any(taken[m.start:m.end]):
            continue
        taken[m.start:m.end] = b"\x01" * (m.end - m.start)
        chosen.append(m)
    chosen.sort(key=lambda m: m.start)
    return chosen
