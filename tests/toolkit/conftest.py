"""Fixtures for toolkit tests: a small bilingual vault on tmp_path (hash embedder, indexed)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reme_agent.config import Settings
from reme_agent.vault import Vault, open_vault

SETTINGS = Settings(embedder={"name": "hash"}, index={"progress": False})

AXES = "lifecycle: evolving\nscope: class\nsource: curated\n"

CLEAN: dict[str, str] = {
    "knowledge/bm25/bm25.md": f"""---
title: BM25
description: Okapi BM25 keyword ranking.
tags: [search, ranking]
{AXES}role: concept
aliases: [Okapi BM25]
---
# BM25

BM25 scores a block by term frequency and inverse document frequency.

part_of:: [[knowledge/hybrid-search/hybrid-search.md|hybrid search]]
""",
    "knowledge/hybrid-search/hybrid-search.md": f"""---
title: Hybrid search
description: Combining BM25 keyword scores with vector similarity.
tags: [search]
{AXES}role: method
importance: 8
---
# Hybrid search

Hybrid search fuses a keyword ranker ([[bm25]]) and a vector ranker.

uses:: [[knowledge/bm25/bm25.md|BM25]], [[knowledge/向量检索/向量检索.md]]

The original paper is [[resource/paper.pdf]].
""",
    "knowledge/向量检索/向量检索.md": f"""---
title: 向量检索
description: 用向量相似度检索笔记。
tags: [search, 中文]
{AXES}role: concept
---
# 向量检索

向量检索把文本编码成向量,按余弦相似度排序。

- related:: [[hybrid-search|混合检索]]
""",
    "knowledge/张三/张三.md": """---
title: 张三
description: 前端架构师。
tags: [people]
lifecycle: evolving
scope: instance
source: curated
role: profile
---
# 张三

张三负责 [owns:: [[向量检索|向量检索模块]]] 的维护。
""",
    "daily/2026-11-28/search-tuning/search-tuning.md": """---
title: Search tuning
description: Compared RRF and blending.
lifecycle: streaming
scope: instance
source: auto
role: observation
status: active
originSessionId: s-1
created: 2026-11-28
---
# Search tuning

The blend beat RRF. See [[knowledge/bm25/bm25.md]] and [[向量检索|vector search]].
""",
    "daily/2026-11-28/search-tuning/transcript.txt": "user: try the blend\n",
    "daily/2026-11-29/refactor/refactor.md": """---
title: Refactor
lifecycle: streaming
scope: instance
source: auto
role: observation
status: distilled
originSessionId: s-2
---
# Refactor

Moved the parser; see [[张三]].
""",
}
BINARY = {"resource/paper.pdf": b"%PDF-1.4\n\x00\x01binary"}

MESSY: dict[str, str] = {
    "knowledge/orphan/orphan.md": f"---\ntitle: Lonely\n{AXES}role: concept\n---\n# Lonely\n\nNo links here.\n",
    "knowledge/broken/broken.md": """---
title: Broken
lifecycle: streaming
scope: class
source: auto
role: claim
importance: 11
---
# Broken

Points at [[no-such-note]] and [[knowledge/bm25/bm25.md]].
""",
    "daily/2026-11-30/bm25/bm25.md": """---
title: BM25 day
lifecycle: streaming
scope: instance
source: auto
role: observation
status: active
originSessionId: s-3
---
# BM25 day

Read about [[knowledge/hybrid-search/hybrid-search.md]].
""",
}


def build(root: Path, notes: dict[str, str], binary: dict[str, bytes] | None = None,
          settings: Settings = SETTINGS) -> Vault:
    for rel, text in notes.items():
        f = root / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text, encoding="utf-8")
    for rel, data in (binary or {}).items():
        f = root / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(data)
    vault = open_vault(root, settings, create=True)
    vault.index()
    return vault


@pytest.fixture(scope="session")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Indexed vaults built once; each test gets a copy (indexing is the slow part)."""
    base = tmp_path_factory.mktemp("templates")
    out = {}
    for name, notes in (("clean", CLEAN), ("messy", {**CLEAN, **MESSY})):
        v = build(base / name, notes, BINARY)
        v.close()
        out[name] = base / name
    return out


def clone(template: Path, dest: Path, settings: Settings = SETTINGS) -> Vault:
    """A private copy of a template vault; copy2 keeps mtimes, so the index stays fresh."""
    shutil.copytree(template, dest, symlinks=True)
    return open_vault(dest, settings)


@pytest.fixture
def vault(tmp_path: Path, templates: dict[str, Path]) -> Iterator[Vault]:
    v = clone(templates["clean"], tmp_path / "vault")
    yield v
    v.close()


@pytest.fixture
def make_vault(tmp_path: Path) -> Iterator[Any]:
    """build(notes) -> an indexed vault of just these notes, closed after the test."""
    made: list[Vault] = []

    def make(notes: dict[str, str], name: str = "vault") -> Vault:
        made.append(build(tmp_path / name, notes))
        return made[-1]

    yield make
    for v in made:
        v.close()


@pytest.fixture
def messy(tmp_path: Path, templates: dict[str, Path]) -> Iterator[Vault]:
    v = clone(templates["messy"], tmp_path / "messy")
    yield v
    v.close()


@pytest.fixture
def io_vault(tmp_path: Path, templates: dict[str, Path]) -> Iterator[tuple[Vault, Path, Path]]:
    """A vault whose config allows uploads from `inbox/` and downloads into `outbox/`."""
    inbox, outbox = tmp_path / "inbox", tmp_path / "outbox"
    inbox.mkdir()
    outbox.mkdir()
    settings = Settings(embedder={"name": "hash"}, index={"progress": False},
                        toolkit={"upload_dirs": [str(inbox)], "download_dirs": [str(outbox)]})
    v = clone(templates["clean"], tmp_path / "vault", settings)
    yield v, inbox, outbox
    v.close()


def vault_hash(vault: Vault) -> str:
    """sha256 over every file path and its bytes, excluding the derived `.reme/` folder."""
    h = hashlib.sha256()
    for f in sorted(vault.root.rglob("*")):
        rel = f.relative_to(vault.root).as_posix()
        if rel.startswith(".reme") or not f.is_file():
            continue
        h.update(rel.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def call_toolkit(toolkit: Any, name: str, **args: Any) -> tuple[str, str]:
    """Call one tool through AgentScope's Toolkit; (state, text) of the final ToolResponse."""
    from agentscope.message import ToolCallBlock
    from agentscope.state import AgentState

    async def run() -> Any:
        last = None
        block = ToolCallBlock(id=f"call-{name}", name=name, input=json.dumps(args))
        async for item in toolkit.call_tool(block, AgentState()):
            last = item
        return last

    resp = asyncio.run(run())
    text = "".join(getattr(b, "text", "") for b in resp.content)
    return str(getattr(resp.state, "value", resp.state)), text
