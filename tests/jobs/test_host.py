"""Host prompts (jobs/host.py): the job YAMLs + protocol + host notes, checked at load time."""

from __future__ import annotations

import copy

import pytest

from reme_agent.errors import ConfigError
from reme_agent.jobs import host
from reme_agent.jobs.base import load_prompt, protocol_text
from reme_agent.jobs.host import HOST_JOBS, host_prompt, unbound_values
from reme_agent.toolkit.registry import BY_NAME
from tests.host_text import tools_named

VALUES = {"vault_dir": "/v", "today": "2026-11-30", "hint": "(none)", "session_id": "s-1",
          "split_tokens": 1234}


@pytest.mark.parametrize("language", ["en", "zh"])
@pytest.mark.parametrize("job", sorted(HOST_JOBS))
def test_every_host_prompt_is_the_job_text_then_a_note_naming_its_tools(job: str,
                                                                        language: str) -> None:
    prompt = host_prompt(job, VALUES | {"language": language}, language=language,
                         tool_name=lambda t: f"mcp__x__{t}")
    system = load_prompt(job, language, placeholders=HOST_JOBS[job].placeholders)
    head = system.render_system({"protocol": protocol_text(), **VALUES, "language": language})
    assert prompt.instructions.startswith(head.rstrip())  # the job's own text, unchanged
    note = prompt.instructions[len(head.rstrip()):]
    assert all(f"`mcp__x__{t}`" in note for t in prompt.tools)
    assert set(prompt.tools) <= set(BY_NAME)
    assert not set(prompt.tools) & HOST_JOBS[job].forbidden_tools
    assert (protocol_text() in prompt.instructions) == (job != "recall")
    assert "{" not in prompt.description and prompt.description.strip()


@pytest.mark.parametrize("job", sorted(HOST_JOBS))
def test_a_host_prompt_names_only_tools_it_lists(job: str) -> None:
    """The job text and the note may only send the model to tools the host will grant it
    (the protocol, embedded whole, speaks of every tool and is checked for existence only)."""
    prompt = host_prompt(job, VALUES | {"language": "en"}, language="en")
    text = prompt.message(VALUES | {"daily_paths": "- d", "flip_note": "F", "transcript": "T",
                                    "recent": "R", "inherit_days": 7, "steps": "schema",
                                    "folder": "knowledge", "query": "Q"})
    own = text.replace(protocol_text(), "")
    named = tools_named(own)
    assert named, "the prompt names no tool"
    assert named <= set(prompt.tools), named - set(prompt.tools)
    assert tools_named(protocol_text()) <= set(BY_NAME)


def test_unbound_values_cover_what_an_agent_cannot_know_when_written() -> None:
    for language in ("en", "zh"):
        values = unbound_values(language)
        assert {"today", "hint", "transcript", "whole_vault"} <= set(values)
        assert not any(ch.isdigit() for ch in values["today"])  # no date baked in


@pytest.fixture
def host_data(monkeypatch: pytest.MonkeyPatch) -> dict:
    """A private copy of prompts/host.yaml the test may break."""
    data = copy.deepcopy(host._host_data())
    monkeypatch.setattr(host, "_host_data", lambda: data)
    return data


def test_a_host_note_without_its_tools_or_with_a_stray_placeholder_fails_at_load(
        host_data: dict) -> None:
    host_data["jobs"]["recall"]["note"]["en"] = "Use the tools."
    with pytest.raises(ConfigError, match=r"lacks \{tools\}"):
        host_prompt("recall", VALUES | {"language": "en"}, language="en")
    host_data["jobs"]["recall"]["note"]["en"] = "Use {tools} in {vault}."
    with pytest.raises(ConfigError, match="unknown placeholders"):
        host_prompt("recall", VALUES | {"language": "en"}, language="en")


def test_a_host_entry_may_not_grant_a_tool_the_job_must_never_use(host_data: dict) -> None:
    host_data["jobs"]["curator"]["tools"] = ["delete"]
    with pytest.raises(ConfigError, match="forbidden tools"):
        host_prompt("curator", VALUES | {"language": "en"}, language="en")
    host_data["jobs"]["curator"]["tools"] = ["lint_everything"]
    with pytest.raises(ConfigError, match="unknown or forbidden"):
        host_prompt("curator", VALUES | {"language": "en"}, language="en")


def test_the_curator_prompt_may_not_list_a_destructive_tool() -> None:
    with pytest.raises(ConfigError, match="must never use"):
        load_prompt("curator", "en", {"tools": ["read", "move"]},
                    placeholders=HOST_JOBS["curator"].placeholders,
                    forbidden_tools=HOST_JOBS["curator"].forbidden_tools)
