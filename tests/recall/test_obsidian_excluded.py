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


def test_a_catastrophic_pattern_is_bounded_and_dropped(tmp_path: Path) -> None:
    """`/(a+)+$/` backtracks for ages on a path of a's ending in another letter: the search
    must not hang on a pattern from app.json (ReDoS), and the prefix filters still apply."""
    import time

    from reme_agent.schema.obsidian import excluded_matcher

    root = tmp_path / "v"
    (root / ".obsidian").mkdir(parents=True)
    _app(root, ["/(a+)+$/", "Templates/"])
    excluded = excluded_matcher(root)
    assert excluded is not None
    slow = "a" * 40 + "!.md"
    started = time.monotonic()
    assert excluded(slow) is False
    assert excluded(slow) is False   # dropped after the first timeout: no second wait
    assert time.monotonic() - started < 5   # a bound, not a speed target (old code: hours)
    assert excluded("Templates/x.md") is True


def test_a_pattern_too_big_to_compile_is_skipped(tmp_path: Path) -> None:
    """Compiling costs about the product of a pattern's counted repeats and no timeout
    covers it: `/(?:x{60000}){60000}/` hung opening the matcher."""
    from reme_agent.schema.obsidian import excluded_matcher

    root = tmp_path / "v"
    (root / ".obsidian").mkdir(parents=True)
    _app(root, ["/(?:x{60000}){60000}/", "/^drafts\\//"])
    excluded = excluded_matcher(root)
    assert excluded is not None and excluded("drafts/a.md") and not excluded("x/a.md")


def test_windows_and_unicode_filters(tmp_path: Path) -> None:
    """A filter typed with backslashes, and a folder name whose file system spelling is NFD
    (macOS) while app.json holds NFC, exclude the folder all the same."""
    import unicodedata

    from reme_agent.schema.obsidian import excluded_matcher

    root = tmp_path / "v"
    (root / ".obsidian").mkdir(parents=True)
    _app(root, ["Archive\\Old\\", "Café/"])
    excluded = excluded_matcher(root)
    assert excluded is not None
    assert excluded("Archive/Old/x.md") and not excluded("Archive/New/x.md")
    assert excluded(unicodedata.normalize("NFD", "Café/menu.md"))
    assert not excluded("Cafe/menu.md")


def test_odd_app_json_is_no_filter(tmp_path: Path) -> None:
    """app.json that is a list, a FIFO, a symlink loop or too big: no filter, no hang."""
    from reme_agent.schema.obsidian import excluded_matcher, link_style

    cases = {
        "list": lambda p: p.write_text('["Templates/"]', encoding="utf-8"),
        "fifo": lambda p: os.mkfifo(p),
        "loop": lambda p: p.symlink_to(p),
        "huge": lambda p: p.write_text(json.dumps({"userIgnoreFilters": ["T/"],
                                                   "pad": "x" * 400_000}), encoding="utf-8"),
        "filters not a list": lambda p: p.write_text('{"userIgnoreFilters": "T/"}',
                                                     encoding="utf-8"),
    }
    for name, make in cases.items():
        root = tmp_path / name.replace(" ", "-")
        (root / ".obsidian").mkdir(parents=True)
        make(root / ".obsidian/app.json")
        assert excluded_matcher(root) is None, name
        assert link_style(root) is None, name


def test_filters_that_are_not_text_are_skipped(tmp_path: Path) -> None:
    """`[null, 5, "T/"]`: a null once became the prefix "None", hiding `None of it.md`."""
    from reme_agent.schema.obsidian import excluded_matcher

    root = tmp_path / "v"
    (root / ".obsidian").mkdir(parents=True)
    _app(root, [None, 5, "T/"])
    excluded = excluded_matcher(root)
    assert excluded is not None and excluded("T/x.md")
    assert not excluded("None of it.md") and not excluded("5 ideas.md")
