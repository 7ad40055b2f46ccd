"""Chat models for LLM jobs, built from `Settings.model` (DESIGN §9).

Providers: OpenAI and any OpenAI-compatible server (`base_url`: vLLM, LM Studio, llama.cpp),
DashScope, Anthropic, DeepSeek and Ollama (extra `reme-agent[ollama]`); `model.stream` picks
the streamed or the single-body answer. The API key is read from the environment variable
named in config, never from the config file. No provider configured -> ModelNotConfigured
before anything is read or written. Transient errors are retried with exponential backoff
(tenacity) by a model-call middleware, so the retry policy is ours, not the SDK's fixed delay.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any

from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from reme_agent.config import ModelSettings
from reme_agent.errors import ConfigError, ModelNotConfigured

log = logging.getLogger("reme_agent.jobs")


def _api_key(cfg: ModelSettings, required: bool) -> str | None:
    if not cfg.api_key_env:
        if required:
            raise ConfigError(f"model.api_key_env is not set for provider {cfg.provider!r}.",
                              "Name the environment variable that holds the API key.")
        return None
    key = os.environ.get(cfg.api_key_env)
    if required and not key:
        raise ConfigError(f"The environment variable {cfg.api_key_env} (model.api_key_env) is empty.",
                          "Export the API key in it before running a job.")
    return key


def build_chat_model(cfg: ModelSettings, job: str = "this") -> Any:
    """An AgentScope ChatModelBase for `cfg`; raises ModelNotConfigured when none is set."""
    if not cfg.configured:
        raise ModelNotConfigured(job)
    from agentscope import model as m
    from agentscope.credential import (
        AnthropicCredential,
        DashScopeCredential,
        DeepSeekCredential,
        OllamaCredential,
        OpenAICredential,
    )

    common: dict[str, Any] = {"model": cfg.model, "stream": cfg.stream, "max_retries": 0}
    # The openai and anthropic SDKs retry twice on their own by default: off, or each of our
    # backoff attempts would be three HTTP requests.
    sdk = {"client_kwargs": {"max_retries": 0}}
    # an unset base_url keeps the provider's own endpoint (DashScope's and DeepSeek's
    # credentials have one; passing None was a validation error)
    url: dict[str, Any] = {"base_url": cfg.base_url} if cfg.base_url else {}
    if cfg.provider == "openai":
        key = _api_key(cfg, required=cfg.base_url is None) or "not-needed"
        params = m.OpenAIChatModel.Parameters(temperature=cfg.temperature, max_tokens=cfg.max_tokens)
        return m.OpenAIChatModel(credential=OpenAICredential(api_key=key, base_url=cfg.base_url),
                                 parameters=params, **common, **sdk)
    if cfg.provider == "dashscope":
        cred = DashScopeCredential(api_key=_api_key(cfg, True), **url)
        params = m.DashScopeChatModel.Parameters(temperature=cfg.temperature,
                                                 max_tokens=cfg.max_tokens)
        return m.DashScopeChatModel(credential=cred, parameters=params, **common, **sdk)
    if cfg.provider == "anthropic":
        cred = AnthropicCredential(api_key=_api_key(cfg, True), **url)
        params = m.AnthropicChatModel.Parameters(temperature=cfg.temperature,
                                                 max_tokens=cfg.max_tokens or 4096)
        return m.AnthropicChatModel(credential=cred, parameters=params, **common, **sdk)
    if cfg.provider == "deepseek":
        cred = DeepSeekCredential(api_key=_api_key(cfg, True), **url)
        params = m.DeepSeekChatModel.Parameters(temperature=cfg.temperature,
                                                max_tokens=cfg.max_tokens)
        return m.DeepSeekChatModel(credential=cred, parameters=params, **common, **sdk)
    if cfg.provider == "ollama":
        try:
            params = m.OllamaChatModel.Parameters(temperature=cfg.temperature,
                                                  max_tokens=cfg.max_tokens)
            return m.OllamaChatModel(credential=OllamaCredential(host=cfg.base_url),
                                     parameters=params, **common)
        except ModuleNotFoundError as exc:  # AgentScope imports the client lazily
            if exc.name != "ollama":
                raise
            raise ConfigError("model.provider 'ollama' needs the `ollama` package.",
                              "pip install 'reme-agent[ollama]'") from exc
    raise ConfigError(f"Unknown model.provider {cfg.provider!r}.")


class BackoffMiddleware:
    """Retries a model call on the model's transient errors with exponential backoff."""

    def __init__(self, retries: int, retryable: tuple[type[BaseException], ...],
                 min_wait: float = 1.0, max_wait: float = 30.0) -> None:
        self.retries = retries
        self.retryable = retryable
        self.min_wait = min_wait
        self.max_wait = max_wait

    async def on_model_call(self, agent: Any, input_kwargs: dict[str, Any],
                            next_handler: Callable[..., Awaitable[Any]]) -> Any:
        if not self.retryable or self.retries <= 0:
            return await next_handler(**input_kwargs)
        async for attempt in AsyncRetrying(
            stop=stop_after_attempt(self.retries + 1),
            wait=wait_exponential(multiplier=self.min_wait, max=self.max_wait),
            retry=retry_if_exception_type(self.retryable), reraise=True,
        ):
            with attempt:
                if attempt.retry_state.attempt_number > 1:
                    log.warning("model call retry %d", attempt.retry_state.attempt_number - 1)
                return await next_handler(**input_kwargs)
        return None  # unreachable: reraise=True


def backoff_middleware(model: Any, retries: int) -> Any:
    """The retry middleware as an AgentScope MiddlewareBase instance."""
    from agentscope.middleware import MiddlewareBase

    class _Backoff(BackoffMiddleware, MiddlewareBase):
        pass

    retryable = tuple(getattr(model, "_get_retryable_exceptions", lambda: ())())
    return _Backoff(retries, retryable)
