"""Read and write tools: list, read, stat, property_read, write, property_update/delete."""

from __future__ import annotations

import pytest

from reme_agent.errors import (
    ConservationViolation,
    InvalidArgument,
    NoteExists,
    NoteNotFound,
    NotText,
    PathEscape,
    StampChanged,
)
from reme_agent.toolkit import build_toolkit
from reme_agent.toolkit.notes import (
    list_notes,
    property_delete,
    property_read,
    property_update,
    read_note,
    stat_note,
    write_note,
)
from reme_agent.toolkit.retrieve import search
from tests.toolkit.conftest import call_toolkit, vault_hash

BM25 = "knowledge/bm25/bm25.md"
HYBRID = "knowledge/hybrid-search/hybrid-search.md"


# -- list ---------------------------------------------------------------------------------
def test_list_folder_recursive_and_glob(vault) -> None:
    got = list_notes(vault, "knowledge")
    assert got["count"] == 4 and got["files"][0] == {
        "path": BM25, "title": "BM25", "description": "Okapi BM25 keyword ranking."}
    assert list_notes(vault, "daily/2026-11-28", recursive=False)["count"] == 0
    txt = list_notes(vault, "daily", glob="*.txt")
    assert [f["path"] for f in txt["files"]] == ["daily/2026-11-28/search-tuning/transcript.txt"]


def test_list_where_filters_on_frontmatter(vault) -> None:
    def paths(**where):
        return [f["path"] for f in list_notes(vault, "", where=where)["files"]]

    assert paths(role="method") == [HYBRID]
    assert paths(tags="ranking") == [BM25]                       # membership in a list
    assert len(paths(tags=["search", "中文"])) == 1                 # all items in the list
    assert paths(role=["method", "profile"]) == [HYBRID, "knowledge/张三/张三.md"]  # one-of
    assert paths(status=None, lifecycle="streaming") == []        # null matches absent only
    assert paths(importance=None, scope="class") == [BM25, "knowledge/向量检索/向量检索.md"]
    assert paths(importance=8) == [HYBRID]


def test_list_limit_truncates_and_says_so(vault) -> None:
    got = list_notes(vault, "", limit=2)
    assert got["truncated"] and got["count"] > 2 and len(got["files"]) == 2
    assert "more" in got.text


def test_list_missing_folder_is_an_actionable_error(vault) -> None:
    with pytest.raises(InvalidArgument, match="No folder 'nope'.*Top folders are"):
        list_notes(vault, "nope")


# -- read / stat / property_read ----------------------------------------------------------
def test_read_whole_file_and_line_range_with_stamp(vault) -> None:
    whole = read_note(vault, BM25)
    assert whole["text"] == (vault.root / BM25).read_text(encoding="utf-8")
    assert whole["stamp"] == vault.store.stamp(BM25) and whole["stamp"] in whole.text
    part = read_note(vault, BM25, start_line=11, end_line=13)
    assert part["text"].splitlines()[0] == "# BM25" and part["end_line"] == 13
    assert read_note(vault, BM25, start_line=15, end_line=999)["end_line"] == part["total_lines"]


@pytest.mark.parametrize("start,end", [(0, None), (99, None), (5, 3)])
def test_read_refuses_bad_line_ranges(vault, start, end) -> None:
    with pytest.raises(InvalidArgument):
        read_note(vault, BM25, start_line=start, end_line=end)


def test_read_missing_file_suggests_close_paths(vault) -> None:
    with pytest.raises(NoteNotFound) as err:
        read_note(vault, "knowledge/bm25/bm52.md")
    assert BM25 in err.value.suggestions and "Did you mean" in str(err.value)


def test_read_refuses_escapes_and_binary(vault) -> None:
    with pytest.raises(PathEscape):
        read_note(vault, "../etc/passwd")
    with pytest.raises(NotText):
        read_note(vault, "resource/paper.pdf")


def test_stat_reports_size_stamp_frontmatter_and_link_counts(vault) -> None:
    st = stat_note(vault, BM25)
    assert st["size"] == (vault.root / BM25).stat().st_size
    assert st["stamp"] == vault.store.stamp(BM25) and st["frontmatter"]["role"] == "concept"
    # inbound: hybrid-search ([[bm25]] + uses::) and the daily note; outbound: part_of:: hybrid
    assert (st["links_in"], st["links_out"], st["links_out_dangling"]) == (3, 1, 0)


def test_property_read_all_or_some_keys(vault) -> None:
    assert property_read(vault, BM25)["properties"]["aliases"] == ["Okapi BM25"]
    got = property_read(vault, BM25, keys=["title", "confidence"])
    assert got["properties"] == {"title": "BM25"} and got["missing"] == ["confidence"]


