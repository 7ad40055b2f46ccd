"""Job framework (DESIGN §9): a YAML prompt + an AgentScope 2.x ReAct agent over L4 tools.

A job is
- a prompt `reme_agent/prompts/<job>.yaml` (loaded with importlib.resources): `tools` (the
  registry tools the job may use), `max_iters`, and per language (`en`, `zh`) a `system`
  template (must contain `{protocol}`, filled from `reme_agent/protocol.md`) and a `user`
  template. Placeholders are checked when the prompt is loaded, before any model call or
  write: a missing required one or an unknown one is a ConfigError at startup, not mid-job.
  Users override any part with a YAML path or a dict (deep-merged over the packaged prompt).
- an `Agent` over a **new** job-scoped Toolkit holding exactly the listed tools, each routed
  through the job's `Guard` (CAS, E-1, write policy, record); `ReActConfig(max_iters)`; the
  backoff middleware of `jobs.models` for transient model errors.

No model configured -> `ModelNotConfigured` before the vault is touched.
"""

from __future__ import annotations

import asyncio
import logging
import string
from collections.abc import Awaitable, Collection, Mapping
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml
from pydantic import BaseModel

from reme_agent.config import deep_merge
from reme_agent.errors import ConfigError, ReMeError
from reme_agent.jobs.models import backoff_middleware, build_chat_model
from reme_agent.toolkit.registry import BY_NAME

if TYPE_CHECKING:
    from reme_agent.jobs.guard import Guard
    from reme_agent.vault import Vault

log = logging.getLogger("reme_agent.jobs")

LANGUAGES = ("en", "zh")
PromptOverride = str | Path | Mapping[str, Any] | None
T = TypeVar("T")


class JobPrompt(BaseModel):
    """A loaded, validated job prompt in one language."""

    name: str
    language: str
    system: str
    user: str
    tools: list[str]
    max_iters: int

    def render_system(self, values: Mapping[str, Any]) -> str:
        return self.system.format_map(dict(values))

    def render_user(self, values: Mapping[str, Any]) -> str:
        return self.user.format_map(dict(values))


class Placeholders(BaseModel):
    """What a job's templates may and must contain (declared by the job module, not the YAML)."""

    system_required: frozenset[str] = frozenset({"protocol"})
    system_allowed: frozenset[str] = frozenset()
    user_required: frozenset[str] = frozenset()
    user_allowed: frozenset[str] = frozenset()


def protocol_text() -> str:
    """The memory protocol every job prompt embeds (`{protocol}`)."""
    return resources.files("reme_agent").joinpath("protocol.md").read_text(encoding="utf-8")


