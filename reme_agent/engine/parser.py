"""Note parser: YAML frontmatter, body, blocks with line spans and hashes, links (DESIGN §6, §4).

Pure functions, no I/O. The indexer diffs block hashes (only new or changed blocks are
embedded), so a block's hash depends on its own text only, never on its position.

Decisions where DESIGN is silent:

- Line endings are normalised to ``\\n`` (``\\r\\n`` -> ``\\n``; in a text with no ``\\n`` at all,
  old-Mac ``\\r`` -> ``\\n``) and a leading BOM is dropped; ``body`` is that normalised text.
  Lines are counted on the normalised ``\\n`` only, everywhere.
- Frontmatter is a first line ``---`` and the next line that is ``---`` or ``...``. Without a
  closing line the first ``---`` is an ordinary thematic break: no frontmatter, no error.
- The YAML itself is read by the note codec (`engine.codec`: python-frontmatter, the safe
  loader and its limits; duplicate keys are refused like malformed YAML).
- Malformed YAML never hides the note: the frontmatter becomes ``{}``, the whole text is the
  body (so it is still indexed), and ``error`` says which file line failed.
- Frontmatter is always JSON-able: dates become ISO strings, keys become strings, sets become
  sorted lists and binary becomes base64 text.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reme_agent.engine.codec import HANDLER, MAX_FRONTMATTER_BYTES, MAX_YAML_ALIASES
from reme_agent.engine.links import FENCE, INDENTED, LINK, Link, extract_links, line_kinds
from reme_agent.engine.tags import body_tags
from reme_agent.errors import ParseError

__all__ = [
    "MAX_FRONTMATTER_BYTES",
    "MAX_YAML_ALIASES",
    "Block",
    "NoteParts",
    "ParsedNote",
    "dump_note",
    "eol_of",
    "normalize_eol",
    "on_lf",
    "parse_note",
    "restore_eol",
    "split_blocks",
    "split_frontmatter",
    "split_note",
]

_HEADING_RE = re.compile(r" {0,3}#{1,6}(?=[ \t]|$)")


@dataclass(frozen=True)
class Block:
    """A retrieval unit of a note: its file line span, text and content hash."""

    index: int
    start_line: int
    end_line: int
    text: str
    hash: str
    heading: str | None


@dataclass
class ParsedNote:
    """Everything the indexer needs from one file; `links` come from the body only."""

    path: str
    frontmatter: dict[str, Any]
    body: str
    body_start_line: int
    blocks: list[Block]
    links: list[Link]
    error: ParseError | None
    tags: list[str] = field(default_factory=list)   # inline `#tags` of the body
    refs: list[Link] = field(default_factory=list)  # embeds, Markdown links: no edges


# -- frontmatter ------------------------------------------------------------------------------
def eol_of(text: str) -> str:
    """The line ending a note is written with: CRLF, CR (old Mac, when the text has no LF at
    all) or LF. Edits write new lines with it, so a CRLF note stays CRLF."""
    if "\r\n" in text:
        return "\r\n"
    if "\r" in text and "\n" not in text:
        return "\r"
    return "\n"


def normalize_eol(text: str) -> str:
    """`text` with CRLF (or, in a CR-only text, CR) line endings turned into LF.

    For a CR-only text every offset stays the same (one character for one), so an edit
    planned on the LF form can be applied to the raw text with `restore_eol`.
    """
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    if "\r" in text and "\n" not in text:
        text = text.replace("\r", "\n")
    return text


def restore_eol(text: str, eol: str) -> str:
    """LF text written back with the note's line ending (`eol_of` of the original)."""
    return text if eol == "\n" else text.replace("\n", eol)


def on_lf(text: str, eol: str, edit: Callable[[str], str]) -> str:
    """`edit` applied to a raw note text (or body) with the note's line ending `eol`.

    LF and CRLF text is edited as it is (the link and block scanners read CRLF); an old-Mac
    CR-only text is edited in its LF form and turned back, one character for one, so every
    byte the edit does not touch is kept."""
    if eol != "\r":
        return edit(text)
    return restore_eol(edit(text.replace("\r", "\n")), "\r")


