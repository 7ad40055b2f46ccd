"""G1: a full disk and a read-only vault are storage refusals, not corruption or crashes.

Before the fix a full disk made `IndexState` move a healthy `index.sqlite` aside as corrupt
(forcing a full rebuild), `search` on a read-only vault failed trying to rename it, and a
tool write on a full disk ended as "internal error: OSError". The disks here are real: a
small tmpfs that fills up and a read-only bind mount (both need root; skipped otherwise).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from reme_agent.engine.state import IndexState, is_corruption
from reme_agent.errors import ReMeError, StorageError
from reme_agent.recall.search import search
from reme_agent.toolkit import notes
from reme_agent.vault import open_vault

from .conftest import HASH, NOTES, ROOT, write


def _mount(args: list[str]) -> bool:
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if os.geteuid() != 0 or not _mount(["-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mnt)]):
        pytest.skip("needs root to mount a small tmpfs")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.fixture
def read_only_vault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    src, ro = tmp_path / "src", tmp_path / "ro"
    for rel, text in NOTES.items():
        write(src, rel, text)
    vault = open_vault(src, HASH, create=True)
    vault.index()
    vault.close()
    ro.mkdir()
    if os.geteuid() != 0 or not _mount(["--bind", str(src), str(ro)]):
        pytest.skip("needs root for a read-only bind mount")
    if not _mount(["-o", "remount,bind,ro", str(ro)]):
        subprocess.run(["umount", str(ro)], check=False)
        pytest.skip("cannot remount read-only")
    monkeypatch.setenv("REME_CACHE_DIR", str(tmp_path / "cache"))
    yield ro
    subprocess.run(["umount", "-l", str(ro)], check=False)


def fill(disk: Path) -> None:
    """Use up every free byte of the disk."""
    with open(disk / "filler.bin", "wb") as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError:
            pass


def test_a_full_disk_is_a_clear_tool_error_and_never_corruption(small_disk: Path) -> None:
    root = small_disk / "vault"
    for rel, text in NOTES.items():
        write(root, rel, text)
    vault = open_vault(root, HASH, create=True)
    vault.index()
    fill(small_disk)
    with pytest.raises(StorageError, match="No space left"):
        notes.write_note(vault, "knowledge/new/new.md", body="hello " * 20000)
    assert not (root / "knowledge/new/new.md").exists()
    # the index keeps answering and is never mistaken for corruption
    assert search(vault, "quokka marsupial", limit=1, log_access=False).results
    vault.close()
    reopened = open_vault(root, HASH)
    assert reopened.state.files()  # the state opens without writing
    with pytest.raises(ReMeError, match="disk is full"):  # chroma must write to open
        search(reopened, "quokka marsupial", limit=1, log_access=False)
    assert not list((root / ".reme").glob("*.corrupt-*"))
    reopened.close()
    env = {**os.environ, "REME_EMBEDDER__NAME": "hash", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "reme_agent", "tool", "write", "--path",
                           "knowledge/x/x.md", "--body", "hello " * 20000, "--vault",
                           str(root)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("Error: Could not write") and "No space left" in done.stderr
    assert "internal error" not in done.stderr
    (small_disk / "filler.bin").unlink()
    after = open_vault(root, HASH)  # nothing was moved aside: no re-embedding needed
    assert after.index().embedded == 0
    assert search(after, "quokka marsupial", limit=1, log_access=False).results
    after.close()


def test_a_read_only_vault_can_be_searched_and_writes_say_why(read_only_vault: Path) -> None:
    vault = open_vault(read_only_vault, HASH)
    assert not str(vault.internal).startswith(str(read_only_vault))
    hits = search(vault, "quokka marsupial", limit=1, log_access=False).results
    assert hits and hits[0].path == "knowledge/quokka/quokka.md"
    report = vault.index()
    assert report.embedded == 0  # the existing .reme/ was reused from the cache copy
    with pytest.raises(StorageError, match="Read-only file system"):
        notes.write_note(vault, "knowledge/new/new.md", body="hello")
    vault.close()
    env = {**os.environ, "REME_EMBEDDER__NAME": "hash", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "reme_agent", "search", "quokka",
                           "--vault", str(read_only_vault)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "knowledge/quokka/quokka.md" in done.stdout


def test_only_real_damage_counts_as_corruption(tmp_path: Path) -> None:
    assert not is_corruption(sqlite3.OperationalError("database or disk is full"))
    assert not is_corruption(sqlite3.OperationalError("attempt to write a readonly database"))
    db = tmp_path / "index.sqlite"
    db.write_bytes(b"this is not a database at all" * 100)
    IndexState(db).close()  # garbage: moved aside and rebuilt, as before
    assert list(tmp_path.glob("index.sqlite.corrupt-*"))


def test_a_locked_or_refused_index_file_is_not_moved_aside(tmp_path: Path) -> None:
    db = tmp_path / "index.sqlite"
    IndexState(db).close()
    db.chmod(0o400)
    shutil.copy(db, tmp_path / "copy.sqlite")
    # Simulate what a full disk does on open: the first write fails with OperationalError.
    real = sqlite3.connect

    class Full(sqlite3.Connection):
        def execute(self, sql: str, *a: object) -> sqlite3.Cursor:  # type: ignore[override]
            if sql.startswith("PRAGMA journal_mode"):
                raise sqlite3.OperationalError("database or disk is full")
            return super().execute(sql, *a)

    sqlite3.connect = lambda *a, **k: real(*a, factory=Full, **k)  # type: ignore[assignment]
    try:
        with pytest.raises(StorageError, match="disk is full"):
            IndexState(db)
    finally:
        sqlite3.connect = real  # type: ignore[assignment]
    assert db.exists() and not list(tmp_path.glob("*.corrupt-*"))
