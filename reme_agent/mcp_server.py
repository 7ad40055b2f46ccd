"""Face 2: the tools as an MCP server (service and expert tiers), built from the one registry.

The same L4 functions as the AgentScope toolkit (no second copy): each spec is bound to the
vault, its ReMeError becomes an MCP `ToolError` (so the model reads what happened and what
to do, and the server keeps serving), and its result carries both the readable text (for the
model) and the JSON data (`structuredContent`, for programs). The `service` tier adds the
LLM jobs as tools (without a chat model configured, only the synchronizer, which then
records raw turns: a tool that can only fail is left out); `expert` exposes atomic tools
only. Both tiers list the jobs' prompts (`mcp_prompts.py`: distill, sync, maintain, recall),
which the host's own model runs. `server_info.version` is the package version.

HTTP binds to 127.0.0.1 by default. Binding anywhere else requires a bearer token read from
an environment variable; requests without it get 401. stdout is the protocol channel on
stdio, so everything else logs to stderr.
"""

from __future__ import annotations

import functools
import hmac
import inspect
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from reme_agent.errors import ConfigError, ReMeError
from reme_agent.mcp_prompts import add_prompts
from reme_agent.toolkit.registry import ToolSpec, select
from reme_agent.toolkit.results import ToolResult

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from reme_agent.vault import Vault


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _job_specs(vault: Vault) -> Sequence[ToolSpec]:
    """Job tools for the service tier; without a model, only those that work without one."""
    from reme_agent.jobs.tools import job_tools

    return job_tools(vault.settings.model.configured)


def mcp_tool(spec: ToolSpec, vault: Vault) -> Callable[..., Any]:
    """The spec bound to `vault`, returning a CallToolResult with text + structured data."""
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp_types import CallToolResult, TextContent

    bound = spec.bind(vault, actor="mcp")

    @functools.wraps(bound)
    def call(**kwargs: Any) -> CallToolResult:
        try:
            result = bound(**kwargs)
        except ReMeError as exc:
            raise ToolError(str(exc)) from exc
        if isinstance(result, ToolResult):
            return CallToolResult(content=[TextContent(type="text", text=result.text)],
                                  structured_content=dict(result))
        if isinstance(result, dict):
            import json

            return CallToolResult(content=[TextContent(type="text", text=json.dumps(
                result, ensure_ascii=False, default=str))], structured_content=result)
        return CallToolResult(content=[TextContent(type="text", text=str(result))])

    del call.__wrapped__
    call.__signature__ = inspect.signature(bound).replace(  # type: ignore[attr-defined]
        return_annotation=CallToolResult)
    call.__annotations__ = {**bound.__annotations__, "return": CallToolResult}
    return call


