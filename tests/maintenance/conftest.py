"""Fixtures for maintenance tests: small real vaults (hash embedder, real index) on tmp_path."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from reme_agent.config import Settings
from reme_agent.maintenance.maintainer import Maintainer
from reme_agent.vault import Vault, open_vault

SETTINGS = Settings(embedder={"name": "hash"}, index={"progress": False})
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
KNOW = {"lifecycle": "evolving", "scope": "class", "source": "curated", "role": "concept"}


def note(body: str, **frontmatter: Any) -> str:
    """Markdown text with YAML frontmatter (values written as JSON, which YAML reads)."""
    if not frontmatter:
        return body.strip() + "\n"
    head = "\n".join(f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in frontmatter.items())
    return f"---\n{head}\n---\n{body.strip()}\n"


def knowledge(title: str, body: str, **extra: Any) -> str:
    return note(f"# {title}\n\n{body}", title=title, **KNOW, **extra)


def daily(title: str, body: str, status: str, updated: str, **extra: Any) -> str:
    return note(f"# {title}\n\n{body}", title=title, lifecycle="streaming", scope="instance",
                source="auto", role="observation", status=status, originSessionId="s-1",
                created=updated, updated=updated, **extra)


def days_ago(n: float) -> datetime:
    return NOW - timedelta(days=n)


def set_mtime(vault: Vault, rel: str, moment: datetime) -> None:
    ts = moment.timestamp()
    os.utime(vault.root / rel, (ts, ts))


def notes_snapshot(vault: Vault) -> dict[str, str]:
    """sha256 of every file outside .reme/, meta/ and audit/ (what maintenance must not churn)."""
    out = {}
    for f in sorted(vault.root.rglob("*")):
        rel = f.relative_to(vault.root).as_posix()
        if f.is_file() and not rel.startswith((".reme", "meta/", "audit/")):
            out[rel] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def read_json(vault: Vault, rel: str) -> dict[str, Any]:
    return json.loads((vault.root / rel).read_text(encoding="utf-8"))


VaultFactory = Callable[..., Vault]


@pytest.fixture
def make_vault(tmp_path: Path) -> Iterator[VaultFactory]:
    """build(notes, mtimes={path: datetime}, settings=...) -> an indexed Vault."""
    made: list[Vault] = []

    def build(notes: dict[str, str], *, mtimes: dict[str, datetime] | None = None,
              settings: Settings | None = None, name: str = "vault") -> Vault:
        root = tmp_path / name
        for rel, text in notes.items():
            file = root / rel
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(text, encoding="utf-8")
        vault = open_vault(root, settings or SETTINGS, create=True)
        for rel, moment in (mtimes or {}).items():
            set_mtime(vault, rel, moment)
        vault.index()
        made.append(vault)
        return vault

    yield build
    for vault in made:
        vault.close()


def maintainer(vault: Vault, *, now: datetime = NOW, **kwargs: Any) -> Maintainer:
    """A Maintainer with a fixed clock and the vault's settings."""
    kwargs.setdefault("split_token_threshold", vault.settings.jobs.split_token_threshold)
    kwargs.setdefault("split_block_threshold", vault.settings.jobs.split_block_threshold)
    return Maintainer(vault, vault.settings.maintain, clock=lambda: now, **kwargs)
