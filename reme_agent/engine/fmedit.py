"""Frontmatter edits that change only the lines of the keys they touch (DESIGN §3, §5).

People keep the vault open in Obsidian and write its YAML by hand: flow lists
(``tags: [person, team/payments]``), comments, quoting, blank lines, anchors, CRLF. An edit
of one property must leave every other byte as it was, so nothing here re-renders a block:
each top-level key's lines are found from the YAML parser's event marks, and only the lines
of a changed key are replaced (rendered by `codec.render_entry`, in flow style when the old
value was), removed, or added after the last key. The note's own line ending is used.
Removing the last property removes the block itself (`---` / `---`), as Obsidian does.

The result is read back with the reader (same limits as every read): frontmatter the reader
would refuse (over 64 KB, a bomb, a duplicate key) is never written, and an edit that would
change any other key (e.g. one key's anchor is used by another key's alias) is refused
rather than written wrong.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from reme_agent.engine.codec import jsonable, render_entry
from reme_agent.engine.parser import normalize_eol, restore_eol, split_note
from reme_agent.errors import FrontmatterEditError

__all__ = ["KeySpan", "edit_frontmatter", "edit_values", "key_lines", "key_spans"]

class _MarkLoader(yaml.SafeLoader):
    """The pure-Python loader (its marks are str offsets) with libyaml's tab rule: a tab
    separates tokens anywhere but in a line's indentation. The reader (`engine.codec`, libyaml)
    accepts `k:<TAB>"x"`, as Obsidian does; without this an edit of such a note failed in the
    scanner."""

    def scan_to_next_token(self) -> None:
        if self.index == 0 and self.peek() == "\ufeff":
            self.forward()
        while True:
            while self.peek() == " " or (self.peek() == "\t" and not self._indenting()):
                self.forward()
            if self.peek() == "#":
                while self.peek() not in "\0\r\n\x85\u2028\u2029":
                    self.forward()
            if not self.scan_line_break():
                return
            if not self.flow_level:
                self.allow_simple_key = True

    def scan_plain_spaces(self, indent: int, start_mark: Any) -> list[str] | None:
        """Spaces inside a plain scalar, tabs included (`k: a<TAB>b` reads `a<TAB>b`)."""
        length = 0
        while self.peek(length) in " \t":
            length += 1
        blank = self.prefix(length)
        if "\t" not in blank:
            return super().scan_plain_spaces(indent, start_mark)
        self.forward(length)
        chunks = super().scan_plain_spaces(indent, start_mark)
        return [blank] if chunks == [] else chunks

    def _indenting(self) -> bool:
        """Whether only spaces and tabs precede this point on its line (block context)."""
        if self.flow_level:
            return False
        start = self.pointer - self.column
        return not self.buffer[start:self.pointer].strip(" \t")


def _events(src: str) -> Iterator[Any]:
    """The YAML events of `src`, with str offsets as marks; a scanner error the reader did
    not raise becomes a FrontmatterEditError (a clear refusal, nothing written)."""
    try:
        yield from yaml.parse(src, Loader=_MarkLoader)
    except yaml.YAMLError as exc:
        raise FrontmatterEditError(
            f"Cannot edit this frontmatter in place: {str(exc).splitlines()[0]}.",
            "Rewrite the properties in an editor so every key starts its own line.") from None


_NODE_START = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_NODE_END = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


@dataclass(frozen=True)
class KeySpan:
    """A top-level key's lines in the YAML text (0-based, inclusive); `flow` when its value
    is a one-line ``[...]`` / ``{...}`` collection."""

    key: str | None  # None: a key we cannot name (a complex `? [a, b]` key)
    first: int
    last: int
    flow: bool


def key_spans(fm: str) -> list[KeySpan] | None:
    """Each top-level key's line span in `fm` (LF YAML text); None when the lines cannot
    be told apart (a flow mapping ``{a: 1, b: 2}`` as the whole block, two keys on a line)."""
    events = iter(_events(fm))
    top = None
    for ev in events:
        if isinstance(ev, yaml.DocumentStartEvent):
            top = next(events)
            break
    if not isinstance(top, yaml.MappingStartEvent):
        return []  # an empty block (or no mapping: the reader refuses it first)
    if top.flow_style:
        return None
    spans: list[KeySpan] = []
    for ev in events:
        if isinstance(ev, yaml.MappingEndEvent):
            break
        key_end = _node_end(ev, events)
        value = next(events)
        end = max(key_end, _node_end(value, events))
        first, last = _line_of(fm, ev.start_mark.index), _last_line(fm, end)
        if spans and first <= spans[-1].last:
            return None
        flow = isinstance(value, _NODE_START) and bool(value.flow_style)
        spans.append(KeySpan(_key_name(ev), first, last, flow))
    return spans


def _node_end(first: Any, events: Iterator[Any]) -> int:
    """Offset just past the last character of the node that starts with `first`.

    Block collections end where the next token starts (past comments and blank lines), so
    their end is their last leaf's; a flow collection ends at its closing bracket.
    """
    if not isinstance(first, _NODE_START):
        return first.end_mark.index
    end = first.end_mark.index
    stack = [bool(first.flow_style)]
    while stack:
        ev = next(events)
        if isinstance(ev, _NODE_START):
            stack.append(bool(ev.flow_style))
        elif isinstance(ev, _NODE_END):
            if stack.pop():
                end = max(end, ev.end_mark.index)
        else:
            end = max(end, ev.end_mark.index)
    return end


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index)


def _last_line(text: str, end: int) -> int:
    """Line of the last character before `end`, trailing blank lines left out (a block
    scalar's span runs on over the blank lines after it)."""
    last = _line_of(text, end - 1) if end > 0 else 0
    lines = text.split("\n")
    while last > 0 and last < len(lines) and not lines[last].strip():
        last -= 1
    return last


def key_lines(text: str) -> dict[str, int]:
    """The file line (1-based) where each top-level frontmatter key of a note starts; {}
    when the note has no frontmatter block or its lines cannot be told apart."""
    parts = split_note(text)
    if parts.error is not None or not parts.head:
        return {}
    yaml_text = normalize_eol(parts.head.removeprefix("\ufeff")).split("\n", 1)[1]
    try:
        spans = key_spans(yaml_text)
    except FrontmatterEditError:   # a scanner error, as `_events` reports it
        return {}
    return {s.key: s.first + 2 for s in spans or () if s.key is not None}


def _key_name(ev: Any) -> str | None:
    """The key as the reader names it (`codec.jsonable` keys: `1:` and `"1":` are "1")."""
    if not isinstance(ev, yaml.ScalarEvent):
        return None
    if ev.style in ("'", '"', "|", ">") or ev.tag is not None:
        return ev.value
    try:
        return str(jsonable({yaml.safe_load(ev.value): None}).popitem()[0])
    except (yaml.YAMLError, ValueError, TypeError):
        return ev.value


def edit_frontmatter(text: str, set_: Mapping[str, Any] | None = None,
                     remove: Iterable[str] = (), path: str = "") -> str:
    """`text` with frontmatter keys set and removed, every other byte kept.

    Raises ParseError when the note's frontmatter cannot be read (fix it first; a
    duplicate key is named with its lines) and FrontmatterEditError when the edit would
    produce frontmatter the reader refuses or would change a key it does not touch.
    """
    parts = split_note(text, path)
    if parts.error is not None:
        raise parts.error
    old = parts.frontmatter
    gone = [k for k in dict.fromkeys(remove) if k in old]
    try:
        wanted = {k: jsonable(v) for k, v in (set_ or {}).items()}
    except ValueError as exc:
        raise FrontmatterEditError(f"Refused property edit of {path!r}: {exc}.") from None
    odd = next((k for k, v in wanted.items() if _not_finite(v)), None)
    if odd is not None:  # NaN never equals itself: the read-back check would blame an anchor
        raise FrontmatterEditError(f"Refused property edit of {path!r}: {odd!r} holds NaN or "
                                   "an infinity, which a property cannot keep.",
                                   "Use a number, or text such as \"unknown\".")
    changed = {k: v for k, v in wanted.items() if k not in old or old[k] != v}
    if not changed and not gone:
        return text
    expected = {k: v for k, v in old.items() if k not in gone} | wanted
    eol = parts.eol
    if not parts.head:
        lead = "\ufeff" if text.startswith("\ufeff") else ""
        if normalize_eol(text[len(lead):]).split("\n", 1)[0].rstrip() == "---":
            raise FrontmatterEditError(
                f"Cannot add properties to {path!r}: its first line is '---' but no line "
                "closes the frontmatter, so it is read as text; a new block would go above "
                "it and the properties written there would stay body text.",
                "Close the frontmatter with a '---' line (or remove the first '---') first.")
        block = "---\n" + "".join(render_entry(k, v) for k, v in changed.items()) + "---\n"
        new_text = lead + restore_eol(block, eol) + text[len(lead):]
    else:
        head = _edit_head(parts.head, eol, changed, gone, path)
        new_text = _without_empty_block(head, parts.body, text) if not expected \
            else head + parts.body
    _check(new_text, expected, path)
    return new_text


def _without_empty_block(head: str, body: str, text: str) -> str:
    """The note without its frontmatter block once the last property is gone, as Obsidian
    does when the last property is deleted; the BOM and the body are kept byte for byte.

    The block stays (empty) when a comment is left in it (the person's text), or when the
    body would then be read as frontmatter itself (it starts with its own `---` block)."""
    inner = normalize_eol(head).split("\n")[1:]
    if any(line.strip() and line.strip() != "---" for line in inner):
        return head + body
    lead = "\ufeff" if text.startswith("\ufeff") else ""
    bare = lead + body
    probe = split_note(bare)
    return head + body if probe.head or probe.error is not None else bare


def _edit_head(head: str, eol: str, changed: Mapping[str, Any], gone: list[str],
               path: str) -> str:
    sep = "\r" if eol == "\r" else "\n"
    raw = head.split(sep)  # fences + YAML lines; a CRLF line keeps its "\r"
    # what follows the closing line's separator: "", or nothing at all when the note ends
    # right after its closing `---` (the closing line is then the last piece, not a tail)
    tail = raw.pop() if head.endswith(sep) else None
    opening, closing, yaml_lines = raw[0], raw[-1], raw[1:-1]
    fm = normalize_eol(sep.join(yaml_lines) + (sep if yaml_lines else ""))
    spans = key_spans(fm)
    if spans is None:
        raise FrontmatterEditError(
            f"Cannot edit the properties of {path!r} line by line: its frontmatter is one "
            "flow mapping ({...}) or has two keys on one line.",
            "Rewrite the frontmatter with one key per line, or pass the whole text to `write`.")
    line_end = "\r" if eol == "\r\n" else ""
    by_key = {s.key: s for s in spans if s.key is not None}
    out: list[str] = []
    pos = 0
    insert_at: int | None = None  # new keys go right after the last key, before a closing comment
    for span in spans:
        out += yaml_lines[pos:span.first]
        pos = span.last + 1
        if span.key in gone:
            continue
        if span.key in changed:
            out += _rendered(span.key, changed[span.key], span.flow, line_end)
        else:
            out += yaml_lines[span.first:pos]
        insert_at = len(out)
    if insert_at is None:
        insert_at = len(out)
    out += yaml_lines[pos:]
    for key in (k for k in changed if k not in by_key):
        new = _rendered(key, changed[key], False, line_end)
        out[insert_at:insert_at] = new
        insert_at += len(new)
    return sep.join([opening, *out, closing, *([] if tail is None else [tail])])


def _not_finite(value: Any) -> bool:
    if isinstance(value, float):
        return value != value or value in (float("inf"), float("-inf"))
    if isinstance(value, dict):
        return any(_not_finite(v) for v in value.values())
    if isinstance(value, list):
        return any(_not_finite(v) for v in value)
    return False


def _rendered(key: str, value: Any, flow: bool, line_end: str) -> list[str]:
    lines = render_entry(key, value, flow=flow).split("\n")[:-1]
    return [line + line_end for line in lines]


def _check(new_text: str, expected: Mapping[str, Any], path: str) -> None:
    """The reader must accept the result and see exactly the expected properties."""
    parts = split_note(new_text, path)
    if parts.error is not None:
        big = "KB" in parts.error.detail or "values" in parts.error.detail
        raise FrontmatterEditError(
            f"Refused property edit of {path!r}: the reader would refuse the result "
            f"({parts.error.detail}); nothing was written.",
            "Use a smaller value." if big else "A YAML anchor of this key is probably used by "
            "another key: edit them together, or rewrite the frontmatter with `write` (text=...).")
    if parts.frontmatter != dict(expected):
        other = sorted(k for k in set(parts.frontmatter) | set(expected)
                       if parts.frontmatter.get(k, ...) != expected.get(k, ...))
        raise FrontmatterEditError(
            f"Refused property edit of {path!r}: it would also change {', '.join(other)} "
            "(a YAML anchor, alias or merge key ties them together); nothing was written.",
            "Edit these keys together, or rewrite the frontmatter with `write` (text=...).")


def edit_values(text: str, rewrite: Callable[[str], str | None], path: str = "") -> str:
    """`text` with each frontmatter text value (a property's, a list item's, at any depth;
    never a key) replaced by `rewrite(value)` when that returns another string.

    Why: a move rewrites links held in properties (``related: "[[Old]]"``) as Obsidian
    does, and the person's YAML must stay as written around them. Only the changed
    scalar's characters are replaced, in its own quoting (plain, '...', "..."), or, for a
    literal block (``|``), only its changed lines; a scalar written over several lines (or
    plain text that would no longer read back the same) becomes one double-quoted line.
    The result is read back like every edit: ParseError when the note's frontmatter cannot
    be read, FrontmatterEditError when the result would not hold exactly the new values.
    """
    parts = split_note(text, path)
    if parts.error is not None:
        raise parts.error
    if not parts.head:
        return text
    lead = 1 if parts.head.startswith("\ufeff") else 0
    src = parts.head[lead:]
    seen: dict[str, str | None] = {}   # rewrite is asked once per scalar, not again below

    def once(value: str) -> str | None:
        if value not in seen:
            seen[value] = rewrite(value)
        return seen[value]

    expected = _rewritten(parts.frontmatter, once)
    if expected == parts.frontmatter:   # nothing to rewrite: not even scanned (the reader
        return text                     # took it; the offset scanner is stricter, `_events`)
    edits = [(s, e, _scalar_text(src[s:e], style, old, new))
             for s, e, style, old, new in _value_edits(src, rewrite, seen)]
    if not edits:
        if expected != parts.frontmatter:   # a value only an alias of a key's anchor holds
            raise FrontmatterEditError(
                f"Cannot rewrite a link in the properties of {path!r}: the value is an alias "
                "(`*name`) of an anchor written on a key, which is never rewritten.",
                "Write the value out in full (without the alias) in an editor, then retry.")
        return text
    for s, e, new_src in reversed(edits):
        src = src[:s] + new_src + src[e:]
    new_text = parts.head[:lead] + src + parts.body
    _check(new_text, expected, path)
    return new_text


def _value_edits(src: str, rewrite: Callable[[str], str | None], seen: dict[str, str | None]
                 ) -> list[tuple[int, int, str | None, str, str]]:
    """(start, end, style, old value, new value) of every value scalar of the first YAML
    document in `src` (the head, fences included) that `rewrite` changes; `seen` records
    each answer."""
    out: list[tuple[int, int, str | None, str, str]] = []
    stack: list[list[bool]] = []   # per open collection: [is a mapping, next node is a key]
    for ev in _events(src):
        if isinstance(ev, yaml.DocumentEndEvent):
            break
        if isinstance(ev, _NODE_END):
            stack.pop()
            continue
        if not isinstance(ev, (yaml.NodeEvent, *_NODE_START)):
            continue
        is_key = bool(stack) and stack[-1][0] and stack[-1][1]
        if stack and stack[-1][0]:
            stack[-1][1] = not stack[-1][1]
        if isinstance(ev, _NODE_START):
            stack.append([isinstance(ev, yaml.MappingStartEvent), True])
        elif (isinstance(ev, yaml.ScalarEvent) and not is_key and stack
              and ev.tag in (None, "!", "tag:yaml.org,2002:str")):
            if ev.value not in seen:   # asked once per scalar (`rewrite` may count)
                seen[ev.value] = rewrite(ev.value)
            new = seen[ev.value]
            if new is not None and new != ev.value:
                start = _after_properties(src, ev.start_mark.index)
                out.append((start, ev.end_mark.index, ev.style, ev.value, new))
    return out


def _after_properties(src: str, pos: int) -> int:
    """Where a node's own text starts: past its `&anchor` and `!tag` (the event's mark
    starts at them), which stay as written."""
    while pos < len(src) and src[pos] in "&!":
        while pos < len(src) and src[pos] not in " \t\r\n":
            pos += 1
        while pos < len(src) and src[pos] in " \t\r\n":
            pos += 1
    return pos


def _scalar_text(old_src: str, style: str | None, old: str, new: str) -> str:
    """The source of a scalar holding `new`, written as `old_src` wrote `old` when it can."""
    one_line = "\n" not in old_src and "\r" not in old_src
    if one_line and style == "'":
        return "'" + new.replace("'", "''") + "'"
    if one_line and style is None and old_src == old and _plain_ok(new):
        return new
    if style == "|":
        kept = _literal_lines(old_src, old.split("\n"), new.split("\n"))
        if kept is not None:
            return kept
    # A JSON string is a YAML double-quoted one; a block scalar's span runs on to the next
    # line, whose break (and blank lines) it keeps.
    tail = old_src[len(old_src.rstrip(" \t\r\n")):] if style in ("|", ">") else ""
    return json.dumps(new, ensure_ascii=False) + tail


def _literal_lines(old_src: str, old: list[str], new: list[str]) -> str | None:
    """A literal block (``|``) with only its changed lines replaced: content line i (after
    the header line) holds value line i after the block's indentation; None when the
    lines do not line up so (the caller writes the value quoted instead)."""
    header, *content = old_src.splitlines(keepends=True)
    if len(old) != len(new):
        return None
    out = [header]
    for i, line in enumerate(content):
        if i < len(old) and old[i] != new[i]:
            body = line.rstrip("\r\n")
            indent = body[:len(body) - len(old[i])]
            if not old[i] or not body.endswith(old[i]) or indent.strip():
                return None
            line = indent + new[i] + line[len(body):]
        out.append(line)
    if any(old[i] != new[i] for i in range(len(content), len(old))):
        return None
    return "".join(out)


def _plain_ok(value: str) -> bool:
    """Whether `value` reads back as itself written plain as a mapping value and list item."""
    try:
        return all(yaml.load(doc, Loader=_MarkLoader) == want for doc, want in (
            (f"k: {value}", {"k": value}), (f"- {value}", [value])))
    except yaml.YAMLError:
        return False


def _rewritten(value: Any, rewrite: Callable[[str], str | None]) -> Any:
    """What the reader must see after `edit_values`: every text value rewritten."""
    if isinstance(value, str):
        new = rewrite(value)
        return value if new is None else new
    if isinstance(value, list):
        return [_rewritten(v, rewrite) for v in value]
    if isinstance(value, dict):
        return {k: _rewritten(v, rewrite) for k, v in value.items()}
    return value
