"""File store and link resolver on hostile names: atomic create (BUG-1), text that cannot be
a file name (BUG-7), names that are not UTF-8 (BUG-9), Unicode twins (BUG-10) and symlinks
leading outside (BUG-11)."""

from __future__ import annotations

import errno
import os
import unicodedata
from pathlib import Path

import pytest

from reme_agent.engine.links import LinkResolver
from reme_agent.engine.store import NOT_UTF8_NAME, FileStore
from reme_agent.errors import NoteExists, PathEscape


@pytest.fixture
def store(tmp_path: Path) -> FileStore:
    (tmp_path / "vault").mkdir()
    return FileStore(tmp_path / "vault")


def _temp_files(store: FileStore) -> list[Path]:
    return list(store.root.rglob(".tmp-*"))


# -- BUG-1: create --------------------------------------------------------------------------
def test_create_links_a_whole_temp_file_and_leaves_no_temp(store: FileStore) -> None:
    stamp = store.create("knowledge/a/a.md", "one\n")
    assert store.read_stamped("knowledge/a/a.md") == ("one\n", stamp)
    assert (store.root / "knowledge/a/a.md").stat().st_mode & 0o777 == 0o644
    with pytest.raises(NoteExists):
        store.create("knowledge/a/a.md", "two\n")
    assert store.read_text("knowledge/a/a.md") == "one\n" and _temp_files(store) == []


def test_create_race_lost_at_the_link_is_note_exists(store: FileStore,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    real_link = os.link

    def racing_link(src: str, dst: Path) -> None:
        Path(dst).write_text("the other writer won\n")  # lands between the check and the link
        real_link(src, dst)

    monkeypatch.setattr(os, "link", racing_link)
    with pytest.raises(NoteExists):
        store.create("a.md", "mine\n")
    assert store.read_text("a.md") == "the other writer won\n" and _temp_files(store) == []


def test_create_without_hard_links_falls_back_to_a_locked_rename(
        store: FileStore, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_links(src: str, dst: Path) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    store.create("a.md", "one\n")
    assert store.read_text("a.md") == "one\n" and _temp_files(store) == []

    def racing_no_links(src: str, dst: Path) -> None:
        Path(dst).write_text("the other writer won\n")
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", racing_no_links)
    with pytest.raises(NoteExists):
        store.create("b.md", "mine\n")
    assert store.read_text("b.md") == "the other writer won\n" and _temp_files(store) == []


# -- BUG-7: text that cannot be a file name ---------------------------------------------------
@pytest.mark.parametrize("bad", ["knowledge/\ud800.md", "\udcff", "knowledge/" + "a" * 256,
                                 "é" * 128 + ".md", "a/" * 2100 + "x.md"])
def test_unencodable_and_overlong_paths_are_path_escape(store: FileStore, bad: str) -> None:
    with pytest.raises(PathEscape) as info:
        store.resolve(bad)
    message = str(info.value)
    message.encode("utf-8")
    assert str(store.root) not in message


def test_a_255_byte_name_is_still_fine(store: FileStore) -> None:
    name = "a" * 252 + ".md"
    store.write(name, "x\n")
    assert store.list() == [name]


def test_a_symlink_loop_is_path_escape_without_the_vault_path(store: FileStore) -> None:
    (store.root / "loop.md").symlink_to(store.root / "loop.md")
    with pytest.raises(PathEscape) as info:
        store.resolve("loop.md")
    assert str(store.root) not in str(info.value)


# -- BUG-9 / BUG-11: listing and scanning -----------------------------------------------------
@pytest.fixture
def messy(store: FileStore, tmp_path: Path) -> FileStore:
    """A vault with a non-UTF-8 folder and file name and symlinks leading outside."""
    store.write("ok/ok.md", "ok\n")
    root = os.fsencode(store.root)
    os.makedirs(os.path.join(root, b"caf\xe9"))
    for rel in (b"caf\xe9/n.md", b"ok/bad\xff.md", b"ok/bad\xff.png"):
        with open(os.path.join(root, rel), "wb") as fh:
            fh.write(b"x\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("secret\n")
    (store.root / "out.md").symlink_to(outside / "secret.md")
    (store.root / "out-dir").symlink_to(outside, target_is_directory=True)
    (store.root / "in.md").symlink_to(store.root / "ok/ok.md")
    return store


def test_list_leaves_out_outside_symlinks_and_non_utf8_names(
        messy: FileStore, caplog: pytest.LogCaptureFixture) -> None:
    assert messy.list() == ["in.md", "ok/ok.md"]
    assert messy.list("ok") == ["ok/ok.md"]
    assert NOT_UTF8_NAME in caplog.text and "caf\\xe9" in caplog.text


def test_scan_reports_non_utf8_names_of_notes_and_folders(messy: FileStore) -> None:
    skipped: list[tuple[str, str]] = []
    found = sorted(p for p, _, _ in messy.scan((".md",), skipped=skipped))
    assert found == ["in.md", "ok/ok.md"]
    assert sorted(skipped) == [("caf\\xe9", NOT_UTF8_NAME), ("ok/bad\\xff.md", NOT_UTF8_NAME)]


# -- BUG-10: NFC/NFD twins --------------------------------------------------------------------
NFC, NFD = "é.md", unicodedata.normalize("NFD", "é.md")


def test_twins_resolve_each_to_itself_and_an_nfc_only_match_is_not_guessed() -> None:
    r = LinkResolver([NFD, NFC])
    assert r.resolve(NFC) == NFC and r.resolve(NFD) == NFD
    assert r.resolve("É") is None and sorted(r.ambiguous("É")) == sorted([NFC, NFD])


def test_removing_one_twin_keeps_the_other_resolvable() -> None:
    r = LinkResolver([NFC, NFD])
    r.remove(NFC)
    assert r.resolve(NFC) == NFD and r.resolve("é") == NFD  # unique again: NFC form matches
    r.add(NFC)
    r.remove(NFD)
    assert r.resolve(NFD) == NFC


def test_an_nfd_target_still_finds_a_single_nfc_file() -> None:
    assert LinkResolver(["knowledge/café/café.md"]).resolve(
        unicodedata.normalize("NFD", "knowledge/café")) == "knowledge/café/café.md"
