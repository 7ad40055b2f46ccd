"""Fixtures for auto-link tests: small real vaults (hash embedder, indexed) built per test."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from reme_agent.config import Settings
from reme_agent.vault import Vault, open_vault

SETTINGS = Settings(embedder={"name": "hash"}, index={"progress": False})
AXES = "lifecycle: evolving\nscope: class\nsource: curated\nrole: concept\n"


def node(title: str, body: str, *, aliases: list[str] | None = None,
         description: str | None = None) -> str:
    """A knowledge note with the four axes."""
    head = f"title: {title}\n"
    if aliases:
        head += "aliases: [" + ", ".join(f'"{a}"' for a in aliases) + "]\n"
    if description:
        head += f"description: {description}\n"
    return f"---\n{head}{AXES}---\n{body.strip()}\n"


def daily(title: str, body: str, status: str) -> str:
    return (f"---\ntitle: {title}\nlifecycle: streaming\nscope: instance\nsource: auto\n"
            f"role: observation\nstatus: {status}\noriginSessionId: s-1\n---\n{body.strip()}\n")


def kpath(slug: str) -> str:
    return f"knowledge/{slug}/{slug}.md"


VaultFactory = Callable[..., Vault]


@pytest.fixture
def make_vault(tmp_path: Path) -> Iterator[VaultFactory]:
    """make_vault({path: text}, settings=...) -> an indexed Vault (closed after the test)."""
    made: list[Vault] = []

    def build(notes: dict[str, str], *, settings: Settings | None = None,
              index: bool = True, name: str = "vault") -> Vault:
        root = tmp_path / name
        for rel, text in notes.items():
            file = root / rel
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(text, encoding="utf-8")
        vault = open_vault(root, settings or SETTINGS, create=True)
        if index:
            vault.index()
        made.append(vault)
        return vault

    yield build
    for vault in made:
        vault.close()


def read(vault: Vault, path: str) -> str:
    return (vault.root / path).read_text(encoding="utf-8")


def body_of(vault: Vault, path: str) -> str:
    text = read(vault, path)
    return text.split("\n---\n", 1)[1] if text.startswith("---\n") else text


def files_hash(vault: Vault, *, skip: tuple[str, ...] = (".reme",)) -> dict[str, str]:
    """sha256 of every file outside `skip` prefixes, by vault-relative path."""
    out: dict[str, str] = {}
    for f in sorted(vault.root.rglob("*")):
        rel = f.relative_to(vault.root).as_posix()
        if f.is_file() and not rel.startswith(skip):
            out[rel] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def links_of(vault: Vault, path: str) -> list[tuple[str, str | None, str | None]]:
    """(resolved target, alias, predicate) of every link in a note's body (a dangling
    target as written)."""
    from reme_agent.engine.links import extract_links

    resolver = vault.view().resolver
    return [(resolver.resolve(x.target, path) or x.target, x.alias, x.predicate)
            for x in extract_links(body_of(vault, path))]


def as_dicts(items: list[Any]) -> list[dict[str, Any]]:
    return [i if isinstance(i, dict) else i.as_dict() for i in items]