def split_frontmatter(text: str, path: str = "") -> tuple[dict[str, Any], str, int, ParseError | None]:
    """Split a note into (frontmatter, body, body_start_line, error).

    On malformed or refused YAML: ``({}, whole normalised text, 1, ParseError naming the
    file line)``.
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    text = normalize_eol(text)
    found = HANDLER.locate(text)
    if found is None:
        return {}, text, 1, None
    start, end, body_pos = found
    fm_text = text[start:end]
    body_start = fm_text.count("\n") + 3  # opening line + YAML lines + closing line, then 1-based
    try:
        data = HANDLER.load(fm_text, path)
    except ParseError as error:
        return {}, text, 1, error
    return data, text[body_pos:], body_start, None


@dataclass(frozen=True)
class NoteParts:
    """A note cut at the end of its frontmatter, byte for byte: ``head + body == text``.

    `head` is the raw frontmatter block (fences, CRLF and comments as written); `body` the
    raw rest, so an edit of either keeps the other exactly. Malformed frontmatter gives an
    empty `head`, ``{}`` and the whole text as `body` (with `error`), as the indexer sees it.
    `eol` is the note's line ending (`eol_of`).
    """

    frontmatter: dict[str, Any]
    head: str
    body: str
    body_start: int  # 1-based file line of the body's first line
    error: ParseError | None = None
    eol: str = "\n"

    def with_body(self, body: str) -> str:
        """The note with a new `body` after its frontmatter block, byte for byte.

        A note that is only frontmatter may end right after its closing ``---`` with no
        newline; gluing a body there (``---new``) would unclose the block and turn every
        property into body text, so the note's own line ending goes in between."""
        if body and self.head and not self.head.endswith(("\n", "\r")):
            return self.head + self.eol + body
        return self.head + body


def split_note(text: str, path: str = "") -> NoteParts:
    """Frontmatter and raw body of a note's text (see `NoteParts`); never raises.

    `split_frontmatter` finds the boundary on the normalised text; the cut is made in the
    original at the same line, so line endings and every other byte are kept.
    """
    eol = eol_of(text)
    fm, body, body_start, error = split_frontmatter(text, path)
    if error is not None or body_start == 1:
        return NoteParts(fm, "", text, 1, error, eol)
    lines = text.split("\r" if eol == "\r" else "\n")
    sep = "\r" if eol == "\r" else "\n"
    raw_body = sep.join(lines[body_start - 1:]) if body and body_start - 1 < len(lines) else ""
    return NoteParts(fm, text[:len(text) - len(raw_body)], raw_body, body_start, None, eol)


def dump_note(frontmatter: Mapping[str, Any], body: str) -> str:
    """A new note's text: ``---\\n<yaml>---\\n<body>`` (unicode and key order kept), or
    just `body` when there is no frontmatter. Existing notes are edited with
    `engine.fmedit`, which keeps every line it does not change."""
    if not frontmatter:
        return body
    return f"---\n{HANDLER.export(frontmatter)}---\n{body}"


# -- blocks -----------------------------------------------------------------------------------
def _heading_text(rest: str) -> str | None:
    """ATX heading text without the optional closing ``#`` run (no regex: linear on any line)."""
    text = rest.strip()
    bare = text.rstrip("#")
    if not bare or bare.endswith((" ", "\t")):
        text = bare.strip()
    return text or None


def _block_hash(text: str) -> str:
    normalised = "\n".join([line.rstrip() for line in text.split("\n")])  # faster than re.sub
    return hashlib.md5(normalised.encode("utf-8", "surrogatepass"), usedforsecurity=False).hexdigest()


MAX_BLOCKS = 2000
"""A note is cut into at most this many blocks (`split_blocks`); past it, runs of consecutive
blocks are merged. Why: every block is embedded and stored on its own, and a 400 KB note of
100k one-line headings kept one tool write in chroma's upsert for over 150 s."""