# -- write --------------------------------------------------------------------------------
def test_write_creates_a_note_that_search_finds_at_once(vault) -> None:
    path = "knowledge/otters/otters.md"
    got = write_note(vault, path, body="# Otters\n\nSea otters hold hands while sleeping.",
                     frontmatter={"title": "Otters", "lifecycle": "evolving", "scope": "class",
                                  "source": "curated", "role": "concept"})
    text = (vault.root / path).read_text(encoding="utf-8")
    assert got["created"] and got["stamp"] == vault.store.stamp(path)
    assert text.startswith("---\ntitle: Otters\n") and text.endswith("sleeping.\n")
    assert search(vault, "otters sleeping hands", limit=3)["results"][0]["path"] == path


def test_write_refuses_an_existing_file_without_overwrite(vault) -> None:
    before = vault_hash(vault)
    with pytest.raises(NoteExists, match="overwrite=True"):
        write_note(vault, BM25, body="gone")
    assert vault_hash(vault) == before


def test_write_overwrite_with_stamp_and_stale_stamp(vault) -> None:
    stamp = read_note(vault, BM25)["stamp"]
    body = ("# BM25\n\nBM25 is a bag-of-words ranking function.\n\n"
            "part_of:: [[knowledge/hybrid-search/hybrid-search.md|hybrid search]]\n")
    got = write_note(vault, BM25, body=body, overwrite=True, stamp=stamp)
    text = (vault.root / BM25).read_text(encoding="utf-8")
    assert not got["created"] and text.endswith(body) and "aliases:\n- Okapi BM25" not in text
    assert "aliases: [Okapi BM25]" in text  # frontmatter kept byte for byte
    before = vault_hash(vault)
    with pytest.raises(StampChanged, match="Read it again"):
        write_note(vault, BM25, body=body + "more\n", overwrite=True, stamp=stamp)
    assert vault_hash(vault) == before


def test_write_refuses_dropping_existing_links(vault) -> None:
    before = vault_hash(vault)
    with pytest.raises(ConservationViolation) as err:
        write_note(vault, HYBRID, body="# Hybrid search\n\nRewritten without links.\n",
                   overwrite=True, stamp=vault.store.stamp(HYBRID))
    assert ("knowledge/bm25/bm25.md", "uses") in err.value.missing
    assert "uses:: [[knowledge/bm25/bm25.md]]" in str(err.value)
    assert vault_hash(vault) == before


def test_write_accepts_links_rewritten_to_full_paths(vault) -> None:
    old = (vault.root / HYBRID).read_text(encoding="utf-8")
    new = old.replace("([[bm25]])", "([[knowledge/bm25/bm25.md|bm25]])")
    write_note(vault, HYBRID, text=new, overwrite=True, stamp=vault.store.stamp(HYBRID))
    assert (vault.root / HYBRID).read_text(encoding="utf-8") == new


@pytest.mark.parametrize("kwargs,match", [
    ({"frontmatter": {"importance": 11}, "body": "x"}, "importance"),
    ({"frontmatter": {"role": "boss"}, "body": "x"}, "role: 'boss' is not one of"),
    ({"text": "---\ntitle: [unclosed\n---\nbody\n"}, "Malformed frontmatter"),
    ({"text": "x", "body": "y"}, "either"),
    ({}, "Nothing to write"),
])
def test_write_validates_input_and_writes_nothing(vault, kwargs, match) -> None:
    before = vault_hash(vault)
    with pytest.raises(InvalidArgument, match=match):
        write_note(vault, "knowledge/new/new.md", **kwargs)
    assert vault_hash(vault) == before


def test_write_refuses_meta_and_resource_overwrites(vault) -> None:
    with pytest.raises(InvalidArgument, match="meta/"):
        write_note(vault, "meta/communities.json", text="{}")
    with pytest.raises(InvalidArgument, match="immutable"):
        write_note(vault, "resource/paper.pdf", text="x", overwrite=True)


def test_write_refuses_a_status_jump(vault) -> None:
    path = "daily/2026-11-28/search-tuning/search-tuning.md"
    text = (vault.root / path).read_text(encoding="utf-8")
    with pytest.raises(InvalidArgument, match="skipping a step"):
        write_note(vault, path, text=text.replace("status: active", "status: archived"),
                   overwrite=True, stamp=vault.store.stamp(path))


# -- property_update / property_delete ----------------------------------------------------
def test_property_update_keeps_the_body_byte_for_byte(vault) -> None:
    raw = (vault.root / BM25).read_bytes()
    body = raw[raw.index(b"---\n# BM25") + 4:]
    got = property_update(vault, BM25, {"importance": 7, "tags": ["search", "ir"]})
    new = (vault.root / BM25).read_bytes()
    assert got["changed"] and new.endswith(body)
    assert property_read(vault, BM25)["properties"]["importance"] == 7


