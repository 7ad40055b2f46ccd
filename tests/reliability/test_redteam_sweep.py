"""Red-team sweep (2026-12-02): a real user's vault and a hostile caller, through the tools.

Each test is one failure the sweep found (docs/decisions.md, "Red-team sweep"), checked on
real files through the public tools; each failed on the code before its fix.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reme_agent.engine.parser import split_note
from reme_agent.errors import ReMeError
from reme_agent.toolkit.registry import BY_NAME
from reme_agent.vault import Vault
from tests.reliability.conftest import make_vault


def run(vault: Vault, tool: str, **args: object) -> dict:
    return BY_NAME[tool].fn(vault, **args)


def stamp_of(vault: Vault, path: str) -> str:
    return run(vault, "read", path=path)["stamp"]


# -- a note that is only frontmatter, with no newline after the closing `---` -------------
ONLY_FM = {"only.md": "---\ntitle: Only\ntags: [a]\n---",
           "only-crlf.md": "---\r\ntitle: Only\r\ntags: [a]\r\n---"}


@pytest.mark.parametrize("path", sorted(ONLY_FM))
def test_a_body_written_under_frontmatter_without_a_final_newline_keeps_the_properties(
        tmp_path: Path, path: str) -> None:
    vault = make_vault(tmp_path / "v", ONLY_FM)
    run(vault, "write", path=path, body="New body.\n", overwrite=True,
        stamp=stamp_of(vault, path))
    data = (vault.root / path).read_bytes()
    eol = b"\r\n" if b"\r\n" in ONLY_FM[path].encode() else b"\n"
    assert data == ONLY_FM[path].encode() + eol + b"New body." + eol
    assert split_note(data.decode()).frontmatter == {"title": "Only", "tags": ["a"]}
    vault.close()


def test_a_property_added_to_such_a_note_goes_after_the_last_key(tmp_path: Path) -> None:
    vault = make_vault(tmp_path / "v", ONLY_FM)
    run(vault, "property_update", path="only.md", properties={"importance": 7})
    assert (vault.root / "only.md").read_text() == \
        "---\ntitle: Only\ntags: [a]\nimportance: 7\n---"
    vault.close()


def test_daily_write_on_a_day_note_made_from_a_template_without_a_final_newline(
        tmp_path: Path) -> None:
    vault = make_vault(tmp_path / "v", {"daily/2026-12-01.md": "---\ntags: [daily]\n---"})
    run(vault, "daily_write", slug="standup", body="Talked about BM25.", date="2026-12-01")
    text = (vault.root / "daily/2026-12-01.md").read_text()
    parts = split_note(text)
    assert parts.error is None and parts.frontmatter["tags"] == ["daily"]
    assert "Talked about BM25." in parts.body and text.startswith("---\ntags: [daily]\n")
    vault.close()


# -- a UTF-8 byte-order mark (Windows editors write one) ----------------------------------
BOM = "\ufeff"
BOM_NOTES = {
    "knowledge/bm25/bm25.md": "# BM25\n",
    "bom.md": BOM + "---\ntitle: Bom\n---\n# Bom\n\nSee [[bm25]].\n",
}


def test_every_rewrite_keeps_the_byte_order_mark(tmp_path: Path) -> None:
    vault = make_vault(tmp_path / "v", BOM_NOTES)
    path = vault.root / "bom.md"
    run(vault, "property_update", path="bom.md", properties={"importance": 7})
    assert path.read_text(encoding="utf-8") == \
        BOM + "---\ntitle: Bom\nimportance: 7\n---\n# Bom\n\nSee [[bm25]].\n"
    run(vault, "write", path="bom.md", body="See [[bm25]] again.\n", overwrite=True,
        stamp=stamp_of(vault, "bom.md"))
    assert path.read_text(encoding="utf-8") == \
        BOM + "---\ntitle: Bom\nimportance: 7\n---\nSee [[bm25]] again.\n"
    run(vault, "move", src="knowledge/bm25/bm25.md", dst="knowledge/okapi.md")  # a transaction
    assert path.read_text(encoding="utf-8") == \
        BOM + "---\ntitle: Bom\nimportance: 7\n---\nSee [[okapi]] again.\n"
    vault.close()


# -- a note far over index.max_file_bytes -------------------------------------------------
def test_a_note_the_indexer_skips_as_too_big_is_not_parsed_by_every_tool(tmp_path: Path) -> None:
    """With a 5 MB limit a 6 MB note full of links is skipped by the indexer; `stat`,
    `list`, `move` and the lints used to parse it (and resolve its ~230k links) each time."""
    from reme_agent.config import Settings

    settings = Settings(embedder={"name": "hash"}, index={"progress": False,
                                                          "max_file_bytes": 5_000_000})
    huge = "# Huge\n\n" + "see [[bm25]] and [[nowhere]] here\n" * 180_000
    assert len(huge) > 6_000_000
    vault = make_vault(tmp_path / "v", {"knowledge/bm25/bm25.md": "# BM25\n", "huge.md": huge},
                       settings=settings)
    view = vault.view()
    assert view.notes["huge.md"].links == [] and "max_file_bytes" in view.notes["huge.md"].error
    assert view.inbound("knowledge/bm25/bm25.md") == []
    assert "huge.md" not in {x["source"] for x in run(vault, "lint_dangling")["items"]}
    listed = {f["path"]: f for f in run(vault, "list")["files"]}
    assert listed["huge.md"]["title"] == "huge"
    vault.close()


# -- a date typo in one property ----------------------------------------------------------
def test_an_impossible_date_is_text_and_the_other_properties_stay_readable(
        tmp_path: Path) -> None:
    note = ("---\ntitle: Trip\ncreated: 2024-01-05\ndue: 2024-13-45\nalso: 2024-02-30\n"
            "tags: [travel]\n---\n# Trip\n")
    vault = make_vault(tmp_path / "v", {"trip.md": note})
    props = run(vault, "property_read", path="trip.md")["properties"]
    assert props == {"title": "Trip", "created": "2024-01-05", "due": "2024-13-45",
                     "also": "2024-02-30", "tags": ["travel"]}
    run(vault, "property_update", path="trip.md", properties={"importance": 7})
    assert (vault.root / "trip.md").read_text() == note.replace(
        "tags: [travel]\n", "tags: [travel]\nimportance: 7\n")
    assert run(vault, "tags_list")["tags"][0]["tag"] == "travel"
    vault.close()


# -- names a person cannot tell apart -----------------------------------------------------
NFC_CAFE = "knowledge/Caf\u00e9.md"
NFD_CAFE = "knowledge/Cafe\u0301.md"
NAMES = {NFC_CAFE: "# Café\n", "knowledge/bm25/bm25.md": "# BM25\n\nSee [[Café]].\n"}


@pytest.mark.parametrize("path", [NFD_CAFE, "knowledge/café.md", "KNOWLEDGE/bm25/bm25.md",
                                  "Knowledge/new-note.md"])
def test_a_new_name_differing_only_in_case_or_normalisation_is_refused(
        tmp_path: Path, path: str) -> None:
    vault = make_vault(tmp_path / "v", NAMES)
    before = sorted(p.relative_to(vault.root) for p in vault.root.rglob("*.md")
                    if ".reme" not in p.parts)
    for tool, args in (("write", {"path": path, "body": "x\n"}),
                       ("copy", {"src": "knowledge/bm25/bm25.md", "dst": path}),
                       ("move", {"src": "knowledge/bm25/bm25.md", "dst": path})):
        with pytest.raises(ReMeError, match="looks the same as the existing"):
            run(vault, tool, **args)
    after = sorted(p.relative_to(vault.root) for p in vault.root.rglob("*.md")
                   if ".reme" not in p.parts)
    assert after == before
    assert (vault.root / "knowledge/bm25/bm25.md").read_text() == NAMES["knowledge/bm25/bm25.md"]
    vault.close()


def test_a_case_only_rename_of_the_note_itself_is_allowed(tmp_path: Path) -> None:
    vault = make_vault(tmp_path / "v", NAMES)
    run(vault, "move", src=NFC_CAFE, dst="knowledge/café.md")
    assert (vault.root / "knowledge/café.md").is_file()
    vault.close()


@pytest.mark.parametrize("name", ["x\u202egnp.md", "a\u200bb.md", "a\u2028b.md", "con.md",
                                  "a*b.md", 'a"b.md', "a<b>.md", "a?.md", "dir./x.md",
                                  "dir /x.md", "LPT1.notes.md"])
def test_new_names_must_be_visible_and_portable(tmp_path: Path, name: str) -> None:
    vault = make_vault(tmp_path / "v", NAMES)
    with pytest.raises(ReMeError, match="Refused write"):
        run(vault, "write", path=name, body="x\n")
    assert not list((vault.root).glob(name.split("/")[0] + "*"))
    vault.close()


def test_properties_are_not_added_above_a_frontmatter_block_that_is_never_closed(
        tmp_path: Path) -> None:
    note = "---\ntitle: Draft\ntags: [x]\n# Draft\n\nText.\n"
    vault = make_vault(tmp_path / "v", {"draft.md": note})
    with pytest.raises(ReMeError, match="no line closes the frontmatter"):
        run(vault, "property_update", path="draft.md", properties={"importance": 7})
    assert (vault.root / "draft.md").read_text() == note
    vault.close()


@pytest.mark.parametrize("timeframe", ["99999999d", "9999999999999999999999d", "99999999999w"])
def test_a_timeframe_older_than_any_date_means_everything(tmp_path: Path, timeframe: str) -> None:
    vault = make_vault(tmp_path / "v", {"a.md": "# A\n"})
    assert [n["path"] for n in run(vault, "recent", timeframe=timeframe)["notes"]] == ["a.md"]
    vault.close()


# -- a symlinked folder inside the vault --------------------------------------------------
def test_a_symlinked_folder_inside_the_vault_is_indexed_once_and_not_written_through(
        tmp_path: Path) -> None:
    notes = {"knowledge/bm25/bm25.md": "# BM25\n\nScores blocks.\n", "a.md": "# A\n\n[[bm25]]\n"}
    vault = make_vault(tmp_path / "v", notes, index=False)
    (vault.root / "knowledge/alias").symlink_to(vault.root / "knowledge/bm25",
                                               target_is_directory=True)
    vault.index()
    assert sorted(vault.index_rows()) == ["a.md", "knowledge/bm25/bm25.md"]
    stamp = stamp_of(vault, "knowledge/bm25/bm25.md")
    with pytest.raises(ReMeError, match="goes through a symlink"):
        run(vault, "write", path="knowledge/alias/bm25.md", body="Changed.\n", overwrite=True,
            stamp=stamp)
    for tool, args in (("delete", {"path": "knowledge/alias/bm25.md"}),
                       ("write", {"path": "knowledge/alias/new.md", "body": "x\n"}),
                       ("move", {"src": "a.md", "dst": "knowledge/alias/a.md"})):
        with pytest.raises(ReMeError, match="goes through a symlink"):
            run(vault, tool, **args)
    assert {p.name for p in (vault.root / "knowledge/bm25").iterdir()} == {"bm25.md"}
    assert (vault.root / "knowledge/bm25/bm25.md").read_text() == notes["knowledge/bm25/bm25.md"]
    vault.close()


@pytest.mark.parametrize("path", ["k.md/x.md", "k.md/sub/x.md"])
def test_a_path_under_a_file_is_a_clear_refusal(tmp_path: Path, path: str) -> None:
    vault = make_vault(tmp_path / "v", {"k.md": "# K\n"})
    for tool, args in (("write", {"path": path, "body": "x\n"}),
                       ("copy", {"src": "k.md", "dst": path}),
                       ("move", {"src": "k.md", "dst": path})):
        with pytest.raises(ReMeError, match="'k.md' is a file, not a folder"):
            run(vault, tool, **args)
    assert (vault.root / "k.md").read_text() == "# K\n"
    vault.close()


@pytest.mark.parametrize("value", [float("nan"), float("inf"), [1, float("-inf")]])
def test_a_nan_property_is_refused_for_what_it_is(tmp_path: Path, value: object) -> None:
    vault = make_vault(tmp_path / "v", {"n.md": "---\ntitle: N\n---\n# N\n"})
    with pytest.raises(ReMeError, match="NaN or an infinity"):
        run(vault, "property_update", path="n.md", properties={"score": value})
    assert (vault.root / "n.md").read_text() == "---\ntitle: N\n---\n# N\n"
    vault.close()


# -- a write back of a partial read --------------------------------------------------------
def test_a_page_of_a_read_cannot_be_written_back_as_the_whole_note(tmp_path: Path) -> None:
    """A model reads lines 5-6 (or the first page of a long note) and writes "the note"
    back with the stamp it got: every line it did not read was gone (E-1 passed: the same
    [[links]] were in the page)."""
    note = "---\ntitle: Long\n---\n# Long\n" + "".join(f"line {i} [[x]]\n" for i in range(40))
    vault = make_vault(tmp_path / "v", {"long.md": note, "other.md": "# O\n\n[[x]]\n"})
    page = run(vault, "read", path="long.md", start_line=5, end_line=6)
    with pytest.raises(ReMeError, match="partial read"):
        run(vault, "write", path="long.md", body=page["text"] + "added\n", overwrite=True,
            stamp=page["stamp"])
    with pytest.raises(ReMeError, match="partial read"):
        run(vault, "copy", src="other.md", dst="long.md", overwrite=True, stamp=page["stamp"])
    assert (vault.root / "long.md").read_text() == note
    # edits that keep the unseen lines still take the page's stamp
    run(vault, "property_update", path="long.md", properties={"importance": 7},
        stamp=page["stamp"])
    whole = run(vault, "read", path="long.md")
    assert not whole["stamp"].startswith("page-") and "line 39 [[x]]" in whole["text"]
    run(vault, "delete", path="long.md", stamp=run(vault, "read", path="long.md",
                                                   start_line=1, end_line=2)["stamp"])
    assert not (vault.root / "long.md").exists()
    vault.close()
