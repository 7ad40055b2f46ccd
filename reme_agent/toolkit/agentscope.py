"""Face 1: the tools as an AgentScope 2.x `Toolkit` (the only toolkit module importing agentscope).

Read tools are `is_read_only=True`; write tools carry `permission=ALLOW` (a plain
FunctionTool asks the user, and an unattended agent parks) and `is_concurrency_safe=False`
(two writes in one turn must not run at once). Every tool also carries ALLOW, so
DONT_ASK-mode agents can still read. A tool's ReMeError becomes an ERROR result with
`str(e)` (what happened + what to do), and the agent continues.

Build one Toolkit per agent run: AgentScope's structured output mutates the toolkit.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool, ToolGroup, Toolkit

from reme_agent.toolkit.registry import GROUPS, ToolSpec, select

if TYPE_CHECKING:
    from reme_agent.vault import Vault

ALLOW = PermissionDecision(behavior=PermissionBehavior.ALLOW,
                           message="reme-agent memory tool: vault-scoped and validated")


def function_tool(spec: ToolSpec, vault: Vault) -> FunctionTool:
    """One spec as a FunctionTool bound to `vault` (the model never sees `vault`)."""
    return FunctionTool(spec.bind(vault, as_text=True), name=spec.name,
                        is_read_only=spec.read_only, is_concurrency_safe=spec.read_only,
                        permission=ALLOW)


def build_toolkit(vault: Vault, groups: Collection[str] | None = None, tier: str = "service",
                  only: Collection[str] | None = None, *, extra: Sequence[ToolSpec] = (),
                  lazy_groups: bool = False) -> Toolkit:
    """A new Toolkit over `vault` (never shared between agents).

    `groups` / `only` narrow the tools (e.g. groups=["retrieve", "read"], only=["search"]).
    `tier="expert"` exposes atomic tools only; `"service"` adds job specs passed in `extra`
    (declared above the toolkit, so imports keep pointing down). With `lazy_groups=True`
    each group becomes an AgentScope ToolGroup the model activates through `reset_tools`;
    by default all selected tools are always on.
    """
    specs = select(groups, only, tier, extra)
    if not lazy_groups:
        return Toolkit(tools=[function_tool(s, vault) for s in specs])
    by_group: dict[str, list[FunctionTool]] = {}
    for s in specs:
        by_group.setdefault(s.group, []).append(function_tool(s, vault))
    return Toolkit(tool_groups=[
        ToolGroup(name=f"memory_{g}", description=GROUPS.get(g, f"{g} tools"), tools=tools)
        for g, tools in by_group.items()])

