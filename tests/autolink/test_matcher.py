"""The name index and the Aho–Corasick matcher: what counts as a linkable mention."""

from __future__ import annotations

from reme_agent.maintenance.autolink.matcher import Matcher, protected_spans
from reme_agent.maintenance.autolink.names import NameIndex, fold

JWT = "knowledge/jwt/jwt.md"
ROT = "knowledge/jwt-rotation/jwt-rotation.md"
KDF = "knowledge/密钥派生/密钥派生.md"
RATE = "knowledge/rate-limit/rate-limit.md"
IT = "knowledge/it-team/it-team.md"

INDEX = NameIndex.from_frontmatter({
    JWT: {"title": "JWT", "description": "JSON web tokens."},
    ROT: {"title": "JWT 轮换", "aliases": ["JWT rotation"]},
    KDF: {"title": "密钥派生"},
    RATE: {"title": "Rate limit", "aliases": ["限流"]},
    IT: {"title": "IT"},
    "daily/2026-11-30/x/x.md": {"title": "Not a target"},
})


def found(body: str) -> list[tuple[str, tuple[str, ...]]]:
    return [(m.text, m.candidates) for m in Matcher(INDEX).find(body)]


def test_chinese_and_english_mentions_are_found_with_their_original_text() -> None:
    hits = found("JWT 轮换的核心是密钥派生。We apply a RATE LIMIT and 限流 too.")
    assert hits == [("JWT 轮换", (ROT,)), ("密钥派生", (KDF,)), ("RATE LIMIT", (RATE,)),
                    ("限流", (RATE,))]


def test_overlapping_names_take_the_longest_match() -> None:
    assert found("The JWT rotation runbook.") == [("JWT rotation", (ROT,))]
    assert found("JWT 轮换") == [("JWT 轮换", (ROT,))]
    assert found("A JWT alone.") == [("JWT", (JWT,))]


def test_latin_names_match_whole_words_only_but_cjk_needs_no_spaces() -> None:
    assert found("JWTs and xJWT and JWT_x and rate limits") == []
    assert found("用JWT签名") == [("JWT", (JWT,))]
    assert found("这是密钥派生器") == [("密钥派生", (KDF,))]


def test_acronyms_match_only_as_written() -> None:
    assert found("Is it the IT desk?") == [("IT", (IT,))]


def test_no_match_inside_code_links_urls_headings_tables_or_fields() -> None:
    body = "\n".join([
        "# JWT heading",
        "",
        "Setext JWT",
        "===",
        "",
        "Use `JWT` inline and [[jwt]] and [[knowledge/x.md|JWT rotation]] and ![[JWT.png]].",
        "See [JWT docs](https://example.com/JWT) and <https://x.org/JWT> and https://a.b/JWT.",
        "Mail jwt@example.com, tag #JWT, footnote [JWT].",
        "",
        "```",
        "JWT in a fence",
        "```",
        "",
        "    JWT indented code",
        "",
        "| name | note |",
        "|------|------|",
        "| JWT  | x    |",
        "",
        "JWT:: value",
        "",
        "[JWT]: https://example.com",
        "<!-- JWT comment -->",
    ])
    assert found(body) == []


def test_predicate_values_and_plain_text_around_protected_spans_still_match() -> None:
    body = "Before `code` the JWT rotation, then https://x.y and 限流."
    assert [t for t, _ in found(body)] == ["JWT rotation", "限流"]


def test_protected_spans_are_sorted_and_merged() -> None:
    spans = protected_spans("a `b` [[c]]`d` e")
    assert spans == sorted(spans)
    assert all(e1 < s2 for (_, e1), (s2, _) in zip(spans, spans[1:], strict=False))


def test_names_come_from_title_aliases_and_stem_and_only_knowledge_is_a_target() -> None:
    assert set(INDEX.nodes) == {JWT, ROT, KDF, RATE, IT}
    assert INDEX.candidates(fold("jwt rotation"), "jwt rotation") == (ROT,)
    assert INDEX.candidates("jwt-rotation", "jwt-rotation") == (ROT,)  # the file stem
    assert INDEX.candidates("rate limit", "rate limit") == (RATE,)  # stem with spaces
    assert INDEX.own_keys(RATE) >= {"rate limit", "限流", "rate-limit"}


def test_a_name_carried_by_two_nodes_is_ambiguous() -> None:
    index = NameIndex.from_frontmatter({
        "knowledge/a/a.md": {"title": "Token", "aliases": ["JWT"]},
        "knowledge/b/b.md": {"title": "Payments", "aliases": ["JWT"]},
    })
    assert index.ambiguous() == {"JWT": ["knowledge/a/a.md", "knowledge/b/b.md"]}
    assert [m.candidates for m in Matcher(index).find("the JWT")] == \
        [("knowledge/a/a.md", "knowledge/b/b.md")]


def test_unsafe_or_short_names_are_not_indexed() -> None:
    index = NameIndex.from_frontmatter({
        "knowledge/a/a.md": {"title": "x", "aliases": ["a|b", "[x]", "1234", "ok name"]}})
    assert set(index.keys()) == {"ok name"}


def test_fold_keeps_offsets() -> None:
    text = "İstanbul JWT"
    assert len(fold(text)) == len(text)
    assert fold(text).endswith("jwt")
