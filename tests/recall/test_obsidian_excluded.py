"""Search leaves out what Obsidian's "Excluded files" hides, unless asked for that folder."""

from __future__ import annotations

import json
import os
from pathlib import Path

from reme_agent.config import Settings
from reme_agent.recall.search import search
from reme_agent.vault import open_vault

HASH = Settings(embedder={"name": "hash"}, index={"progress": False})
TEXT = "Quarterly planning checklist for the payments team.\n"


def _app(root: Path, filters: list[str]) -> None:
    app = root / ".obsidian/app.json"
    app.write_text(json.dumps({"userIgnoreFilters": filters}), encoding="utf-8")
    st = app.stat()   # a new mtime even within one clock tick
    os.utime(app, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))


def _paths(vault, **kw) -> set[str]:
    return {r.path for r in search(vault, "quarterly planning checklist", log_access=False,
                                   **kw).results}


def test_excluded_files_are_left_out_of_search(tmp_path: Path) -> None:
    root = tmp_path / "v"
    for rel in ("knowledge/plan/plan.md", "Templates/plan.md", "notes/plan.draft.md"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"# {rel}\n\n{TEXT}", encoding="utf-8")
    (root / ".obsidian").mkdir()
    _app(root, ["Templates/", "/\\.draft\\.md$/", "/[unclosed/"])
    with open_vault(root, HASH, create=True) as v:
        v.index()
        assert _paths(v) == {"knowledge/plan/plan.md"}
        assert _paths(v, prefix="Templates/") == {"Templates/plan.md"}
        _app(root, [])   # the user takes the filters out in Obsidian
        assert _paths(v) == {"knowledge/plan/plan.md", "Templates/plan.md",
                             "notes/plan.draft.md"}
