"""Names are first-class (DESIGN §7): title, aliases, stem and headings find their note."""

from __future__ import annotations

import pytest

from reme_agent.recall.names import max_edits, osa_distance
from reme_agent.recall.normalize import compact, fold, spaced, within_words
from reme_agent.recall.search import search
from tests.recall.conftest import VaultFactory, note

MENTIONS = ("The circuit breaker tripped again; circuit breaker settings were wrong, "
            "and the circuit breaker dashboard showed it.")


def _first(vault, query: str) -> str:
    return search(vault, query, log_access=False).results[0].path


@pytest.fixture
def named(make_vault: VaultFactory):
    return make_vault({
        "熔断.md": note("服务调用失败率超过阈值时暂时停止调用下游，等待恢复。",
                        aliases=["circuit breaker", "断路器"]),
        "incidents/outage.md": note(MENTIONS),
        "people/Priya Natarajan.md": note("Staff engineer, owns auth.", title="Priya Natarajan"),
        "people/Priya Sharma.md": note("Designer on the growth team."),
        "concepts/Blue-green deployment.md": note("Two identical environments, switch traffic."),
        "knowledge/runbook/runbook.md": note("# Runbook\n\n## Failover drill\n\nPromote the "
                                             "replica, then repoint the writers."),
        "notes/mixed.md": note("A failover happens when the primary dies; drills help."),
    })


def test_an_alias_only_in_frontmatter_puts_its_note_first(named) -> None:
    # the other note says "circuit breaker" three times; the alias says what 熔断.md *is*
    assert _first(named, "circuit breaker") == "熔断.md"
    assert _first(named, "断路器") == "熔断.md"


@pytest.mark.parametrize("query", ["CIRCUIT  BREAKER", "circuit-breaker", "ｃｉｒｃｕｉｔ ｂｒｅａｋｅｒ",
                                   "熔斷"])
def test_a_normalised_name_matches(named, query: str) -> None:
    assert _first(named, query) == "熔断.md"


def test_a_name_within_a_small_edit_distance_matches(named) -> None:
    assert _first(named, "Priya Natarjan") == "people/Priya Natarajan.md"
    assert _first(named, "Blue-green deploymnet") == "concepts/Blue-green deployment.md"
    response = search(named, "Priya Natarjan", log_access=False)
    assert response.results[0].match == {"kind": "name:fuzzy", "name": "Priya Natarajan",
                                         "field": "title"}


def test_a_name_inside_a_longer_question_is_found(named) -> None:
    assert _first(named, "what is the circuit breaker threshold") == "熔断.md"
    assert _first(named, "熔断是什么意思") == "熔断.md"


def test_a_unique_heading_is_a_name(named) -> None:
    assert _first(named, "failover drill") == "knowledge/runbook/runbook.md"


def test_names_can_be_switched_off(named) -> None:
    off = named.settings.search.model_copy(update={"use_names": False})
    first = search(named, "circuit breaker", options=off, log_access=False).results[0].path
    assert first == "incidents/outage.md"   # what text relevance alone does


def test_normal_forms() -> None:
    assert fold("ＡＢＣ熔斷") == "abc熔断"
    assert compact("Blue-green  deployment!") == "bluegreendeployment"
    assert spaced("云南自驾2025的行程") == "云南自驾 2025 的行程"
    words = spaced("what a moment")
    assert not within_words(words, words.find("mom"), words.find("mom") + 3)
    assert within_words("mom s day", 0, 3)


def test_edit_distance_counts_a_swap_as_one_edit() -> None:
    assert osa_distance("bukcet", "bucket", 2) == 1
    assert osa_distance("strom", "storm", 2) == 1
    assert osa_distance("abcdef", "uvwxyz", 2) == 3       # stops past the limit
    assert [max_edits(n) for n in (4, 5, 7, 8, 20)] == [0, 1, 1, 2, 2]


def test_one_title_word_inside_a_long_phrase_is_weak_evidence(make_vault: VaultFactory) -> None:
    # "garden" is half of the title's weight either way; what changes is how much of the
    # query it explains: all of a one-word query, or one word of a pasted sentence
    vault = make_vault({
        "notes/tomato garden.md": note("Stakes, watering, blight.", title="Tomato garden"),
        "notes/harbour.md": note("We watched the sunset from the old harbour wall; the "
                                 "garden behind it was closed for repairs."),
    })
    from reme_agent.recall.names import index_for

    names = index_for(vault)
    short = names.match("garden")["notes/tomato garden.md"]
    long = names.match("sunset from the old harbour wall garden closed repairs")
    weak = long["notes/tomato garden.md"]
    assert short.kind == weak.kind == "tokens"
    assert weak.strength <= short.strength / 2
    first = search(vault, "sunset from the old harbour wall garden closed repairs",
                   log_access=False).results[0]
    assert first.path == "notes/harbour.md"


def test_a_name_of_stopwords_alone_names_its_note_only_as_the_whole_query(
        make_vault: VaultFactory) -> None:
    vault = make_vault({
        "notes/odd.md": note("Kept from an old import.", aliases=["for the"]),
        "notes/thanks.md": note("Thanks for the support at the studio."),
    })
    from reme_agent.recall.names import index_for

    names = index_for(vault)
    assert "notes/odd.md" not in names.match("thanks for the support")
    assert names.match("for the")["notes/odd.md"].kind == "exact"
    assert _first(vault, "thanks for the support") == "notes/thanks.md"
