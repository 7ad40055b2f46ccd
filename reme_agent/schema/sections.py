"""The sections of a daily entry (DESIGN §9 synchronizer): their names, and adding one line.

A daily entry (a workspace's summary note, or a task's ``# <slug>`` section of an Obsidian
day note) has level-2 sections, each known in English and Chinese. The synchronizer's
section discipline (`jobs/synchronizer.py`) and `daily_attach` (`toolkit/materials.py`),
which links a stored material under Materials, read the names from here. Headings inside
code fences do not count.
"""

from __future__ import annotations

import re

__all__ = ["SECTIONS", "add_line", "section_key"]

SECTIONS: dict[str, tuple[str, ...]] = {
    "objective": ("Objective", "目标"),
    "plan": ("Plan", "计划"),
    "progress": ("Progress", "进展"),
    "findings": ("Findings", "发现"),
    "decisions": ("Decisions", "决策", "决定"),
    "next": ("Next", "Next steps", "下一步"),
    "materials": ("Materials", "材料", "资料"),
}
"""Section key -> the heading names it is known by (the first is what code writes)."""

_NAMES = {name.casefold(): key for key, names in SECTIONS.items() for name in names}
H2 = re.compile(r"^##\s+(.+?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def section_key(heading: str) -> str:
    """The key of a ``## heading`` text ("Materials:" -> "materials"); an unknown heading
    keeps its own key, ``other:<name>``."""
    name = heading.strip().rstrip(":：").strip()
    return _NAMES.get(name.casefold(), f"other:{name.casefold()}")


def add_line(body: str, key: str, line: str) -> str:
    """`body` (LF) with `line` added at the end of its first `key` section, or, when there
    is none, in a new ``## <name>`` section at the end. Everything else stays byte for byte
    (a person may have arranged the note in Obsidian)."""
    lines = body.split("\n")
    fenced = False
    start = end = None
    for i, text in enumerate(lines):
        if FENCE.match(text):
            fenced = not fenced
            continue
        m = None if fenced else H2.match(text)
        if m is None and (fenced or not text.startswith("# ")):
            continue
        if start is not None:  # the next heading (level 1 or 2) ends the section
            end = i
            break
        if m is not None and section_key(m.group(1)) == key:
            start = i
    if start is None:
        head = body.rstrip("\n")
        return (head + "\n\n" if head else "") + f"## {SECTIONS[key][0]}\n{line}\n"
    stop = len(lines) if end is None else end
    last = start
    for i in range(start + 1, stop):
        if lines[i].strip():
            last = i
    return "\n".join([*lines[:last + 1], line, *lines[last + 1:]])
