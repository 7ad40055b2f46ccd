"""The synchronizer and the distiller end to end over the OpenAI chat-completions wire.

`provider: openai` with `base_url` on the scripted loopback server: AgentScope's real
OpenAIChatModel, its formatter and the openai SDK send HTTP and parse the JSON (or SSE)
answers; the vault, chromadb (hash embedder), the guard and the agent loop are real. Each
job runs with the answer in one body and streamed.
"""

from __future__ import annotations

import json

import pytest

from reme_agent.jobs.distiller import run_distiller
from reme_agent.jobs.synchronizer import run_synchronizer
from reme_agent.toolkit.notes import property_read
from tests.jobs.conftest import AUTH, DAILY_JWT, JWT, TODAY, ZHANG, text_of, vault_hash
from tests.wire.conftest import KEY, MODEL, content_text, read_answer
from tests.wire.fake_llm import ScriptedLLMServer, Status, call, tool_messages

CHAT = [{"role": "user", "content": "Let's rotate the JWT keys with a dual-key verifier."},
        {"role": "assistant", "content": "Done: the verifier accepts both keys for 24h."}]
NEW = f"daily/{TODAY.isoformat()}/dual-key-rollout/dual-key-rollout.md"
# Non-ASCII, quotes and newlines: streamed, the arguments are cut inside all of them
SYNC_ARGS = {"slug": "dual-key-rollout", "title": "Dual-key rollout",
             "description": "Rolling out the dual-key JWT verifier.",
             "body": "## Objective\nRoll out the dual-key verifier (双钥验证).\n\n## Progress\n"
                     "- Verifier accepts \"old\" and \"new\" keys for 24h.\n"}
STREAMING = pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])


def assistant_calls(body: dict) -> list[dict]:
    """The tool calls of the last assistant message the client sent back."""
    return [m for m in body["messages"] if m["role"] == "assistant"][-1]["tool_calls"]


@STREAMING
def test_synchronizer_writes_the_daily_note_through_the_openai_wire(wire_vault,
                                                                    stream: bool) -> None:
    with ScriptedLLMServer([[call("daily_write", **SYNC_ARGS)], "Wrote the note."]) as server:
        vault = wire_vault(server, stream=stream)
        result = run_synchronizer(vault, CHAT, today=TODAY, session_id="s-42")

    assert result.ok and result.error is None and result.created == [NEW]
    assert result.summary == "Wrote the note."
    text = text_of(vault, NEW)
    assert "# Dual-key rollout\n\n" + SYNC_ARGS["body"] in text
    assert property_read(vault, NEW)["properties"]["originSessionId"] == "s-42"

    first, second = server.requests
    assert {first.path, second.path} == {"/v1/chat/completions"}
    assert first.headers["authorization"] == f"Bearer {KEY}"  # from model.api_key_env
    body = first.body
    assert (body["model"], body["stream"], body["temperature"]) == (MODEL, stream, 0.0)
    assert ("stream_options" in body) is stream and "tool_choice" not in body
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "[user] Let's rotate the JWT keys" in content_text(body["messages"][1])
    assert [t["function"]["name"] for t in body["tools"]] == ["daily_read", "daily_list",
                                                              "daily_write", "daily_attach"]
    # the answer went back as an assistant tool call and a `tool` message with its id
    assert [m["role"] for m in second.body["messages"]] == ["system", "user", "assistant",
                                                            "tool"]
    (sent,) = assistant_calls(second.body)
    assert (sent["id"], sent["type"], sent["function"]["name"]) == ("call_1", "function",
                                                                    "daily_write")
    assert json.loads(sent["function"]["arguments"]) == SYNC_ARGS
    (back,) = tool_messages(second.body)
    assert back["tool_call_id"] == "call_1" and back["content"].startswith(f"Created {NEW}")


@STREAMING
def test_synchronizer_stores_a_long_output_beside_the_note_over_the_wire(wire_vault,
                                                                        stream: bool) -> None:
    log = "".join(f"token {i}: verified with the {'old' if i % 2 else 'new'} key\n"
                  for i in range(60))
    attach = {"slug": "dual-key-rollout", "filename": "verify.log", "content": log,
              "description": "Verifier run over 60 tokens"}
    with ScriptedLLMServer([[call("daily_write", **SYNC_ARGS)], [call("daily_attach", **attach)],
                            "Wrote the note and its log."]) as server:
        vault = wire_vault(server, stream=stream)
        result = run_synchronizer(vault, CHAT, today=TODAY, session_id="s-42")

    material = NEW.rsplit("/", 1)[0] + "/verify.log"
    assert result.ok and result.created == [NEW, material]
    assert (vault.root / material).read_text(encoding="utf-8") == log  # streamed, cut, joined
    assert "- [[verify.log]] — Verifier run over 60 tokens" in text_of(vault, NEW)
    back = tool_messages(server.requests[2].body)[-1]
    assert back["content"].startswith(f"Stored {material}")