def load_prompt(job: str, language: str = "en", override: PromptOverride = None, *,
                placeholders: Placeholders | None = None,
                forbidden_tools: Collection[str] = ()) -> JobPrompt:
    """Load `prompts/<job>.yaml`, merge `override` over it, and validate it.

    Raises ConfigError naming the problem: an unknown language, a missing `{protocol}` (or
    other required placeholder), an unknown placeholder, an unknown or forbidden tool.
    """
    if language not in LANGUAGES:
        raise ConfigError(f"Unknown job language {language!r}.", f"Use one of {LANGUAGES}.")
    source = resources.files("reme_agent").joinpath("prompts", f"{job}.yaml")
    try:
        data = yaml.safe_load(source.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise ConfigError(f"No prompt for job {job!r} (reme_agent/prompts/{job}.yaml).") from None
    if override is not None:
        data = deep_merge(data, _override_data(override))
    where = f"prompt of the {job} job"
    texts = data.get(language) or {}
    if not isinstance(texts, dict) or not texts.get("system") or not texts.get("user"):
        raise ConfigError(f"The {where} has no {language!r} system/user templates.",
                          f"Give `{language}: {{system: ..., user: ...}}` in the YAML.")
    tools = data.get("tools")
    if not isinstance(tools, list) or not tools or not all(isinstance(t, str) for t in tools):
        raise ConfigError(f"The {where} must list its tools (`tools: [read, write, ...]`).")
    unknown = [t for t in tools if t not in BY_NAME]
    if unknown:
        raise ConfigError(f"The {where} lists unknown tools {unknown}.",
                          f"Tools: {', '.join(BY_NAME)}.")
    banned = [t for t in tools if t in forbidden_tools]
    if banned:
        raise ConfigError(f"The {where} lists tools this job must never use: {banned}.")
    max_iters = data.get("max_iters")
    if not isinstance(max_iters, int) or max_iters < 1:
        raise ConfigError(f"The {where} needs `max_iters` as a positive integer.")
    ph = placeholders or Placeholders()
    check_template(where, "system", texts["system"], ph.system_required,
                   ph.system_required | ph.system_allowed)
    check_template(where, "user", texts["user"], ph.user_required,
                   ph.user_required | ph.user_allowed)
    return JobPrompt(name=job, language=language, system=texts["system"], user=texts["user"],
                     tools=list(dict.fromkeys(tools)), max_iters=max_iters)


def _override_data(override: str | Path | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(override, Mapping):
        return dict(override)
    path = Path(override)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"Cannot read the prompt override {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"The prompt override {path} must be a mapping.")
    return data


def check_template(where: str, part: str, template: str, required: frozenset[str],
                   allowed: frozenset[str]) -> None:
    """ConfigError unless `template` parses and its placeholders are within `allowed` and
    include `required` (also used for the host notes of jobs/host.py)."""
    try:
        fields = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
    except ValueError as exc:
        raise ConfigError(f"The {part} template of the {where} is malformed: {exc}.",
                          "Write literal braces as {{ and }}.") from exc
    bad = sorted(f for f in fields if not f.isidentifier() or f not in allowed)
    if bad:
        raise ConfigError(f"The {part} template of the {where} uses unknown placeholders "
                          f"{bad}.", f"Allowed: {', '.join(sorted(allowed))}; write literal "
                          "braces as {{ and }}.")
    missing = sorted(required - fields)
    if missing:
        raise ConfigError(f"The {part} template of the {where} lacks "
                          + ", ".join("{" + m + "}" for m in missing) + ".",
                          "Put the placeholder back; the job cannot run without it.")


def resolve_model(vault: Vault, model: Any | None, job: str) -> Any:
    """The given model, or one built from `vault.settings.model` (ModelNotConfigured if none)."""
    return model if model is not None else build_chat_model(vault.settings.model, job)


async def run_agent(prompt: JobPrompt, guard: Guard, model: Any, *,
                    system_values: Mapping[str, Any], user_values: Mapping[str, Any],
                    retries: int = 3, middlewares: list[Any] | None = None) -> tuple[str, str]:
    """One ReAct reply over the job's tools; returns (final text, finished reason)."""
    from agentscope.agent import Agent, InjectionConfig, ReActConfig
    from agentscope.message import UserMsg
    from agentscope.tool import FunctionTool, Toolkit

    from reme_agent.toolkit.agentscope import ALLOW
    from reme_agent.toolkit.registry import select

    specs = select(only=prompt.tools)
    toolkit = Toolkit(tools=[  # a new Toolkit per run: structured output mutates toolkits
        FunctionTool(guard.wrap(s), name=s.name, is_read_only=s.read_only,
                     is_concurrency_safe=s.read_only, permission=ALLOW) for s in specs])
    agent = Agent(name=f"reme-{prompt.name}", system_prompt=prompt.render_system(system_values),
                  model=model, toolkit=toolkit,
                  middlewares=[backoff_middleware(model, retries), *(middlewares or [])],
                  react_config=ReActConfig(max_iters=prompt.max_iters),
                  # today/vault are in the prompt; time hints would make runs non-deterministic
                  injection_config=InjectionConfig(inject_runtime_state=False))
    reply = await agent.reply(UserMsg("user", prompt.render_user(user_values)))
    reason = reply.finished_reason
    return reply.get_text_content() or "", str(getattr(reason, "value", reason))


async def guarded(coro: Awaitable[tuple[str, str]]) -> tuple[str, str | None, str | None]:
    """(summary, finished reason, error): an agent failure ends the job, not the caller.

    What the tools already wrote stays written and is reported; the caller decides (e.g. the
    distiller flips nothing after an error).
    """
    try:
        summary, reason = await coro
    except ReMeError as exc:
        return "", None, str(exc)
    except Exception as exc:  # model/transport failure after retries, script exhausted, ...
        # the result names the error; the traceback (a provider's, mostly) only with -v
        log.warning("job agent stopped: %s: %s", type(exc).__name__, exc,
                    exc_info=log.isEnabledFor(logging.INFO))
        return "", None, f"{type(exc).__name__}: {exc}"
    return summary, reason, None


def run_sync(coro: Awaitable[T], name: str) -> T:
    """Run a job's coroutine from synchronous code (not inside a running event loop)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)  # type: ignore[arg-type]
    if asyncio.iscoroutine(coro):
        coro.close()
    raise RuntimeError(f"run_{name} was called inside a running event loop; "
                       f"use `await arun_{name}(...)` there.")
