"""L2 See-also links, the audited L3 predicate upgrade, and the L4 report-only pass."""

from __future__ import annotations

import datetime as dt

import pytest

from reme_agent.config import AutoLinkSettings
from reme_agent.engine.links import extract_links
from reme_agent.errors import ConservationViolation, InvalidArgument, ModelNotConfigured
from reme_agent.maintenance.autolink.judge import ScriptedJudge
from reme_agent.maintenance.autolink.l2 import see_also_insertion
from reme_agent.maintenance.autolink.l3 import upgrade_predicate
from reme_agent.maintenance.autolink.runner import AutoLinker
from reme_agent.toolkit.notes import read_note, write_note
from tests.autolink.conftest import body_of, files_hash, kpath, links_of, node, read

BM25, TFIDF, KAFKA, COPY = kpath("bm25"), kpath("tf-idf"), kpath("kafka"), kpath("bm25-copy")
TEXT = "BM25 ranks documents by term frequency and inverse document frequency with length normalisation."
NOTES = {
    BM25: node("BM25", TEXT),
    TFIDF: node("TF-IDF", "TF-IDF weights terms by term frequency and inverse document "
                          "frequency across documents."),
    KAFKA: node("Kafka", "Kafka is a distributed log for event streaming between services."),
    COPY: node("Okapi ranking", TEXT),
}
L2 = AutoLinkSettings(l2_similarity=0.6, l4_similarity=0.92)


# -- L2 ---------------------------------------------------------------------------------
def test_l2_appends_a_see_also_link_once_and_is_idempotent(make_vault) -> None:
    vault = make_vault(NOTES)
    judge = ScriptedJudge(pairs={(BM25, TFIDF): True})
    before = body_of(vault, BM25)
    report = AutoLinker(vault, L2, judge).run("L2")
    assert [(a["source"], a["target"]) for a in report.l2["added"]] == [(BM25, TFIDF)]
    after = body_of(vault, BM25)
    assert after == before + "\nSee also: [[tf-idf|TF-IDF]]\n"  # in the vault's link style
    asked = {(q.source.path, q.target.path) for q in judge.asked}
    assert (BM25, TFIDF) in asked and (BM25, COPY) not in asked  # duplicates are L4's
    snapshot = files_hash(vault)
    again = AutoLinker(vault, L2, judge).run("L2")
    assert again.l2["added"] == [] and files_hash(vault) == snapshot
    assert (BM25, TFIDF) not in {(q.source.path, q.target.path) for q in judge.asked[len(asked):]}


def test_l2_writes_nothing_the_judge_declines(make_vault) -> None:
    vault = make_vault(NOTES)
    snapshot = files_hash(vault)
    report = AutoLinker(vault, L2, ScriptedJudge()).run("L2")
    assert report.l2["added"] == [] and report.l2["declined"]
    assert files_hash(vault) == snapshot


def test_l2_extends_its_own_see_also_line() -> None:
    body = "Text.\n\nSee also: [[knowledge/a/a.md|A]]\n"
    ins = see_also_insertion(body, "[[b|B]]", "See also")
    new = body[:ins.pos] + ins.text + body[ins.pos:]
    assert new == "Text.\n\nSee also: [[knowledge/a/a.md|A]], [[b|B]]\n"
    assert see_also_insertion("Text.", "[[x|X]]", "参见").text == "\n\n参见: [[x|X]]\n"


def test_l2_and_l3_need_a_model_and_change_nothing_without_one(make_vault) -> None:
    vault = make_vault(NOTES)
    snapshot = files_hash(vault)
    for level in ("L2", "L3", "L1,L3"):
        with pytest.raises(ModelNotConfigured):
            AutoLinker(vault).run(level)
    assert files_hash(vault) == snapshot


# -- L3 ---------------------------------------------------------------------------------
A, B = kpath("jwt-rotation"), kpath("auth")
L3_NOTES = {
    A: node("JWT rotation", f"Rotation is done by [[{B}|the auth service]] nightly.\n\n- [[auth]]\n"
                            f"\nrelated:: [[{kpath('kafka')}]]"),
    B: node("Auth service", "Issues tokens."),
    kpath("kafka"): node("Kafka", "A log."),
}


