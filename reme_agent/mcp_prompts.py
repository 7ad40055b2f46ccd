"""The host-run jobs as MCP prompts: distill, sync, maintain, recall (seed L2 slash commands).

A host (Claude Code, Claude Desktop, any MCP client) lists them with `prompts/list` and offers
them as slash commands; `prompts/get` returns one user message: the job's instructions
(jobs/host.py: the job YAML with {protocol} filled, then the host note naming this server's
tools) and the task rendered from the host's arguments and the vault (the dailies to distill,
the recent active dailies a sync may update). The host's own model then does the job with the
MCP tools, so no model is configured here; both tiers list the prompts.

The four builders are plain functions (`distill_prompt`, ...); `PROMPTS` names their
arguments and `add_prompts` registers them on an `MCPServer`. A ReMeError (a missing daily,
an unknown step) becomes an MCP error carrying its text, so the host shows what to do instead
of "Error rendering prompt".
"""

from __future__ import annotations

import datetime as _dt
import inspect
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

from reme_agent.errors import InvalidArgument, ReMeError
from reme_agent.jobs.distiller import check_dailies, flip_note
from reme_agent.jobs.host import CURATOR_STEPS, describe, host_prompt, unbound_values
from reme_agent.jobs.synchronizer import (
    coerce_messages,
    recent_active,
    render_recent,
    render_transcript,
)
from reme_agent.schema.layout import KNOWLEDGE
from reme_agent.toolkit.common import norm_folder, parse_day
from reme_agent.toolkit.daily import daily_list

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from reme_agent.vault import Vault

_SEPARATORS = re.compile(r"[\s,;]+")


def distill_prompt(vault: Vault, paths: str | None = None, date: str | None = None,
                   hint: str | None = None) -> str:
    """The distiller's prompt for `paths`, or for the active dailies (of `date`, if given)."""
    if paths and paths.strip():
        dailies = check_dailies(vault, _SEPARATORS.split(paths.strip()))
    else:
        if date:  # checked under its own name (daily_list would call it `start`)
            date = parse_day(date, "date").isoformat()
        found = daily_list(vault, start=date, end=date, status="active", limit=5000)["notes"]
        dailies = [n["path"] for n in found]
        if not dailies:
            raise InvalidArgument(f"No active daily notes{f' on {date}' if date else ''} to "
                                  "distill.", "Pass `paths`, or record a session first "
                                  "(the `sync` prompt).")
    language = vault.settings.jobs.language
    values = _values(vault, hint) | {"daily_paths": "\n".join(f"- {p}" for p in dailies),
                                     "flip_note": flip_note(language, True)}
    return host_prompt("distiller", values, language=language).message(values)


def sync_prompt(vault: Vault, summary: str | None = None, messages: str | None = None,
                session_id: str | None = None, hint: str | None = None) -> str:
    """The synchronizer's prompt for a summary and/or messages, else for the host's session."""
    cfg = vault.settings.jobs
    parts = [summary.strip()] if summary and summary.strip() else []
    if messages and messages.strip():
        parts.append(_transcript(messages, cfg.sync_max_chars))
    today = _dt.date.today()
    values = _values(vault, hint) | {
        "session_id": (session_id or "").strip() or f"mcp-{_dt.datetime.now():%Y%m%d-%H%M%S}",
        "transcript": "\n\n".join(parts) or unbound_values(cfg.language)["transcript"],
        "recent": render_recent(recent_active(vault, today, cfg.inherit_days)),
        "inherit_days": cfg.inherit_days}
    return host_prompt("synchronizer", values, language=cfg.language).message(values)


def maintain_prompt(vault: Vault, steps: str | None = None, folder: str | None = None) -> str:
    """The curator's prompt for `steps` (default all, always in CURATOR_STEPS order) on `folder`."""
    wanted = [s.lower() for s in _SEPARATORS.split((steps or "").strip()) if s]
    unknown = [s for s in wanted if s not in CURATOR_STEPS]
    if unknown:
        raise InvalidArgument(f"Unknown maintenance steps {unknown}.",
                              f"Steps: {', '.join(CURATOR_STEPS)} (default: all).")
    chosen = [s for s in CURATOR_STEPS if not wanted or s in wanted]
    language = vault.settings.jobs.language
    if folder is None or not folder.strip():  # knowledge/ by default, the vault if it has none
        folder = KNOWLEDGE if vault.store.is_dir(KNOWLEDGE) else ""
    values = _values(vault) | {"split_tokens": vault.settings.jobs.split_token_threshold,
                               "steps": ", ".join(chosen),
                               "folder": norm_folder(vault, folder)
                               or unbound_values(language)["whole_vault"]}
    return host_prompt("curator", values, language=language).message(values)


