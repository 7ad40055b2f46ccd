"""Merge keeps old names working: the winner's `merged_from` record redirects the loser's old
path and names (read, links, traverse), lint lists links through a redirect and --fix
rewrites them, a real note later taking an old path or name wins, chains flatten."""

from __future__ import annotations

import pytest

from reme_agent.cli import main
from reme_agent.config import Settings
from reme_agent.engine.links import LinkResolver
from reme_agent.engine.names import link_names, resolver_over
from reme_agent.engine.parser import split_frontmatter
from reme_agent.errors import NoteNotFound
from reme_agent.maintenance.merge import apply_merge
from reme_agent.toolkit.files import delete, move
from reme_agent.toolkit.lint import (
    fix_redirect_links,
    lint_alias_links,
    lint_collisions,
    lint_dangling,
    lint_redirect_links,
)
from reme_agent.toolkit.notes import read_note
from reme_agent.toolkit.retrieve import graph_traverse
from tests.maintenance.conftest import NOW, VaultFactory, knowledge

WIN = "knowledge/large-language-model/large-language-model.md"
LOSE = "knowledge/llm/llm.md"
T = "knowledge/transformer/transformer.md"
NOTES = {
    WIN: knowledge("Large language model", f"Predicts tokens with [[{T}]].", created="2024-01-01"),
    LOSE: knowledge("Large language models", f"Trained by [[{T}]].", created="2025-01-01",
                    aliases=["LLM"]),
    T: knowledge("Transformer", "An architecture; see [[large-language-model]]."),
}
NEW = "knowledge/chat/chat.md"


@pytest.fixture
def merged(make_vault: VaultFactory):
    vault = make_vault(NOTES)
    outcome = apply_merge(vault, [WIN, LOSE], now=NOW)
    assert outcome.winner == WIN and not vault.store.exists(LOSE)
    return vault


def _write(vault, path: str, text: str) -> None:
    vault.store.write(path, text)
    vault.refresh([path])


def test_the_winner_keeps_the_losers_names_and_a_dated_record(merged) -> None:
    fm = split_frontmatter(merged.store.read_text(WIN))[0]
    assert fm["aliases"] == ["Large language models", "LLM"]
    assert fm["merged_from"] == [{"path": LOSE, "title": "Large language models",
                                  "aliases": ["LLM"], "date": NOW.astimezone().date().isoformat()}]


@pytest.mark.parametrize("name", [LOSE, "knowledge/llm/llm", "knowledge/llm", "llm",
                                  "Large language models", "large LANGUAGE models", "LLM"])
def test_read_of_an_old_path_or_name_reaches_the_winner(merged, name: str) -> None:
    got = read_note(merged, name)
    assert got["path"] == WIN and "Trained by" in got["text"]


def test_a_hand_written_link_to_an_old_name_resolves_and_lint_fix_rewrites_it(merged) -> None:
    body = ("Chat runs on [[Large language models]], see [[knowledge/llm/llm.md]] and "
            "[[llm#History|the model]].\n")
    _write(merged, NEW, body)
    assert {t for t, _ in merged.graph.outbound(NEW)} == {WIN}   # not dangling
    assert lint_dangling(merged)["count"] == 0
    assert lint_alias_links(merged)["count"] == 0                 # reported once, below
    items = lint_redirect_links(merged)["items"]
    assert [(i["target"], i["resolves_to"], i["merged_from"], i["fix"]) for i in items] == [
        ("Large language models", WIN, LOSE, "[[large-language-model|Large language models]]"),
        ("knowledge/llm/llm.md", WIN, LOSE, "[[large-language-model]]"),
        ("llm", WIN, LOSE, "[[large-language-model|the model]]"),
    ]
    got = fix_redirect_links(merged)
    assert got["count"] == 3 and got["files"] == [{"path": NEW, "links": 3}]
    assert merged.store.read_text(NEW) == (
        "Chat runs on [[large-language-model|Large language models]], see "
        "[[large-language-model]] and [[large-language-model#History|the model]].\n")
    assert lint_redirect_links(merged)["count"] == 0
    assert {t for t, _ in merged.graph.outbound(NEW)} == {WIN}
    assert fix_redirect_links(merged)["count"] == 0   # idempotent


def test_lint_fix_writes_the_vaults_link_style(make_vault: VaultFactory, monkeypatch,
                                               capsys) -> None:
    vault = make_vault(NOTES, settings=Settings(embedder={"name": "hash"},
                                                index={"progress": False},
                                                links={"style": "path"}))
    apply_merge(vault, [WIN, LOSE], now=NOW)
    _write(vault, NEW, "Uses an [[LLM]].\n")
    root = str(vault.root)
    vault.close()
    monkeypatch.setenv("REME_EMBEDDER__NAME", "hash")
    monkeypatch.setenv("REME_LINKS__STYLE", "path")
    assert main(["lint", "--strict", "--vault", root]) == 1
    assert "links through a merge redirect (1)" in capsys.readouterr().out.lower()
    assert main(["lint", "--fix", "--vault", root]) == 0
    assert "Fixed 1 link(s) in 1 file(s)" in capsys.readouterr().out
    text = (vault.root / NEW).read_text(encoding="utf-8")
    assert text == "Uses an [[knowledge/large-language-model/large-language-model|LLM]].\n"


