"""The LLM jobs as tool specs, for faces that offer them (the MCP service tier).

Declared here, above the toolkit, so `toolkit/` never imports `jobs/` (imports point down).
These are synchronous functions: the MCP server runs sync tools in a worker thread, where
`run_*` may start its own event loop. An AgentScope agent should call `arun_*` directly
instead of getting these as tools.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from reme_agent.toolkit.registry import ToolSpec
from reme_agent.toolkit.results import ToolResult, tool

if TYPE_CHECKING:
    from reme_agent.vault import Vault


@tool
def synchronizer(vault: Vault, messages: list[dict[str, str]], mode: Literal["llm", "transcript"] = "llm",
                 session_id: str | None = None, hint: str = "") -> ToolResult:
    """Record a conversation in today's daily note (daily/<date>/<slug>/<slug>.md).

    The synchronizer creates, updates or continues the day's note for this task; it never
    writes knowledge/. Use mode "transcript" to append the raw turns without a model.

    Args:
        messages: The conversation, oldest first: [{"role": "user", "content": "..."}, ...].
        mode: "llm" summarises with the configured model; "transcript" appends the turns verbatim.
        session_id: The conversation's id, recorded as originSessionId.
        hint: Extra guidance for the model, e.g. the task's name.
    """
    from reme_agent.jobs.synchronizer import run_synchronizer

    result = run_synchronizer(vault, messages, mode=mode, session_id=session_id, hint=hint)
    return ToolResult(result.model_dump(mode="json"), result.render())


@tool
def distiller(vault: Vault, daily_paths: list[str], hint: str = "",
              flip_status: bool = True) -> ToolResult:
    """Distill daily notes into knowledge nodes (read, merge, write; never losing a link).

    Each fully processed daily note is flipped to status "distilled".

    Args:
        daily_paths: Daily notes to distill, e.g. ["daily/2026-11-30/search-tuning/search-tuning.md"].
        hint: Extra guidance for the model, e.g. what to focus on.
        flip_status: Flip each fully processed daily note to "distilled".
    """
    from reme_agent.jobs.distiller import run_distiller

    result = run_distiller(vault, daily_paths, hint=hint, flip_status=flip_status)
    return ToolResult(result.model_dump(mode="json"), result.render())


JOB_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("synchronizer", synchronizer, "jobs", read_only=False, kind="job"),
    ToolSpec("distiller", distiller, "jobs", read_only=False, kind="job"),
)