def _server_class() -> type[MCPServer]:
    """MCPServer whose argument errors are one line naming each bad argument.

    The SDK validates a call's arguments before our tool runs and answers with pydantic's
    multi-line dump (error type, input, a documentation URL); the tool's own checks answer
    in one line (`toolkit.results`). This keeps the two alike."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from pydantic import ValidationError

    from reme_agent.toolkit.results import arguments_error

    class ReMeMCPServer(MCPServer):
        async def call_tool(self, name: str, arguments: dict[str, Any],
                            context: Any = None) -> Any:
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as exc:
                cause = exc.__cause__
                if not isinstance(cause, ValidationError):
                    raise
                tool = next((t for t in await self.list_tools() if t.name == name), None)
                schemas = (tool.input_schema if tool else {}).get("properties", {})
                raise ToolError(f"Error executing tool {name}: "
                                f"{arguments_error(cause.errors(), schemas)}") from cause

    return ReMeMCPServer


def build_server(vault: Vault, tier: str = "service", *,
                 extra: Sequence[ToolSpec] | None = None) -> MCPServer:
    """A new MCP server over `vault` (no global registration, no shared state)."""
    from mcp_types import ToolAnnotations

    from reme_agent import __version__

    server = _server_class()("reme-agent", version=__version__, instructions=(
        "Long-term memory: a vault of Markdown notes. Search before you write; read a note "
        "(and its stamp) before you change it; link with full paths like "
        "[[knowledge/topic/topic.md]]."))
    specs = select(tier=tier, extra=_job_specs(vault) if extra is None else extra)
    for spec in specs:
        server.add_tool(mcp_tool(spec, vault), name=spec.name, description=spec.description,
                        annotations=ToolAnnotations(read_only_hint=spec.read_only,
                                                    destructive_hint=spec.destructive))
    add_prompts(server, vault)
    return server


class BearerAuth:
    """ASGI middleware: refuse HTTP requests without `Authorization: Bearer <token>`."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            headers = dict(scope.get("headers") or [])
            if not hmac.compare_digest(headers.get(b"authorization", b""), self.expected):
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain"),
                                        (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": b"missing or wrong bearer token"})
                return
        await self.app(scope, receive, send)


def http_app(server: MCPServer, host: str, token: str | None) -> Any:
    """The streamable-HTTP ASGI app, wrapped in bearer auth when a token is given."""
    from mcp.server.transport_security import TransportSecuritySettings

    security = None
    if host not in LOOPBACK:
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    app = server.streamable_http_app(host=host, transport_security=security, stateless_http=True,
                                     json_response=True)
    return BearerAuth(app, token) if token else app


MIN_TOKEN_CHARS = 16
"""Shortest bearer token accepted: a guessable token is no lock."""


def resolve_token(host: str, token_env: str | None) -> str | None:
    """The bearer token from `token_env`, or None to serve without auth (loopback only).

    Fails closed: a named variable that is unset, empty or whitespace stops the server
    (the user asked for auth; starting without it would be a silent downgrade), and so
    does a token shorter than MIN_TOKEN_CHARS or one with spaces around it.
    """
    if token_env is None:
        if host not in LOOPBACK:
            raise ConfigError(
                f"Refusing to serve MCP over HTTP on {host} without a bearer token.",
                "Set --token-env NAME to an environment variable holding a secret token, "
                "or bind to 127.0.0.1.")
        return None
    raw = os.environ.get(token_env)
    if raw is None or not raw.strip():
        raise ConfigError(
            f"--token-env {token_env}: the variable is {'unset' if raw is None else 'empty'}; "
            "refusing to serve without the auth you asked for.",
            f"Export {token_env} with a secret of at least {MIN_TOKEN_CHARS} characters, e.g. "
            "`python -c 'import secrets; print(secrets.token_urlsafe(32))'`.")
    if raw != raw.strip():
        raise ConfigError(f"--token-env {token_env}: the token has spaces around it.",
                          "Store the token without surrounding whitespace.")
    if len(raw) < MIN_TOKEN_CHARS:
        raise ConfigError(f"--token-env {token_env}: the token has {len(raw)} characters; at "
                          f"least {MIN_TOKEN_CHARS} are required.",
                          "Use a long random secret, e.g. `python -c 'import secrets; "
                          "print(secrets.token_urlsafe(32))'`.")
    return raw


def serve(vault: Vault, tier: str, transport: str, host: str = "127.0.0.1", port: int = 8765,
          token_env: str | None = None) -> None:
    """Run the server until interrupted (stdio or streamable HTTP)."""
    server = build_server(vault, tier)
    if transport == "stdio":
        server.run("stdio")
        return
    import uvicorn

    token = resolve_token(host, token_env)
    # where to connect is what the person starting it needs: one plain line on stderr, not
    # a WARNING log record (nothing is wrong), and stdout stays free
    print(f"MCP ({tier} tier) on http://{host}:{port}/mcp"
          + (" with bearer auth" if token else ""), file=sys.stderr, flush=True)
    uvicorn.run(http_app(server, host, token), host=host, port=port, log_level="warning")
