"""A real AgentScope Agent drives the tools with a scripted model (only the LLM is scripted)."""

from __future__ import annotations

import asyncio
import re

from agentscope.agent import Agent, InjectionConfig, ReActConfig
from agentscope.message import TextBlock, UserMsg

from reme_agent.testing import ScriptedChatModel, result_text, tool_call, tool_results
from reme_agent.toolkit import TOOLS, build_toolkit
from tests.toolkit.conftest import vault_hash

BM25 = "knowledge/bm25/bm25.md"
ADDED = "- BM25 has two knobs: k1 (term saturation) and b (length normalisation).\n"


def make_agent(vault, model: ScriptedChatModel) -> Agent:
    return Agent(name="memory", system_prompt="You keep the team's memory.", model=model,
                 toolkit=build_toolkit(vault), react_config=ReActConfig(max_iters=6),
                 injection_config=InjectionConfig(inject_runtime_state=False))


def write_with_read_stamp(messages, tools):
    """Turn 3 reacts to turn 2: take the text and stamp `read` returned, append, write back."""
    answer = result_text(tool_results(messages)[-1])
    head, text = answer.split("\n", 1)
    stamp = re.search(r"stamp ([0-9a-f]{64})", head).group(1)
    return [tool_call("c3", "write", path=BM25, text=text + ADDED, overwrite=True, stamp=stamp)]


def test_agent_searches_reads_and_writes_through_the_toolkit(vault) -> None:
    before = (vault.root / BM25).read_text(encoding="utf-8")
    stamp_before = vault.store.stamp(BM25)
    model = ScriptedChatModel([
        [TextBlock(text="Let me look it up."),
         tool_call("c1", "search", query="inverse document frequency", limit=3)],
        [tool_call("c2", "read", path=BM25)],
        write_with_read_stamp,
        [TextBlock(text="Saved the BM25 parameters.")],
    ])
    agent = make_agent(vault, model)
    reply = asyncio.run(agent.reply(UserMsg("user", "Remember BM25's two parameters.")))

    assert reply.get_text_content() == "Saved the BM25 parameters."
    assert (vault.root / BM25).read_text(encoding="utf-8") == before + ADDED
    results = tool_results(agent)
    assert [(r.name, r.state) for r in results] == [
        ("search", "success"), ("read", "success"), ("write", "success")]
    texts = [result_text(r) for r in results]
    assert texts[0].startswith(f"========== {BM25} ==========")
    assert texts[1].startswith(f"[{BM25} | lines 1-15 of 15 | stamp {stamp_before}]\n---\n")
    assert texts[2].startswith(f"Replaced {BM25} (stamp {vault.store.stamp(BM25)})")
    assert model.calls[0]["tool_names"] == [s.name for s in TOOLS] and model.remaining == 0


def test_agent_gets_actionable_errors_and_the_vault_stays_intact(vault) -> None:
    before = vault_hash(vault)
    model = ScriptedChatModel([
        [tool_call("c1", "write", path=BM25, body="overwritten")],
        [tool_call("c2", "daily_status", path="daily/2026-11-29/refactor", status="active")],
        [tool_call("c3", "read", path="knowledge/bm52/bm52.md")],
        [TextBlock(text="Nothing changed.")],
    ])
    agent = make_agent(vault, model)
    reply = asyncio.run(agent.reply(UserMsg("user", "Try some bad calls.")))
    assert reply.get_text_content() == "Nothing changed."
    results = tool_results(agent)
    assert [r.state for r in results] == ["error", "error", "error"]
    texts = [result_text(r) for r in results]
    assert "already exists" in texts[0] and "overwrite=True" in texts[0]
    assert "moving back is not allowed" in texts[1]
    assert f"Did you mean: {BM25}" in texts[2]
    assert vault_hash(vault) == before


QUOKKA_COPY = "knowledge/bm25-copy/bm25-copy.md"


def test_destructive_calls_ask_the_user_unless_the_toolkit_allows_them(vault) -> None:
    """G1: `build_toolkit` no longer lets an agent delete or move without asking."""
    def script() -> ScriptedChatModel:
        return ScriptedChatModel([[tool_call("c1", "copy", src=BM25, dst=QUOKKA_COPY)],
                                  [tool_call("c2", "delete", path=BM25)],
                                  [TextBlock(text="done")]])

    agent = make_agent(vault, script())
    reply = asyncio.run(agent.reply(UserMsg("user", "Copy BM25, then delete it.")))
    assert (vault.root / QUOKKA_COPY).exists()       # a plain copy destroys nothing: no question
    assert (vault.root / BM25).exists()               # the delete waits for the user
    assert "permission" in reply.get_text_content().lower()

    unattended = Agent(name="job", system_prompt="...", model=script(),
                       toolkit=build_toolkit(vault, allow_destructive=True),
                       react_config=ReActConfig(max_iters=6),
                       injection_config=InjectionConfig(inject_runtime_state=False))
    (vault.root / QUOKKA_COPY).unlink()
    asyncio.run(unattended.reply(UserMsg("user", "Copy BM25, then delete it.")))
    assert not (vault.root / BM25).exists()


def test_a_copy_over_a_file_asks_like_a_delete(vault) -> None:
    from reme_agent.toolkit import get_tool

    copy = get_tool("copy")
    assert not copy.needs_confirmation({"src": BM25, "dst": QUOKKA_COPY})
    assert copy.needs_confirmation({"src": BM25, "dst": QUOKKA_COPY, "overwrite": True})
    assert get_tool("move").needs_confirmation({"src": BM25, "dst": QUOKKA_COPY})
    assert not get_tool("write").needs_confirmation({"path": BM25, "overwrite": True})
