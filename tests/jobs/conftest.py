"""Fixtures for job tests: a small indexed vault (hash embedder) and scripted-turn helpers.

Only the LLM is scripted: the vault, the toolkit, the guard and the AgentScope agent loop are
real. Turns that depend on a tool's answer (a stamp, a note's text) are callables.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from reme_agent.config import Settings
from reme_agent.engine.queue import WorkQueue
from reme_agent.testing import result_text, tool_results
from reme_agent.vault import Vault, open_vault

SETTINGS = Settings(embedder={"name": "hash"}, index={"progress": False})
TODAY = dt.date(2026, 11, 30)
YESTERDAY = "2026-11-29"

JWT = "knowledge/jwt-key-rotation/jwt-key-rotation.md"
AUTH = "knowledge/auth-service/auth-service.md"
ZHANG = "knowledge/张三/张三.md"
DAILY_JWT = f"daily/{YESTERDAY}/jwt-rotation/jwt-rotation.md"
DAILY_TODAY = f"daily/{TODAY.isoformat()}/search-tuning/search-tuning.md"

KNOW = "lifecycle: evolving\nscope: class\nsource: curated\n"

NOTES: dict[str, str] = {
    JWT: f"""---
title: JWT key rotation
description: How the auth service rotates its JWT signing keys.
{KNOW}role: method
---
# JWT key rotation

Keys rotate every 90 days.

part_of:: [[{AUTH}]]
owner:: [[{ZHANG}]]
""",
    AUTH: f"""---
title: Auth service
description: The service that issues and checks tokens.
{KNOW}role: concept
---
# Auth service

Issues JWTs for every client.
""",
    ZHANG: """---
title: 张三
description: 后端工程师,负责认证服务。
lifecycle: evolving
scope: instance
source: curated
role: profile
---
# 张三

张三负责 [owns:: [[knowledge/auth-service/auth-service.md]]]。
""",
    DAILY_JWT: """---
title: JWT rotation
description: Rotating the signing keys of the auth service.
lifecycle: streaming
scope: instance
source: auto
role: observation
status: active
originSessionId: s-1
---
# JWT rotation

## Objective
Rotate the JWT signing keys without logging anybody out.

## Plan
- Add the new key next to the old one.

## Progress
- Generated the new RSA key.

## Next
- Deploy the dual-key verifier.
""",
    DAILY_TODAY: """---
title: Search tuning
description: Comparing fusion methods.
lifecycle: streaming
scope: instance
source: auto
role: observation
status: active
originSessionId: s-2
---
# Search tuning

## Objective
Pick the default fusion method.

## Progress
- Ran the eval with RRF.

## Findings
- Blend beats RRF by 2 points of nDCG.

## Materials
- evals/results/fusion.json
""",
}


def build(root: Path, notes: dict[str, str] = NOTES, settings: Settings = SETTINGS) -> Vault:
    for rel, text in notes.items():
        f = root / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text, encoding="utf-8")
    vault = open_vault(root, settings, create=True)
    vault.index()
    return vault


@pytest.fixture
def vault(tmp_path: Path) -> Iterator[Vault]:
    v = build(tmp_path / "vault")
    yield v
    v.close()


@pytest.fixture
def queue(vault: Vault) -> WorkQueue:
    """The vault's durable follow-up queue (what the distiller enqueues into)."""
    return vault.queue


def vault_hash(vault: Vault) -> str:
    """sha256 over every file path and its bytes, excluding the derived `.reme/` folder."""
    h = hashlib.sha256()
    for f in sorted(vault.root.rglob("*")):
        rel = f.relative_to(vault.root).as_posix()
        if rel.startswith(".reme") or not f.is_file():
            continue
        h.update(rel.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def text_of(vault: Vault, path: str) -> str:
    return (vault.root / path).read_text(encoding="utf-8")


def last_answer(messages) -> str:  # type: ignore[no-untyped-def]
    """The text of the latest tool result the model has seen."""
    return result_text(tool_results(messages)[-1])


def answered_body(messages, tool: str = "read") -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """(stamp, whole text) from the latest successful `read` answer the model has seen."""
    block = [r for r in tool_results(messages) if r.name == tool and r.state == "success"][-1]
    head, text = result_text(block).split("\n", 1)
    return re.search(r"stamp ([0-9a-f]{64})", head).group(1), text


def answers(model) -> list[str]:  # type: ignore[no-untyped-def]
    """Every tool result text in the last call the scripted model received."""
    return [result_text(r) for r in tool_results(model.calls[-1]["messages"])]
