"""Lint tools find each kind of problem in a messy vault and nothing in a clean one."""

from __future__ import annotations

import pytest

from reme_agent.errors import InvalidArgument
from reme_agent.toolkit import build_toolkit
from reme_agent.toolkit.lint import lint_collisions, lint_dangling, lint_orphans, lint_schema
from tests.toolkit.conftest import call_toolkit, vault_hash

LINTS = [lint_dangling, lint_orphans, lint_collisions, lint_schema]


@pytest.mark.parametrize("lint", LINTS, ids=lambda f: f.__name__)
def test_a_clean_vault_has_no_findings(vault, lint) -> None:
    got = lint(vault)
    assert got["count"] == 0 and got["items"] == [] and got.text.startswith("No ")


def test_dangling_finds_missing_and_ambiguous_targets(messy) -> None:
    items = {(i["source"], i["target"]): i for i in lint_dangling(messy)["items"]}
    assert set(items) == {("knowledge/broken/broken.md", "no-such-note"),
                          ("knowledge/hybrid-search/hybrid-search.md", "bm25")}
    assert items[("knowledge/broken/broken.md", "no-such-note")]["line"] == 11
    assert items[("knowledge/hybrid-search/hybrid-search.md", "bm25")]["ambiguous"] == [
        "daily/2026-11-30/bm25/bm25.md", "knowledge/bm25/bm25.md"]


def test_dangling_suggests_close_names(vault) -> None:
    vault.store.write("knowledge/typo/typo.md", "See [[hybrid-serch]].\n")
    item = lint_dangling(vault, folder="knowledge")["items"][0]
    assert item["suggestions"] == ["knowledge/hybrid-search/hybrid-search.md"]
    assert "did you mean" in lint_dangling(vault).text


def test_links_to_existing_non_notes_are_not_dangling(vault) -> None:
    assert "resource/paper.pdf" in (vault.root / "knowledge/hybrid-search/hybrid-search.md").read_text()
    assert lint_dangling(vault)["count"] == 0


def test_orphans_are_knowledge_islands(messy) -> None:
    assert [i["path"] for i in lint_orphans(messy)["items"]] == ["knowledge/orphan/orphan.md"]


def test_a_node_with_only_outbound_links_is_not_an_orphan(vault) -> None:
    # 张三 links out but nothing links to it: reachable, so not reported.
    assert "knowledge/张三/张三.md" not in [i["path"] for i in lint_orphans(vault)["items"]]


def test_collisions_find_shared_short_names_and_affected_links(messy) -> None:
    [item] = lint_collisions(messy)["items"]
    assert item["name"] == "bm25"
    assert item["paths"] == ["daily/2026-11-30/bm25/bm25.md", "knowledge/bm25/bm25.md"]
    assert item["links"] == [{"source": "knowledge/hybrid-search/hybrid-search.md",
                              "line": 13, "target": "bm25"}]


def test_alias_collisions_are_found(vault) -> None:
    vault.store.write("knowledge/a/a.md", "---\naliases: [Fusion]\n---\n[[bm25]]\n")
    vault.store.write("knowledge/b/b.md", "---\naliases: [fusion]\n---\n[[bm25]]\n")
    names = [i["name"].casefold() for i in lint_collisions(vault)["items"]]
    assert names == ["fusion"]


def test_schema_reports_each_violation_and_never_rewrites(messy) -> None:
    before = vault_hash(messy)
    got = lint_schema(messy)
    assert got["checked"] == 9 and [i["path"] for i in got["items"]] == ["knowledge/broken/broken.md"]
    errors = " | ".join(got["items"][0]["errors"])
    for part in ("importance", "missing 'status'", "missing 'confidence'", "originSessionId"):
        assert part in errors
    assert vault_hash(messy) == before


def test_schema_reports_malformed_yaml_and_missing_axes(vault) -> None:
    vault.store.write("knowledge/bad/bad.md", "---\ntitle: [oops\n---\nbody\n")
    vault.store.write("knowledge/bare/bare.md", "# Bare\n")
    items = {i["path"]: i["errors"] for i in lint_schema(vault, folder="knowledge")["items"]}
    assert "not valid YAML" in items["knowledge/bad/bad.md"][0]
    assert len([e for e in items["knowledge/bare/bare.md"] if "missing required key" in e]) == 4


def test_lint_folder_must_exist(vault) -> None:
    with pytest.raises(InvalidArgument, match="No folder"):
        lint_schema(vault, folder="nowhere")


def test_lints_through_the_toolkit(messy) -> None:
    tk = build_toolkit(messy, groups=["lint"])
    for name, needle in [("lint_dangling", "no-such-note"), ("lint_orphans", "orphan.md"),
                         ("lint_collisions", "[[bm25]]"), ("lint_schema", "importance")]:
        state, text = call_toolkit(tk, name)
        assert state == "success" and needle in text
