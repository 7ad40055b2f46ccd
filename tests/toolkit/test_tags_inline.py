"""tags_list / tags_stat count inline #tags beside the tags property, as Obsidian's tag pane
does, from the index rows and from hand edits not indexed yet; an index from before the
tags column is brought up to date once."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from reme_agent.toolkit.tags import tags_list, tags_stat
from reme_agent.vault import open_vault
from tests.toolkit.conftest import SETTINGS, build

NOTES = {
    "knowledge/a/a.md": "---\ntags: [Search]\n---\n# A\n\nRanking notes #search #project/alpha\n",
    "knowledge/b/b.md": "# B\n\nPlain #Project/Beta and `#code` <!-- #hidden -->\n\n"
                        "```\n#fenced\n```\n",
    "knowledge/c/c.md": "# C\n\nNo tags here, only C# and issue #42.\n",
}


def _counts(vault) -> dict[str, int]:
    return {t["tag"]: t["count"] for t in tags_list(vault)["tags"]}


def test_inline_tags_count_from_rows_and_from_hand_edits(tmp_path: Path) -> None:
    root = tmp_path / "v"
    with build(root, NOTES) as v:
        # one note counts once per tag, whatever the case or the place it came from
        assert _counts(v) == {"Search": 1, "project/alpha": 1, "Project/Beta": 1}
        assert [n["path"] for n in tags_stat(v, "project")["notes"]] == [
            "knowledge/a/a.md", "knowledge/b/b.md"]
        assert tags_stat(v, "#project/")["count"] == 2   # a trailing / as in a nested tag
        # a hand edit the index has not seen yet is read from the file
        (root / "knowledge/c/c.md").write_text("# C\n\nNow #search too.\n", encoding="utf-8")
        assert _counts(v)["Search"] == 2
        assert [n["path"] for n in tags_stat(v, "#SEARCH")["notes"]][-1] == "knowledge/c/c.md"


def test_an_index_from_before_the_tags_column_is_read_again_once(tmp_path: Path) -> None:
    from reme_agent.engine import indexer as indexer_mod

    root = tmp_path / "v"
    with build(root, NOTES) as v:
        db_path = v.state.path
    with sqlite3.connect(db_path) as db:   # what an index made before the column holds
        db.execute("ALTER TABLE files DROP COLUMN tags")
        db.execute("UPDATE meta SET value='3' WHERE key=?", (indexer_mod.DOCUMENTS_KEY,))
    with open_vault(root, SETTINGS) as v:
        assert v.state.file("knowledge/b/b.md").tags == []
        report = v.index()
        assert report.embedded == 0   # re-read, nothing re-embedded
        assert v.state.file("knowledge/b/b.md").tags == ["Project/Beta"]
        assert v.index().changed_files == []
