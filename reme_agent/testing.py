"""Test helpers that ship with reme-agent: a scripted chat model for AgentScope 2.x agents.

Only the LLM is scripted; the agent, the toolkit and the vault are real. Use it to test an
app built on the memory tools, or a job, without a network or an API key::

    model = ScriptedChatModel([
        [tool_call("c1", "search", query="BM25")],
        [tool_call("c2", "read", path="knowledge/bm25/bm25.md")],
        [TextBlock(text="done")],
    ])
    agent = Agent(name="t", system_prompt="...", model=model, toolkit=build_toolkit(vault),
                  react_config=ReActConfig(max_iters=5),
                  injection_config=InjectionConfig(inject_runtime_state=False))
    reply = asyncio.run(agent.reply(UserMsg("user", "go")))
    assert [c["tool_names"] for c in model.calls]          # what the model was offered
    assert tool_results(agent)[0].state == "success"

A turn may also be a callable `(messages, tools) -> list[block]`, so a script can react to
what the tools returned (e.g. pass on the stamp a `read` answered), or an exception instance,
which the call raises (a `TransientModelError` counts as retryable, like a provider's rate
limit, so retry/backoff code can be tested offline).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from agentscope.credential import CredentialBase
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import Msg, TextBlock, ToolCallBlock, ToolResultBlock
from agentscope.model import ChatModelBase, ChatResponse, ChatUsage
from agentscope.tool import ToolChoice
from pydantic import BaseModel

Turn = Sequence[Any] | Callable[[list[Msg], list[dict[str, Any]]], Sequence[Any]] | BaseException

__all__ = ["ScriptedChatModel", "TextBlock", "TransientModelError", "result_text", "tool_call",
           "tool_results"]


class TransientModelError(Exception):
    """A stand-in for a provider's transient error (rate limit, timeout): retryable."""


class ScriptedChatModel(ChatModelBase):
    """Replays planned turns (lists of TextBlock / ToolCallBlock) and records every call."""

    class Parameters(BaseModel):
        """A scripted model has no parameters."""

    type = "scripted_chat"

    def __init__(self, turns: Sequence[Turn],
                 retryable: tuple[type[BaseException], ...] = (TransientModelError,)) -> None:
        super().__init__(credential=CredentialBase(), model="scripted-model",
                         parameters=self.Parameters(), stream=False, max_retries=0,
                         context_size=1_000_000)  # large: context compression never triggers
        self.formatter = OpenAIChatFormatter()  # the Agent reads model.formatter
        self._turns = list(turns)
        self._retryable = retryable
        self.calls: list[dict[str, Any]] = []

    def _get_retryable_exceptions(self) -> tuple[type[BaseException], ...]:  # type: ignore[override]
        return self._retryable

    @property
    def remaining(self) -> int:
        return len(self._turns)

    async def _call_api(self, model_name: str, messages: list[Msg],
                        tools: list[dict[str, Any]] | None = None,
                        tool_choice: ToolChoice | None = None, **kwargs: Any) -> ChatResponse:
        snapshot = [m.model_copy(deep=True) for m in messages]
        self.calls.append({"messages": snapshot,
                           "tool_names": [t["function"]["name"] for t in tools or []],
                           "tools": tools or [], "tool_choice": tool_choice})
        if not self._turns:
            raise RuntimeError("ScriptedChatModel: the script is exhausted "
                               f"after {len(self.calls) - 1} turns")
        turn = self._turns.pop(0)
        if isinstance(turn, BaseException):
            raise turn
        blocks = turn(snapshot, tools or []) if callable(turn) else turn
        return ChatResponse(content=[b.model_copy(deep=True) for b in blocks], is_last=True,
                            usage=ChatUsage(input_tokens=0, output_tokens=0, time=0.0))


def tool_call(call_id: str, name: str, /, **args: Any) -> ToolCallBlock:
    """A tool call block; AgentScope 2.x carries the arguments as a JSON string.

    Ids must be unique within one reply: the agent drops a call whose id it has seen.
    """
    return ToolCallBlock(id=call_id, name=name, input=json.dumps(args, ensure_ascii=False))


def tool_results(source: Any) -> list[ToolResultBlock]:
    """Every tool result block in an agent's context (or a list of Msg), in order."""
    msgs = getattr(getattr(source, "state", None), "context", source)
    return [b for m in msgs for b in m.content if getattr(b, "type", None) == "tool_result"]


def result_text(block: ToolResultBlock) -> str:
    """The text of a tool result: errors arrive as a str, successes as a list of blocks."""
    if isinstance(block.output, str):
        return block.output
    return "".join(getattr(b, "text", "") or "" for b in block.output)
