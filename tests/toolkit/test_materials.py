"""daily_attach: sibling materials beside a daily note, linked from it, written once, all or
nothing (DESIGN §2 "+ sibling materials", §5)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reme_agent.config import Settings
from reme_agent.errors import InvalidArgument, ReMeError
from reme_agent.schema.sections import add_line
from reme_agent.toolkit.daily import daily_list, daily_read, daily_status, daily_write
from reme_agent.toolkit.lint import lint_dangling, lint_schema
from reme_agent.toolkit.materials import daily_attach
from reme_agent.toolkit.notes import property_read
from tests.toolkit.conftest import clone, vault_hash

DAY = "2026-11-28"
TUNING = f"daily/{DAY}/search-tuning/search-tuning.md"
FOLDER = f"daily/{DAY}/search-tuning"
CODE = "\n".join(f"score_{i} = bm25(q, d{i})" for i in range(40)) + "\n"


def attach(vault, name: str = "scoring", content: str = CODE, **kwargs):
    return daily_attach(vault, "search-tuning", name, content, date=DAY, **kwargs)


def text(vault, path: str) -> str:
    return (vault.root / path).read_text(encoding="utf-8")


def resolves(vault, source: str, path: str) -> bool:
    """Some link of `source` leads to `path` (the resolver as the graph sees it now)."""
    view = vault.view()
    return any(view.resolve(link, source) == path for link in view.notes[source].links)


def test_a_code_material_is_a_frozen_note_linked_under_materials(vault) -> None:
    got = attach(vault, description="Scores of the\nblend run", language="python",
                 origin_session_id="s-7")

    path = f"{FOLDER}/scoring.md"
    assert got["path"] == path and got["note"] == TUNING and got["created"] and got["linked"]
    props = property_read(vault, path)["properties"]
    assert {k: props.get(k) for k in ("lifecycle", "scope", "source", "role", "status",
                                      "originSessionId", "description")} == {
        "lifecycle": "frozen", "scope": "instance", "source": "auto", "role": "reference",
        "status": None, "originSessionId": "s-7", "description": "Scores of the blend run"}
    assert text(vault, path).split("---\n", 2)[2] == f"```python\n{CODE}```\n"
    summary = text(vault, TUNING)
    assert summary.endswith("## Materials\n- [[scoring]] — Scores of the blend run\n")
    assert "The blend beat RRF." in summary  # the rest of the note is kept
    assert resolves(vault, TUNING, path)
    assert lint_dangling(vault)["count"] == 0
    assert lint_schema(vault, "daily")["count"] == 0
    assert [m["path"] for m in daily_read(vault, FOLDER)["materials"]] == [
        path, f"{FOLDER}/transcript.txt"]


def test_a_text_attachment_is_stored_as_given_and_its_link_resolves(vault) -> None:
    log = "12:00 start\n12:01 FAILED test_blend\n"
    got = attach(vault, "pytest.log", log)

    assert got["kind"] == "attachment" and (vault.root / FOLDER / "pytest.log").read_bytes() \
        == log.encode()
    assert "- [[pytest.log]]" in text(vault, TUNING)
    assert resolves(vault, TUNING, f"{FOLDER}/pytest.log")


def test_the_link_goes_into_an_existing_materials_section(vault) -> None:
    daily_write(vault, "search-tuning", "## Materials\n- evals/blend.json\n\n## Next\n- ship\n",
                date=DAY)
    attach(vault)

    body = text(vault, TUNING).split("---\n", 2)[2]
    assert "## Materials\n- evals/blend.json\n- [[scoring]]\n\n## Next\n- ship\n" in body


def test_attaching_the_same_content_again_changes_nothing(vault) -> None:
    attach(vault, language="python")
    before = vault_hash(vault)

    again = attach(vault, language="python")
    assert not again["created"] and not again["linked"]
    assert "already holds this content" in again.text
    assert vault_hash(vault) == before and text(vault, TUNING).count("[[scoring]]") == 1


def test_other_content_under_an_existing_name_is_refused(vault) -> None:
    attach(vault)
    before = vault_hash(vault)
    with pytest.raises(InvalidArgument, match="already exists with other content") as err:
        attach(vault, content="something else\n")
    assert "scoring-2" in err.value.hint and vault_hash(vault) == before


def test_oversize_content_is_refused_and_nothing_is_written(tmp_path: Path, templates) -> None:
    settings = Settings(embedder={"name": "hash"}, index={"progress": False,
                                                          "max_file_bytes": 1000})
    vault = clone(templates["clean"], tmp_path / "small", settings)
    try:
        before = vault_hash(vault)
        with pytest.raises(InvalidArgument, match=r"the limit is 1000 \(index.max_file_bytes"):
            attach(vault, content="x" * 2000)
        assert vault_hash(vault) == before
        assert attach(vault, content="x" * 500)["created"]  # under the limit: stored
    finally:
        vault.close()


@pytest.mark.parametrize("name", ["..", "../escape", "notes/inner", "sub\\inner", ".env",
                                  "bad\x07name", "line\nbreak", "a#b", "chart.png",
                                  "search-tuning", "search-tuning.md", "   "])
def test_names_that_are_not_one_safe_file_name_are_refused(vault, name: str) -> None:
    before = vault_hash(vault)
    with pytest.raises(InvalidArgument, match="Refused|is empty") as err:
        attach(vault, name)
    assert not any(c in str(err.value) for c in "\n\x07")  # shown escaped, never raw
    assert vault_hash(vault) == before


def test_names_that_are_not_a_text_type_become_notes(vault) -> None:
    got = attach(vault, "migrate.sql", "ALTER TABLE t ADD c int;\n", language="sql")
    assert got["path"] == f"{FOLDER}/migrate.sql.md" and got["kind"] == "note"
    assert "- [[migrate.sql]]" in text(vault, TUNING)
    assert resolves(vault, TUNING, f"{FOLDER}/migrate.sql.md")
    with pytest.raises(InvalidArgument, match="`language` is for notes"):
        attach(vault, "out.txt", "x\n", language="text")


def test_a_missing_or_distilled_daily_note_takes_no_material(vault) -> None:
    before = vault_hash(vault)
    with pytest.raises(InvalidArgument, match="daily_write"):
        daily_attach(vault, "nope", "x", "y", date=DAY)
    with pytest.raises(InvalidArgument, match="distilled"):
        daily_attach(vault, "refactor", "x", "y", date="2026-11-29")
    assert vault_hash(vault) == before  # the material was not created either


def test_a_new_name_that_makes_links_ambiguous_rewrites_them_with_the_create(vault) -> None:
    hybrid = "knowledge/hybrid-search/hybrid-search.md"
    assert "([[bm25]])" in text(vault, hybrid)
    got = attach(vault, "bm25", "BM25 run log\n")

    path = f"{FOLDER}/bm25.md"
    assert "([[knowledge/bm25/bm25|bm25]])" in text(vault, hybrid)  # still the knowledge note
    assert f"- [[{path[:-3]}]]" in text(vault, TUNING) and got["created"]
    assert resolves(vault, TUNING, path) and lint_dangling(vault)["count"] == 0


def test_materials_are_not_daily_notes(vault) -> None:
    attach(vault, language="python")
    attach(vault, "pytest.log", "ok\n")

    assert [n["path"] for n in daily_list(vault, start=DAY, end=DAY)["notes"]] == [TUNING]
    for path in (f"{FOLDER}/scoring.md", f"{FOLDER}/pytest.log"):
        with pytest.raises(InvalidArgument, match="not a daily note"):
            daily_read(vault, path)
        with pytest.raises(InvalidArgument):
            daily_status(vault, path, "distilled")


# -- Obsidian day notes -----------------------------------------------------------------------
def test_with_day_notes_materials_go_beside_the_day_note_and_link_from_its_section(
        make_vault) -> None:
    vault = make_vault({"daily/2026-11-30.md": "# Monday\n\nCoffee.\n"})
    daily_write(vault, "search-tuning", "## Progress\n- ran the blend\n", date="2026-11-30")
    daily_write(vault, "other-task", "## Progress\n- later\n", date="2026-11-30")

    got = daily_attach(vault, "search-tuning", "scoring", CODE, date="2026-11-30")
    path = "daily/2026-11-30/search-tuning/scoring.md"
    assert got["path"] == path and got["note"] == "daily/2026-11-30.md"
    body = text(vault, "daily/2026-11-30.md")
    assert "# search-tuning\n\n## Progress\n- ran the blend\n\n## Materials\n- [[scoring]]\n\n" \
           "# other-task" in body
    assert resolves(vault, "daily/2026-11-30.md", path)
    assert [m["path"] for m in daily_read(vault, "daily/2026-11-30.md")["materials"]] == [path]
    assert [n["path"] for n in daily_list(vault)["notes"]] == ["daily/2026-11-30.md"]
    with pytest.raises(InvalidArgument, match="no '# third' section"):
        daily_attach(vault, "third", "x", "y", date="2026-11-30")


def test_every_refusal_is_a_reme_error_the_faces_can_show(vault) -> None:
    with pytest.raises(ReMeError):
        attach(vault, content="   ")
    with pytest.raises(ReMeError):
        daily_attach(vault, "Bad Slug", "x", "y", date=DAY)


def test_add_line_skips_headings_in_code_and_ends_the_section_at_the_next_heading() -> None:
    body = "# T\n\n```\n## Materials\n```\n\n## Materials\n- a\n\n# other\n"
    assert add_line(body, "materials", "- b") == \
        "# T\n\n```\n## Materials\n```\n\n## Materials\n- a\n- b\n\n# other\n"
    assert add_line("# T\n", "materials", "- b") == "# T\n\n## Materials\n- b\n"
    assert add_line("# T\n\n## 材料\n- a\n\n## Next\n", "materials", "- b") == \
        "# T\n\n## 材料\n- a\n- b\n\n## Next\n"
