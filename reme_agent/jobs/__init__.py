"""L3: LLM jobs (DESIGN §9): ReAct agents whose only actions are the L4 memory tools.

    run_synchronizer / arun_synchronizer   messages -> daily/<date>/<slug>/<slug>.md
    run_distiller / arun_distiller         daily notes -> knowledge/<slug>/<slug>.md (R-M-W)
    JobResult                              what a job read, wrote, linked, flipped, ...
    drain, start_followup_worker           run the follow-up queue's items (jobs/followups.py)
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
    "QueueItem": "reme_agent.engine.queue",
    "drain": "reme_agent.jobs.followups",
    "start_followup_worker": "reme_agent.jobs.followups",
    "load_prompt": "reme_agent.jobs.base",
    "JobPrompt": "reme_agent.jobs.base",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'reme_agent.jobs' has no attribute {name!r}")
