"""L1 on real vaults: additive links, ambiguity, CAS redo, the additive proof, who is written."""

from __future__ import annotations

import pytest

from reme_agent.config import AutoLinkSettings
from reme_agent.errors import AdditiveCheckFailed
from reme_agent.maintenance.autolink import l1
from reme_agent.maintenance.autolink.judge import ScriptedJudge
from reme_agent.maintenance.autolink.l1 import AddedLink, check_additive
from reme_agent.maintenance.autolink.runner import AutoLinker
from tests.autolink.conftest import body_of, daily, files_hash, kpath, links_of, node, read

ROT, KDF, RATE, GW = kpath("jwt-rotation"), kpath("密钥派生"), kpath("rate-limit"), \
    kpath("api-gateway")
OVERVIEW, PAY = kpath("jwt-overview"), kpath("jwt-payment")
CLOSED = "daily/2026-11-28/ops/ops.md"
ACTIVE = "daily/2026-11-30/today/today.md"

BASE = {
    ROT: node("JWT 轮换", "# JWT 轮换\n\nJWT 轮换的核心是密钥派生,每 90 天一次。", aliases=["JWT rotation"]),
    KDF: node("密钥派生", "# 密钥派生\n\n从主密钥派生签名密钥。"),
    RATE: node("Rate limit", "# Rate limit\n\nA rate limit caps requests per client.",
               aliases=["限流"]),
    GW: node("API gateway", """# API gateway — rate limit

The gateway applies the rate limit before routing; 限流 also protects JWT rotation.
Another rate limit mention stays plain.

Config uses `rate limit` in code and https://example.com/rate-limit as a URL.

```yaml
rate limit: 100
```
"""),
    CLOSED: daily("Ops", "# Ops\n\nTuned the rate limit today.", "distilled"),
    ACTIVE: daily("Today", "# Today\n\nStill tuning the rate limit.", "active"),
    "resource/spec.md": "# Spec\n\nThe rate limit spec.\n",
}


def test_chinese_and_english_mentions_get_additive_links_with_original_text(make_vault) -> None:
    vault = make_vault(BASE)
    before = body_of(vault, GW)
    report = AutoLinker(vault).run("L1")
    after = body_of(vault, GW)
    # links in the vault's (shortest) style, the mention kept as shown text
    assert "The gateway applies the [[rate-limit|rate limit]] before" in after
    # first mention per target: 限流 (also rate-limit) stays plain; JWT rotation is linked
    assert "; 限流 also protects [[jwt-rotation|JWT rotation]]." in after
    assert "Another rate limit mention stays plain." in after
    # code, URL, fence and the heading are untouched
    assert "`rate limit`" in after and "https://example.com/rate-limit as" in after
    assert "# API gateway — rate limit\n" in after and "rate limit: 100" in after
    stripped = after.replace("[[rate-limit|", "").replace("[[jwt-rotation|", "").replace("]]", "")
    assert stripped == before
    assert "JWT 轮换的核心是[[密钥派生]]" in body_of(vault, ROT)  # the mention is the name
    assert report.l1["links_added"] >= 3


def test_self_mentions_are_never_linked(make_vault) -> None:
    vault = make_vault(BASE)
    AutoLinker(vault).run("L1")
    assert "[[" not in body_of(vault, RATE)
    assert "[[" not in body_of(vault, KDF)


def test_existing_links_count_as_the_first_mention(make_vault) -> None:
    vault = make_vault({**BASE, GW: node("API gateway", f"See [[{RATE}]]. The rate limit.")})
    AutoLinker(vault).run("L1")
    assert links_of(vault, GW) == [(RATE, None, None)]


def test_every_mention_is_linked_when_first_mention_only_is_off(make_vault) -> None:
    vault = make_vault(BASE)
    linker = AutoLinker(vault, AutoLinkSettings(first_mention_only=False))
    linker.link_note(GW)
    targets = [t for t, _, _ in links_of(vault, GW)]
    assert targets.count(RATE) == 3  # "rate limit" twice + 限流


def test_closed_daily_notes_are_linked_but_active_ones_and_resources_never(make_vault) -> None:
    vault = make_vault(BASE)
    untouched = {p: read(vault, p) for p in (ACTIVE, "resource/spec.md")}
    report = AutoLinker(vault).run("L1")
    assert "Tuned the [[rate-limit|rate limit]] today." in read(vault, CLOSED)
    assert {p: read(vault, p) for p in untouched} == untouched
    assert AutoLinker(vault).link_note(ACTIVE).status == "skipped"
    res = AutoLinker(vault).link_note("resource/spec.md")
    assert res.status == "skipped" and "never written" in (res.reason or "")
    assert report.l1["refused"] == []


def test_a_rerun_adds_nothing(make_vault) -> None:
    vault = make_vault(BASE)
    AutoLinker(vault).run("L1")
    snapshot = files_hash(vault)
    again = AutoLinker(vault).run("L1")
    assert again.l1["links_added"] == 0
    assert files_hash(vault) == snapshot


def test_dry_run_writes_nothing_and_reports_the_plan(make_vault) -> None:
    vault = make_vault(BASE)
    snapshot = files_hash(vault)
    report = AutoLinker(vault).run("L1", dry_run=True)
    assert files_hash(vault) == snapshot
    assert report.l1["links_added"] >= 3
    assert {r["status"] for r in report.l1["changed"]} == {"would_link"}


def test_frontmatter_and_crlf_bytes_are_kept(make_vault) -> None:
    text = node("API gateway", "The rate limit.\r\nSecond line.").replace("\n", "\r\n")
    vault = make_vault({**BASE, GW: text})
    AutoLinker(vault).link_note(GW)
    raw = (vault.root / GW).read_bytes().decode()
    assert raw == text.replace("The rate limit.", "The [[rate-limit|rate limit]].")


