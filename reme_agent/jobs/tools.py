"""The LLM jobs as tool specs, for faces that offer them (the MCP service tier).

Declared here, above the toolkit, so `toolkit/` never imports `jobs/` (imports point down).
These are synchronous functions: the MCP server runs sync tools in a worker thread, where
`run_*` may start its own event loop. An AgentScope agent should call `arun_*` directly
instead of getting these as tools.

Without a chat model configured, `job_tools` leaves out the jobs that need one (the
distiller): a tool that can only fail is noise in the model's tool list. The synchronizer
stays: its default mode "auto" records the raw turns when there is no model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from reme_agent.toolkit.registry import ToolSpec
from reme_agent.toolkit.results import ToolResult, tool

if TYPE_CHECKING:
    from reme_agent.vault import Vault


@tool
def synchronizer(vault: Vault, messages: list[dict[str, str]],
                 mode: Literal["auto", "llm", "transcript"] = "auto",
                 session_id: str | None = None, hint: str = "") -> ToolResult:
    """Record a conversation in today's daily note (daily/<date>/<slug>/<slug>.md).

    The synchronizer creates, updates or continues the day's note for this task; it never
    writes knowledge/. Turns an earlier call already recorded for the session are skipped,
    so sending the whole conversation again is safe.

    Args:
        messages: The conversation from its start, oldest first: [{"role": "user", "content": "..."}, ...].
        mode: "llm" summarises with the configured model; "transcript" appends the turns verbatim; "auto" = llm when a model is configured, else transcript.
        session_id: The conversation's id, recorded as originSessionId.
        hint: Extra guidance for the model, e.g. the task's name.
    """
    from reme_agent.jobs.synchronizer import choose_mode, run_synchronizer

    result = run_synchronizer(vault, messages, mode=choose_mode(vault, mode),
                              session_id=session_id, hint=hint)
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
NEEDS_MODEL = frozenset({"distiller"})
"""Job tools that cannot do anything without a chat model."""


def job_tools(model_configured: bool) -> tuple[ToolSpec, ...]:
    """The job tools worth offering: all with a model, else those that work without one."""
    return tuple(s for s in JOB_TOOLS if model_configured or s.name not in NEEDS_MODEL)
