"""Fixtures for wire tests: a real vault whose model settings point at the scripted server.

The model is configured exactly as a user would in `configs/`: `Settings(model={provider,
model, base_url, api_key_env, stream})`, the key in the environment variable it names. The
jobs build their real AgentScope model from it; only the server's answers are scripted.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from reme_agent.config import Settings
from reme_agent.vault import Vault
from tests.jobs.conftest import NOTES, build
from tests.wire.fake_llm import ScriptedLLMServer, tool_messages

KEY_ENV = "REME_WIRE_API_KEY"
KEY = "sk-wire-dummy"
MODEL = "wire-model"


def wire_settings(server: ScriptedLLMServer, provider: str = "openai",
                  stream: bool = False) -> Settings:
    """Settings as in a user's config: Ollama takes the host, the others `<host>/v1`."""
    base_url = server.url if provider == "ollama" else f"{server.url}/v1"
    return Settings(embedder={"name": "hash"}, index={"progress": False},
                    model={"provider": provider, "model": MODEL, "base_url": base_url,
                           "api_key_env": KEY_ENV, "stream": stream})


@pytest.fixture
def wire_vault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
               ) -> Iterator[Callable[..., Vault]]:
    """`wire_vault(server, provider="openai", stream=False)`: the jobs' sample vault, indexed."""
    monkeypatch.setenv(KEY_ENV, KEY)
    opened: list[Vault] = []

    def make(server: ScriptedLLMServer, provider: str = "openai", stream: bool = False) -> Vault:
        vault = build(tmp_path / f"vault{len(opened)}", NOTES,
                      wire_settings(server, provider, stream))
        opened.append(vault)
        return vault

    yield make
    for vault in opened:
        vault.close()


def content_text(message: dict[str, Any]) -> str:
    """A message's text: OpenAI content is a string or a list of `{"type": "text"}` parts."""
    content = message.get("content") or ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content)


def tool_name(message: dict[str, Any]) -> str:
    """A tool result's tool name: `name` in OpenAI's format, `tool_name` in Ollama's."""
    return message.get("name") or message.get("tool_name") or ""


def read_answer(bodies: list[dict[str, Any]], path: str) -> tuple[str, str]:
    """(stamp, whole text) of the latest `read` of `path` the client sent back as a tool result."""
    for message in reversed(tool_messages(bodies[-1])):
        head, _, text = message["content"].partition("\n")
        if tool_name(message) == "read" and path in head:
            return re.search(r"stamp ([0-9a-f]{64})", head).group(1), text  # type: ignore[union-attr]
    raise AssertionError(f"no read result for {path} in the last request")
