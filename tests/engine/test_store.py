"""File store: path safety, atomic writes, O_EXCL create and CAS."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from reme_agent.engine.store import FileStore, decode_text, stamp_of
from reme_agent.errors import NoteExists, NoteNotFound, NotText, PathEscape, StampChanged


@pytest.fixture
def store(tmp_path: Path) -> FileStore:
    (tmp_path / "vault").mkdir()
    return FileStore(tmp_path / "vault")


@pytest.mark.parametrize("bad", ["../x.md", "a/../../x.md", "/etc/passwd", "C:\\Windows\\x.md",
                                 "..\\x.md", "", ".reme/index.sqlite", "a/\x00b.md"])
def test_paths_escaping_the_vault_are_refused(store: FileStore, bad: str) -> None:
    with pytest.raises(PathEscape):
        store.resolve(bad)


def test_symlink_leading_outside_is_refused(store: FileStore, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("secret")
    (store.root / "link").symlink_to(outside)
    with pytest.raises(PathEscape):
        store.read_text("link/secret.md")
    with pytest.raises(PathEscape):
        store.write("link/new.md", "x")
    assert not (outside / "new.md").exists()


def test_write_read_round_trip_keeps_chinese_text(store: FileStore) -> None:
    stamp = store.write("knowledge/张三/张三.md", "---\ntitle: 张三\n---\n前端架构师\n")
    text, again = store.read_stamped("knowledge/张三/张三.md")
    assert text.endswith("前端架构师\n")
    assert stamp == again == stamp_of(text.encode())


def test_create_refuses_an_existing_file(store: FileStore) -> None:
    store.create("a.md", "one")
    with pytest.raises(NoteExists):
        store.create("a.md", "two")
    assert store.read_text("a.md") == "one"


def test_cas_write_detects_a_concurrent_change(store: FileStore) -> None:
    store.write("a.md", "v1")
    _, stamp = store.read_stamped("a.md")
    store.write("a.md", "v2 by someone else")
    with pytest.raises(StampChanged):
        store.write_if_unchanged("a.md", "v3 from stale read", stamp)
    assert store.read_text("a.md") == "v2 by someone else"


def test_cas_with_none_stamp_means_create_only(store: FileStore) -> None:
    store.write_if_unchanged("new.md", "hello", None)
    with pytest.raises(StampChanged):
        store.write_if_unchanged("new.md", "again", None)


def test_concurrent_cas_writers_never_lose_an_update(store: FileStore) -> None:
    store.write("counter.md", "0")

    def bump() -> None:
        for _ in range(25):
            while True:
                text, stamp = store.read_stamped("counter.md")
                try:
                    store.write_if_unchanged("counter.md", str(int(text) + 1), stamp)
                    break
                except StampChanged:
                    continue

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.read_text("counter.md") == "100"


def test_atomic_write_leaves_no_temp_files(store: FileStore) -> None:
    store.write("d/a.md", "x" * 10000)
    store.write("d/a.md", "y")
    assert sorted(os.listdir(store.root / "d")) == ["a.md"]


def test_missing_file_error_suggests_close_names(store: FileStore) -> None:
    store.write("knowledge/bm25/bm25.md", "x")
    with pytest.raises(NoteNotFound) as info:
        store.read_text("knowledge/bm25/bm2.md")
    assert "knowledge/bm25/bm25.md" in info.value.suggestions


def test_binary_and_non_utf8_content_is_not_text(store: FileStore) -> None:
    store.write_bytes("img.md", b"\x89PNG\x00\x00")
    store.write_bytes("latin.md", "caf\xe9".encode("latin-1"))
    with pytest.raises(NotText):
        store.read_text("img.md")
    with pytest.raises(NotText):
        store.read_text("latin.md")
    assert decode_text("\ufeffbom".encode()) == "bom"


def test_move_copy_delete_and_list(store: FileStore) -> None:
    store.write("a/x.md", "x")
    store.copy("a/x.md", "b/y.md")
    store.move("a/x.md", "c/z.md")
    assert store.list() == ["b/y.md", "c/z.md"]
    assert not (store.root / "a").exists()  # empty folder pruned
    with pytest.raises(NoteExists):
        store.move("b/y.md", "c/z.md")
    store.delete("b/y.md")
    assert store.list(pattern="*.md") == ["c/z.md"]
    with pytest.raises(NoteNotFound):
        store.delete("b/y.md")


def test_list_skips_internal_folders(store: FileStore) -> None:
    store.write("n.md", "x")
    (store.root / ".reme").mkdir(exist_ok=True)
    (store.root / ".reme" / "i.md").write_text("internal")
    (store.root / ".git").mkdir()
    (store.root / ".git" / "g.md").write_text("git")
    assert store.list() == ["n.md"]


# -- cas_edit: the one CAS loop (DESIGN §5: at most 3 redos) ---------------------------------
class _Racer:
    """A writer thread that appends a line to the note each time it is asked to, and waits
    until it has: a real second writer landing between our read and our write."""

    def __init__(self, store: FileStore, path: str) -> None:
        self.store, self.path = store, path
        self.go, self.done = threading.Event(), threading.Event()
        self.stop = False
        self.writes = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            self.go.wait()
            self.go.clear()
            if self.stop:
                return
            self.writes += 1
            self.store.write(self.path, self.store.read_text(self.path) + f"racer {self.writes}\n")
            self.done.set()

    def race(self) -> None:
        self.go.set()
        assert self.done.wait(5)
        self.done.clear()

    def close(self) -> None:
        self.stop = True
        self.go.set()
        self.thread.join(5)


def test_cas_edit_gives_up_after_three_redos_under_a_racing_writer(store: FileStore) -> None:
    store.write("n.md", "start\n")
    racer = _Racer(store, "n.md")
    planned: list[str] = []

    def edit(text: str) -> str:
        planned.append(text)
        racer.race()                        # someone writes between our read and our write
        return text + "ours\n"

    try:
        with pytest.raises(StampChanged) as caught:
            store.cas_edit("n.md", edit)
    finally:
        racer.close()
    assert caught.value.redos == 3 and len(planned) == 4      # first try + 3 redos
    assert "kept changing" in str(caught.value)
    assert store.read_text("n.md") == "start\n" + "".join(f"racer {i}\n" for i in range(1, 5))


def test_cas_edit_redoes_on_the_new_text_and_both_edits_survive(store: FileStore) -> None:
    store.write("n.md", "start\n")
    racer = _Racer(store, "n.md")
    calls = [0]

    def edit(text: str) -> str:
        calls[0] += 1
        if calls[0] == 1:
            racer.race()
        return text + "ours\n"

    try:
        done = store.cas_edit("n.md", edit)
    finally:
        racer.close()
    assert (done.status, done.redos) == ("written", 1)
    assert store.read_text("n.md") == "start\nracer 1\nours\n"
    assert done.stamp == store.stamp("n.md")


def test_cas_edit_with_the_callers_stamp_never_redoes(store: FileStore) -> None:
    old = store.write("n.md", "one\n")
    store.write("n.md", "two\n")
    seen: list[str] = []
    with pytest.raises(StampChanged, match="changed since it was read"):
        store.cas_edit("n.md", lambda t: seen.append(t) or t + "x\n", stamp=old)
    assert seen == [] and store.read_text("n.md") == "two\n"


def test_cas_edit_creates_a_missing_file_and_a_lost_create_becomes_an_update(
        store: FileStore) -> None:
    def first(text: str | None) -> str:
        if text is None and not store.exists("a.md"):
            store.create("a.md", "theirs\n")     # another writer creates it first
        return (text or "") + "ours\n"

    done = store.cas_edit("a.md", first, create=True)
    assert (done.status, done.redos) == ("written", 1)
    assert store.read_text("a.md") == "theirs\nours\n"
    assert store.cas_edit("a.md", lambda t: None).status == "unchanged"
    with pytest.raises(NoteNotFound):
        store.cas_edit("b.md", lambda t: "x\n")