def split_blocks(body: str, line_offset: int = 1, max_block_chars: int = 2000, *,
                 kinds: bytearray | None = None, max_blocks: int = MAX_BLOCKS) -> list[Block]:
    """Cut a body into retrieval blocks with 1-based file lines (`line_offset` = body's line 1).

    Blocks split on ATX headings and blank lines. A heading's block continues through the first
    paragraph after it (heading + first paragraph), because a heading alone retrieves poorly and
    a paragraph without its heading loses context. Blank lines inside fenced code do not split
    it. Size wins over structure: a block reaching `max_block_chars` (fences included) is cut at
    a line boundary, and a single longer line is hard-cut into pieces that share its line number.
    Blank-only blocks are dropped. `kinds` may pass ``line_kinds(body.split("\\n"))``.
    A note that would give more than `max_blocks` blocks gets runs of consecutive blocks
    merged into one each (`_merge_runs`), so it stays searchable at a bounded cost.
    """
    max_chars = max(1, max_block_chars)
    lines = body.split("\n")
    if kinds is None or len(kinds) != len(lines):
        kinds = line_kinds(lines)
    blocks: list[Block] = []
    heading: str | None = None
    start = -1  # first line index of the open block, -1 when none
    start_pos = 0  # offset of that line in body
    last = -1  # last non-blank line index of the open block
    has_body = False  # the open block holds more than its heading
    block_heading: str | None = None

    def flush() -> None:
        nonlocal start
        if start >= 0 and last >= start:
            text = "\n".join(lines[start:last + 1])
            if text.strip():
                blocks.append(Block(len(blocks), start + line_offset, last + line_offset,
                                    text, _block_hash(text), block_heading))
        start = -1

    pos = 0
    for i, line in enumerate(lines):
        line_pos = pos
        pos += len(line) + 1
        kind = kinds[i]
        blank = not line.strip()
        if blank:
            if kind != FENCE and start >= 0 and has_body:
                flush()
            continue
        match = _HEADING_RE.match(line) if kind not in (FENCE, INDENTED) and "#" in line[:4] else None
        if match is not None:
            flush()
            heading = _heading_text(line[match.end():])
        elif start >= 0 and pos - 1 - start_pos > max_chars:
            flush()  # size cut at a line boundary
        if len(line) > max_chars:
            flush()
            for k in range(0, len(line), max_chars):
                piece = line[k:k + max_chars]
                if piece.strip():
                    blocks.append(Block(len(blocks), i + line_offset, i + line_offset,
                                        piece, _block_hash(piece), heading))
            continue
        if start < 0:
            start, start_pos, has_body, block_heading = i, line_pos, False, heading
        if match is None:
            has_body = True
        last = i
    flush()
    return _merge_runs(blocks, max(1, max_blocks)) if len(blocks) > max_blocks else blocks


def _merge_runs(blocks: list[Block], max_blocks: int) -> list[Block]:
    """At most `max_blocks` blocks: each run of ceil(n / max_blocks) consecutive blocks
    becomes one, its text the run's texts with the line breaks that separated them (the
    lines between blocks are blank), its heading the first block's."""
    size = -(-len(blocks) // max_blocks)
    merged: list[Block] = []
    for k in range(0, len(blocks), size):
        run = blocks[k:k + size]
        parts = [run[0].text]
        for before, block in zip(run, run[1:], strict=False):
            parts.append("\n" * max(0, block.start_line - before.end_line))  # "" in one line
            parts.append(block.text)
        text = "".join(parts)
        merged.append(Block(len(merged), run[0].start_line, run[-1].end_line, text,
                            _block_hash(text), run[0].heading))
    return merged


# -- notes ------------------------------------------------------------------------------------
def parse_note(path: str, text: str) -> ParsedNote:
    """Parse one file's text; never raises (malformed YAML is reported in `error`)."""
    frontmatter, body, body_start, error = split_frontmatter(text, path)
    kinds = line_kinds(body.split("\n"))  # one structure scan shared by blocks and links
    found = extract_links(body, body_start, kinds=kinds, refs=True)   # one pass for both
    return ParsedNote(path, frontmatter, body, body_start,
                      split_blocks(body, body_start, kinds=kinds),
                      [x for x in found if x.kind == LINK], error, body_tags(body, kinds),
                      [x for x in found if x.kind != LINK])