def test_l3_upgrade_is_audited_and_only_that_edge_changes(make_vault) -> None:
    vault = make_vault(L3_NOTES)
    before = body_of(vault, A)
    report = AutoLinker(vault, judge=ScriptedJudge(predicates={(A, B): "part_of"})).run("L3")
    assert [(u["source"], u["target"], u["predicate"]) for u in report.l3["upgraded"]] == \
        [(A, B, "part_of")]
    after = body_of(vault, A)
    assert after == before.replace(f"by [[{B}|the auth service]]",
                                   f"by [part_of:: [[{B}|the auth service]]]") \
        .replace("- [[auth]]", "- part_of:: [[auth]]")
    assert {p for _, _, p in links_of(vault, A)} == {"part_of", "related"}
    audit = vault.root / "audit" / dt.date.today().isoformat() / "auto_link.md"
    text = audit.read_text(encoding="utf-8")
    assert "predicate_upgrade" in text and A in text and "predicate=part_of" in text
    assert extract_links(text) == []  # the audit note quotes the line but adds no edge


def test_plain_writes_that_drop_a_link_are_still_refused(make_vault) -> None:
    vault = make_vault(L3_NOTES)
    current = read_note(vault, A)
    body = body_of(vault, A).replace("- [[auth]]", "- part_of:: [[auth]]") \
        .replace(f"by [[{B}|the auth service]]", f"by [part_of:: [[{B}|the auth service]]]")
    with pytest.raises(ConservationViolation):
        write_note(vault, A, body=body, overwrite=True, stamp=current["stamp"])
    assert read(vault, A) == current["text"]


def test_upgrade_predicate_refuses_bad_input(make_vault) -> None:
    vault = make_vault(L3_NOTES)
    snapshot = files_hash(vault)
    with pytest.raises(InvalidArgument):
        upgrade_predicate(vault, A, B, "is a")
    with pytest.raises(InvalidArgument):
        upgrade_predicate(vault, A, kpath("kafka"), "uses")  # already typed: no bare link
    assert files_hash(vault) == snapshot


def test_l3_ignores_invalid_model_predicates(make_vault) -> None:
    vault = make_vault(L3_NOTES)
    snapshot = files_hash(vault)
    report = AutoLinker(vault, judge=ScriptedJudge(predicates={(A, B): "part of!"})).run("L3")
    assert report.l3["upgraded"] == [] and files_hash(vault) == snapshot


# -- L4 ---------------------------------------------------------------------------------
def test_l4_writes_only_a_report(make_vault) -> None:
    vault = make_vault(NOTES)
    snapshot = files_hash(vault, skip=(".reme", "audit/"))
    report = AutoLinker(vault, L2).run("L4")
    assert [(p["a"], p["b"]) for p in report.l4["pairs"]] == [(COPY, BM25)]
    assert files_hash(vault, skip=(".reme", "audit/")) == snapshot
    path = report.l4["report"]
    assert path == f"audit/{dt.date.today().isoformat()}/auto_link_l4.md"
    text = read(vault, path)
    assert COPY in text and BM25 in text and extract_links(text) == []


def test_l4_dry_run_and_a_clean_vault_write_no_report(make_vault) -> None:
    vault = make_vault(NOTES)
    assert AutoLinker(vault, L2).run("L4", dry_run=True).l4["report"] is None
    clean = make_vault({BM25: NOTES[BM25], KAFKA: NOTES[KAFKA]}, name="clean")
    assert AutoLinker(clean, L2).run("L4").l4["report"] is None
    assert not (vault.root / "audit").exists() and not (clean.root / "audit").exists()


def test_l4_lists_names_shared_by_several_nodes(make_vault) -> None:
    vault = make_vault({BM25: node("BM25", "a", aliases=["ranker"]),
                        KAFKA: node("Kafka", "b", aliases=["ranker"])})
    report = AutoLinker(vault).run("L4")
    assert report.l4["shared_names"] == [{"name": "ranker", "paths": [BM25, KAFKA]}]
    assert "ranker" in read(vault, report.l4["report"])
