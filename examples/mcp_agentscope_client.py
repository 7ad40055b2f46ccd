"""An AgentScope 2.x agent reaching reme-agent through AgentScope's own MCP client.

    python examples/mcp_agentscope_client.py --vault ./demo-vault

The server runs as a stdio subprocess (`reme-agent mcp --tier expert`). With no model
configured the agent is driven by the scripted model shipped in `reme_agent.testing`, so the
example runs offline; pass your own ChatModelBase to `run()` for a real LLM.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any


async def run(vault: str, model: Any | None = None) -> str:
    from agentscope.agent import Agent, InjectionConfig, ReActConfig
    from agentscope.mcp import MCPClient, StdioMCPConfig
    from agentscope.message import TextBlock, UserMsg
    from agentscope.permission import PermissionContext, PermissionMode
    from agentscope.state import AgentState
    from agentscope.tool import Toolkit

    from reme_agent.testing import ScriptedChatModel, tool_call

    client = MCPClient(name="memory", is_stateful=True, mcp_config=StdioMCPConfig(
        command=sys.executable, args=["-m", "reme_agent", "mcp", "--vault", vault,
                                      "--tier", "expert"]))
    await client.connect()
    try:
        toolkit = Toolkit(mcps=[client])
        model = model or ScriptedChatModel([
            [tool_call("c1", "mcp__memory__write", path="knowledge/mcp-demo/mcp-demo.md",
                       body="The MCP demo note: agents share one memory vault.", overwrite=True)],
            [tool_call("c2", "mcp__memory__search", query="shared memory vault", limit=3)],
            [TextBlock(text="Saved and found the MCP demo note.")],
        ])
        agent = Agent(name="mcp-user", system_prompt="You keep notes in the memory tools.",
                      model=model, toolkit=toolkit, react_config=ReActConfig(max_iters=6),
                      injection_config=InjectionConfig(inject_runtime_state=False),
                      # Unattended example: MCP write tools would otherwise ask for permission.
                      state=AgentState(permission_context=PermissionContext(
                          mode=PermissionMode.BYPASS)))
        reply = await agent.reply(UserMsg("user", "Remember that agents share one memory vault."))
        return reply.get_text_content() or ""
    finally:
        await client.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vault", default="./demo-vault")
    args = ap.parse_args()
    print(asyncio.run(run(args.vault)))


if __name__ == "__main__":
    main()
