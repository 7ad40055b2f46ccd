"""File tools: move (link rewriting, all-or-nothing), copy, delete, upload, download."""

from __future__ import annotations

import pytest

from reme_agent.errors import InvalidArgument, NoteExists, NoteNotFound, StampChanged
from reme_agent.toolkit import build_toolkit, files
from reme_agent.toolkit.files import copy, delete, download, move, upload
from reme_agent.toolkit.lint import lint_dangling
from reme_agent.toolkit.retrieve import graph_traverse
from tests.toolkit.conftest import BINARY, call_toolkit, vault_hash

BM25 = "knowledge/bm25/bm25.md"
HYBRID = "knowledge/hybrid-search/hybrid-search.md"
VEC = "knowledge/向量检索/向量检索.md"
VEC_NEW = "knowledge/vector-search/vector-search.md"
DAILY = "daily/2026-11-28/search-tuning/search-tuning.md"
ZHANG = "knowledge/张三/张三.md"


def read(vault, path: str) -> str:
    return (vault.root / path).read_text(encoding="utf-8")


# -- move ---------------------------------------------------------------------------------
def test_move_rewrites_chinese_inbound_links_keeping_style_alias_and_predicate(vault) -> None:
    got = move(vault, VEC, VEC_NEW)
    assert not (vault.root / VEC).exists() and (vault.root / VEC_NEW).is_file()
    assert f"uses:: [[{BM25}|BM25]], [[{VEC_NEW}]]" in read(vault, HYBRID)  # a path stays a path
    assert "[owns:: [[vector-search|向量检索模块]]]" in read(vault, ZHANG)  # a name stays a name
    assert "[[vector-search|vector search]]" in read(vault, DAILY)
    assert "- related:: [[hybrid-search|混合检索]]" in read(vault, VEC_NEW)  # still resolves
    assert {r["path"] for r in got["rewritten"]} == {HYBRID, ZHANG, DAILY}
    assert lint_dangling(vault)["count"] == 0
    back = graph_traverse(vault, [VEC_NEW], direction="in")
    assert {e["source"] for e in back["edges"]} == {HYBRID, ZHANG, DAILY}
    assert {e["predicate"] for e in back["edges"]} == {"uses", "owns", None}


def test_move_rewrites_english_short_and_alias_links_in_their_own_style(vault) -> None:
    new = "knowledge/okapi-bm25/okapi-bm25.md"
    move(vault, BM25, new)
    text = read(vault, HYBRID)
    # [[bm25]] would now resolve only through BM25's title (not in Obsidian): renamed, as
    # Obsidian renames it; the path link keeps its path form and its shown text
    assert "([[okapi-bm25]])" in text and f"uses:: [[{new}|BM25]], [[{VEC}]]" in text
    assert f"See [[{new}]] and" in read(vault, DAILY)
    assert lint_dangling(vault)["count"] == 0


def test_move_rewrites_links_a_new_name_would_make_ambiguous(vault) -> None:
    move(vault, "daily/2026-11-29/refactor/refactor.md", "daily/2026-11-29/bm25/bm25.md")
    # [[bm25]] would now be ambiguous: the shortest unambiguous form is the full path
    assert "([[knowledge/bm25/bm25]])" in read(vault, HYBRID)
    assert lint_dangling(vault)["count"] == 0


def test_move_leaves_links_that_still_resolve_by_name_untouched(vault) -> None:
    before = read(vault, ZHANG), read(vault, DAILY)
    got = move(vault, VEC, "knowledge/archive/向量检索.md")  # same name, another folder
    assert (read(vault, ZHANG), read(vault, DAILY)) == before  # [[向量检索|...]] still resolves
    assert "[[knowledge/archive/向量检索.md]]" in read(vault, HYBRID)  # the path link follows
    assert {r["path"] for r in got["rewritten"]} == {HYBRID}
    assert lint_dangling(vault)["count"] == 0


def test_move_rolls_back_every_written_file_when_a_step_fails(vault, monkeypatch) -> None:
    before = vault_hash(vault)

    def broken_move(src: str, dst: str, overwrite: bool = False) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(vault.store, "move", broken_move)
    with pytest.raises(OSError, match="disk full"):
        move(vault, VEC, VEC_NEW)
    assert vault_hash(vault) == before


def test_move_rolls_back_when_a_later_write_fails(vault, monkeypatch) -> None:
    before = vault_hash(vault)
    real = vault.store.write_if_unchanged
    calls = []

    def flaky(rel: str, text: str, stamp: str | None) -> str:
        calls.append(rel)
        if len(calls) == 2:
            raise OSError("write failed")
        return real(rel, text, stamp)

    monkeypatch.setattr(vault.store, "write_if_unchanged", flaky)
    with pytest.raises(OSError):
        move(vault, VEC, VEC_NEW)
    assert vault_hash(vault) == before
    # the second write failed, nothing after it ran, and the first was undone (a CAS write)
    assert len(calls) == 3 and calls[2] == calls[0]


def test_move_checks_every_stamp_before_writing(vault, monkeypatch) -> None:
    real_plan = files.plan_move

    def plan_then_someone_edits(*args, **kwargs):
        edits = real_plan(*args, **kwargs)
        vault.store.write(ZHANG, read(vault, ZHANG) + "\nedited meanwhile\n")
        return edits

    monkeypatch.setattr(files, "plan_move", plan_then_someone_edits)
    with pytest.raises(StampChanged):
        move(vault, VEC, VEC_NEW)
    monkeypatch.undo()
    assert (vault.root / VEC).is_file() and "向量检索模块" in read(vault, ZHANG)
    assert VEC_NEW not in read(vault, HYBRID) and VEC_NEW not in read(vault, DAILY)


