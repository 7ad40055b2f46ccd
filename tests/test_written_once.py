"""Memory written once: a turn lands in the daily note once, whatever path brings it.

The real middleware on a real AgentScope agent, the `session_end` hook and `reme-agent sync`
(twice) all record the same conversation; no model is configured, so every path uses the
transcript mode. Only the app's model is scripted.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

from agentscope.agent import Agent, InjectionConfig, ReActConfig
from agentscope.message import UserMsg
from agentscope.state import AgentState
from click.testing import CliRunner

from reme_agent.cli import cli
from reme_agent.hooks import run_hook
from reme_agent.middleware import MemoryMiddleware
from reme_agent.testing import ScriptedChatModel, TextBlock
from tests.jobs.conftest import vault as vault  # noqa: F401  (the fixture)

ROOT = Path(__file__).resolve().parents[1]
CHAT = [{"role": "user", "content": "Rotate the JWT keys?"},
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "And retire the old key."},
        {"role": "assistant", "content": "Done."}]  # said twice: two turns


def note(vault, sid: str) -> str:  # type: ignore[no-untyped-def]
    day = dt.date.today().isoformat()
    return (vault.root / f"daily/{day}/session-{sid}/session-{sid}.md").read_text(encoding="utf-8")


def agent(mw: MemoryMiddleware, replies: list[str], state: AgentState) -> Agent:
    model = ScriptedChatModel([[TextBlock(text=r)] for r in replies])
    return Agent(name="app", system_prompt="s", model=model, middlewares=[mw], state=state,
                 react_config=ReActConfig(max_iters=2),
                 injection_config=InjectionConfig(inject_runtime_state=False))


def assert_each_turn_once(text: str) -> None:
    assert text.count("Rotate the JWT keys?") == 1
    assert text.count("And retire the old key.") == 1
    assert text.count(": Done.\n") == 2


def test_middleware_then_hook_then_sync_twice_records_each_turn_once(vault, tmp_path) -> None:
    mw = MemoryMiddleware(vault, recall=False)
    app = agent(mw, ["Done.", "Done."], AgentState(session_id="s-42"))
    for msg in (CHAT[0], CHAT[2]):
        asyncio.run(app.reply(UserMsg("user", msg["content"])))
    assert mw.last_error is None and mw.last_sync.turns == {"new": 2, "already_synced": 0}

    report = run_hook("session_end", vault, {"session_id": "s-42", "messages": CHAT})
    assert report["sync"]["turns"] == {"new": 0, "already_synced": 4}
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps(CHAT), encoding="utf-8")
    for _ in range(2):
        got = CliRunner().invoke(cli, ["sync", "--messages", str(chat), "--session-id", "s-42",
                                       "--vault", str(vault.root)])
        assert got.exit_code == 0 and "Nothing new to record." in got.stdout, got.output
    assert_each_turn_once(note(vault, "s-42"))


def test_turn_counts_survive_a_saved_state_and_a_compressed_context(vault) -> None:
    mw = MemoryMiddleware(vault, recall=False)
    first = agent(mw, ["Done."], AgentState(session_id="s-43"))
    asyncio.run(first.reply(UserMsg("user", CHAT[0]["content"])))
    state = AgentState.model_validate_json(first.state.model_dump_json())
    state.context = []  # what compression leaves: earlier turns gone from the context
    asyncio.run(agent(mw, ["Done."], state).reply(UserMsg("user", CHAT[2]["content"])))
    assert mw.last_sync.turns == {"new": 2, "already_synced": 0}  # the 2nd "Done." is new

    report = run_hook("session_end", vault, {"session_id": "s-43", "messages": CHAT})
    assert report["sync"]["turns"]["new"] == 0
    assert_each_turn_once(note(vault, "s-43"))


def test_two_syncs_at_once_and_a_grown_transcript_add_only_new_turns(vault, tmp_path) -> None:
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps(CHAT[:2]), encoding="utf-8")
    args = [sys.executable, "-m", "reme_agent", "sync", "--messages", str(chat),
            "--session-id", "s-44", "--mode", "transcript", "--vault", str(vault.root)]
    env = {**os.environ, "REME_EMBEDDER__NAME": "hash", "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    chat.write_text(json.dumps(CHAT), encoding="utf-8")  # the conversation went on
    grown = subprocess.run(args + ["--json"], env=env, capture_output=True, text=True,
                           timeout=120)
    assert json.loads(grown.stdout)["turns"] == {"new": 2, "already_synced": 2}
    assert_each_turn_once(note(vault, "s-44"))
