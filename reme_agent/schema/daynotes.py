"""Sections of an Obsidian day note: one ``# <slug>`` section per task (DESIGN §2).

Pure functions over a day note's LF body; `toolkit.daily` writes through them and the
synchronizer merges inside a section as it would inside a workspace note's body. Headings in
code fences do not count. The section runs to the next H1 (or the end of the note).
"""

from __future__ import annotations

import re

__all__ = ["section_body", "section_names", "with_section"]

_FENCE = re.compile(r"^\s{0,3}(```|~~~)")


def _h1_text(line: str) -> str | None:
    if not line.startswith("# "):
        return None
    return line[2:].strip().rstrip("#").strip()


def _h1_lines(lines: list[str]) -> list[int]:
    """Indices of the H1 heading lines outside code fences."""
    out, fenced = [], False
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and _h1_text(line) is not None:
            out.append(i)
    return out


def section_names(body: str) -> list[str]:
    """The ``# <heading>`` sections of a day note's (LF) body, in order."""
    lines = body.split("\n")
    return [_h1_text(lines[i]) or "" for i in _h1_lines(lines)]


def _section_span(lines: list[str], slug: str) -> tuple[int, int] | None:
    """(heading line, end line exclusive) of the ``# <slug>`` section, or None."""
    heads = _h1_lines(lines)
    for k, i in enumerate(heads):
        if _h1_text(lines[i]) == slug:
            return i, heads[k + 1] if k + 1 < len(heads) else len(lines)
    return None


def section_body(body: str, slug: str) -> str | None:
    """The content of the ``# <slug>`` section of a day note's LF body (without its
    heading), or None: what a writer merges into, as it would a workspace note's body."""
    lines = body.split("\n")
    span = _section_span(lines, slug)
    if span is None:
        return None
    return "\n".join(lines[span[0] + 1:span[1]]).strip("\n") + "\n"


def with_section(body: str, slug: str, text: str, mode: str) -> str:
    """A day note's LF body with `text` appended to (or replacing) its ``# <slug>`` section;
    a missing section is added at the end. A leading H1 of `text` is dropped: the section
    heading names it."""
    lines_in = text.strip("\n").split("\n")
    if lines_in and _h1_text(lines_in[0]) is not None:
        lines_in = lines_in[1:]
    content = "\n".join(lines_in).strip("\n")
    lines = body.split("\n")
    span = _section_span(lines, slug)
    if span is None:
        head = body.rstrip("\n")
        return (head + "\n\n" if head else "") + f"# {slug}\n\n{content}\n"
    start, end = span
    old = "\n".join(lines[start + 1:end]).strip("\n")
    new = content if mode == "replace" or not old else f"{old}\n\n{content}"
    rest = "\n".join(lines[end:])
    return "\n".join(lines[:start + 1]) + f"\n\n{new}\n" + ("\n" + rest if rest else "")
