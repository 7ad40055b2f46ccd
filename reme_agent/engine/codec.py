"""The note codec: YAML frontmatter read and rendered through python-frontmatter (DESIGN §3, §6).

`HANDLER` is a python-frontmatter `YAMLHandler` (its detect / split / load / export
interface), so any code that speaks python-frontmatter can use our notes; what it does
differently from the stock handler, and why (docs/decisions.md, "Note codec"):

- **split** finds the block the way Obsidian does: a first line ``---`` and the next line
  ``---`` or ``...``. The stock boundary regex also takes ``----`` and leading blank lines,
  and `frontmatter.loads` strips the body; we cut without losing a byte.
- **load** is the safe loader with our limits (a YAML bomb or a hostile note cannot hurt the
  reader): at most 64 KB of frontmatter, at most 100 anchors + aliases, at most 100,000
  values after alias expansion, nesting at most 64 deep, no ``!!python/...`` tags (the safe
  loader refuses them), and **no duplicate keys** (YAML says keys are unique; PyYAML keeps
  the last one silently, so a person's second ``tags:`` would win unnoticed). Values come
  back JSON-able (dates as ISO text, keys as strings).
- **export** renders a mapping for a *new* note only. Editing an existing note never
  re-renders its block (that reflows flow lists, drops comments, re-quotes and expands
  anchors): `engine.fmedit` renders just the keys it changes, with `render_entry`.
"""

from __future__ import annotations

import base64
import datetime as _dt
import re
from collections.abc import Mapping
from typing import Any

import yaml
from frontmatter.default_handlers import YAMLHandler

from reme_agent.errors import ParseError

__all__ = [
    "HANDLER",
    "MAX_FRONTMATTER_BYTES",
    "MAX_YAML_ALIASES",
    "SafeYAMLHandler",
    "jsonable",
    "render_entry",
]

MAX_FRONTMATTER_BYTES = 64 * 1024
MAX_YAML_ALIASES = 100  # anchors `&x` + aliases `*x`; more is refused as a YAML bomb
MAX_VALUES = 100_000  # values after alias expansion; ~30 aliases can already expand to 10**9
MAX_DEPTH = 64

_Base: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_OPEN_RE = re.compile(r"---[ \t]*(?:\n|$)")
_CLOSE_RE = re.compile(r"^(?:---|\.\.\.)[ \t]*$", re.M)
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Refused(ValueError):
    """Internal: the YAML loaded but cannot be accepted (a bomb, too deep, a duplicate key)."""

    def __init__(self, message: str, line: int = 1) -> None:
        super().__init__(message)
        self.line = line


