"""Lint for a vault people keep in Obsidian: links only reme-agent resolves (and their fix),
strictness per folder, `lint --fix` and `lint --strict`, the sample vault lints clean."""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

import pytest

from reme_agent.cli import main
from reme_agent.config import Settings
from reme_agent.toolkit.lint import fix_alias_links, lint_alias_links, lint_dangling, lint_schema
from reme_agent.vault import open_vault
from tests.toolkit.conftest import SETTINGS, build

PEOPLE = {
    "people/王芳.md": "---\ntitle: Wang Fang (王芳)\naliases: [Wang Fang]\n---\n# 王芳\n\nPayments.\n",
    "notes/rate-limit.md": "---\ntitle: Rate limiting\n---\nCaps requests.\n",
    "knowledge/bm25/bm25.md": "---\ntitle: BM25\nlifecycle: evolving\nscope: class\n"
                              "source: curated\nrole: concept\n---\nRanking.\n",
    "notes/meeting.md": "# Meeting\n\nAsk [[Wang Fang]] about it.\n\n"
                        "| who | topic |\n|---|---|\n| [[Wang Fang]] | [[rate limiting#Why]] |\n\n"
                        "owner:: [[Wang Fang|Fang]] uses [[knowledge/bm25]] and [[王芳]].\n",
}


@pytest.fixture
def people(make_vault):
    return make_vault(PEOPLE)


def test_links_resolved_only_through_an_alias_title_or_folder_note_are_reported(people) -> None:
    items = lint_alias_links(people)["items"]
    got = [(i["line"], i["target"], i["via"], i["fix"]) for i in items]
    assert got == [
        (3, "Wang Fang", "alias", "[[王芳|Wang Fang]]"),
        (7, "Wang Fang", "alias", "[[王芳|Wang Fang]]"),
        (7, "rate limiting", "title", "[[rate-limit|rate limiting]]"),
        (9, "Wang Fang", "alias", "[[王芳|Fang]]"),
        (9, "knowledge/bm25", "folder_note", "[[bm25|knowledge/bm25]]"),
    ]
    assert lint_dangling(people)["count"] == 0  # they do resolve here


def test_lint_fix_rewrites_them_keeping_shown_text_anchor_predicate_and_table(people) -> None:
    before_edges = sorted(map(str, people.graph.outbound("notes/meeting.md")))
    got = fix_alias_links(people)
    assert got["count"] == 5 and got["files"] == [{"path": "notes/meeting.md", "links": 5}]
    text = (people.root / "notes/meeting.md").read_text(encoding="utf-8")
    assert text == ("# Meeting\n\nAsk [[王芳|Wang Fang]] about it.\n\n"
                    "| who | topic |\n|---|---|\n"
                    "| [[王芳\\|Wang Fang]] | [[rate-limit#Why\\|rate limiting]] |\n\n"
                    "owner:: [[王芳|Fang]] uses [[bm25|knowledge/bm25]] and [[王芳]].\n")
    assert lint_alias_links(people)["count"] == 0
    assert sorted(map(str, people.graph.outbound("notes/meeting.md"))) == before_edges
    again = fix_alias_links(people)
    assert again["count"] == 0  # idempotent


def test_a_hand_kept_vault_is_not_flooded_but_job_notes_stay_strict(tmp_path: Path) -> None:
    notes = {f"notes/n{i}.md": f"---\ntitle: N{i}\ntags: [x]\n---\nText.\n" for i in range(5)}
    notes["knowledge/Circuit breaker.md"] = "# Circuit breaker\n\nHand kept.\n"
    notes["knowledge/cb/cb.md"] = "---\ntitle: CB\n---\nWritten by a job.\n"
    notes["notes/bad.md"] = "---\nrole: person\n---\nA bad enum value.\n"
    vault = build(tmp_path / "v", notes)
    try:
        items = {i["path"]: i["errors"] for i in lint_schema(vault)["items"]}
        assert set(items) == {"knowledge/cb/cb.md", "notes/bad.md"}
        assert len([e for e in items["knowledge/cb/cb.md"] if "missing required" in e]) == 4
        assert items["notes/bad.md"] == [
            "role: 'person' is not one of observation, claim, question, profile, concept, "
            "method, reference, fundamentals"]
    finally:
        vault.close()
    strict = Settings(embedder={"name": "hash"}, index={"progress": False},
                      lint={"strictness": {"": "strict", "notes/": "off"}})
    with open_vault(tmp_path / "v", strict) as vault:
        assert {i["path"] for i in lint_schema(vault)["items"]} == {
            "knowledge/Circuit breaker.md", "knowledge/cb/cb.md"}


def _copy_sample(dest: Path) -> Path:
    src = resources.files("reme_agent") / "sample_vault"
    with resources.as_file(src) as path:
        shutil.copytree(path, dest)
    return dest


def test_the_shipped_sample_vault_lints_clean(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("REME_EMBEDDER__NAME", "hash")
    root = _copy_sample(tmp_path / "sample")
    assert main(["lint", "--strict", "--vault", str(root)]) == 0


def test_lint_strict_exits_1_when_anything_is_reported_and_fix_repairs(people, monkeypatch,
                                                                      capsys) -> None:
    monkeypatch.setenv("REME_EMBEDDER__NAME", "hash")
    root = str(people.root)
    people.close()
    assert main(["lint", "--strict", "--vault", root]) == 1
    assert "links obsidian does not resolve (5)" in capsys.readouterr().out.lower()
    assert main(["lint", "--fix", "--strict", "--vault", root]) == 0
    out = capsys.readouterr().out
    assert "Fixed 5 link(s) in 1 file(s)" in out


def test_settings_reach_the_lint(tmp_path: Path) -> None:
    assert SETTINGS.lint.strictness[""] == "relaxed"


def test_orphans_count_embeds_markdown_links_and_property_links(tmp_path: Path) -> None:
    from reme_agent.toolkit.lint import lint_orphans

    notes = {
        "alone.md": "# Alone\n",
        "md-source.md": "See [the target](notes/md%20target.md).\n",
        "notes/md target.md": "# Target\n",
        "embedder.md": "![[embedded]]\n",
        "embedded.md": "# Embedded\n",
        "prop-source.md": "---\nrelated: \"[[prop target]]\"\n---\nbody\n",
        "prop target.md": "# Prop target\n",
        "code.md": "`[x](alone.md)` and <!-- ![[alone]] -->\n",
        # no candidate itself (it has a wikilink): only the index says it names only-md
        "linked.md": "[[embedded]] and [the only one](only-md.md)\n",
        "only-md.md": "# Reached by a Markdown link alone\n",
    }
    with build(tmp_path / "v", notes) as v:
        assert [i["path"] for i in lint_orphans(v, folder="")["items"]] == ["alone.md", "code.md"]
        # an index from before the reference keys were kept: every note is read instead
        from reme_agent.engine.indexer import DOCUMENTS_KEY
        v.state.set_meta(DOCUMENTS_KEY, "3")
        with v.state._lock, v.state._db:
            v.state._db.execute("DELETE FROM refkeys")
        assert [i["path"] for i in lint_orphans(v, folder="")["items"]] == ["alone.md", "code.md"]
