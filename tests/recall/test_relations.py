"""Relation questions reach the note a predicate link points to (DESIGN §4, §7)."""

from __future__ import annotations

import pytest

from reme_agent.recall.relations import asked_predicates
from reme_agent.recall.search import search
from tests.recall.conftest import VaultFactory, note


@pytest.fixture
def team(make_vault: VaultFactory):
    return make_vault({
        "projects/支付网关.md": note(
            "owner:: [[王芳]]\n- depends_on:: [[订单数据库]]\n\n统一对接各家支付渠道的网关服务。",
            title="支付网关", aliases=["Payment gateway"]),
        "people/王芳.md": note("支付团队的技术负责人，说话很快。", aliases=["Wang Fang"]),
        "people/Alice Chen.md": note("PM for checkout. Owns the payment gateway roadmap and "
                                     "talks about the payment gateway every day."),
        "projects/订单数据库.md": note("MySQL 8.0，一主两从。", aliases=["Order DB"]),
        "knowledge/jwt/jwt.md": note("How we rotate keys. Written up by [author:: [[张三]]] "
                                     "after the outage.", title="JWT key rotation"),
        "people/张三.md": note("SRE, on call this week."),
    })


@pytest.mark.parametrize("query", ["who owns the payment gateway", "谁负责支付网关",
                                   "支付网关是谁负责的", "payment gateway owner"])
def test_who_owns_x_answers_with_the_owner_note(team, query: str) -> None:
    results = search(team, query, log_access=False).results
    assert results[0].path == "people/王芳.md"
    assert results[0].match == {"kind": "relation", "predicate": "owner",
                                "subject": "projects/支付网关.md", "direction": "out"}


def test_an_inline_predicate_is_a_relation_too(team) -> None:
    first = search(team, "who wrote the JWT key rotation doc", log_access=False).results[0]
    assert first.path == "people/张三.md"


def test_a_relation_word_that_names_a_predicate_is_followed(team) -> None:
    first = search(team, "what does the payment gateway depend on", log_access=False).results[0]
    assert first.path == "projects/订单数据库.md"


def test_without_a_question_about_a_relation_the_named_note_comes_first(team) -> None:
    assert search(team, "payment gateway", log_access=False).results[0].path == \
        "projects/支付网关.md"


def test_relations_can_be_switched_off(team) -> None:
    off = team.settings.search.model_copy(update={"use_relations": False})
    paths = [n.path for n in search(team, "who owns the payment gateway", options=off,
                                    log_access=False).results]
    assert paths[0] != "people/王芳.md"


def test_the_lexicon_asks_for_predicates_in_both_languages() -> None:
    assert "owner" in asked_predicates("who owns the payment gateway")
    assert "owner" in asked_predicates("订单数据库归谁管")
    assert "decided_by" in asked_predicates("谁批准了 ADR-011")
    assert "caused_by" in asked_predicates("what was the root cause")
    assert asked_predicates("payment gateway architecture") == set()
    assert asked_predicates("我用的电脑") <= {"depends_on", "uses", "requires", "built_on",
                                              "based_on", "dependency"}
    assert asked_predicates("不用担心") == set()   # single characters are never cues


def test_a_query_reads_each_subjects_links_once(team, monkeypatch: pytest.MonkeyPatch) -> None:
    """Relations and neighbours share one read of a subject's links (a hub's are long)."""
    from reme_agent.engine.tokenize import tokenize
    from reme_agent.recall.evidence import gather

    graph_type = type(team.graph)
    real_out, real_in = graph_type.outbound, graph_type.inbound
    calls: list[tuple[str, str]] = []
    monkeypatch.setattr(graph_type, "outbound",
                        lambda self, path: calls.append(("out", path)) or real_out(self, path))
    monkeypatch.setattr(graph_type, "inbound",
                        lambda self, path: calls.append(("in", path)) or real_in(self, path))
    opts = team.settings.search.model_copy(update={"use_phrases": False})
    query = "who owns the payment gateway"
    ev = gather(team, query, tokenize(query), opts)
    assert ev.relations["people/王芳.md"].predicate == "owner"
    assert {"people/王芳.md", "projects/订单数据库.md"} <= ev.neighbours.keys()
    assert ("out", "projects/支付网关.md") in calls
    assert len(calls) == len(set(calls))


def test_the_text_says_why_a_result_outranks_higher_scores(team) -> None:
    """Results are ordered by evidence (relation, name, phrase) before score, so the text a
    model reads says which evidence put a note where its score alone would not."""
    response = search(team, "who owns the payment gateway", log_access=False)
    first, text = response.results[0], response.render()
    assert first.match is not None and first.match["kind"] == "relation"
    block = text.split("==========")[2]
    assert "[matched: projects/支付网关.md links to it as owner]" in block
    named = search(team, "支付网关", log_access=False)
    assert named.results[0].match["kind"].startswith("name:")
    assert '[matched: the query names it (exact title "支付网关")]' in named.render()
    plain = search(team, "MySQL 一主两从", log_access=False)
    assert plain.results[0].match is None and "[matched:" not in plain.render().split(
        "==========")[2]
