"""Each factor moves the ranking the way DESIGN §7's formula says (small real vaults)."""

from __future__ import annotations

import math

import pytest

from reme_agent.recall.search import rank_blocks, search
from tests.recall.conftest import SETTINGS, VaultFactory, days_ago, note, write_meta

BODY = "The quokka migration plan covers tundra shipping lanes and ferry schedules."
QUERY = "quokka migration ferry"
# recency_weight 1.0: the seed's bare exp(-Δt/τ), so the formula can be checked exactly.
BM25_ONLY = SETTINGS.search.model_copy(update={"vector_weight": 0.0, "recency_weight": 1.0})
# Exact text ties: recency off too, since files written a moment apart differ by a hair.
TIES = BM25_ONLY.model_copy(update={"use_recency": False})
FILLER = "Unrelated gardening remarks about tomatoes, compost and watering cans."


def _order(vault, query=QUERY, **kw) -> list[str]:
    return [n.path for n in search(vault, query, log_access=False, expand_depth=0, **kw).results]


def _node(response, path):
    return next(n for n in response.results if n.path == path)


def test_a_highly_linked_node_overtakes_an_equal_text_peer(make_vault: VaultFactory) -> None:
    notes = {"knowledge/north-node/north-node.md": note(BODY),
             "knowledge/south-node/south-node.md": note(BODY)}
    for i in range(5):
        notes[f"knowledge/linker-{i}/linker-{i}.md"] = note(
            f"{FILLER} See [[knowledge/south-node/south-node.md]].")
    vault = make_vault(notes)
    plain = search(vault, QUERY, options=TIES.model_copy(update={"use_centrality": False}),
                   log_access=False)
    north, south = (_node(plain, p) for p in ("knowledge/north-node/north-node.md",
                                               "knowledge/south-node/south-node.md"))
    assert north.factors["base"] == pytest.approx(south.factors["base"])
    assert plain.results[0].path == north.path          # the tie goes to the path order
    boosted = search(vault, QUERY, options=TIES, log_access=False)
    assert boosted.results[0].path == south.path
    factor = _node(boosted, south.path).factors["centrality"]
    assert factor == pytest.approx(1 + 0.15 * math.log(1 + 5))
    assert _node(boosted, north.path).factors["centrality"] == 1.0


def test_a_node_in_a_seed_community_gets_beta(make_vault: VaultFactory) -> None:
    strong = "Quokka migration ferry quokka migration ferry timetable."
    notes = {f"knowledge/seed-{i}/seed-{i}.md": note(strong) for i in range(3)}
    notes["knowledge/east-peer/east-peer.md"] = note(BODY + " " + FILLER)
    notes["knowledge/west-peer/west-peer.md"] = note(BODY + " " + FILLER)
    # The weakest candidate gets 0 from min-max; keep the peers above it.
    notes["knowledge/weak/weak.md"] = note("A ferry. " + FILLER + " " + FILLER)
    vault = make_vault(notes)
    write_meta(vault, "communities", {"algorithm": "louvain", "resolution": 1.0, "communities": {
        **{f"knowledge/seed-{i}/seed-{i}.md": 1 for i in range(3)},
        "knowledge/east-peer/east-peer.md": 2, "knowledge/west-peer/west-peer.md": 1}})
    off = TIES.model_copy(update={"use_community": False})
    assert _order(vault, options=off)[3:5] == ["knowledge/east-peer/east-peer.md",
                                               "knowledge/west-peer/west-peer.md"]
    on = search(vault, QUERY, options=TIES.model_copy(update={"use_community": True}),
                log_access=False)
    assert [n.path for n in on.results][3:5] == ["knowledge/west-peer/west-peer.md",
                                                 "knowledge/east-peer/east-peer.md"]
    assert _node(on, "knowledge/west-peer/west-peer.md").factors["community"] == 1.2
    assert _node(on, "knowledge/east-peer/east-peer.md").factors["community"] == 1.0
    assert all(_node(on, f"knowledge/seed-{i}/seed-{i}.md").factors["community"] == 1.2
               for i in range(3))