def test_property_update_keeps_a_crlf_body_exactly(vault) -> None:
    path = "knowledge/crlf/crlf.md"
    raw = b"---\r\ntitle: CRLF\r\n---\r\n# CRLF\r\n\r\nLine one.\r\nLine two.\r\n"
    vault.store.write_bytes(path, raw)
    property_update(vault, path, {"role": "concept"})
    assert (vault.root / path).read_bytes().endswith(b"# CRLF\r\n\r\nLine one.\r\nLine two.\r\n")


def test_property_update_on_a_note_without_frontmatter_adds_one(vault) -> None:
    vault.store.write("knowledge/plain/plain.md", "# Plain\n\nNo frontmatter.\n")
    property_update(vault, "knowledge/plain/plain.md", {"title": "Plain"})
    assert (vault.root / "knowledge/plain/plain.md").read_text(encoding="utf-8") == \
        "---\ntitle: Plain\n---\n# Plain\n\nNo frontmatter.\n"


def test_property_update_with_stale_stamp_or_bad_value_changes_nothing(vault) -> None:
    before = vault_hash(vault)
    with pytest.raises(StampChanged):
        property_update(vault, BM25, {"importance": 3}, stamp="0" * 64)
    with pytest.raises(InvalidArgument, match="importance"):
        property_update(vault, BM25, {"importance": "high"})
    with pytest.raises(InvalidArgument, match="moving back"):
        property_update(vault, "daily/2026-11-29/refactor/refactor.md", {"status": "active"})
    assert vault_hash(vault) == before


def test_property_update_without_change_does_not_write(vault) -> None:
    before = vault_hash(vault)
    assert not property_update(vault, BM25, {"title": "BM25"})["changed"]
    assert vault_hash(vault) == before


def test_property_delete_removes_keys_and_reports_absent_ones(vault) -> None:
    got = property_delete(vault, BM25, ["aliases", "confidence"])
    assert got["missing"] == ["confidence"] and "aliases" not in got["properties"]
    assert "aliases" not in (vault.root / BM25).read_text(encoding="utf-8")


# -- through the AgentScope Toolkit -------------------------------------------------------
def test_read_family_through_the_toolkit(vault) -> None:
    tk = build_toolkit(vault)
    state, text = call_toolkit(tk, "list", folder="knowledge", where={"role": "concept"})
    assert state == "success" and BM25 in text
    state, text = call_toolkit(tk, "read", path=BM25, start_line=1, end_line=3)
    assert state == "success" and text.startswith(f"[{BM25} | lines 1-3 of 15 | stamp ")
    state, text = call_toolkit(tk, "stat", path=BM25)
    assert state == "success" and "links_in: 3" in text
    state, text = call_toolkit(tk, "property_read", path=BM25, keys=["title"])
    assert state == "success" and "title: BM25" in text


def test_write_family_through_the_toolkit(vault) -> None:
    tk = build_toolkit(vault)
    state, text = call_toolkit(tk, "write", path="knowledge/x/x.md", body="# X\n",
                               frontmatter={"title": "X"})
    assert state == "success" and text.startswith("Created knowledge/x/x.md")
    state, text = call_toolkit(tk, "property_update", path="knowledge/x/x.md",
                               properties={"role": "concept"})
    assert state == "success" and text.startswith("Updated")
    state, text = call_toolkit(tk, "property_delete", path="knowledge/x/x.md", keys=["role"])
    assert state == "success"
    state, text = call_toolkit(tk, "write", path="knowledge/x/x.md", body="again")
    assert state == "error" and "already exists" in text


def test_wrong_types_from_the_model_are_refused_by_name(vault) -> None:
    tk = build_toolkit(vault)
    before = vault_hash(vault)
    state, text = call_toolkit(tk, "property_update", path=BM25, properties="importance=3")
    assert state == "error" and "'properties'" in text
    state, text = call_toolkit(tk, "read", path=BM25, start_line="first")
    assert state == "error" and "start_line" in text
    assert vault_hash(vault) == before


def test_an_overwrite_without_the_stamp_of_a_read_is_refused(vault) -> None:
    """G5: an agent can no longer overwrite blind; the refusal says how to do it right."""
    before = vault_hash(vault)
    with pytest.raises(InvalidArgument, match="without its stamp") as err:
        write_note(vault, BM25, body="blind\n", overwrite=True)
    assert "Read" in str(err.value) and "--force" in str(err.value)
    assert vault_hash(vault) == before