def test_a_real_note_that_later_takes_the_old_path_or_name_wins(merged) -> None:
    other = "knowledge/models/models.md"
    _write(merged, other, knowledge("Large language models", "A survey of several models."))
    _write(merged, NEW, "See [[Large language models]] and [[llm]].\n")
    # the new note's title beats the redirect; the old file name still redirects
    assert set(merged.graph.outbound(NEW)) == {(other, None), (WIN, None)}
    assert lint_collisions(merged)["count"] == 0
    assert read_note(merged, "Large language models")["path"] == other
    _write(merged, LOSE, knowledge("LLM", "A new note at the old path."))
    assert read_note(merged, LOSE)["path"] == LOSE
    assert read_note(merged, "llm")["path"] == LOSE
    assert {t for t, _ in merged.graph.outbound(NEW)} == {other, LOSE}
    assert lint_redirect_links(merged)["count"] == 0


def test_a_chain_of_merges_resolves_to_the_last_winner(make_vault: VaultFactory) -> None:
    c = "knowledge/foundation-model/foundation-model.md"
    fans = {f"knowledge/fan{i}/fan{i}.md": knowledge(f"Fan {i}", "Likes [[foundation-model]].")
            for i in range(2)}   # more inbound links: the winner of the second merge
    vault = make_vault({**NOTES, **fans, c: knowledge("Foundation model", "Big models.")})
    apply_merge(vault, [WIN, LOSE], now=NOW)
    assert apply_merge(vault, [c, WIN], now=NOW).winner == c
    records = split_frontmatter(vault.store.read_text(c))[0]["merged_from"]
    assert [r["path"] for r in records] == [LOSE, WIN]   # the loser's record came along
    for name in (LOSE, "llm", "LLM", "Large language models", WIN, "Large language model"):
        assert read_note(vault, name)["path"] == c, name
    _write(vault, NEW, "[[llm]] and [[large-language-model]]\n")
    assert {t for t, _ in vault.graph.outbound(NEW)} == {c}
    assert graph_traverse(vault, ["llm"])["seeds"] == [c]


def test_redirect_records_that_name_each_other_never_loop() -> None:
    a, b = "knowledge/a/a.md", "knowledge/b/b.md"
    fms = {a: {"title": "A", "merged_from": [b, "knowledge/gone/gone.md", a]},
           b: {"title": "B", "merged_from": [{"path": a, "title": "A"}]}}
    resolver = resolver_over([a, b], fms)
    assert resolver.resolve(a) == a and resolver.resolve(b) == b   # real notes win
    assert resolver.resolve("A") == a                              # own title, not a redirect
    assert resolver.resolve("gone") == a
    both = LinkResolver([a, b], redirects={a: ["knowledge/x/x.md"], b: ["knowledge/x/x.md"]})
    assert both.resolve("x") is None and both.ambiguous("x") == [a, b]


def test_only_names_from_a_merge_record_become_redirects() -> None:
    fm = {"title": "Kept", "aliases": ["Kept", "Mine", "Old"],
          "merged_from": [{"path": "knowledge/old/old.md", "title": "Old", "aliases": ["Kept"]},
                          "legacy/plain.md", {"title": "no path"}, 7]}
    names = link_names(fm)
    assert names.aliases == ["Kept", "Mine", "Kept"]       # its own title stays an alias
    assert names.redirects == ["knowledge/old/old.md", "legacy/plain.md", "Old", "Kept"]


def test_delete_and_move_never_act_through_a_redirect(merged) -> None:
    with pytest.raises(NoteNotFound) as err:
        delete(merged, LOSE)
    assert err.value.suggestions == [WIN]
    with pytest.raises(NoteNotFound):
        move(merged, "Large language models", "knowledge/x/x.md")
    assert merged.store.exists(WIN)


def test_a_record_added_by_hand_resolves_links_that_were_dangling(make_vault: VaultFactory) -> None:
    vault = make_vault({**NOTES, NEW: "Once [[old-idea]] was a note.\n"})
    assert lint_dangling(vault)["count"] == 1
    text = vault.store.read_text(T).replace("title:", 'merged_from: ["knowledge/old-idea.md"]\n'
                                            "title:", 1)
    _write(vault, T, text)
    assert {t for t, _ in vault.graph.outbound(NEW)} == {T}
    assert lint_dangling(vault)["count"] == 0
