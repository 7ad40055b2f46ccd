"""An AgentScope 2.x app with reme-agent memory (DESIGN §9: the memory middleware).

    python examples/agentscope_app.py                       # offline, scripted model
    python examples/agentscope_app.py --vault ./my-vault --config configs/model.yaml

The app's agent gets the read-only memory tools (search, traverse, read, ...) and the
`MemoryMiddleware`: before each reply the vault is searched with the user's message and the
hits are put in the system prompt as "Loaded Memory"; after each reply the turn goes to the
synchronizer (the LLM synchronizer when a model is configured, else transcript mode).

With no model configured the app runs offline: a scripted model plays the assistant, so you
can see the whole loop (recall -> reply -> daily note) without an API key.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from agentscope.agent import Agent, InjectionConfig, ReActConfig
from agentscope.message import UserMsg
from agentscope.state import AgentState

from reme_agent import MemoryMiddleware, Vault, build_toolkit, load_settings, open_vault
from reme_agent.jobs.models import build_chat_model
from reme_agent.middleware import SECTION
from reme_agent.schema.layout import init_layout
from reme_agent.testing import ScriptedChatModel, TextBlock, tool_call
from reme_agent.toolkit import get_tool

SEED = "knowledge/jwt-key-rotation/jwt-key-rotation.md"
QUESTIONS = ["How often do we rotate the JWT signing keys?",
             "Good. Next time remind me to retire the old key after 24 hours."]


def seed(vault: Vault) -> None:
    """One knowledge note, written through the `write` tool (as any app would)."""
    if vault.store.exists(SEED):
        return
    get_tool("write").fn(vault, path=SEED, frontmatter={
        "title": "JWT key rotation", "description": "How the auth service rotates JWT keys.",
        "lifecycle": "evolving", "scope": "class", "source": "curated", "role": "method"},
        body="# JWT key rotation\n\nSigning keys rotate every 90 days; a dual-key verifier "
             "accepts the old and the new key for 24 hours.\n")


def offline_model() -> ScriptedChatModel:
    """Plays the assistant: one memory search, then answers from what it found."""
    return ScriptedChatModel([
        [tool_call("c1", "search", query="JWT key rotation", limit=3)],
        [TextBlock(text="Every 90 days; the old key stays valid for 24 hours (from memory).")],
        [TextBlock(text="Noted: retire the old key 24 hours after a rotation.")],
    ])


async def main(vault_dir: Path, configs: list[Path]) -> int:
    settings = load_settings(configs, vault=vault_dir)
    vault = open_vault(vault_dir, settings, create=True)
    init_layout(vault.root)
    seed(vault)
    vault.index()
    configured = settings.model.configured
    model = build_chat_model(settings.model, "app") if configured else offline_model()
    memory = MemoryMiddleware(vault, limit=3)  # sync: llm if configured, else transcript
    agent = Agent(name="assistant", system_prompt="You are the team's helpful assistant.",
                  model=model, toolkit=build_toolkit(vault, groups=["retrieve", "read"]),
                  middlewares=[memory], state=AgentState(session_id="example"),
                  react_config=ReActConfig(max_iters=5),
                  injection_config=InjectionConfig(inject_runtime_state=False))
    print(f"vault: {vault.root} | model: {settings.model.model if configured else 'scripted'}")
    for question in QUESTIONS:
        reply = await agent.reply(UserMsg("user", question))
        print(f"\nuser: {question}\nassistant: {reply.get_text_content()}")
        if isinstance(model, ScriptedChatModel):
            shown = model.calls[-1]["messages"][0].get_text_content()
            print(f"  (system prompt had {SECTION!r}: {SECTION in shown})")
        if memory.last_sync is not None:
            print(f"  memory: {memory.last_sync.summary or memory.last_sync.error}")
    vault.close()
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vault", type=Path, default=Path("example-vault"))
    parser.add_argument("--config", type=Path, action="append", default=[])
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.vault, args.config)))