@STREAMING
def test_distiller_rewrites_a_note_with_the_stamp_it_read_over_the_wire(wire_vault,
                                                                        stream: bool) -> None:
    def rewrite(bodies: list[dict]) -> list:
        stamp, whole = read_answer(bodies, JWT)
        assert "Keys rotate every 90 days." in whole
        return [call("write", path=JWT, overwrite=True, stamp=stamp,
                     text=whole.replace("every 90 days.", "every 30 days (was 90)."))]

    with ScriptedLLMServer([
        [call("daily_read", path=DAILY_JWT)],
        ["Reading both notes.", call("read", path=JWT), call("read", path=AUTH)],
        rewrite,
        [call("daily_status", path=DAILY_JWT, status="distilled")],
        "Updated the rotation period.",
    ]) as server:
        vault = wire_vault(server, stream=stream)
        result = run_distiller(vault, [DAILY_JWT], today=TODAY)

    assert result.ok and result.error is None, result.error
    text = text_of(vault, JWT)
    assert "every 30 days (was 90)." in text
    assert f"part_of:: [[{AUTH}]]" in text and f"owner:: [[{ZHANG}]]" in text  # E-1 kept
    assert result.written == [JWT, DAILY_JWT] and result.flipped == [DAILY_JWT]
    assert property_read(vault, DAILY_JWT)["properties"]["status"] == "distilled"

    # two calls in one answer (indexes 0 and 1 when streamed) came back as two results
    third = server.bodies[2]
    assert [m["role"] for m in third["messages"]] == ["system", "user", "assistant", "tool",
                                                      "assistant", "tool", "tool"]
    sent = assistant_calls(third)
    assert [(c["id"], c["function"]["name"]) for c in sent] == [("call_2", "read"),
                                                                ("call_3", "read")]
    assert [json.loads(c["function"]["arguments"]) for c in sent] == [{"path": JWT},
                                                                      {"path": AUTH}]
    results = tool_messages(third)[-2:]
    assert [m["tool_call_id"] for m in results] == ["call_2", "call_3"]
    assert JWT in results[0]["content"] and AUTH in results[1]["content"]
    assert content_text([m for m in third["messages"] if m["role"] == "assistant"][-1]) == \
        "Reading both notes."


def test_a_refused_write_travels_back_as_a_tool_result(wire_vault) -> None:
    with ScriptedLLMServer([
        [call("write", path=JWT, text="# JWT\n", overwrite=True)],
        "Gave up.",
    ]) as server:
        vault = wire_vault(server)
        before = vault_hash(vault)
        result = run_distiller(vault, [DAILY_JWT], today=TODAY,
                               flip_status=False)

    (back,) = tool_messages(server.bodies[1])
    assert back["tool_call_id"] == "call_1" and "has not read it yet" in back["content"]
    assert vault_hash(vault) == before and [i.path for i in result.failed] == [JWT]
    assert result.summary == "Gave up."


def test_the_deepseek_provider_speaks_the_same_wire_with_the_configured_temperature(
        wire_vault) -> None:
    with ScriptedLLMServer([[call("daily_write", **SYNC_ARGS)], "ok"]) as server:
        vault = wire_vault(server, provider="deepseek")
        result = run_synchronizer(vault, CHAT, today=TODAY, session_id="s-42")

    assert result.created == [NEW]
    body = server.bodies[0]
    assert (body["model"], body["temperature"], body["stream"]) == (MODEL, 0.0, False)
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_a_rate_limit_is_retried_by_our_backoff_and_the_job_completes(wire_vault) -> None:
    with ScriptedLLMServer([Status(429, "rate limited"), [call("daily_write", **SYNC_ARGS)],
                            "ok"]) as server:
        vault = wire_vault(server)
        vault.settings.model.retries = 1
        result = run_synchronizer(vault, CHAT, today=TODAY, session_id="s-42")

    assert result.ok and result.created == [NEW]
    assert len(server.requests) == 3 and server.bodies[0] == server.bodies[1]


def test_only_our_backoff_retries_a_failing_provider(wire_vault) -> None:
    """`model.retries: 1` means two HTTP requests, not the SDK's own three per attempt."""
    with ScriptedLLMServer([Status(503, "overloaded")] * 2) as server:
        vault = wire_vault(server)
        vault.settings.model.retries = 1
        before = vault_hash(vault)
        result = run_synchronizer(vault, CHAT, today=TODAY, session_id="s-42")

    assert result.error and "503" in result.error and not result.ok
    assert len(server.requests) == 2 and vault_hash(vault) == before

