"""The scripted server itself: its answers parse as the providers' own SDK types, streamed
arguments really arrive in pieces, and a broken script fails the test instead of hanging."""

from __future__ import annotations

import json

import httpx
import pytest
from ollama import ChatResponse as OllamaChatResponse
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from tests.wire.fake_llm import ScriptedLLMServer, call

CALLS = ["Looking.", call("read", path="knowledge/张三/张三.md"), call("search", query="JWT keys")]


def post(server: ScriptedLLMServer, path: str, **body: object) -> httpx.Response:
    return httpx.post(server.url + path, json={"model": "m", "messages": [], **body}, timeout=5)


def sse_events(response: httpx.Response) -> list[str]:
    return [line[len("data: "):] for line in response.text.split("\n\n") if line]


def test_openai_answers_validate_as_the_sdks_types() -> None:
    with ScriptedLLMServer([CALLS, "Done."]) as server:
        calls = ChatCompletion.model_validate(post(server, "/v1/chat/completions").json())
        text = ChatCompletion.model_validate(post(server, "/v1/chat/completions").json())

    choice = calls.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content == "Looking."
    assert [(c.id, c.function.name, json.loads(c.function.arguments))
            for c in choice.message.tool_calls] == [
        ("call_1", "read", {"path": "knowledge/张三/张三.md"}),
        ("call_2", "search", {"query": "JWT keys"})]
    assert text.choices[0].finish_reason == "stop" and text.choices[0].message.content == "Done."


def test_streamed_tool_calls_arrive_in_pieces_by_index_then_usage_then_done() -> None:
    with ScriptedLLMServer([CALLS], chunk_chars=5) as server:
        response = post(server, "/v1/chat/completions", stream=True,
                        stream_options={"include_usage": True})

    assert response.headers["content-type"] == "text/event-stream"
    *events, done = sse_events(response)
    assert done == "[DONE]"
    chunks = [ChatCompletionChunk.model_validate(json.loads(e)) for e in events]
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-2].choices[0].finish_reason == "tool_calls"
    deltas = [d for c in chunks[:-1] for d in c.choices[0].delta.tool_calls or []]
    opened = [(d.index, d.id, d.function.name) for d in deltas if d.id]
    assert opened == [(0, "call_1", "read"), (1, "call_2", "search")]
    pieces = {i: [d.function.arguments for d in deltas if d.index == i and not d.id]
              for i in (0, 1)}
    assert all(len(p) > 1 and max(map(len, p)) <= 5 for p in pieces.values())
    assert json.loads("".join(pieces[0])) == {"path": "knowledge/张三/张三.md"}
    text = "".join(c.choices[0].delta.content or "" for c in chunks[:-1])
    assert text == "Looking."


def test_ollama_answers_validate_as_the_clients_types() -> None:
    with ScriptedLLMServer([CALLS, CALLS]) as server:
        whole = OllamaChatResponse(**post(server, "/api/chat", stream=False).json())
        lines = post(server, "/api/chat", stream=True).text.splitlines()

    assert whole.done and [(c.function.name, c.function.arguments)
                           for c in whole.message.tool_calls] == [
        ("read", {"path": "knowledge/张三/张三.md"}), ("search", {"query": "JWT keys"})]
    parts = [OllamaChatResponse(**json.loads(line)) for line in lines]
    assert [p.done for p in parts] == [False] * (len(parts) - 1) + [True]
    assert "".join(p.message.content or "" for p in parts) == "Looking."
    assert [c.function.name for p in parts for c in p.message.tool_calls or []] == ["read",
                                                                                   "search"]


def test_a_callable_turn_sees_every_request_so_far() -> None:
    seen: list[int] = []

    def turn(bodies: list[dict]) -> str:
        seen.append(len(bodies))
        return bodies[-1]["messages"][-1]["content"].upper()

    with ScriptedLLMServer(["first", turn]) as server:
        post(server, "/v1/chat/completions")
        answer = post(server, "/v1/chat/completions",
                      messages=[{"role": "tool", "tool_call_id": "call_1", "content": "stamp 1"}])
    assert seen == [2] and answer.json()["choices"][0]["message"]["content"] == "STAMP 1"
    assert server.requests[1].body["messages"][0]["tool_call_id"] == "call_1"


def test_an_exhausted_script_answers_400_and_fails_the_test() -> None:
    with (pytest.raises(AssertionError, match="script exhausted after 1 requests"),
          ScriptedLLMServer(["only one"]) as server):
        assert post(server, "/v1/chat/completions").status_code == 200
        # 400, not 5xx: the SDKs would retry a 5xx and slow the suite down
        assert post(server, "/v1/chat/completions").status_code == 400
