"""Fuzzy L1 (G5): the normaliser, variant and near proposals, who decides them, and safety.

Real vaults, real matchers and embedders (hash here); only the judge is scripted.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from reme_agent.config import AutoLinkSettings
from reme_agent.engine.links import extract_links
from reme_agent.maintenance.autolink.fuzzy import FuzzyMatcher
from reme_agent.maintenance.autolink.judge import ScriptedJudge
from reme_agent.maintenance.autolink.matcher import Unprotected, protected_spans
from reme_agent.maintenance.autolink.names import NameIndex
from reme_agent.maintenance.autolink.normalize import normalize, spelling_similarity
from reme_agent.maintenance.autolink.runner import AutoLinker
from tests.autolink.conftest import body_of, files_hash, kpath, links_of, node, read

JWT, RATE, CB, ROT, GO = kpath("jwt"), kpath("rate-limiting"), kpath("circuit-breaker"), \
    kpath("jwt-key-rotation"), kpath("go")
PAY, NOTE = kpath("支付"), kpath("incident")
NODES = {
    JWT: node("JWT", "Signed tokens."),
    RATE: node("Rate limiting", "Caps requests.", aliases=["限流"]),
    CB: node("Circuit breaker", "Fails fast."),
    ROT: node("JWT key rotation", "Rotate signing keys.", aliases=["密钥轮换"]),
    GO: node("Go", "The language."),
    PAY: node("支付", "支付总览。"),
}
INCIDENT = node("Incident", "The JWTs expired; clients were rate-limited and we go home late.\n\n"
                "The Circuit breaker opened. See [[knowledge/go/go.md|the Go notes]].")
NO_NEAR = AutoLinkSettings(near_similarity=2.0)  # variants only: near needs a score > 1


def short(path: str) -> str:
    """A link target as the default (shortest) link style writes it."""
    return path.rsplit("/", 1)[-1].removesuffix(".md")


def fuzzy_found(names: dict[str, dict], body: str) -> list[tuple[str, str, tuple[str, ...]]]:
    matcher = FuzzyMatcher(NameIndex.from_frontmatter(names))
    norm, free = normalize(body), Unprotected(protected_spans(body))
    return [(p.kind, p.text, p.candidates) for p in
            matcher.variants(body, norm, free) + matcher.near(body, norm, free)]


# -- the normaliser (properties) --------------------------------------------------------
WORDS = ["rate", "limit", "token", "bucket", "circuit", "breaker", "search", "vector", "cache",
         "stampede", "queue", "letter", "pool", "connection", "deployment", "feature", "flag",
         "shard", "key", "service", "gateway", "event", "release", "canary", "window"]


def _plural(word: str) -> str:
    return word + ("es" if word.endswith(("s", "x", "ch", "sh")) else "s")


def forms(words: list[str]) -> list[str]:
    """Surface forms people write for a name made of `words`."""
    title = " ".join(words).capitalize()
    last = words[:-1]
    return [title, title.upper(), " ".join(words), "-".join(words), "/".join(words),
            " ".join([*last, _plural(words[-1])]), "-".join([*last, _plural(words[-1])]),
            " ".join(words) + "'s",
            "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in " ".join(words))]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(WORDS), min_size=2, max_size=3, unique=True))
def test_a_name_matches_itself_in_every_form_we_generate(words: list[str]) -> None:
    path = kpath("-".join(words))
    title = " ".join(words).capitalize()
    for form in forms(words):
        body = f"Yesterday the {form} misbehaved."
        found = fuzzy_found({path: {"title": title}}, body)
        assert any(path in cands and form.startswith(text) for _, text, cands in found), form


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3, unique=True),
       st.sampled_from(["x", "un", "zz"]), st.sampled_from(["", "ly", "q"]))
def test_a_name_never_matches_inside_a_longer_word(words: list[str], pre: str, post: str) -> None:
    """Variants never match inside a word; near spans (which allow a typo or a shared prefix)
    still start and end on word boundaries, so a link never cuts a word."""
    path = kpath("-".join(words))
    body = f"Saw {pre}{''.join(words)}{post} and {pre}{' '.join(words)}{post}zz today."
    matcher = FuzzyMatcher(NameIndex.from_frontmatter({path: {"title": " ".join(words)}}))
    norm, free = normalize(body), Unprotected([])
    assert matcher.variants(body, norm, free) == []
    for p in matcher.near(body, norm, free):
        assert not body[p.start - 1].isalnum() and not body[p.end].isalnum(), p.text


@given(st.text(max_size=80))
def test_units_point_back_into_the_text_and_join_to_the_key_string(text: str) -> None:
    norm = normalize(text)
    assert norm.joined == "".join(u.key for u in norm.units)
    for u in norm.units:
        assert 0 <= u.start < u.end <= len(text)
        assert norm.unit_at_start and norm.unit_at_end


def test_width_case_inflection_and_hyphen_variants_meet_one_key() -> None:
    keys = {normalize(t).joined for t in ("rate limiting", "Rate-limited", "RATE LIMITS",
                                          "ｒａｔｅ ｌｉｍｉｔ", "rate limit's")}
    assert keys == {"ratelimit"}
    assert normalize("APIs").joined == normalize("API").joined == "api"
    assert normalize("Exponential back-off").joined == normalize("exponential backoff").joined
    assert spelling_similarity("idempotancy keys", "Idempotency key") > 0.7
    assert spelling_similarity("Experiment 15 re-ranked", "Ranking experiments") < 0.7


def test_acronyms_keep_their_case_in_variants_but_take_plurals_and_full_width() -> None:
    names = {JWT: {"title": "JWT"}, kpath("it"): {"title": "IT"}}
    found = fuzzy_found(names, "JWTs, ＪＷＴ and jwt; is it the IT desk?")
    assert [t for _, t, _ in found] == ["JWTs", "ＪＷＴ", "IT"]


def test_near_finds_reordered_typo_and_cjk_names_but_not_half_of_one() -> None:
    names = {ROT: {"title": "JWT key rotation", "aliases": ["密钥轮换"]},
             kpath("idem"): {"title": "Idempotency key"}}
    near = [(t, c) for body in ("The rotation of JWT keys. One key. The rotation.",
                                "The idempotancy key.", "先轮换密钥。")
            for k, t, c in fuzzy_found(names, body) if k == "near"]
    assert ("rotation of JWT keys", (ROT,)) in near
    assert ("idempotancy key", (kpath("idem"),)) in near
    assert ("轮换密钥", (ROT,)) in near
    assert all(t not in ("key", "rotation", "One key") for t, _ in near)


# -- who decides --------------------------------------------------------------------------
def test_fuzzy_proposals_go_to_the_judge_and_exact_matches_do_not(make_vault) -> None:
    vault = make_vault({**NODES, NOTE: INCIDENT})
    judge = ScriptedJudge(choices={"JWTs": JWT, "rate-limited": RATE, "go": None})
    res = AutoLinker(vault, NO_NEAR, judge).link_note(NOTE)
    asked = {q.text: q.kind for q in judge.asked}
    assert asked == {"JWTs": "variant", "rate-limited": "variant"}  # "go": Go is linked already
    assert {(x["text"], x["chosen_by"], x["kind"]) for x in res.links} == {
        ("JWTs", "model", "variant"), ("rate-limited", "model", "variant"),
        ("Circuit breaker", "name", "exact")}
    assert (JWT, "JWTs", None) in links_of(vault, NOTE)


def test_without_a_model_fuzzy_proposals_are_reported_and_nothing_fuzzy_is_written(
        make_vault) -> None:
    vault = make_vault({**NODES, NOTE: node("Incident", "The JWTs expired; we were rate-limited.")})
    before = files_hash(vault)
    for dry_run in (True, False):
        report = AutoLinker(vault, NO_NEAR).run("L1", dry_run=dry_run)
        assert {(p["text"], p["kind"], p["outcome"]) for p in report.l1["proposals"]} == {
            ("JWTs", "variant", "skipped: no model"), ("rate-limited", "variant",
                                                       "skipped: no model")}
        assert report.l1["links_added"] == 0
        assert "fuzzy proposals left" in report.render()
    assert files_hash(vault) == {k: v for k, v in before.items()}


def test_a_capitalised_one_word_name_needs_its_capital_to_link_without_a_model(make_vault) -> None:
    vault = make_vault({**NODES, NOTE: node("Incident", "We go live on Monday.")})
    res = AutoLinker(vault, NO_NEAR).link_note(NOTE)
    assert res.status == "unchanged" and res.proposals[0]["text"] == "go"
    vault2 = make_vault({**NODES, NOTE: node("Incident", "Services are written in Go.")},
                        name="v2")
    assert AutoLinker(vault2, NO_NEAR).link_note(NOTE).links[0]["text"] == "Go"


def test_a_chinese_name_inside_a_longer_word_is_a_proposal_not_a_link(make_vault) -> None:
    vault = make_vault({**NODES, NOTE: node("回调", "支付宝回调要限流。")})
    res = AutoLinker(vault, NO_NEAR).link_note(NOTE)
    assert [x["text"] for x in res.links] == ["限流"]
    assert [p["text"] for p in res.proposals] == ["支付"]


def test_a_longer_variant_beats_the_exact_name_inside_it(make_vault) -> None:
    vault = make_vault({**NODES, NOTE: node("Ops", "We automated JWT key rotations last week.")})
    judge = ScriptedJudge(choices={"JWT key rotations": ROT})
    res = AutoLinker(vault, NO_NEAR, judge).link_note(NOTE)
    assert links_of(vault, NOTE) == [(ROT, "JWT key rotations", None)]
    assert res.links[0]["kind"] == "variant"
    res2 = AutoLinker(vault, NO_NEAR).run("L1", dry_run=True)  # no model: JWT is not linked
    assert all(r["path"] != NOTE for r in res2.l1["changed"])


def test_an_accepted_near_mention_replaces_the_exact_name_inside_it(make_vault) -> None:
    vault = make_vault({**NODES, NOTE: node("Ops", "Nobody owned the rotation of JWT keys.")})
    judge = ScriptedJudge(choices={"rotation of JWT keys": ROT})
    res = AutoLinker(vault, AutoLinkSettings(near_similarity=0.3), judge).link_note(NOTE)
    assert links_of(vault, NOTE) == [(ROT, "rotation of JWT keys", None)]
    assert res.links[0]["kind"] == "near"
    assert judge.asked[0].kind == "near" and judge.asked[0].score is not None
    vault2 = make_vault({**NODES, NOTE: node("Ops", "Nobody owned the rotation of JWT keys.")},
                        name="v2")
    declined = AutoLinker(vault2, AutoLinkSettings(near_similarity=0.3), ScriptedJudge())
    declined.link_note(NOTE)  # the judge says no: the exact JWT inside is linked as before
    assert links_of(vault2, NOTE) == [(JWT, "JWT", None)]


def test_exact_mode_is_the_old_l1(make_vault) -> None:
    vault = make_vault({**NODES, NOTE: INCIDENT})
    judge = ScriptedJudge()
    AutoLinker(vault, AutoLinkSettings(fuzzy=False), judge).link_note(NOTE)
    assert judge.asked == []
    assert [t for t, _, _ in links_of(vault, NOTE)] == [CB, GO]


# -- safety: additive, E-1, CAS ----------------------------------------------------------
def test_fuzzy_links_are_additive_and_keep_every_existing_link(make_vault) -> None:
    vault = make_vault({**NODES, NOTE: INCIDENT})
    before = body_of(vault, NOTE)
    old_edges = {(x.target, x.predicate) for x in extract_links(before)}
    AutoLinker(vault, NO_NEAR, ScriptedJudge(choices={"JWTs": JWT, "rate-limited": RATE})
               ).link_note(NOTE)
    after = body_of(vault, NOTE)
    new_edges = {(x.target, x.predicate) for x in extract_links(after)}
    assert old_edges <= new_edges  # E-1
    targets = "|".join(re.escape(short(t)) for t in (JWT, RATE, CB))  # the vault's link style
    added = re.compile(rf"\[\[(?:{targets})\|([^\]]*)\]\]")
    assert len(added.findall(after)) == 3
    assert added.sub(r"\1", after) == before  # only `[[target|` and `]]` were inserted
    assert read(vault, NOTE).startswith("---\ntitle: Incident\n")


def test_a_concurrent_edit_while_the_judge_thinks_is_redone_and_both_survive(
        make_vault) -> None:
    vault = make_vault({**NODES, NOTE: node("Incident", "The JWTs expired.")})

    class RacingJudge(ScriptedJudge):
        def choose(self, questions):  # another writer edits the note mid-decision, once
            if not self.asked:
                text = (vault.root / NOTE).read_text(encoding="utf-8")
                vault.store.write(NOTE, text + "\nA concurrent line.\n")
            return super().choose(questions)

    res = AutoLinker(vault, NO_NEAR, RacingJudge(choices={"JWTs": JWT})).link_note(NOTE)
    assert res.status == "linked" and res.redos == 1
    after = read(vault, NOTE)
    assert "A concurrent line." in after and f"[[{short(JWT)}|JWTs]] expired" in after


def test_many_proposals_reach_the_judge_in_batches_of_judge_batch(make_vault) -> None:
    vault = make_vault({**NODES, NOTE: node("Incident", "JWTs, rate-limited calls and circuit "
                                                        "breakers; 支付宝 too.")})
    calls: list[int] = []

    class Counting(ScriptedJudge):
        def choose(self, questions):
            calls.append(len(questions))
            return super().choose(questions)

    AutoLinker(vault, AutoLinkSettings(judge_batch=2, near_similarity=2.0), Counting()
               ).link_note(NOTE)
    assert calls == [2, 2]


def test_a_batch_run_embeds_every_near_window_in_one_call(make_vault) -> None:
    notes = {kpath(f"ops-{i}"): node(f"Ops {i}", f"Day {i}: the rotation of JWT keys again.")
             for i in range(3)}
    vault = make_vault({**NODES, **notes})
    linker = AutoLinker(vault, AutoLinkSettings(near_similarity=0.3))
    calls: list[int] = []
    real = linker.similarity.embedder

    class Counting:
        def embed_documents(self, texts):
            calls.append(len(texts))
            return real.embed_documents(texts)

    linker.similarity.embedder = Counting()
    report = linker.run("L1", dry_run=True)
    assert len(report.l1["proposals"]) == 3 and {p["kind"] for p in report.l1["proposals"]} == {
        "near"}
    assert calls == [2]  # one span text, one name: embedded once, then cached
