"""reme-agent: long-term Markdown memory for AgentScope agents.

Public API (imported lazily, so `import reme_agent` stays cheap; `__all__` is pinned by
tests/test_public_api.py):

    open_vault, Vault                      the vault handle (engine + projections)
    Settings, load_settings                configuration
    search                                 node-level recall
    build_toolkit                          the atomic tools as an AgentScope Toolkit
    MemoryMiddleware                       recall before a reply, sync after it (AgentScope)
    run_synchronizer, arun_synchronizer    messages -> daily note (LLM job)
    run_distiller, arun_distiller          daily notes -> knowledge (LLM job)
    run_maintainer                         the maintainer (the model decides merges/splits)
    AutoLinker                             auto-link L1-L4
    start_followup_worker                  drain the vault's follow-up queue on a thread
    build_server                           the tools as an MCP server
    ReMeError, errors                      the exception tree (ReMeError and subclasses)
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "Settings": "reme_agent.config",
    "load_settings": "reme_agent.config",
    "Vault": "reme_agent.vault",
    "open_vault": "reme_agent.vault",
    "search": "reme_agent.recall.search",
    "build_toolkit": "reme_agent.toolkit.agentscope",
    "MemoryMiddleware": "reme_agent.middleware",
    "run_synchronizer": "reme_agent.jobs.synchronizer",
    "arun_synchronizer": "reme_agent.jobs.synchronizer",
    "run_distiller": "reme_agent.jobs.distiller",
    "arun_distiller": "reme_agent.jobs.distiller",
    "run_maintainer": "reme_agent.jobs.maintainer_job",
    "AutoLinker": "reme_agent.maintenance.autolink.runner",
    "start_followup_worker": "reme_agent.jobs.followups",
    "build_server": "reme_agent.mcp_server",
    "ReMeError": "reme_agent.errors",
}

__all__ = sorted([*_EXPORTS, "errors", "__version__"])


def __getattr__(name: str) -> Any:
    if name == "errors":
        return importlib.import_module("reme_agent.errors")
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'reme_agent' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
