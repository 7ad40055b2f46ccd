"""L4: the atomic memory tools (DESIGN §1), one module per family, one table in `registry`.

Python callers use the functions directly (each returns a `ToolResult`, which is a dict with
a `.text` for models); `build_toolkit` (in `toolkit.agentscope`) exposes them to AgentScope.
This package imports no agentscope at import time, so `reme-agent --help` stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentscope.tool import Toolkit

    from reme_agent.toolkit.registry import GROUPS, TOOLS, ToolSpec, get_tool, select
    from reme_agent.toolkit.results import ToolResult

# Imported on first use, so that `import reme_agent.toolkit.retrieve` (a search from the
# command line) does not load every tool module with the registry (G6 cold start).
_LAZY = {"GROUPS": "registry", "TOOLS": "registry", "ToolSpec": "registry",
         "get_tool": "registry", "select": "registry", "ToolResult": "results"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"reme_agent.toolkit.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'reme_agent.toolkit' has no attribute {name!r}")

__all__ = ["GROUPS", "TOOLS", "ToolResult", "ToolSpec", "build_toolkit", "get_tool", "select"]


def build_toolkit(*args: Any, **kwargs: Any) -> Toolkit:
    """See `reme_agent.toolkit.agentscope.build_toolkit` (imported lazily: agentscope is slow)."""
    from reme_agent.toolkit.agentscope import build_toolkit as build

    return build(*args, **kwargs)
