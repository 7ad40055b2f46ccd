"""Who is calling a tool, for audit entries that must say who did what (DESIGN §5).

Faces set it around a call: the CLI (`cli`), the MCP server (`mcp`), a job's guard (the job
name); anything else (an AgentScope app's agent) is `agent`. Only audited operations read it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

current_actor: ContextVar[str] = ContextVar("reme_actor", default="agent")


@contextmanager
def acting_as(name: str) -> Iterator[None]:
    token = current_actor.set(name)
    try:
        yield
    finally:
        current_actor.reset(token)
