"""G1: a CAS write raced by an editor that appends in place loses no line.

An editor (or a logger, or Obsidian's in-place save) that writes into the file between our
stamp check and our rename wrote into the old inode, which the rename then dropped: 97 of
6,938 appended lines were lost over 62 writes. The store now keeps the old file open and
compares it after the rename; if it changed, the file is put back to the other writer's
version (with anything appended to ours meanwhile) and the write reports StampChanged.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from reme_agent.engine.store import FileStore
from reme_agent.errors import StampChanged


def _appender(path: Path, stop: threading.Event, out: list[str]) -> None:
    i = 0
    while not stop.is_set():
        line = f"appended {i}\n"
        with open(path, "a", encoding="utf-8") as fh:  # in place, like `echo >> note.md`
            fh.write(line)
        out.append(line)
        i += 1
        time.sleep(0.001)


def test_appends_racing_cas_writes_are_never_lost(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    store.write("log.md", "# Log\n")
    stop = threading.Event()
    appended: list[str] = []
    writer = threading.Thread(target=_appender, args=(tmp_path / "log.md", stop, appended))
    writer.start()
    written = conflicts = 0
    try:
        deadline = time.monotonic() + 6
        n = 0
        while time.monotonic() < deadline:
            n += 1
            try:
                store.cas_edit("log.md", lambda text, n=n: text.replace(
                    "# Log\n", f"# Log\nedit {n}\n", 1))
                written += 1
            except StampChanged:
                conflicts += 1
    finally:
        stop.set()
        writer.join()
    final = (tmp_path / "log.md").read_text(encoding="utf-8")
    lost = [line for line in appended if line not in final]
    assert written >= 3 and written + conflicts >= 10, (written, conflicts)
    assert lost == [], f"{len(lost)} of {len(appended)} appended lines lost"
    assert final.startswith("# Log\n")


def test_an_in_place_rewrite_during_a_cas_write_wins_and_is_reported(tmp_path: Path) -> None:
    """Obsidian saves by truncating and rewriting in place: that version must survive."""
    store = FileStore(tmp_path)
    store.write("n.md", "v1\n")
    text, stamp = store.read_stamped("n.md")
    original = store._atomic_write

    def rewrite_in_place_then_replace(path: Path, data: bytes) -> str:
        with open(path, "r+b") as fh:  # the editor's save lands between check and rename
            fh.truncate(0)
            fh.write(b"the person's version\n")
        return original(path, data)

    store._atomic_write = rewrite_in_place_then_replace  # type: ignore[method-assign]
    try:
        store.write_if_unchanged("n.md", "the tool's version\n", stamp)
    except StampChanged:
        pass
    else:
        raise AssertionError("the conflict was not reported")
    finally:
        store._atomic_write = original  # type: ignore[method-assign]
    assert (tmp_path / "n.md").read_text(encoding="utf-8") == "the person's version\n"


def test_an_append_that_reaches_the_replaced_file_late_is_carried_over(tmp_path: Path) -> None:
    """A writer that opened the file before our rename and writes after the grace period
    (descheduled on a loaded machine) still gets its line into the note."""
    store = FileStore(tmp_path)
    store.write("log.md", "# Log\n")
    text, stamp = store.read_stamped("log.md")
    with open(tmp_path / "log.md", "a", encoding="utf-8") as late:  # opened before the rename
        store.write_if_unchanged("log.md", text + "our line\n", stamp)
        time.sleep(0.05)                                                # past the 3 ms grace
        late.write("their late line\n")
    store.late_appends.drain()
    final = (tmp_path / "log.md").read_text(encoding="utf-8")
    assert final == "# Log\nour line\ntheir late line\n"


def test_a_late_append_after_a_second_write_lands_in_the_newest_file(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    store.write("log.md", "a\n")
    with open(tmp_path / "log.md", "a", encoding="utf-8") as late:
        store.cas_edit("log.md", lambda t: t + "b\n")
        store.cas_edit("log.md", lambda t: t + "c\n")
        late.write("late\n")
    store.late_appends.drain()
    assert (tmp_path / "log.md").read_text(encoding="utf-8") == "a\nb\nc\nlate\n"
