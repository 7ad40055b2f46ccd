"""A file that appears or goes re-resolves every link that can name it, in a path-limited
run (a tool's write, the watcher), not only at the next whole-vault run.

The indexer finds those links through its link-key index, and asks the same question as
`retarget` (`links.file_keys` for the file, `links.link_key` for each link): a link whose
last segment no file name says (`[[../]]`, `[[x/.]]`) is always re-resolved, and
`[[y.md]]` is found by a file named `y.md.md`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reme_agent.config import Settings
from reme_agent.toolkit.lint import lint_dangling
from reme_agent.vault import open_vault

HASH = Settings(embedder={"name": "hash"}, index={"progress": False})

FORMS = [   # (source, link, the file it names once that file exists)
    ("k/sub/n.md", "../", "k/k.md"),          # the folder note of the folder above
    ("n.md", "x/.", "x.md"),                 # a path ending in "."
    ("n.md", "y.md", "y.md.md"),             # path + ".md": a file named with two .md
    ("k/sub/n.md", "../x", "k/x.md"),        # relative path
    ("n.md", "./Café.md", "café.md"),        # ./, case, .md: what target_key folds
    ("n.md", "sub/", "sub/sub.md"),          # trailing slash: the folder note
]


def _out(vault, source: str) -> list[tuple[str, bool]]:
    return [(t, vault.graph.is_dangling(t)) for t, _ in vault.graph.outbound(source)]


@pytest.mark.parametrize(("source", "target", "file"), FORMS)
def test_creating_and_deleting_the_target_updates_the_edge_without_a_full_run(
        tmp_path: Path, source: str, target: str, file: str) -> None:
    root = tmp_path / "v"
    (root / source).parent.mkdir(parents=True, exist_ok=True)
    (root / source).write_text(f"# n\n\nsee [[{target}]]\n", encoding="utf-8")
    vault = open_vault(root, HASH)
    try:
        vault.index()
        assert _out(vault, source) == [(target, True)]
        assert [x["target"] for x in lint_dangling(vault).data["items"]] == [target]

        (root / file).parent.mkdir(parents=True, exist_ok=True)
        (root / file).write_text("# the target\n", encoding="utf-8")
        vault.refresh([file])
        assert _out(vault, source) == [(file, False)]
        assert lint_dangling(vault).data["items"] == []

        (root / file).unlink()
        vault.refresh([file])
        assert _out(vault, source) == [(target, True)]
        assert [x["target"] for x in lint_dangling(vault).data["items"]] == [target]
    finally:
        vault.close()

