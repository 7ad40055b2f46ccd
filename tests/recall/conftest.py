"""Fixtures for recall tests: small real vaults (hash embedder, real index) on tmp_path."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from reme_agent.config import Settings
from reme_agent.vault import Vault, open_vault

SETTINGS = Settings(embedder={"name": "hash"}, index={"progress": False})


def note(body: str, **frontmatter: Any) -> str:
    """Markdown text with optional YAML frontmatter (values written as JSON scalars)."""
    if not frontmatter:
        return body.strip() + "\n"
    head = "\n".join(f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in frontmatter.items())
    return f"---\n{head}\n---\n{body.strip()}\n"


def write_meta(vault: Vault, name: str, payload: dict[str, Any], *, version: int = 1,
               computed_at: datetime | None = None) -> None:
    data = {"version": version,
            "computed_at": (computed_at or datetime.now(UTC)).isoformat().replace("+00:00", "Z"),
            **payload}
    path = vault.root / "meta" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")


def days_ago(n: float) -> datetime:
    return datetime.now(UTC) - timedelta(days=n)


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
        for rel, moment in (mtimes or {}).items():
            ts = moment.timestamp()
            os.utime(root / rel, (ts, ts))
        vault = open_vault(root, settings or SETTINGS, create=True)
        vault.index()
        made.append(vault)
        return vault

    yield build
    for vault in made:
        vault.close()
