"""MemoryMiddleware: Loaded Memory before a reply, the synchronizer after it (real Agent)."""

from __future__ import annotations

import asyncio

from agentscope.agent import Agent, InjectionConfig, ReActConfig
from agentscope.message import UserMsg
from agentscope.state import AgentState

from reme_agent.middleware import SECTION, MemoryMiddleware
from reme_agent.testing import ScriptedChatModel, TextBlock, tool_call
from tests.jobs.conftest import DAILY_TODAY, JWT, TODAY, build
from tests.jobs.conftest import vault as vault  # noqa: F401  (the fixture)


def make_agent(model: ScriptedChatModel, mw: MemoryMiddleware, sid: str = "app-1") -> Agent:
    return Agent(name="app", system_prompt="You help the team.", model=model, middlewares=[mw],
                 state=AgentState(session_id=sid), react_config=ReActConfig(max_iters=3),
                 injection_config=InjectionConfig(inject_runtime_state=False))


def system_prompt(model: ScriptedChatModel, call: int = 0) -> str:
    return model.calls[call]["messages"][0].get_text_content()


def test_it_injects_loaded_memory_and_logs_the_turn_without_a_model(vault) -> None:
    model = ScriptedChatModel([[TextBlock(text="Every 90 days.")]])
    mw = MemoryMiddleware(vault, limit=3)
    reply = asyncio.run(make_agent(model, mw).reply(UserMsg("user", "How often do JWT keys rotate?")))

    assert reply.get_text_content() == "Every 90 days."
    prompt = system_prompt(model)
    assert prompt.startswith("You help the team.\n\n" + SECTION) and JWT in prompt
    assert "Keys rotate every 90 days." in prompt
    assert mw.loaded == {}  # the loaded notes belong to that reply only
    sync = mw.last_sync
    assert sync is not None and sync.mode == "transcript" and mw.last_error is None
    text = (vault.root / sync.written[0]).read_text(encoding="utf-8")
    assert "**user**: How often do JWT keys rotate?" in text
    assert "**app** (assistant): Every 90 days." in text


def test_memory_is_fresh_per_reply_and_absent_when_the_vault_is_empty(vault, tmp_path) -> None:
    model = ScriptedChatModel([[TextBlock(text="a")], [TextBlock(text="b")]])
    mw = MemoryMiddleware(vault, sync=False, limit=2)
    agent = make_agent(model, mw)
    asyncio.run(agent.reply(UserMsg("user", "JWT key rotation")))
    asyncio.run(agent.reply(UserMsg("user", "fusion method nDCG blend")))
    assert JWT in system_prompt(model, 0) and DAILY_TODAY not in system_prompt(model, 0)
    assert DAILY_TODAY in system_prompt(model, 1) and JWT not in system_prompt(model, 1)

    empty = build(tmp_path / "empty", {})
    model = ScriptedChatModel([[TextBlock(text="c")]])
    asyncio.run(make_agent(model, MemoryMiddleware(empty, sync=False)).reply(
        UserMsg("user", "JWT key rotation")))
    assert system_prompt(model) == "You help the team."
    empty.close()


def test_a_message_the_vault_knows_nothing_about_injects_no_memory(vault) -> None:
    model = ScriptedChatModel([[TextBlock(text="a")]])
    mw = MemoryMiddleware(vault, sync=False)
    asyncio.run(make_agent(model, mw).reply(UserMsg("user", "kubernetes pod autoscaling")))
    assert system_prompt(model) == "You help the team."


def test_after_a_reply_the_llm_synchronizer_gets_the_turn(vault) -> None:
    app_model = ScriptedChatModel([[TextBlock(text="Use the dual-key verifier.")]])
    sync_model = ScriptedChatModel([
        [tool_call("s1", "daily_write", slug="key-advice", date=TODAY.isoformat(),
                   body="## Findings\n- Dual-key verifier avoids logouts.\n")],
        [TextBlock(text="recorded")],
    ])
    mw = MemoryMiddleware(vault, model=sync_model)
    asyncio.run(make_agent(app_model, mw).reply(UserMsg("user", "How do we avoid logouts?")))

    assert mw.last_sync.mode == "llm" and mw.last_sync.summary == "recorded"
    transcript = sync_model.calls[0]["messages"][1].get_text_content()
    assert "[user] How do we avoid logouts?" in transcript
    assert "[assistant] Use the dual-key verifier." in transcript
    path = f"daily/{TODAY.isoformat()}/key-advice/key-advice.md"
    assert mw.last_sync.created == [path]
    assert "originSessionId: app-1" in (vault.root / path).read_text(encoding="utf-8")


def test_memory_failures_never_break_the_reply(vault, monkeypatch) -> None:
    def broken(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("index gone")

    monkeypatch.setattr("reme_agent.recall.search.search", broken)
    model = ScriptedChatModel([[TextBlock(text="still here")]])
    sync_model = ScriptedChatModel([])  # exhausted at once: the sync fails
    mw = MemoryMiddleware(vault, model=sync_model)
    reply = asyncio.run(make_agent(model, mw).reply(UserMsg("user", "JWT keys?")))
    assert reply.get_text_content() == "still here"
    assert system_prompt(model) == "You help the team."
    assert mw.last_error and "exhausted" in mw.last_error


def test_background_sync_is_awaited_by_flush(vault) -> None:
    model = ScriptedChatModel([[TextBlock(text="ok")]])
    mw = MemoryMiddleware(vault, background=True, recall=False)

    async def run() -> None:
        await make_agent(model, mw, sid="bg").reply(UserMsg("user", "note this"))
        await mw.flush()

    asyncio.run(run())
    assert mw.last_sync is not None and mw.last_sync.written
