"""Face 1: the tools as an AgentScope 2.x `Toolkit` (the only toolkit module importing agentscope).

Read tools are `is_read_only=True`; write tools are allowed (a plain FunctionTool asks the
user, and an unattended agent parks) and `is_concurrency_safe=False` (two writes in one
turn must not run at once). Every tool also carries ALLOW, so DONT_ASK-mode agents can
still read. Destructive calls (`delete`, `move`, `copy` over an existing file) ask the user
through AgentScope's permission flow, unless the toolkit is built with
`allow_destructive=True` (unattended jobs); the decision is made per call from its input,
so an ordinary copy never asks. A tool's ReMeError becomes an ERROR result with `str(e)`
(what happened + what to do), and the agent continues.

Build one Toolkit per agent run: AgentScope's structured output mutates the toolkit.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool, ToolGroup, Toolkit

from reme_agent.toolkit.registry import GROUPS, ToolSpec, select

if TYPE_CHECKING:
    from reme_agent.vault import Vault

ALLOW = PermissionDecision(behavior=PermissionBehavior.ALLOW,
                           message="reme-agent memory tool: vault-scoped and validated")


class VaultTool(FunctionTool):
    """A registry tool bound to a vault, with a per-call permission decision."""

    def __init__(self, spec: ToolSpec, vault: Vault, *, allow_destructive: bool) -> None:
        super().__init__(spec.bind(vault, as_text=True), name=spec.name,
                         is_read_only=spec.read_only, is_concurrency_safe=spec.read_only,
                         permission=ALLOW)
        self.spec = spec
        self.allow_destructive = allow_destructive

    async def check_permissions(self, tool_input: dict[str, Any] | None = None,
                                *_args: Any, **_kwargs: Any) -> PermissionDecision:
        if not self.allow_destructive and self.spec.needs_confirmation(tool_input or {}):
            shown = ", ".join(f"{k}={v!r}" for k, v in (tool_input or {}).items())
            return PermissionDecision(
                behavior=PermissionBehavior.ASK,
                message=f"reme-agent: `{self.spec.name}({shown})` removes or replaces a file "
                        "in the vault; confirm to go on.")
        return ALLOW


def function_tool(spec: ToolSpec, vault: Vault, *, allow_destructive: bool = False) -> VaultTool:
    """One spec as a FunctionTool bound to `vault` (the model never sees `vault`)."""
    return VaultTool(spec, vault, allow_destructive=allow_destructive)


def build_toolkit(vault: Vault, groups: Collection[str] | None = None, tier: str = "service",
                  only: Collection[str] | None = None, *, extra: Sequence[ToolSpec] = (),
                  lazy_groups: bool = False, allow_destructive: bool = False) -> Toolkit:
    """A new Toolkit over `vault` (never shared between agents).

    `groups` / `only` narrow the tools (e.g. groups=["retrieve", "read"], only=["search"]).
    `tier="expert"` exposes atomic tools only; `"service"` adds job specs passed in `extra`
    (declared above the toolkit, so imports keep pointing down). With `lazy_groups=True`
    each group becomes an AgentScope ToolGroup the model activates through `reset_tools`;
    by default all selected tools are always on. Destructive calls ask the user unless
    `allow_destructive=True` (for unattended agents whose deletes are intended).
    """
    specs = select(groups, only, tier, extra)
    tools = [function_tool(s, vault, allow_destructive=allow_destructive) for s in specs]
    if not lazy_groups:
        return Toolkit(tools=list(tools))
    by_group: dict[str, list[FunctionTool]] = {}
    for s, tool in zip(specs, tools, strict=True):
        by_group.setdefault(s.group, []).append(tool)
    return Toolkit(tool_groups=[
        ToolGroup(name=f"memory_{g}", description=GROUPS.get(g, f"{g} tools"), tools=tools)
        for g, tools in by_group.items()])

