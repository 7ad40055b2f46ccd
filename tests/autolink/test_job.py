"""The auto-link LLM job (prompt + AgentScope agent) as the judge; only the model is scripted."""

from __future__ import annotations

import json

import pytest

from reme_agent.config import AutoLinkSettings
from reme_agent.errors import ModelNotConfigured
from reme_agent.jobs.autolink_job import JobJudge, parse_answers
from reme_agent.jobs.base import load_prompt
from reme_agent.maintenance.autolink.runner import AutoLinker
from reme_agent.testing import ScriptedChatModel, TextBlock, tool_call
from tests.autolink.conftest import body_of, kpath, links_of, node

OVERVIEW, PAY, GW = kpath("jwt-overview"), kpath("jwt-payment"), kpath("api-gateway")
NOTES = {
    OVERVIEW: node("JWT overview", "What a JWT is.", aliases=["JWT"],
                   description="JSON web tokens in general."),
    PAY: node("JWT payment flow", "Tokens in payments.", aliases=["JWT"],
              description="How the payment service signs JWTs."),
    GW: node("API gateway", "The gateway checks the JWT of every request."),
}


def answer(**answers: object) -> TextBlock:
    return TextBlock(text=json.dumps({"answers": [{"id": int(k[1:]), "answer": v}
                                                  for k, v in answers.items()]}))


def test_the_scripted_model_picks_the_target_of_an_ambiguous_mention(make_vault) -> None:
    vault = make_vault(NOTES)
    model = ScriptedChatModel([
        [tool_call("c1", "read", path=PAY)],  # the model may look before answering
        [answer(q0=PAY)],
    ])
    res = AutoLinker(vault, judge=JobJudge(vault, model)).link_note(GW)
    assert res.status == "linked"
    assert links_of(vault, GW) == [(PAY, "JWT", None)]
    offered = set(model.calls[0]["tool_names"])
    assert offered == {"read", "search", "graph_traverse", "stat"}  # read-only tools
    prompt = model.calls[0]["messages"][-1].get_text_content()
    assert "Mention: 'JWT'" in prompt and "How the payment service signs JWTs." in prompt


def test_a_model_answering_none_or_nonsense_links_nothing(make_vault) -> None:
    vault = make_vault(NOTES)
    for reply in ([answer(q0=None)], [TextBlock(text="I am not sure.")]):
        model = ScriptedChatModel([reply])
        res = AutoLinker(vault, judge=JobJudge(vault, model)).link_note(GW)
        assert res.status == "unchanged"
        assert "[[" not in body_of(vault, GW)


def test_the_job_answers_l2_and_l3_questions(make_vault) -> None:
    a, b = kpath("bm25"), kpath("tf-idf")
    vault = make_vault({
        a: node("BM25", f"BM25 ranks documents by term frequency; see [[{b}]]."),
        b: node("TF-IDF", "TF-IDF weights terms by term frequency and inverse document frequency."),
    })
    model = ScriptedChatModel([[answer(q0="is_a")]])
    report = AutoLinker(vault, AutoLinkSettings(), JobJudge(vault, model)).run("L3")
    assert report.l3["upgraded"][0]["predicate"] == "is_a"
    assert links_of(vault, a) == [(b, None, "is_a")]
    assert "Suggested predicates: is_a" in model.calls[0]["messages"][-1].get_text_content()


def test_no_model_configured_fails_before_anything_is_read(make_vault) -> None:
    vault = make_vault(NOTES)
    with pytest.raises(ModelNotConfigured):
        JobJudge(vault)


def test_the_prompt_loads_in_both_languages_and_forbids_write_tools() -> None:
    from reme_agent.errors import ConfigError
    from reme_agent.jobs.autolink_job import PLACEHOLDERS
    from reme_agent.jobs.guard import WRITE_TOOLS

    for lang in ("en", "zh"):
        spec = load_prompt("autolink", lang, placeholders=PLACEHOLDERS, forbidden_tools=WRITE_TOOLS)
        assert "{protocol}" in spec.system and not set(spec.tools) & WRITE_TOOLS
    with pytest.raises(ConfigError):
        load_prompt("autolink", "en", {"tools": ["read", "write"]}, placeholders=PLACEHOLDERS,
                    forbidden_tools=WRITE_TOOLS)


def test_parse_answers_accepts_fenced_json_and_id_maps() -> None:
    assert parse_answers('```json\n{"answers": [{"id": 0, "answer": "x"}]}\n```') == {0: "x"}
    assert parse_answers('Sure: {"1": true}') == {1: True}
    assert parse_answers("no json here") == {}


def test_the_model_is_asked_about_a_fuzzy_proposal_and_its_answer_is_linked(make_vault) -> None:
    jwt, note = kpath("jwt"), kpath("incident")
    vault = make_vault({jwt: node("JWT", "Signed tokens.", description="JSON web tokens."),
                        note: node("Incident", "The JWTs expired at midnight.")})
    model = ScriptedChatModel([[answer(q0=jwt)]])
    res = AutoLinker(vault, judge=JobJudge(vault, model)).link_note(note)
    assert links_of(vault, note) == [(jwt, "JWTs", None)]
    assert res.links[0]["kind"] == "variant" and res.links[0]["chosen_by"] == "model"
    prompt = model.calls[0]["messages"][-1].get_text_content()
    assert "(variant)" in prompt and "resembles 'JWT'" in prompt
