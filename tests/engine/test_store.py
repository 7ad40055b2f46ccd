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
