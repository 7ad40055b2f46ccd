"""`read` pages a huge note (BUG-8), and every tool refuses text that is not UTF-8 (BUG-7)."""

from __future__ import annotations

import pytest

from reme_agent.errors import InvalidArgument
from reme_agent.toolkit import notes
from reme_agent.toolkit.notes import property_update, read_note, write_note

BIG = "knowledge/big/big.md"


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(notes, "READ_MAX_CHARS", 100)
    return 100


def test_a_long_note_is_read_in_pages_that_cover_it_exactly(vault, small_pages) -> None:
    lines = [f"line {i:03d} " + "x" * 10 for i in range(1, 41)]  # 19 chars each
    vault.store.write(BIG, "\n".join(lines) + "\n")
    got, start = [], None
    while True:
        page = read_note(vault, BIG, start_line=start)
        assert len(page["text"]) <= small_pages and page["total_lines"] == 40
        got += page["text"].split("\n")
        if not page.get("truncated"):
            break
        assert page["next_start_line"] == page["end_line"] + 1
        assert f"pass start_line={page['next_start_line']} to read on" in page.text
        start = page["next_start_line"]
    assert got == lines


def test_a_line_range_over_the_cap_is_truncated_too(vault, small_pages) -> None:
    vault.store.write(BIG, "\n".join("y" * 30 for _ in range(10)) + "\n")
    page = read_note(vault, BIG, start_line=2, end_line=9)
    assert (page["start_line"], page["end_line"], page["next_start_line"]) == (2, 4, 5)
    assert page["truncated"] and "note is 0.0 MB" in page.text


def test_one_line_longer_than_the_cap_is_cut_and_says_so(vault, small_pages) -> None:
    vault.store.write(BIG, "z" * 500 + "\nshort\n")
    page = read_note(vault, BIG)
    assert page["text"] == "z" * 100 and page["next_start_line"] == 2
    assert "line 1 cut at 100 characters" in page.text
    assert read_note(vault, BIG, start_line=2)["text"] == "short"


def test_a_normal_note_reads_whole_without_paging_fields(vault) -> None:
    page = read_note(vault, "knowledge/bm25/bm25.md")
    assert "truncated" not in page and "next_start_line" not in page


@pytest.mark.parametrize("call", [
    lambda v: write_note(v, "knowledge/s/s.md", body="ok", frontmatter={"k\ud800": 1}),
    lambda v: property_update(v, "knowledge/bm25/bm25.md", properties={"k": ["a", "\udcff"]}),
])
def test_lone_surrogates_anywhere_in_an_argument_are_refused_by_name(vault, call) -> None:
    with pytest.raises(InvalidArgument, match="Argument '(frontmatter|properties)'.*surrogate"):
        call(vault)
    assert not (vault.root / "knowledge/s/s.md").exists()