def recall_prompt(vault: Vault, query: str) -> str:
    """The recall prompt: search, traverse and read the vault before answering `query`."""
    if not query.strip():
        raise InvalidArgument("`query` is empty.", "Pass the question to answer from memory.")
    language = vault.settings.jobs.language
    values = _values(vault) | {"query": query.strip()}
    return host_prompt("recall", values, language=language).message(values)


@dataclass(frozen=True)
class Arg:
    """One prompt argument (MCP prompt arguments are strings)."""

    name: str
    description: str
    required: bool = False


@dataclass(frozen=True)
class PromptSpec:
    """One MCP prompt: its name, the job it is built from, its builder and arguments."""

    name: str
    job: str
    """The job (prompts/<job>.yaml) the prompt is built from."""
    build: Callable[..., str]
    args: tuple[Arg, ...]


PROMPTS: tuple[PromptSpec, ...] = (
    PromptSpec("distill", "distiller", distill_prompt, (
        Arg("paths", "Daily notes to distill, e.g. daily/2026-11-30/jwt-rotation, separated by "
            "commas or spaces; default: every active one."),
        Arg("date", "Without paths: only the active daily notes of this day (YYYY-MM-DD)."),
        Arg("hint", "What to focus on, e.g. decisions first."))),
    PromptSpec("sync", "synchronizer", sync_prompt, (
        Arg("summary", "What happened in the session, in a few sentences or bullets."),
        Arg("messages", 'The conversation: JSON [{"role", "content"}, ...] or plain text. '
            "Without summary and messages the host records its current session."),
        Arg("session_id", "Id of the session, stored as originSessionId."),
        Arg("hint", "What to focus on."))),
    PromptSpec("maintain", "curator", maintain_prompt, (
        Arg("steps", f"Steps, separated by commas: {', '.join(CURATOR_STEPS)}; default: all."),
        Arg("folder", "Folder to curate; default knowledge (the whole vault if it has none)."))),
    PromptSpec("recall", "recall", recall_prompt, (
        Arg("query", "The question to answer from memory.", required=True),)),
)
"""The MCP prompts, their jobs and arguments (docs/mcp.md "Prompts")."""


def add_prompts(server: MCPServer, vault: Vault) -> None:
    """Register the prompts on `server` (both tiers: they need no model here)."""
    language = vault.settings.jobs.language
    for spec in PROMPTS:
        server.prompt(name=spec.name, description=describe(spec.job, language))(
            prompt_function(spec, vault))


def prompt_function(spec: PromptSpec, vault: Vault) -> Callable[..., str]:
    """`spec.build` bound to `vault`, with a signature MCPServer turns into the arguments."""
    def render(**kwargs: Any) -> str:
        from mcp.shared.exceptions import MCPError
        from mcp_types import INVALID_PARAMS

        try:
            return spec.build(vault, **kwargs)
        except ReMeError as exc:  # its text says what to do; the SDK would hide it
            raise MCPError(INVALID_PARAMS, str(exc)) from exc

    params = [inspect.Parameter(
        a.name, inspect.Parameter.KEYWORD_ONLY,
        default=inspect.Parameter.empty if a.required else None,
        annotation=Annotated[str if a.required else str | None, Field(description=a.description)])
        for a in spec.args]
    render.__name__ = spec.name
    render.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    render.__annotations__ = {p.name: p.annotation for p in params} | {"return": str}
    return render


def _values(vault: Vault, hint: str | None = None) -> dict[str, Any]:
    """Values every host prompt's system text may use."""
    return {"vault_dir": str(vault.root), "today": _dt.date.today().isoformat(),
            "language": vault.settings.jobs.language,
            "hint": (hint or "").strip() or "(none)"}


def _transcript(messages: str, max_chars: int) -> str:
    """JSON messages (a list, or {"messages": [...]}) as the synchronizer renders them;
    any other text as given (its last `max_chars` characters)."""
    try:
        data = json.loads(messages)
    except ValueError:
        data = None
    if isinstance(data, dict):
        data = data.get("messages")
    if isinstance(data, list) and (turns := coerce_messages(data)):
        return render_transcript(turns, max_chars)
    return messages.strip()[-max_chars:]
