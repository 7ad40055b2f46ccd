"""Note parser: YAML frontmatter, body, blocks with line spans and hashes, links (DESIGN §6, §4).

Pure functions, no I/O. The indexer diffs block hashes (only new or changed blocks are
embedded), so a block's hash depends on its own text only, never on its position.

Decisions where DESIGN is silent:

- Line endings are normalised to ``\\n`` (``\\r\\n`` -> ``\\n``) and a leading BOM is dropped;
  ``body`` is that normalised text. Lines are counted on ``\\n`` only, everywhere.
- Frontmatter is a first line ``---`` and the next line that is ``---`` or ``...``. Without a
  closing line the first ``---`` is an ordinary thematic break: no frontmatter, no error.
- Malformed YAML never hides the note: the frontmatter becomes ``{}``, the whole text is the
  body (so it is still indexed), and ``error`` says which file line failed.
- Frontmatter is always JSON-able: dates become ISO strings, keys become strings, sets become
  sorted lists and binary becomes base64 text.
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from reme_agent.engine.links import FENCE, INDENTED, Link, extract_links, line_kinds
from reme_agent.errors import ParseError

__all__ = [
    "MAX_FRONTMATTER_BYTES",
    "MAX_YAML_ALIASES",
    "Block",
    "NoteParts",
    "ParsedNote",
    "dump_note",
    "parse_note",
    "split_blocks",
    "split_frontmatter",
    "split_note",
]

MAX_FRONTMATTER_BYTES = 64 * 1024
MAX_YAML_ALIASES = 100  # anchors `&x` + aliases `*x`; more is refused as a YAML bomb
_MAX_NODES = 100_000  # values after alias expansion; ~30 aliases can already expand to 10**9
_MAX_DEPTH = 64

_Loader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper: type = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

_OPEN_RE = re.compile(r"---[ \t]*(?:\n|$)")
_CLOSE_RE = re.compile(r"^(?:---|\.\.\.)[ \t]*$", re.M)
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


# -- frontmatter ------------------------------------------------------------------------------
class _Refused(Exception):
    """Internal: the YAML loaded but cannot be accepted (too deep or too big once expanded)."""


def _jsonable(value: Any, depth: int, budget: list[int]) -> Any:
    """Copy of a safe_load result with JSON-able keys and values; refuses bombs and cycles."""
    budget[0] -= 1
    if budget[0] < 0:
        raise _Refused(f"frontmatter expands to more than {_MAX_NODES} values (YAML alias bomb?)")
    if depth > _MAX_DEPTH:
        raise _Refused(f"frontmatter is nested more than {_MAX_DEPTH} levels deep")
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, _dt.date):  # datetime is a date too
        return value.isoformat()
    if isinstance(value, dict):
        return {_key(k): _jsonable(v, depth + 1, budget) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v, depth + 1, budget) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((_jsonable(v, depth + 1, budget) for v in value), key=repr)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return str(value)


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, _dt.date):
        return key.isoformat()
    if key is None or isinstance(key, bool):
        return {None: "null", True: "true", False: "false"}[key]
    return str(key)


def _count_aliases(fm_text: str, path: str) -> ParseError | None:
    """Refuse more than MAX_YAML_ALIASES anchors/aliases, naming the line of the first extra."""
    if fm_text.count("&") + fm_text.count("*") <= MAX_YAML_ALIASES:
        return None  # cheap pre-check: cannot have that many tokens
    seen = 0
    try:
        for token in yaml.scan(fm_text, Loader=_Loader):
            if isinstance(token, yaml.AnchorToken | yaml.AliasToken):
                seen += 1
                if seen > MAX_YAML_ALIASES:
                    return ParseError(path, token.start_mark.line + 2,
                                      f"more than {MAX_YAML_ALIASES} YAML anchors/aliases "
                                      "(refused as a possible YAML bomb)")
    except yaml.YAMLError:
        return None  # a syntax error: the load reports it with its line
    return None


def _load_yaml(fm_text: str, path: str) -> tuple[dict[str, Any], ParseError | None]:
    if len(fm_text.encode("utf-8", "surrogatepass")) > MAX_FRONTMATTER_BYTES:
        return {}, ParseError(path, 1, f"frontmatter is larger than {MAX_FRONTMATTER_BYTES // 1024} KB")
    refused = _count_aliases(fm_text, path)
    if refused is not None:
        return {}, refused
    try:
        data = yaml.load(fm_text, Loader=_Loader)  # _Loader is a *safe* loader
        data = _jsonable(data, 0, [_MAX_NODES])
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        detail = ": ".join(str(p) for p in (exc.context, exc.problem) if p) or type(exc).__name__
        line = mark.line + 2 if mark is not None else 1
        if mark is not None:
            detail += f" (column {mark.column + 1})"
        return {}, ParseError(path, line, detail)
    except _Refused as exc:
        return {}, ParseError(path, 1, str(exc))
    except RecursionError:
        return {}, ParseError(path, 1, "frontmatter is nested too deeply")
    except Exception as exc:  # e.g. ValueError for `date: 2024-13-45`; never raise
        return {}, ParseError(path, 1, f"{type(exc).__name__}: {exc}")
    if data is None:
        return {}, None
    if not isinstance(data, dict):
        kind = "list" if isinstance(data, list) else type(data).__name__
        return {}, ParseError(path, 2, f"frontmatter must be a mapping of keys to values, not a {kind}")
    return data, None


def split_frontmatter(text: str, path: str = "") -> tuple[dict[str, Any], str, int, ParseError | None]:
    """Split a note into (frontmatter, body, body_start_line, error).

    On malformed YAML: ``({}, whole normalised text, 1, ParseError naming the file line)``.
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    opening = _OPEN_RE.match(text) if text.startswith("---") else None
    if opening is None or (opening.end() == len(text) and not text.endswith("\n")):
        return {}, text, 1, None
    closing = _CLOSE_RE.search(text, opening.end())
    if closing is None:
        return {}, text, 1, None
    fm_text = text[opening.end():closing.start()]
    body_pos = closing.end() + 1 if text.startswith("\n", closing.end()) else closing.end()
    body_start = fm_text.count("\n") + 3  # opening line + YAML lines + closing line, then 1-based
    data, error = _load_yaml(fm_text, path)
    if error is not None:
        return {}, text, 1, error
    return data, text[body_pos:], body_start, None


