"""The relevance floor, verbatim phrases and snippet choice (DESIGN §7)."""

from __future__ import annotations

import pytest

from reme_agent.recall.phrases import phrase_of
from reme_agent.recall.search import search
from reme_agent.recall.snippets import is_metadata
from tests.recall.conftest import VaultFactory, note


@pytest.fixture
def kitchen(make_vault: VaultFactory):
    return make_vault({
        "recipes/carbonara.md": note("Guanciale, yolks, pecorino and black pepper. No cream, "
                                     "no garlic, no parsley."),
        "recipes/pesto.md": note("Basil, garlic, pine nuts and parmesan, pounded in a mortar."),
        "recipes/红烧肉.md": note("五花肉切块焯水。炒糖色火一定要小，糊了就苦。小火炖一个小时。"),
        "recipes/糖醋排骨.md": note("排骨焯水后炒糖色，火要大一点，糖色一定要炒透，小火收汁。"),
        "knowledge/jwt/jwt.md": note("owner:: [[Priya]]\n\nHow we rotate the JWT signing "
                                     "keys without logging anyone out: two keys overlap.",
                                     title="JWT key rotation"),
        "people/Priya.md": note("Staff engineer."),
    })


def test_a_query_about_nothing_in_the_vault_is_answered_no_good_match(kitchen) -> None:
    response = search(kitchen, "kubernetes pod autoscaling", log_access=False)
    assert response.results and all(n.weak for n in response.results)
    assert response.render().startswith("No good match")


def test_a_real_answer_is_not_weak(kitchen) -> None:
    response = search(kitchen, "carbonara without cream", log_access=False)
    assert response.results[0].path == "recipes/carbonara.md"
    assert not response.results[0].weak
    assert "No good match" not in response.render()


def test_the_floor_can_be_switched_off(kitchen) -> None:
    off = kitchen.settings.search.model_copy(update={"use_floor": False})
    response = search(kitchen, "kubernetes pod autoscaling", options=off, log_access=False)
    assert not any(n.weak for n in response.results)


def test_a_verbatim_phrase_puts_its_note_first(kitchen) -> None:
    # both notes hold 炒糖色 / 火 / 一定 / 小; only one holds them in this order
    for query in ("炒糖色火一定要小", '"no garlic, no parsley"', "yolks pecorino and black pepper"):
        first = search(kitchen, query, log_access=False).results[0]
        assert first.match == {"kind": "phrase"}, query
    assert search(kitchen, "炒糖色火一定要小", log_access=False).results[0].path == \
        "recipes/红烧肉.md"


def test_phrase_like_queries() -> None:
    assert phrase_of('say "no garlic" please') == "no garlic"
    assert phrase_of("炒糖色火一定要小") == "炒糖色火一定要小"
    assert phrase_of("garlic") is None


def test_the_shown_chunk_is_content_not_a_metadata_line(kitchen) -> None:
    node = search(kitchen, "jwt key rotation", log_access=False).results[0]
    assert node.path == "knowledge/jwt/jwt.md"
    assert "two keys overlap" in node.chunks[0].text


def test_a_relation_question_shows_the_line_that_answers_it(kitchen) -> None:
    response = search(kitchen, "who owns the jwt key rotation", log_access=False)
    assert response.results[0].path == "people/Priya.md"
    subject = next(n for n in response.results if n.path == "knowledge/jwt/jwt.md")
    assert subject.chunks[0].text.startswith("owner::")


def test_metadata_blocks() -> None:
    assert is_metadata("owner:: [[张三]]\n- depends_on:: [[订单数据库]]")
    assert is_metadata("[[a]], [[b]]\n#tag")
    assert not is_metadata("owner:: [[张三]]\nThe service signs tokens.")
