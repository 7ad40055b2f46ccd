"""Rough edges (2026-12-02): small things a real user hits, through the public surface.

Each test is one item of docs/decisions.md, "Rough edges (2026-12-02)", checked on real
files through the tools, the command line or the MCP server; each failed on the code
before its fix.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reme_agent.engine.parser import split_note
from reme_agent.toolkit.registry import BY_NAME
from reme_agent.vault import Vault
from tests.reliability.conftest import make_vault


def run(vault: Vault, tool: str, **args: object) -> dict:
    return BY_NAME[tool].fn(vault, **args)


# -- deleting the last property removes the frontmatter block (as Obsidian does) ----------
LAST = {
    "plain.md": ("---\ntitle: x\n---\n# Body\n\ntext\n", "# Body\n\ntext\n"),
    "bom-crlf.md": ("\ufeff---\r\ntitle: x\r\ntags: [a]\r\n---\r\nBody\r\n", "\ufeffBody\r\n"),
    "only.md": ("---\ntitle: x\n---", ""),
    "blank-lines.md": ("---\n\ntitle: x\n\n---\nBody\n", "Body\n"),
}


@pytest.mark.parametrize("path", sorted(LAST))
def test_deleting_the_last_property_removes_the_empty_block(tmp_path: Path, path: str) -> None:
    text, expected = LAST[path]
    vault = make_vault(tmp_path / "v", {path: text}, index=False)
    keys = list(split_note(text).frontmatter)
    run(vault, "property_delete", path=path, keys=keys)
    assert (vault.root / path).read_bytes() == expected.encode()
    vault.close()


KEPT = {
    # a comment is the person's own text: the block stays with it
    "comment.md": ("---\n# kept\ntitle: x\n---\nBody\n", "---\n# kept\n---\nBody\n"),
    # without the block, the body's own `---` lines would become the frontmatter
    "rule.md": ("---\ntitle: x\n---\n---\nnot: props\n---\n",
                "---\n---\n---\nnot: props\n---\n"),
}


@pytest.mark.parametrize("path", sorted(KEPT))
def test_the_empty_block_stays_when_removing_it_would_change_the_note(
        tmp_path: Path, path: str) -> None:
    text, expected = KEPT[path]
    vault = make_vault(tmp_path / "v", {path: text}, index=False)
    run(vault, "property_delete", path=path, keys=["title"])
    assert (vault.root / path).read_text(encoding="utf-8") == expected
    assert split_note(expected).frontmatter == {}
    vault.close()