# -- ambiguity --------------------------------------------------------------------------
AMBIGUOUS = {
    OVERVIEW: node("JWT overview", "What a JWT is.", aliases=["JWT"],
                   description="JSON web tokens in general."),
    PAY: node("JWT payment flow", "Tokens in payments.", aliases=["JWT"],
              description="How the payment service signs JWTs."),
    GW: node("API gateway", "The gateway checks the JWT of every request.\n\nLater: JWT again."),
}


def test_ambiguous_mentions_are_skipped_and_listed_without_a_model(make_vault) -> None:
    vault = make_vault(AMBIGUOUS)
    report = AutoLinker(vault).run("L1")
    assert "[[" not in body_of(vault, GW)
    amb = [a for a in report.l1["ambiguous"] if a["path"] == GW]
    assert amb == [{"path": GW, "text": "JWT", "line": amb[0]["line"],
                    "candidates": [OVERVIEW, PAY], "outcome": "skipped: no model"}]


def test_ambiguous_mention_links_the_target_the_judge_chose(make_vault) -> None:
    vault = make_vault(AMBIGUOUS)
    judge = ScriptedJudge(choices={"JWT": OVERVIEW})
    res = AutoLinker(vault, judge=judge).link_note(GW)
    assert res.status == "linked"
    assert links_of(vault, GW) == [(OVERVIEW, "JWT", None)]
    (q,) = judge.asked
    assert q.paragraph == "The gateway checks the JWT of every request."
    assert [c.description for c in q.candidates] == ["JSON web tokens in general.",
                                                      "How the payment service signs JWTs."]


def test_a_judge_answer_outside_the_candidates_is_a_skip(make_vault) -> None:
    vault = make_vault(AMBIGUOUS)
    res = AutoLinker(vault, judge=ScriptedJudge(choices={"JWT": kpath("nope")})).link_note(GW)
    assert res.status == "unchanged"
    assert res.ambiguous[0]["outcome"] == "declined by the model"


# -- CAS and the additive proof ---------------------------------------------------------
def test_a_concurrent_edit_causes_a_cas_redo_and_both_edits_survive(make_vault, monkeypatch) -> None:
    vault = make_vault(BASE)
    store = vault.store
    real = store.write_if_unchanged
    calls: list[str] = []

    def racing(path: str, text: str, stamp: str | None) -> str:
        calls.append(path)
        if len(calls) == 1:  # someone else edits the note between our read and our write
            current = (vault.root / path).read_text(encoding="utf-8")
            store.write(path, current + "\nA concurrent paragraph about the rate limit.\n")
        return real(path, text, stamp)

    monkeypatch.setattr(store, "write_if_unchanged", racing)
    res = AutoLinker(vault).link_note(GW)
    assert res.status == "linked" and res.redos == 1
    after = read(vault, GW)
    assert "A concurrent paragraph about the rate limit." in after  # their edit
    assert "The gateway applies the [[rate-limit|rate limit]] before" in after  # ours


def test_a_note_that_keeps_changing_is_skipped_and_audited(make_vault, monkeypatch) -> None:
    vault = make_vault(BASE)
    store = vault.store
    real = store.write_if_unchanged
    n = [0]

    def always_racing(path: str, text: str, stamp: str | None) -> str:
        if path == GW:
            n[0] += 1
            store.write(path, (vault.root / path).read_text(encoding="utf-8") + f"\nedit {n[0]}\n")
        return real(path, text, stamp)

    monkeypatch.setattr(store, "write_if_unchanged", always_racing)
    res = AutoLinker(vault).link_note(GW)
    assert res.status == "conflict" and n[0] == 4  # first try + 3 redos
    assert "[[" not in body_of(vault, GW)
    audits = list((vault.root / "audit").rglob("refused.md"))
    assert audits and GW in audits[0].read_text(encoding="utf-8")


def test_the_additive_check_refuses_a_body_whose_text_changed() -> None:
    old = "The rate limit applies."
    link = AddedLink(4, 14, RATE, "rate limit")
    good = f"The [[{RATE}|rate limit]] applies."
    check_additive("x.md", old, good, [link])
    for bad in (f"The [[{RATE}|rate limit]] applies!",       # a character changed
                f"The [[{RATE}|rate limits]] applies.",      # the mention changed
                f"The [[{RATE}|rate limit]]  applies.",      # a character added
                f"The [[{RATE}|rate limit] applies."):       # markup broken
        with pytest.raises(AdditiveCheckFailed):
            check_additive("x.md", old, bad, [link])


def test_the_additive_check_refuses_dropping_an_existing_link() -> None:
    old = "See [[a]]. The rate limit."
    link = AddedLink(15, 25, RATE, "rate limit")
    with pytest.raises(AdditiveCheckFailed):
        check_additive("x.md", old, f"See a. The [[{RATE}|rate limit]].", [link])


def test_a_planner_bug_is_refused_and_nothing_is_written(make_vault, monkeypatch) -> None:
    vault = make_vault(BASE)
    before = read(vault, GW)
    real = l1.apply_links
    monkeypatch.setattr(l1, "apply_links", lambda body, links: real(body, links).replace(
        "routing", "ROUTING"))
    res = AutoLinker(vault).link_note(GW)
    assert res.status == "refused" and "differs" in (res.reason or "")
    assert read(vault, GW) == before


def test_malformed_frontmatter_is_never_rewritten(make_vault) -> None:
    bad = "---\ntitle: [unclosed\n---\nThe rate limit.\n"
    vault = make_vault({**BASE, GW: bad})
    res = AutoLinker(vault).link_note(GW)
    assert res.status == "skipped" and read(vault, GW) == bad
