"""Reading tool names out of a prompt text (host prompts, exported agents)."""

from __future__ import annotations

import re

from reme_agent.jobs.base import protocol_text
from reme_agent.toolkit.registry import BY_NAME

_QUOTED = re.compile(r"`(mcp__[A-Za-z0-9_-]+?__)?([a-z][a-z0-9_]*)`")
_FAMILY = re.compile(r"^(lint|link|daily|property|tags|graph)_[a-z0-9_]+$")
JOB_TOOLS = {"synchronizer", "distiller"}


def tools_named(text: str) -> set[str]:
    """Tool names a text quotes: `search`, `mcp__reme__search`, and anything shaped like a tool
    of a family (`lint_...`, `daily_...`), so a misspelt or removed tool is caught too."""
    out = set()
    for m in _QUOTED.finditer(text):
        prefixed, name = m.groups()
        if prefixed or name in BY_NAME or name in JOB_TOOLS or _FAMILY.match(name):
            out.add(name)
    return out


def without_protocol(text: str) -> str:
    """The text with the embedded memory protocol cut out (it names tools for every job)."""
    protocol = protocol_text()
    assert protocol in text
    return text.replace(protocol, "")