def test_an_old_node_decays_below_a_fresh_equal_one(make_vault: VaultFactory) -> None:
    old, fresh = "knowledge/north-old/north-old.md", "knowledge/south-new/south-new.md"
    vault = make_vault({old: note(BODY, updated="2020-01-01"),
                        fresh: note(BODY, updated=days_ago(1).date().isoformat())},
                       mtimes={old: days_ago(2000), fresh: days_ago(1)})
    response = search(vault, QUERY, options=BM25_ONLY, log_access=False)
    assert [n.path for n in response.results] == [fresh, old]
    assert _node(response, old).factors["recency"] < 0.001
    assert _node(response, fresh).factors["recency"] == pytest.approx(math.exp(-1 / 60), rel=0.02)
    off = BM25_ONLY.model_copy(update={"use_recency": False})
    assert _order(vault, options=off)[0] == old                # tie -> path order without it


def test_a_recent_hit_in_the_access_log_makes_a_node_fresh(make_vault: VaultFactory) -> None:
    old = "knowledge/old-note/old-note.md"
    vault = make_vault({old: note(BODY, updated="2020-01-01")}, mtimes={old: days_ago(900)})
    before = search(vault, QUERY, options=BM25_ONLY, log_access=False).results[0]
    write_meta(vault, "access_log", {"entries": {old: {
        "last_read": days_ago(2).isoformat(), "hit_days": [], "hits_30d": 1}}})
    after = search(vault, QUERY, options=BM25_ONLY, log_access=False).results[0]
    assert before.factors["recency"] < 0.001
    assert after.factors["recency"] == pytest.approx(math.exp(-2 / 60), rel=0.02)


def test_mtime_can_be_ignored_when_a_note_has_a_date(make_vault: VaultFactory) -> None:
    path = "knowledge/cloned/cloned.md"
    vault = make_vault({path: note(BODY, updated="2020-01-01")})   # fresh mtime (a clone)
    opts = BM25_ONLY.model_copy(update={"recency_use_mtime": False})
    assert search(vault, QUERY, options=BM25_ONLY, log_access=False).results[0] \
        .factors["recency"] > 0.99
    assert search(vault, QUERY, options=opts, log_access=False).results[0] \
        .factors["recency"] < 0.001


def test_layer_weights_break_ties_knowledge_daily_resource(make_vault: VaultFactory) -> None:
    paths = ["resource/a-doc/a-doc.md", "daily/2024-05-01/b-log/b-log.md",
             "knowledge/c-node/c-node.md"]
    vault = make_vault({p: note(BODY, title="Same title") for p in paths})
    assert _order(vault, options=TIES) == list(reversed(paths))
    flipped = TIES.model_copy(update={"layer_weights": {"resource": 1.0, "daily": 0.9,
                                                             "knowledge": 0.8}})
    assert _order(vault, options=flipped) == paths
    assert _order(vault, options=TIES.model_copy(update={"use_layer": False})) == sorted(paths)


def test_every_factor_is_reported_and_multiplies_into_the_score(
        make_vault: VaultFactory) -> None:
    vault = make_vault({"knowledge/a/a.md": note(BODY), "knowledge/b/b.md": note(
        "[[knowledge/a/a.md]] " + FILLER)})
    node = search(vault, QUERY, log_access=False).results[0]
    assert set(node.factors) == {"base", "centrality", "community", "recency", "layer"}
    product = math.prod(node.factors.values())
    assert node.score == pytest.approx(product)


def test_rank_blocks_applies_factors_without_grouping(make_vault: VaultFactory) -> None:
    body = "\n\n".join(f"Quokka migration ferry paragraph {i} about lanes." for i in range(5))
    vault = make_vault({"knowledge/many/many.md": note(body),
                        "knowledge/x/x.md": note(BODY)})
    hits = rank_blocks(vault, QUERY, limit=10)
    assert sum(h.path == "knowledge/many/many.md" for h in hits) >= 5
    assert all(h.factors and h.score == pytest.approx(h.base * math.prod(h.factors.values()))
               for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_recency_weight_bounds_the_factor(make_vault: VaultFactory) -> None:
    old = "knowledge/old/old.md"
    vault = make_vault({old: note(BODY, updated="2020-01-01")})
    opts = BM25_ONLY.model_copy(update={"recency_use_mtime": False, "recency_weight": 0.2})
    factor = search(vault, QUERY, options=opts, log_access=False).results[0].factors["recency"]
    assert factor == pytest.approx(0.8, abs=1e-6)  # (1-w) + w*exp(-years/60 days) -> 1-w