@dataclass(frozen=True)
class NoteParts:
    """A note cut at the end of its frontmatter, byte for byte: ``head + body == text``.

    `head` is the raw frontmatter block (fences, CRLF and comments as written); `body` the
    raw rest, so an edit of either keeps the other exactly. Malformed frontmatter gives an
    empty `head`, ``{}`` and the whole text as `body` (with `error`), as the indexer sees it.
    """

    frontmatter: dict[str, Any]
    head: str
    body: str
    body_start: int  # 1-based file line of the body's first line
    error: ParseError | None = None


def split_note(text: str, path: str = "") -> NoteParts:
    """Frontmatter and raw body of a note's text (see `NoteParts`); never raises.

    `split_frontmatter` finds the boundary on the normalised text; the cut is made in the
    original at the same line, so line endings and every other byte are kept.
    """
    fm, body, body_start, error = split_frontmatter(text, path)
    if error is not None or body_start == 1:
        return NoteParts(fm, "", text, 1, error)
    lines = text.split("\n")
    raw_body = "\n".join(lines[body_start - 1:]) if body and body_start - 1 < len(lines) else ""
    return NoteParts(fm, text[:len(text) - len(raw_body)], raw_body, body_start)


def dump_note(frontmatter: Mapping[str, Any], body: str) -> str:
    """``---\\n<yaml>---\\n<body>`` (unicode kept, key order kept); just `body` when empty."""
    if not frontmatter:
        return body
    data = _plain(frontmatter)
    text = yaml.dump(data, Dumper=_Dumper, allow_unicode=True, sort_keys=False,
                     default_flow_style=False, width=1_000_000)
    return f"---\n{text}---\n{body}"


def _plain(value: Any) -> Any:
    """Mappings -> dict and tuples/sets -> list, so the safe dumper accepts them."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((_plain(v) for v in value), key=repr)
    return value


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


def split_blocks(body: str, line_offset: int = 1, max_block_chars: int = 2000, *,
                 kinds: bytearray | None = None) -> list[Block]:
    """Cut a body into retrieval blocks with 1-based file lines (`line_offset` = body's line 1).

    Blocks split on ATX headings and blank lines. A heading's block continues through the first
    paragraph after it (heading + first paragraph), because a heading alone retrieves poorly and
    a paragraph without its heading loses context. Blank lines inside fenced code do not split
    it. Size wins over structure: a block reaching `max_block_chars` (fences included) is cut at
    a line boundary, and a single longer line is hard-cut into pieces that share its line number.
    Blank-only blocks are dropped. `kinds` may pass ``line_kinds(body.split("\\n"))``.
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
    return blocks


# -- notes ------------------------------------------------------------------------------------
def parse_note(path: str, text: str) -> ParsedNote:
    """Parse one file's text; never raises (malformed YAML is reported in `error`)."""
    frontmatter, body, body_start, error = split_frontmatter(text, path)
    kinds = line_kinds(body.split("\n"))  # one structure scan shared by blocks and links
    return ParsedNote(path, frontmatter, body, body_start,
                      split_blocks(body, body_start, kinds=kinds),
                      extract_links(body, body_start, kinds=kinds), error)
