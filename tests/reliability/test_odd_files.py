"""G1: only regular files are read; a file that vanishes mid-run is a deletion.

Before the fix a FIFO named `x.md` hung `index` for ever (a plain open blocks until a writer
comes), and a note deleted between the scan and the read escaped as a raw FileNotFoundError
or was reported as "skipped" with the absolute path in the message.
"""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path

import pytest

from reme_agent.errors import NotText
from reme_agent.toolkit import notes
from reme_agent.vault import Vault

from .conftest import HASH, make_vault, write


@pytest.fixture
def vault(tmp_path: Path) -> Vault:
    v = make_vault(tmp_path / "vault")
    yield v
    v.close()


def run_with_deadline(fn, seconds: float = 60.0):  # type: ignore[no-untyped-def]
    """Run fn in a thread; fail (instead of hanging the suite) if it does not return."""
    box: dict = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # re-raised in the test thread
            box["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"{fn} blocked for {seconds} s"
    if "error" in box:
        raise box["error"]
    return box.get("value")


def test_a_fifo_named_like_a_note_neither_hangs_index_nor_read(vault: Vault) -> None:
    os.mkfifo(vault.root / "knowledge/pipe.md")
    report = run_with_deadline(vault.index)
    assert {"path": "knowledge/pipe.md", "reason": "not a regular file (a FIFO, socket or "
            "device)"} in report.skipped
    with pytest.raises(NotText, match="not a regular file"):
        run_with_deadline(lambda: notes.read_note(vault, "knowledge/pipe.md"))
    listed = [f["path"] for f in notes.list_notes(vault, "").data["files"]]
    assert "knowledge/pipe.md" not in listed
    run_with_deadline(lambda: vault.refresh(["knowledge/pipe.md"]))


def test_a_fifo_that_replaced_an_indexed_note_is_dropped_not_read(vault: Vault) -> None:
    quokka = vault.root / "knowledge/quokka/quokka.md"
    quokka.unlink()
    os.mkfifo(quokka)
    run_with_deadline(lambda: vault.refresh(["knowledge/quokka/quokka.md"]))
    assert "knowledge/quokka/quokka.md" not in vault.state.files()


def test_notes_vanishing_during_index_are_deletions_not_errors(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    for i in range(800):
        write(root, f"k/n{i:03d}.md", f"# n{i}\n\nhello world {i}\n")
    vault = make_vault(root, notes={}, settings=HASH, index=False)
    files = sorted((root / "k").glob("*.md"))
    random.Random(7).shuffle(files)
    stop = threading.Event()

    def deleter() -> None:
        for f in files[:400]:
            if stop.is_set():
                return
            f.unlink(missing_ok=True)
            time.sleep(0.0003)

    t = threading.Thread(target=deleter)
    t.start()
    try:
        report = vault.index()
    finally:
        stop.set()
        t.join()
    assert not [s for s in report.skipped if "No such file" in s["reason"]], report.skipped
    assert all(str(root) not in s["reason"] for s in report.skipped)
    vault.index()
    on_disk = {f"k/{p.name}" for p in (root / "k").glob("*.md")}
    assert set(vault.state.files()) == on_disk
    vault.close()
