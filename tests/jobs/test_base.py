"""Job framework: prompts validated at load, exact job toolkits, no-model refusal, backoff."""

from __future__ import annotations

import asyncio
import logging

import pytest
from tenacity import wait_none

from reme_agent.config import ModelSettings
from reme_agent.errors import ConfigError, ModelNotConfigured
from reme_agent.jobs import distiller, synchronizer
from reme_agent.jobs.base import load_prompt
from reme_agent.jobs.distiller import run_distiller
from reme_agent.jobs.guard import Guard
from reme_agent.jobs.models import BackoffMiddleware, backoff_middleware, build_chat_model
from reme_agent.jobs.synchronizer import run_synchronizer
from reme_agent.testing import ScriptedChatModel, TextBlock, TransientModelError
from reme_agent.toolkit.agentscope import function_tool
from reme_agent.toolkit.registry import BY_NAME
from tests.jobs.conftest import DAILY_JWT, TODAY, vault_hash

SYNC = {"placeholders": synchronizer.PLACEHOLDERS, "forbidden_tools": synchronizer.FORBIDDEN_TOOLS}
DIST = {"placeholders": distiller.PLACEHOLDERS, "forbidden_tools": distiller.FORBIDDEN_TOOLS}


# -- prompts ------------------------------------------------------------------------------
@pytest.mark.parametrize("language", ["en", "zh"])
def test_packaged_prompts_load_and_render_in_both_languages(language: str) -> None:
    sync = load_prompt("synchronizer", language, **SYNC)
    dist = load_prompt("distiller", language, **DIST)
    assert sync.tools == ["daily_list", "daily_read", "daily_write", "daily_attach"]
    assert "lint_schema" in dist.tools and "daily_write" not in dist.tools
    values = {"protocol": "PROTOCOL", "vault_dir": "/v", "today": "2026-11-30", "hint": "h",
              "session_id": "s", "language": language, "transcript": "T", "recent": "R",
              "inherit_days": 7, "daily_paths": "- d", "flip_note": "F"}
    for prompt in (sync, dist):
        assert "PROTOCOL" in prompt.render_system(values)
        assert prompt.render_user(values)


def test_a_prompt_without_protocol_fails_at_load_time() -> None:
    with pytest.raises(ConfigError, match=r"lacks \{protocol\}"):
        load_prompt("distiller", "en", {"en": {"system": "You distill. Today is {today}."}}, **DIST)


def test_unknown_placeholders_and_stray_braces_fail_at_load_time() -> None:
    with pytest.raises(ConfigError, match="unknown placeholders"):
        load_prompt("distiller", "en", {"en": {"user": "{daily_paths} {nope}"}}, **DIST)
    with pytest.raises(ConfigError, match="malformed"):
        load_prompt("distiller", "en", {"en": {"user": "{daily_paths} {"}}, **DIST)
    with pytest.raises(ConfigError, match="unknown placeholders"):
        load_prompt("distiller", "en", {"en": {"user": 'JSON {"a": 1} {daily_paths}'}}, **DIST)
    ok = load_prompt("distiller", "en", {"en": {"user": 'JSON {{"a": 1}} {daily_paths}'}}, **DIST)
    assert ok.render_user({"daily_paths": "x"}) == 'JSON {"a": 1} x'


def test_prompts_are_overridable_by_dict_and_by_path(tmp_path) -> None:
    assert load_prompt("distiller", "en", {"max_iters": 5}, **DIST).max_iters == 5
    path = tmp_path / "mine.yaml"
    path.write_text("tools: [search, read]\nzh:\n  user: '只看 {daily_paths}'\n", encoding="utf-8")
    zh = load_prompt("distiller", "zh", path, **DIST)
    assert zh.tools == ["search", "read"] and zh.user == "只看 {daily_paths}"
    assert "{protocol}" in zh.system  # the packaged system prompt is kept


def test_unknown_and_forbidden_tools_fail_at_load_time() -> None:
    with pytest.raises(ConfigError, match="unknown tools"):
        load_prompt("distiller", "en", {"tools": ["read", "telepathy"]}, **DIST)
    with pytest.raises(ConfigError, match="must never use"):
        load_prompt("synchronizer", "en", {"tools": ["daily_write", "lint_schema"]}, **SYNC)
    with pytest.raises(ConfigError, match="must never use"):
        load_prompt("synchronizer", "en", {"tools": ["daily_write", "write"]}, **SYNC)
    with pytest.raises(ConfigError, match="Unknown job language"):
        load_prompt("distiller", "fr", **DIST)


# -- toolkit ------------------------------------------------------------------------------
def test_the_job_toolkit_holds_exactly_the_listed_tools_with_unchanged_schemas(vault) -> None:
    model = ScriptedChatModel([[TextBlock(text="nothing")]])
    run_distiller(vault, [DAILY_JWT], model=model, today=TODAY, flip_status=False,
                  prompt={"tools": ["read", "write", "search"]})
    offered = model.calls[0]["tools"]
    assert [t["function"]["name"] for t in offered] == ["search", "read", "write"]

    async def schemas() -> list[dict]:
        from agentscope.tool import Toolkit

        return await Toolkit(tools=[function_tool(BY_NAME[n], vault)
                                    for n in ("search", "read", "write")]).get_tool_schemas()

    assert offered == asyncio.run(schemas())


def test_a_wrapped_tool_keeps_name_doc_and_signature(vault) -> None:
    import inspect

    guard = Guard(vault, "t", today=TODAY)
    wrapped = guard.wrap(BY_NAME["write"])
    plain = BY_NAME["write"].bind(vault, as_text=True)
    assert wrapped.__name__ == "write" and wrapped.__doc__ == plain.__doc__
    assert str(inspect.signature(wrapped)) == str(inspect.signature(plain))


