"""Jobs run by a host's own model with the MCP tools (seed architecture L2: the expert tier).

The expert tier exposes no LLM job: the host's model (Claude Code, any MCP host) runs the job
itself with the atomic tools, so no model is configured on our side. What that model reads is
built from the sources the in-process jobs use, never from a second copy of the instructions:

    prompts/<job>.yaml   the job's system text ({protocol} filled from protocol.md), its user
                         template and its tools, loaded and checked by `load_prompt`
    prompts/host.yaml    per job: tools a host needs besides those, a description, and a note
                         on what the host's model must do itself because no guard runs around
                         it (jobs/guard.py does that work for the in-process job)

`curator` and `recall` exist for hosts only (no in-process job: maintenance without a model is
`reme-agent maintain`, and search needs no model). Two faces use this module: the MCP prompts
(`mcp_prompts.py`, a task rendered from a host's arguments) and `export-agents`
(`agents_export.py`, a standing system prompt).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from importlib import resources
from typing import Any

import yaml
from pydantic import BaseModel

from reme_agent.errors import ConfigError
from reme_agent.jobs import distiller, synchronizer
from reme_agent.jobs.base import LANGUAGES, Placeholders, check_template, load_prompt, protocol_text
from reme_agent.jobs.guard import WRITE_TOOLS
from reme_agent.toolkit.registry import BY_NAME

CURATOR_STEPS: tuple[str, ...] = ("schema", "dangling", "orphans", "collisions", "merge",
                                  "split", "autolink")
"""The curator's steps, in the order it runs them (one section each in prompts/curator.yaml)."""
UNBOUND = frozenset({"today", "hint", "transcript", "whole_vault"})


class HostJob(BaseModel):
    """What a host-run job's prompt may contain and which tools it must never list."""

    name: str
    placeholders: Placeholders
    forbidden_tools: frozenset[str] = frozenset()


HOST_JOBS: dict[str, HostJob] = {job.name: job for job in (
    HostJob(name="distiller", placeholders=distiller.PLACEHOLDERS,
            forbidden_tools=distiller.FORBIDDEN_TOOLS),
    HostJob(name="synchronizer", placeholders=synchronizer.PLACEHOLDERS,
            forbidden_tools=synchronizer.FORBIDDEN_TOOLS),
    # the curator adds, and takes out only a wrong link (`link_remove`: named, with a
    # reason, audited): no tool that deletes, moves or changes a status
    HostJob(name="curator", placeholders=Placeholders(
        system_allowed=frozenset({"vault_dir", "today", "language", "split_tokens"}),
        user_required=frozenset({"steps"}), user_allowed=frozenset({"folder", "today"})),
        forbidden_tools=frozenset({"delete", "move", "copy", "upload", "download",
                                   "daily_write", "daily_attach", "daily_status",
                                   "property_delete"})),
    HostJob(name="recall", placeholders=Placeholders(
        system_required=frozenset(), system_allowed=frozenset({"vault_dir", "today", "language"}),
        user_required=frozenset({"query"})), forbidden_tools=WRITE_TOOLS),
)}


class HostPrompt(BaseModel):
    """A job's prompt as a host's model gets it: instructions + the tools to call."""

    job: str
    language: str
    description: str
    tools: list[str]
    """MCP tool names (as the server lists them): the job prompt's tools + the host extras."""
    instructions: str
    """The job's system text, then the host note naming the tools as the host sees them."""
    user: str
    """The job's user template (placeholders unfilled)."""

    def message(self, values: Mapping[str, Any]) -> str:
        """Instructions and the task (the user template filled with `values`) in one text."""
        return f"{self.instructions.rstrip()}\n\n---\n\n{self.user.format_map(dict(values))}"


def host_prompt(job: str, values: Mapping[str, Any], *, language: str,
                tool_name: Callable[[str], str] = str) -> HostPrompt:
    """The host prompt of `job` with its system text rendered from `values` ({protocol} is
    filled here). `tool_name` maps an MCP tool name to the name the host shows the model.

    Raises ConfigError when a prompt or its host entry is malformed (checked on every load,
    so a broken edit fails the first prompt request, never halfway through a job).
    """
    spec = HOST_JOBS[job]
    prompt = load_prompt(job, language, placeholders=spec.placeholders,
                         forbidden_tools=spec.forbidden_tools)
    entry = _host_entry(job, language)
    tools = list(dict.fromkeys([*prompt.tools, *entry["tools"]]))
    note = entry["note"].format(tools=", ".join(f"`{tool_name(t)}`" for t in tools))
    system = prompt.render_system({"protocol": protocol_text(), **values})
    return HostPrompt(job=job, language=prompt.language, description=entry["description"],
                      tools=tools, instructions=f"{system.rstrip()}\n\n{note.rstrip()}\n",
                      user=prompt.user)


def describe(job: str, language: str) -> str:
    """The job's one-paragraph description for hosts (MCP prompt list, agent frontmatter)."""
    return str(_host_entry(job, language)["description"])


def unbound_values(language: str) -> dict[str, str]:
    """Placeholder values for text written once and used on many days (exported agents) or
    for an input the host did not pass (`transcript`, `whole_vault`)."""
    _check_language(language)
    return dict(_host_data()["unbound"][language])


@functools.cache
def _host_data() -> dict[str, Any]:
    text = resources.files("reme_agent").joinpath("prompts", "host.yaml").read_text("utf-8")
    data = yaml.safe_load(text) or {}
    unbound = data.get("unbound") or {}
    for lang in LANGUAGES:
        values = unbound.get(lang)
        if not isinstance(values, dict) or not set(values) >= UNBOUND:
            raise ConfigError(f"prompts/host.yaml: `unbound.{lang}` needs "
                              f"{', '.join(sorted(UNBOUND))}.")
    return data


def _host_entry(job: str, language: str) -> dict[str, Any]:
    """prompts/host.yaml's entry for `job` in `language`, checked."""
    _check_language(language)
    where = f"host entry of the {job} job (prompts/host.yaml)"
    raw = (_host_data().get("jobs") or {}).get(job)
    if not isinstance(raw, dict):
        raise ConfigError(f"The {where} is missing.")
    description = (raw.get("description") or {}).get(language)
    note = (raw.get("note") or {}).get(language)
    if not isinstance(description, str) or not description.strip() or not isinstance(note, str):
        raise ConfigError(f"The {where} needs `description.{language}` and `note.{language}`.")
    check_template(where, "note", note, frozenset({"tools"}), frozenset({"tools"}))
    tools = raw.get("tools") or []
    bad = [t for t in tools if t not in BY_NAME or t in HOST_JOBS[job].forbidden_tools]
    if bad:
        raise ConfigError(f"The {where} lists unknown or forbidden tools {bad}.")
    return {"description": " ".join(description.split()), "note": note, "tools": list(tools)}


def _check_language(language: str) -> None:
    if language not in LANGUAGES:
        raise ConfigError(f"Unknown job language {language!r}.", f"Use one of {LANGUAGES}.")
