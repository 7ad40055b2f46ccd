"""The synchronizer and the distiller over Ollama's chat API (`POST /api/chat`).

`provider: ollama` with `base_url` as the Ollama host: AgentScope's real OllamaChatModel, its
formatter and the `ollama` client (extra `reme-agent[ollama]`) talk to the scripted loopback
server, one JSON body or NDJSON lines. Ollama's format differs from OpenAI's where it
matters to us: arguments are a JSON object, results go back as `role: tool` messages with
`tool_name` (no call id), options carry the temperature, and the client rebuilds every tool
property from `type`/`items`/`description`/`enum` only, dropping anything else.
"""

from __future__ import annotations

import sys

import pytest

from reme_agent.config import ModelSettings
from reme_agent.errors import ConfigError
from reme_agent.jobs.distiller import run_distiller
from reme_agent.jobs.models import build_chat_model
from reme_agent.jobs.synchronizer import run_synchronizer
from tests.jobs.conftest import AUTH, DAILY_JWT, JWT, TODAY, text_of
from tests.wire.conftest import MODEL, read_answer
from tests.wire.fake_llm import ScriptedLLMServer, call, tool_messages
from tests.wire.test_jobs_over_openai import CHAT, NEW, SYNC_ARGS

STREAMING = pytest.mark.parametrize("stream", [False, True], ids=["json", "ndjson"])


@STREAMING
def test_synchronizer_writes_the_daily_note_through_the_ollama_wire(wire_vault,
                                                                    stream: bool) -> None:
    with ScriptedLLMServer([[call("daily_write", **SYNC_ARGS)], "Wrote the note."]) as server:
        vault = wire_vault(server, provider="ollama", stream=stream)
        result = run_synchronizer(vault, CHAT, today=TODAY, session_id="s-42")

    assert result.ok and result.created == [NEW] and result.summary == "Wrote the note."
    assert "# Dual-key rollout\n\n" + SYNC_ARGS["body"] in text_of(vault, NEW)
    first, second = server.requests
    assert {first.path, second.path} == {"/api/chat"}
    body = first.body
    assert (body["model"], body["stream"], body["options"]) == (MODEL, stream,
                                                               {"temperature": 0.0})
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert [t["function"]["name"] for t in body["tools"]] == ["daily_read", "daily_list",
                                                              "daily_write", "daily_attach"]
    assistant = [m for m in second.body["messages"] if m["role"] == "assistant"][-1]
    assert assistant["tool_calls"] == [{"function": {"name": "daily_write",
                                                     "arguments": SYNC_ARGS}}]
    (back,) = tool_messages(second.body)
    assert back["tool_name"] == "daily_write" and back["content"].startswith(f"Created {NEW}")


def test_every_parameter_reaches_ollama_with_its_type(wire_vault) -> None:
    """The ollama client drops `anyOf`: optional parameters must travel as type lists."""
    with ScriptedLLMServer(["ok"]) as server:
        vault = wire_vault(server, provider="ollama")
        run_distiller(vault, [DAILY_JWT], today=TODAY, flip_status=False)

    tools = {t["function"]["name"]: t["function"]["parameters"]
             for t in server.bodies[0]["tools"]}
    untyped = [f"{name}.{prop}" for name, params in tools.items()
               for prop, schema in params["properties"].items() if not schema.get("type")]
    assert untyped == []
    assert tools["read"]["properties"]["start_line"]["type"] == ["integer", "null"]
    assert tools["write"]["properties"]["frontmatter"]["type"] == ["object", "null"]


@STREAMING
def test_distiller_rewrites_a_note_with_the_stamp_it_read_over_ollama(wire_vault,
                                                                      stream: bool) -> None:
    def rewrite(bodies: list[dict]) -> list:
        stamp, whole = read_answer(bodies, JWT)
        return [call("write", path=JWT, overwrite=True, stamp=stamp,
                     text=whole.replace("every 90 days.", "every 30 days."))]

    with ScriptedLLMServer([
        [call("daily_read", path=DAILY_JWT)],
        [call("read", path=JWT), call("read", path=AUTH)],
        rewrite,
        [call("daily_status", path=DAILY_JWT, status="distilled")],
        "Done.",
    ]) as server:
        vault = wire_vault(server, provider="ollama", stream=stream)
        result = run_distiller(vault, [DAILY_JWT], today=TODAY)

    assert result.ok and result.error is None, result.error
    assert "every 30 days." in text_of(vault, JWT) and result.flipped == [DAILY_JWT]
    results = tool_messages(server.bodies[2])[-2:]
    assert [m["tool_name"] for m in results] == ["read", "read"]
    assert JWT in results[0]["content"] and AUTH in results[1]["content"]


def test_a_missing_ollama_client_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ollama", None)  # `import ollama` now fails
    with pytest.raises(ConfigError, match=r"reme-agent\[ollama\]"):
        build_chat_model(ModelSettings(provider="ollama", model="qwen2.5:7b"))