# -- no model -----------------------------------------------------------------------------
def test_no_model_configured_fails_at_once_and_the_vault_is_byte_identical(vault) -> None:
    before = vault_hash(vault)
    with pytest.raises(ModelNotConfigured, match="distiller job needs a chat model"):
        run_distiller(vault, [DAILY_JWT], today=TODAY)
    with pytest.raises(ModelNotConfigured, match="synchronizer job needs a chat model"):
        run_synchronizer(vault, [{"role": "user", "content": "hi"}], today=TODAY)
    assert vault_hash(vault) == before


def test_build_chat_model_needs_a_provider_and_builds_without_network(monkeypatch) -> None:
    with pytest.raises(ModelNotConfigured):
        build_chat_model(ModelSettings(), "distiller")
    cfg = ModelSettings(provider="openai", model="qwen2.5", base_url="http://127.0.0.1:9/v1")
    model = build_chat_model(cfg, "distiller")
    assert type(model).__name__ == "OpenAIChatModel" and model.max_retries == 0
    monkeypatch.delenv("DASHSCOPE_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="DASHSCOPE_API_KEY"):
        build_chat_model(ModelSettings(provider="dashscope", model="qwen-max",
                                       api_key_env="DASHSCOPE_API_KEY"))


def example_models() -> dict[str, dict]:
    """Every `model:` block of configs/model.example.yaml, the commented ones uncommented."""
    import re
    from pathlib import Path

    import yaml

    text = (Path(__file__).resolve().parents[2] / "configs/model.example.yaml").read_text()
    blocks = {}
    for part in re.split(r"^# --- ", text, flags=re.M)[1:]:
        lines = [re.sub(r"^# ?", "", ln) if ln.startswith("# ") or ln == "#" else ln
                 for ln in part.splitlines()[1:] if not ln.startswith("# Job settings")]
        data = yaml.safe_load("\n".join(lines).split("\njobs:")[0]) or {}
        blocks[data["model"]["provider"]] = data["model"]
    return blocks


def test_every_provider_in_the_example_config_builds_as_documented(monkeypatch) -> None:
    """DashScope and DeepSeek without a base_url used to fail: None overrode their endpoint."""
    blocks = example_models()
    assert set(blocks) == {"openai", "dashscope", "anthropic", "deepseek", "ollama"}
    for cfg in blocks.values():
        if cfg.get("api_key_env"):
            monkeypatch.setenv(cfg["api_key_env"], "sk-test")
    built = {p: build_chat_model(ModelSettings.model_validate(c), "distiller")
             for p, c in blocks.items()}
    assert {p: type(m).__name__ for p, m in built.items()} == {
        "openai": "OpenAIChatModel", "dashscope": "DashScopeChatModel",
        "anthropic": "AnthropicChatModel", "deepseek": "DeepSeekChatModel",
        "ollama": "OllamaChatModel"}
    assert str(built["dashscope"].client.base_url).startswith("https://dashscope.aliyuncs.com/")
    assert str(built["deepseek"].client.base_url).startswith("https://api.deepseek.com")
    assert built["dashscope"].client.max_retries == 0  # our backoff, not the SDK's on top
    intl = build_chat_model(ModelSettings.model_validate(
        blocks["dashscope"] | {"base_url": "https://dashscope-intl.aliyuncs.com/compatible-mode/v1"}))
    assert str(intl.client.base_url).startswith("https://dashscope-intl.aliyuncs.com/")


# -- backoff ------------------------------------------------------------------------------
def test_backoff_middleware_retries_a_transient_model_error(vault, monkeypatch) -> None:
    monkeypatch.setattr("reme_agent.jobs.models.wait_exponential", lambda **_: wait_none())
    model = ScriptedChatModel([TransientModelError("429 rate limited"),
                               [TextBlock(text="nothing to record")]])
    result = run_synchronizer(vault, [{"role": "user", "content": "hi"}], model=model,
                              today=TODAY)
    assert result.error is None and result.summary == "nothing to record"
    assert len(model.calls) == 2

    mw = backoff_middleware(model, retries=3)
    assert isinstance(mw, BackoffMiddleware) and mw.retryable == (TransientModelError,)


def test_non_retryable_model_errors_end_the_job_with_a_clear_error(vault) -> None:
    model = ScriptedChatModel([ValueError("bad request")])
    result = run_synchronizer(vault, [{"role": "user", "content": "hi"}], model=model,
                              today=TODAY)
    assert result.error == "ValueError: bad request" and not result.ok and len(model.calls) == 1


def test_a_model_that_cannot_be_reached_is_one_warning_line_without_v(vault, caplog) -> None:
    """An unreachable server (Ollama not running) printed a 30-line traceback on stderr."""
    caplog.set_level(logging.WARNING, logger="reme_agent.jobs")  # as the CLI sets it, no -v
    result = run_synchronizer(vault, [{"role": "user", "content": "hi"}], today=TODAY,
                              model=ScriptedChatModel([ConnectionError("Failed to connect")]))
    assert result.error == "ConnectionError: Failed to connect"
    stopped = [r for r in caplog.records if r.message.startswith("job agent stopped")]
    assert len(stopped) == 1 and not stopped[0].exc_info
    caplog.clear()
    caplog.set_level(logging.INFO, logger="reme_agent.jobs")  # -v: the traceback is shown
    run_synchronizer(vault, [{"role": "user", "content": "hi"}], today=TODAY,
                     model=ScriptedChatModel([ConnectionError("Failed to connect")]))
    stopped = [r for r in caplog.records if r.message.startswith("job agent stopped")]
    assert stopped and stopped[0].exc_info
