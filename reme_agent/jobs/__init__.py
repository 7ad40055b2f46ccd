"""L3: LLM jobs (DESIGN §9): ReAct agents whose only actions are the L4 memory tools.

    run_synchronizer / arun_synchronizer   messages -> daily/<date>/<slug>/<slug>.md
    run_distiller / arun_distiller         daily notes -> knowledge/<slug>/<slug>.md (R-M-W)
    JobResult                              what a job read, wrote, linked, flipped, ...
    JobQueue, default_queue                follow-up jobs (split, auto-link) for F6/F7
    load_prompt                            the YAML prompt of a job, validated

Names are imported lazily so that importing the package does not load agentscope.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "run_synchronizer": "reme_agent.jobs.synchronizer",
    "arun_synchronizer": "reme_agent.jobs.synchronizer",
    "run_distiller": "reme_agent.jobs.distiller",
    "arun_distiller": "reme_agent.jobs.distiller",
    "JobResult": "reme_agent.jobs.guard",
    "Issue": "reme_agent.jobs.guard",
    "LinkEdge": "reme_agent.jobs.guard",
    "JobQueue": "reme_agent.jobs.queue",
    "QueueItem": "reme_agent.jobs.queue",
    "default_queue": "reme_agent.jobs.queue",
    "queue_for": "reme_agent.jobs.queue",
    "load_prompt": "reme_agent.jobs.base",
    "JobPrompt": "reme_agent.jobs.base",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'reme_agent.jobs' has no attribute {name!r}")
