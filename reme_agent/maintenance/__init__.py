"""Maintenance (DESIGN §9 maintainer): keeps the vault healthy and writes recall's signals.

No model is needed here: LLM decisions (merge yes/no, split naming) come in through the
`MergeJudge` / `SplitPlanner` interfaces, which `reme_agent.jobs.maintainer_job` implements.

    Maintainer(vault, settings.maintain).run(only=None, dry_run=False, move_archived=False)

Names are imported lazily, so `reme-agent --help` does not load networkx and numpy.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "STEPS": "reme_agent.maintenance.maintainer",
    "MaintainReport": "reme_agent.maintenance.maintainer",
    "Maintainer": "reme_agent.maintenance.maintainer",
    "DuplicateGroup": "reme_agent.maintenance.merge",
    "MergeJudge": "reme_agent.maintenance.merge",
    "MergeVerdict": "reme_agent.maintenance.merge",
    "StepResult": "reme_agent.maintenance.report",
    "ChildPlan": "reme_agent.maintenance.split",
    "SplitPlan": "reme_agent.maintenance.split",
    "SplitPlanner": "reme_agent.maintenance.split",
    "SplitProposal": "reme_agent.maintenance.split",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'reme_agent.maintenance' has no attribute {name!r}")