@pytest.mark.parametrize("src,dst,error", [
    ("knowledge/nope/nope.md", "knowledge/x/x.md", NoteNotFound),
    (BM25, HYBRID, NoteExists),
    (BM25, BM25, InvalidArgument),
    (BM25, "../outside.md", Exception),
])
def test_bad_moves_leave_the_vault_byte_identical(vault, src, dst, error) -> None:
    before = vault_hash(vault)
    with pytest.raises(error):
        move(vault, src, dst)
    assert vault_hash(vault) == before


# -- copy / delete ------------------------------------------------------------------------
def test_copy_duplicates_bytes_and_refuses_existing(vault) -> None:
    copy(vault, "resource/paper.pdf", "resource/paper-copy.pdf")
    assert (vault.root / "resource/paper-copy.pdf").read_bytes() == BINARY["resource/paper.pdf"]
    with pytest.raises(NoteExists):
        copy(vault, BM25, HYBRID)


def test_delete_reports_the_links_it_leaves_dangling(vault) -> None:
    got = delete(vault, BM25)
    assert not (vault.root / BM25).exists()
    left = {(d["source"], d["target"]) for d in got["dangling"]}
    assert left == {(HYBRID, "bm25"), (HYBRID, BM25), (DAILY, BM25)}
    assert all(d["now_resolves_to"] is None for d in got["dangling"])
    assert "3 link(s) now dangling" in got.text


def test_delete_with_stale_stamp_or_missing_file_changes_nothing(vault) -> None:
    before = vault_hash(vault)
    with pytest.raises(StampChanged):
        delete(vault, BM25, stamp="0" * 64)
    with pytest.raises(NoteNotFound):
        delete(vault, "knowledge/nope.md")
    assert vault_hash(vault) == before


def test_file_ops_through_the_toolkit(vault) -> None:
    tk = build_toolkit(vault)
    state, text = call_toolkit(tk, "copy", src=BM25, dst="knowledge/bm25-copy/bm25-copy.md")
    assert state == "success" and text.startswith("Copied")
    state, text = call_toolkit(tk, "move", src="knowledge/bm25-copy/bm25-copy.md",
                               dst="knowledge/bm25-2/bm25-2.md")
    assert state == "success" and text.startswith("Moved")
    state, text = call_toolkit(tk, "delete", path="knowledge/bm25-2/bm25-2.md")
    assert state == "success" and "0 link(s) now dangling" in text
    state, text = call_toolkit(tk, "upload", local_path="/etc/hostname")
    assert state == "error" and "upload_dirs" in text


# -- upload / download --------------------------------------------------------------------
def test_upload_copies_an_allowed_file_into_resource(io_vault) -> None:
    vault, inbox, _ = io_vault
    (inbox / "scan.png").write_bytes(b"\x89PNG\x00data")
    got = upload(vault, str(inbox / "scan.png"))
    assert got["path"] == "resource/scan.png"
    assert (vault.root / "resource/scan.png").read_bytes() == b"\x89PNG\x00data"
    (inbox / "notes.md").write_text("# Notes\n\nuploaded text\n")
    assert upload(vault, str(inbox / "notes.md"), dest="resource/docs/notes.md")["path"] == \
        "resource/docs/notes.md"
    with pytest.raises(NoteExists):
        upload(vault, str(inbox / "scan.png"))


def test_upload_refuses_anything_outside_the_allowed_folders(io_vault, tmp_path) -> None:
    vault, inbox, _ = io_vault
    secret = tmp_path / "secret.txt"
    secret.write_text("secret")
    (inbox / "sneaky.txt").symlink_to(secret)
    (inbox / "ok.txt").write_text("ok")
    before = vault_hash(vault)
    for path, dest in [(str(secret), None), (str(inbox / "sneaky.txt"), None),
                       (str(inbox / ".." / "secret.txt"), None),
                       (str(inbox / "ok.txt"), "knowledge/ok.txt"),
                       (str(inbox / "missing.txt"), None)]:
        with pytest.raises(InvalidArgument):
            upload(vault, path, dest=dest)
    assert vault_hash(vault) == before


def test_download_writes_only_into_allowed_folders(io_vault, tmp_path) -> None:
    vault, _, outbox = io_vault
    got = download(vault, BM25, str(outbox / "sub" / "bm25.md"))
    assert (outbox / "sub" / "bm25.md").read_bytes() == (vault.root / BM25).read_bytes()
    assert got["bytes"] == (vault.root / BM25).stat().st_size
    with pytest.raises(InvalidArgument, match="already exists"):
        download(vault, BM25, str(outbox / "sub" / "bm25.md"))
    download(vault, HYBRID, str(outbox / "sub" / "bm25.md"), overwrite=True)
    for bad in [tmp_path / "elsewhere.md", outbox / ".." / "escape.md"]:
        with pytest.raises(InvalidArgument, match="outside the allowed"):
            download(vault, BM25, str(bad))
        assert not bad.exists()


def test_uploads_and_downloads_are_off_by_default(vault, tmp_path) -> None:
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(InvalidArgument, match="disabled"):
        upload(vault, str(tmp_path / "f.txt"))
    with pytest.raises(InvalidArgument, match="disabled"):
        download(vault, BM25, str(tmp_path / "out.md"))