class _GuardedLoader(_Base):  # type: ignore[misc, valid-type]
    """The safe loader, refusing a mapping that names one key twice."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: dict[str, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE_TAG or not isinstance(key_node, yaml.ScalarNode):
                    continue  # `<<: *base` may be overridden by an explicit key: that is YAML
                key = _key(self.construct_object(key_node))
                line = key_node.start_mark.line + 2  # file line: the block starts on line 2
                if key in seen:
                    raise _Refused(f"duplicate key {key!r} (lines {seen[key]} and {line}): "
                                   "YAML keys must be unique; keep one and delete the other",
                                   line)
                seen[key] = line
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_timestamp(self, node: Any) -> Any:
        """A date YAML would read, or the text as written when it is no calendar date
        (`2024-13-45`, `2024-02-30`): one typo must not make every property unreadable,
        and Obsidian shows such a value as text too."""
        try:
            return super().construct_yaml_timestamp(node)
        except ValueError:
            return self.construct_scalar(node)


_GuardedLoader.add_constructor("tag:yaml.org,2002:timestamp",
                               _GuardedLoader.construct_yaml_timestamp)


def jsonable(value: Any, depth: int = 0, budget: list[int] | None = None) -> Any:
    """A JSON-able copy of a loaded (or given) value; refuses bombs and cycles."""
    if budget is None:
        budget = [MAX_VALUES]
    budget[0] -= 1
    if budget[0] < 0:
        raise _Refused(f"frontmatter expands to more than {MAX_VALUES} values (YAML alias bomb?)")
    if depth > MAX_DEPTH:
        raise _Refused(f"frontmatter is nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, _dt.date):  # datetime is a date too
        return value.isoformat()
    if isinstance(value, Mapping):
        return {_key(k): jsonable(v, depth + 1, budget) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v, depth + 1, budget) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((jsonable(v, depth + 1, budget) for v in value), key=repr)
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
        for token in yaml.scan(fm_text, Loader=_Base):
            if isinstance(token, yaml.AnchorToken | yaml.AliasToken):
                seen += 1
                if seen > MAX_YAML_ALIASES:
                    return ParseError(path, token.start_mark.line + 2,
                                      f"more than {MAX_YAML_ALIASES} YAML anchors/aliases "
                                      "(refused as a possible YAML bomb)")
    except yaml.YAMLError:
        return None  # a syntax error: the load reports it with its line
    return None


class SafeYAMLHandler(YAMLHandler):
    """python-frontmatter's YAML handler with our boundary, limits and renderer."""

    def detect(self, text: str) -> bool:
        return self.locate(text) is not None

    @staticmethod
    def locate(text: str) -> tuple[int, int, int] | None:
        """(YAML start, YAML end, body start) offsets in LF text, or None without a block.

        Without a closing line the first ``---`` is an ordinary thematic break.
        """
        opening = _OPEN_RE.match(text) if text.startswith("---") else None
        if opening is None or (opening.end() == len(text) and not text.endswith("\n")):
            return None
        closing = _CLOSE_RE.search(text, opening.end())
        if closing is None:
            return None
        body = closing.end() + 1 if text.startswith("\n", closing.end()) else closing.end()
        return opening.end(), closing.start(), body

    def split(self, text: str) -> tuple[str, str]:
        """(YAML text, body) of LF text, the body kept byte for byte (ValueError: no block)."""
        found = self.locate(text)
        if found is None:
            raise ValueError("no frontmatter block")
        start, end, body = found
        return text[start:end], text[body:]

    def load(self, fm: str, path: str = "", **_: object) -> dict[str, Any]:  # type: ignore[override]
        """The mapping of a YAML block, JSON-able; ParseError (with the file line) if refused."""
        if len(fm.encode("utf-8", "surrogatepass")) > MAX_FRONTMATTER_BYTES:
            raise ParseError(path, 1,
                             f"frontmatter is larger than {MAX_FRONTMATTER_BYTES // 1024} KB")
        refused = _count_aliases(fm, path)
        if refused is not None:
            raise refused
        try:
            data = jsonable(yaml.load(fm, Loader=_GuardedLoader))  # a *safe* loader
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            detail = ": ".join(str(p) for p in (exc.context, exc.problem) if p) or type(exc).__name__
            if mark is not None:
                detail += f" (column {mark.column + 1})"
            raise ParseError(path, mark.line + 2 if mark is not None else 1, detail) from None
        except _Refused as exc:
            raise ParseError(path, exc.line, str(exc)) from None
        except RecursionError:
            raise ParseError(path, 1, "frontmatter is nested too deeply") from None
        except Exception as exc:  # e.g. ValueError for `date: 2024-13-45`; never raise raw
            raise ParseError(path, 1, f"{type(exc).__name__}: {exc}") from None
        if data is None:
            return {}
        if not isinstance(data, dict):
            kind = "list" if isinstance(data, list) else type(data).__name__
            raise ParseError(path, 2, f"frontmatter must be a mapping of keys to values, not a {kind}")
        return data

    def export(self, metadata: Mapping[str, Any], **_: object) -> str:  # type: ignore[override]
        """YAML for a new block: unicode and key order kept, lists indented as Obsidian
        writes them; ends with a newline ("" for an empty mapping)."""
        if not metadata:
            return ""
        return _dump(_plain(metadata), flow=False)


class _ObsidianDumper(yaml.SafeDumper):
    """Block lists indented under their key (``tags:\\n  - a``), as Obsidian writes them."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def _string(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    """A string holding NEL (U+0085) is written double-quoted, where it is escaped (``\\N``):
    PyYAML writes it raw in a single-quoted scalar and reads it back as a line break folded
    to a space, so the value changed on every write (the only character that does, of all
    code points up to U+30FF checked one by one)."""
    if "\x85" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')
    return dumper.represent_str(value)


_ObsidianDumper.add_representer(str, _string)


def _dump(data: Any, *, flow: bool) -> str:
    return yaml.dump(data, Dumper=_ObsidianDumper, allow_unicode=True, sort_keys=False,
                     default_flow_style=flow, width=1_000_000)


def _plain(value: Any) -> Any:
    """Mappings -> dict and tuples/sets -> list, so the safe dumper accepts them."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((_plain(v) for v in value), key=repr)
    return value


def render_entry(key: str, value: Any, *, flow: bool = False) -> str:
    """The YAML lines of one top-level ``key: value`` (LF, ending in a newline).

    `flow`: a list or mapping value is written on one line (``tags: [a, b]``), to keep the
    style the person used for that key.
    """
    value = _plain(value)
    if flow and isinstance(value, list | dict) and value:
        shown_key = _dump([key], flow=True).strip()[1:-1]  # the key quoted as YAML needs
        return f"{shown_key}: {_dump(value, flow=True).strip()}\n"
    return _dump({key: value}, flow=False)


HANDLER = SafeYAMLHandler()
"""The one codec instance every reader and writer uses."""
