"""Whole-vault runs list only folders whose mtime moved (G6): an edit anywhere is still found."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest

from reme_agent.config import Settings
from reme_agent.engine.store import FileStore
from reme_agent.vault import open_vault

HASH = Settings(embedder={"name": "hash"}, index={"progress": False})
EXT = (".md", ".markdown", ".txt")
FOLDERS = ["", "a", "a/b", "a/b/c", "knowledge/x", "daily/2026-01-01/s"]


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def age(root: Path, seconds: float = 100.0) -> None:
    """Make every file and folder look old, as a vault is between two runs (folders changed
    in the last few seconds are listed again anyway)."""
    past = time.time() - seconds
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            os.utime(os.path.join(dirpath, name), (past, past))
        os.utime(dirpath, (past, past))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "v"
    for i, folder in enumerate(FOLDERS):
        prefix = f"{folder}/" if folder else ""
        write(root, f"{prefix}n{i}.md", f"# Note {i}\n\nbody {i}\n")
        write(root, f"{prefix}m{i}.md", f"# Other {i}\n\ntext {i}\n")
    (root / ".reme").mkdir()   # made by the first run: it would move the root folder's mtime
    age(root)
    return root


def listed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Folders listed from now on (spy on the one listing function)."""
    seen: list[str] = []
    real = FileStore._list_folder

    def spy(self: FileStore, folder: str, **kw: object) -> object:
        seen.append(os.path.relpath(folder, self.root))
        return real(self, folder, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(FileStore, "_list_folder", spy)
    return seen


@pytest.mark.parametrize("folder", FOLDERS)
def test_an_edit_in_place_is_found_in_any_folder_without_listing_it(
        root: Path, folder: str, monkeypatch: pytest.MonkeyPatch) -> None:
    rel = f"{folder}/n{FOLDERS.index(folder)}.md" if folder else "n0.md"
    with open_vault(root, HASH) as v:
        v.index()
        seen = listed(monkeypatch)
        path = root / rel
        text = path.read_text(encoding="utf-8")
        path.write_text(text.replace("body", "BODY"), encoding="utf-8")  # same size, in place
        report = v.index()
        assert any("BODY" in b.text for b in v.state.blocks_of(rel))
    assert report.changed_files == [rel]
    assert seen == [], "no folder changed, so none is listed again"


@pytest.mark.parametrize("folder", FOLDERS)
def test_new_deleted_and_renamed_files_are_found_in_any_folder(root: Path, folder: str) -> None:
    prefix = f"{folder}/" if folder else ""
    with open_vault(root, HASH) as v:
        v.index()
        write(root, f"{prefix}new.md", "# New\n\nfresh\n")
        (root / f"{prefix}m{FOLDERS.index(folder)}.md").unlink()
        report = v.index()
        assert report.changed_files == [f"{prefix}new.md"]
        assert report.deleted_files == [f"{prefix}m{FOLDERS.index(folder)}.md"]
        os.rename(root / f"{prefix}new.md", root / f"{prefix}renamed.md")
        report = v.index()
        assert report.changed_files == [f"{prefix}renamed.md"]
        assert report.deleted_files == [f"{prefix}new.md"]


def test_a_moved_folder_is_found(root: Path) -> None:
    with open_vault(root, HASH) as v:
        v.index()
        os.rename(root / "a/b", root / "moved")
        report = v.index()
    assert sorted(report.changed_files) == ["moved/c/m3.md", "moved/c/n3.md", "moved/m2.md",
                                            "moved/n2.md"]
    assert sorted(report.deleted_files) == sorted(["a/b/c/n3.md", "a/b/c/m3.md", "a/b/m2.md",
                                                   "a/b/n2.md"])


def test_folders_with_links_temp_files_or_bad_names_are_listed_every_time(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (root / "a" / "link.md").symlink_to(root / "n0.md")
    write(root, "a/b/.tmp-writer-1", "half")
    write(root, "knowledge/x/bad\x01name.md", "# Bad\n")
    age(root)
    with open_vault(root, HASH) as v:
        first = v.index()
        seen = listed(monkeypatch)
        again = v.index()
    assert sorted(seen) == ["a", "a/b", "knowledge/x"]
    assert again.skipped == first.skipped and any("bad" in s["path"] for s in again.skipped)


def test_a_folder_changed_just_before_the_scan_is_listed_again(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(root, "a/b/fresh.md", "# Fresh\n")   # a/b's mtime is now: too recent to trust
    with open_vault(root, HASH) as v:
        v.index()
        seen = listed(monkeypatch)
        v.index()
    assert seen == ["a/b"]


def test_listings_survive_a_new_process(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with open_vault(root, HASH) as v:
        v.index()
    seen = listed(monkeypatch)
    with open_vault(root, HASH) as v2:
        v2.index()
    assert seen == []


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_the_cached_scan_finds_what_a_full_scan_finds(tmp_path: Path, seed: int) -> None:
    """Random trees and random changes (some in place, some aged, some fresh): the cached
    scan returns exactly the full walk's files, sizes, mtimes and order."""
    rng = random.Random(seed)
    root = tmp_path / "v"
    root.mkdir()
    store = FileStore(root)
    folders = ["", "p", "p/q", "r", "r/s/t", "u v", "中文"]
    listings: dict = {}
    for step in range(12):
        for _ in range(rng.randint(1, 6)):
            folder = rng.choice(folders)
            name = f"{folder}/f{rng.randint(0, 6)}.md" if folder else f"f{rng.randint(0, 6)}.md"
            path = root / name
            action = rng.random()
            if action < 0.2 and path.exists():
                path.unlink()
            elif action < 0.3 and folder and (root / folder).is_dir() and step % 4 == 3:
                target = root / f"{folder}-moved{step}"
                os.rename(root / folder, target)
                folders.append(target.relative_to(root).as_posix())
            else:
                write(root, name, "x" * rng.randint(1, 40))
        if rng.random() < 0.7:
            age(root, rng.choice([10.0, 100.0]))
        found, listings = store.scan_cached(EXT, listings)
        assert found == list(store.scan(EXT)), f"step {step}"


def test_an_edit_that_keeps_the_links_resolves_none(root: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Editing text is the common change: its run must not build a link resolver (a vault
    walk and every row decoded). A changed link still resolves, in the same process."""
    write(root, "a/linker.md", "# Linker\n\nsee [[n0]] and [[missing]]\n")
    with open_vault(root, HASH) as v:
        v.index()
    from reme_agent.engine import names as names_module

    built: list[int] = []
    real = names_module.LinkResolver

    def counting(*args: object, **kwargs: object) -> object:
        built.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(names_module, "LinkResolver", counting)  # the indexer's resolver_over
    with open_vault(root, HASH) as v2:
        write(root, "a/linker.md", "# Linker\n\nsee [[n0]] and [[missing]]\n\nmore words\n")
        assert v2.index().changed_files == ["a/linker.md"]
        assert built == []
        assert v2.graph.outbound("a/linker.md") == [("missing", None), ("n0.md", None)]
        write(root, "a/linker.md", "# Linker\n\nsee [[n0]] and [[m1]]\n")
        v2.index()
        assert built == [1]
        assert v2.graph.outbound("a/linker.md") == [("a/m1.md", None), ("n0.md", None)]
        assert "missing" not in v2.graph


def test_runs_in_another_process_and_tool_writes_keep_whole_runs_exact(root: Path) -> None:
    """A whole-vault run compares against what this process's last run left; another
    process's run or a path-limited run in between must not make it miss or repeat work."""
    with open_vault(root, HASH) as a, open_vault(root, HASH) as b:
        a.index()
        write(root, "a/n1.md", "# Note 1\n\nchanged by b\n")
        assert b.index().changed_files == ["a/n1.md"]
        write(root, "a/b/n2.md", "# Note 2\n\nchanged by a\n")
        assert a.index().changed_files == ["a/b/n2.md"]
        write(root, "knowledge/x/n4.md", "# Note 4\n\nwritten by a tool\n")
        assert a.refresh(["knowledge/x/n4.md"]).changed_files == ["knowledge/x/n4.md"]
        write(root, "n0.md", "# Note 0\n\nedited\n")
        report = a.index()
        assert report.changed_files == ["n0.md"] and report.deleted_files == []
        assert a.index().changed_files == [] and b.index().changed_files == []


def test_indexable_paths_names_what_the_next_run_would_index_without_listing_kept_folders(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Search's "N notes are not indexed yet" count (recall/freshness.py) asks this."""
    write(root, "a/b/.tmp-writer-1", "half")
    age(root)
    with open_vault(root, HASH) as v:
        v.index()
        indexed = {r for r in v.state.file_stats()}
        assert sorted(v.indexer.indexable_paths()) == sorted(indexed)
        write(root, "a/b/c/added.md", "# Added\n")
        (root / "knowledge/x/n4.md").unlink()
        seen = listed(monkeypatch)
        names = v.indexer.indexable_paths()
        assert sorted(seen) == ["a/b", "a/b/c", "knowledge/x"]  # a/b: its temp file
        assert "a/b/c/added.md" in names and "knowledge/x/n4.md" not in names
        assert (root / "a/b/.tmp-writer-1").exists(), "a read-only question sweeps nothing"
        report = v.index()
    assert sorted(names) == sorted((indexed | set(report.changed_files))
                                   - set(report.deleted_files))


def test_search_counts_a_note_written_by_hand_as_not_indexed(root: Path) -> None:
    from reme_agent.recall.freshness import check_for

    with open_vault(root, HASH) as v:
        v.index()
        write(root, "a/by-hand.md", "# By hand\n")
        report = check_for(v).report(v)
    assert report.unindexed_files == 1 and "not indexed yet" in (report.hint() or "")
