"""Communities: Louvain with a fixed seed, valid schema, stable ids, read by search end to end."""

from __future__ import annotations

import pytest

from reme_agent.maintenance.communities import assign_ids, stability
from reme_agent.recall.search import search
from reme_agent.recall.signals import CommunitiesSignal, load_signal_text
from tests.maintenance.conftest import VaultFactory, knowledge, maintainer, read_json

ZOO = [f"knowledge/zoo-{i}/zoo-{i}.md" for i in range(4)]
OPS = [f"knowledge/ops-{i}/ops-{i}.md" for i in range(4)]


def clique(paths: list[str], topic: str, strength: int) -> dict[str, str]:
    notes = {}
    for i, path in enumerate(paths):
        links = " ".join(f"[[{p}]]" for p in paths if p != path)
        notes[path] = knowledge(f"{topic} {i}", f"{'Platypus venom spurs. ' * strength}"
                                                f"Note {i} about {topic}. {links}")
    return notes


@pytest.fixture
def vault(make_vault: VaultFactory):
    notes = {**clique(ZOO, "zoology", 3), **clique(OPS, "operations", 1)}
    notes[OPS[0]] = notes[OPS[0]].replace("operations.", f"operations. [[{ZOO[0]}]]")  # bridge
    return make_vault(notes)


def test_two_linked_cliques_become_two_communities_with_a_valid_schema(vault) -> None:
    report = maintainer(vault).run(["communities"])
    text = (vault.root / "meta/communities.json").read_text(encoding="utf-8")
    signal = load_signal_text("communities", text)
    assert isinstance(signal, CommunitiesSignal)
    assert signal.algorithm == "louvain" and signal.resolution == 1.0
    comm = signal.communities
    assert len({comm[p] for p in ZOO}) == 1 and len({comm[p] for p in OPS}) == 1
    assert comm[ZOO[0]] != comm[OPS[0]]
    stats = signal.stats
    assert stats["nodes"] == 8 and stats["edges"] == 13 and stats["communities"] == 2
    assert stats["modularity"] > 0.3 and stats["stability"] is None
    assert report.step("communities").found["communities"] == 2


def test_a_second_run_keeps_ids_and_reports_full_stability(vault) -> None:
    maintainer(vault).run(["communities"])
    first = read_json(vault, "meta/communities.json")
    maintainer(vault).run(["communities"])
    second = read_json(vault, "meta/communities.json")
    assert second["communities"] == first["communities"]
    assert second["stats"]["stability"] == {"jaccard": 1.0, "kept": 1.0}
    assert second["stats"]["previous_computed_at"] == first["computed_at"]


def test_an_unchanged_graph_reuses_the_partition_and_a_new_link_recomputes_it(vault) -> None:
    first = maintainer(vault).run(["communities"]).step("communities")
    assert "reused" not in first.found
    again = maintainer(vault).run(["communities"]).step("communities")
    assert again.found["reused"] == 1 and again.found["communities"] == 2
    path = OPS[1]
    vault.store.write(path, vault.store.read_text(path) + f"\nAlso [[{ZOO[2]}]].\n")
    changed = maintainer(vault).run(["communities"]).step("communities")   # indexes first
    assert "reused" not in changed.found and changed.found["edges"] == 14


def test_ids_follow_the_best_overlapping_previous_community() -> None:
    previous = {"a": 7, "b": 7, "c": 7, "d": 3, "e": 3}
    groups = [["d", "e", "x"], ["a", "b"], ["c"]]
    mapping = assign_ids(groups, previous)
    assert mapping["d"] == mapping["x"] == 3        # kept its id
    assert mapping["a"] == mapping["b"] == 7
    assert mapping["c"] == 8                        # a new community: a fresh id
    stab = stability(mapping, previous)
    assert stab is not None and 0 < stab["jaccard"] < 1 and stab["kept"] == pytest.approx(4 / 5)


def test_search_applies_the_community_factor_to_a_same_community_node(vault) -> None:
    maintainer(vault).run(["communities"])
    comm = vault.signals.communities()
    on = vault.settings.search.model_copy(update={"use_community": True})  # off by default
    response = search(vault, "platypus venom spurs", limit=8, expand_depth=0, options=on,
                      log_access=False)
    assert len(response.results) == 8 and not response.warnings
    seeds = {comm[n.path] for n in response.results[:3]}
    assert len(seeds) == 1                                     # the top 3 share a community
    for node in response.results:
        expected = 1.2 if comm[node.path] in seeds else 1.0    # beta for the seeds' community
        assert node.factors["community"] == pytest.approx(expected), node.path
    assert sorted({round(n.factors["community"], 6) for n in response.results}) == [1.0, 1.2]



HUB = "knowledge/old-overview/old-overview.md"
ZOO3, OPS3 = ZOO[:3], OPS[:3]


def chain(paths: list[str], topic: str, text: str) -> dict[str, str]:
    """A loosely tied topic: each note links the next one."""
    return {path: knowledge(f"{topic} {i}", f"{text} Note {i} about {topic}."
                                            + (f" [[{paths[i + 1]}]]" if i + 1 < len(paths) else ""))
            for i, path in enumerate(paths)}


def _hub(status: str | None) -> str:
    """An overview tying both topics together with three relations to each note."""
    links = "\n".join(f"- [[{p}]]\n- about:: [[{p}]]\n- see:: [[{p}]]" for p in [*ZOO3, *OPS3])
    extra = {"status": status} if status else {}
    return knowledge("Old overview", f"Everything, once.\n\n{links}", **extra)


@pytest.mark.parametrize("how", ["frontmatter", "archived.json"])
def test_an_archived_hub_does_not_join_two_groups(make_vault: VaultFactory, how: str) -> None:
    """Recall ranks live notes by the partition: an archived note's links must not make
    two topics one community (DESIGN §7). The hub is left out and gets no id."""
    from reme_agent.recall.signals import ArchivedSignal

    vault = make_vault({**chain(ZOO3, "zoology", "Platypus venom spurs."),
                        **chain(OPS3, "operations", "Pager rotation."), HUB: _hub(None)})
    maintainer(vault).run(["communities"])
    comm = vault.signals.communities()
    assert comm[ZOO3[0]] == comm[OPS3[0]] == comm[HUB]        # live, the hub binds them
    if how == "frontmatter":   # a person archived it by hand
        (vault.root / HUB).write_text(_hub("archived"), encoding="utf-8")
    else:                      # the maintainer's list (decay)
        vault.signals.write_signal("archived", ArchivedSignal(threshold=0.1, archived=[HUB]))
    report = maintainer(vault).run(["communities"])
    comm = vault.signals.communities()
    assert HUB not in comm
    assert len({comm[p] for p in ZOO3}) == 1 and len({comm[p] for p in OPS3}) == 1
    assert comm[ZOO3[0]] != comm[OPS3[0]]
    stats = read_json(vault, "meta/communities.json")["stats"]
    assert stats["nodes"] == 6 and stats["archived_left_out"] == 1
    assert report.step("communities").found["communities"] == 2
    # the ranking: a zoology query's seeds no longer lift the operations notes
    on = vault.settings.search.model_copy(update={"use_community": True})
    response = search(vault, "platypus venom spurs", limit=8, expand_depth=0, options=on,
                      log_access=False)
    ops = [n for n in response.results if n.path in OPS3]
    zoo = [n for n in response.results if n.path in ZOO3]
    assert zoo and all(n.factors["community"] == pytest.approx(1.2) for n in zoo)
    assert ops and all(n.factors["community"] == pytest.approx(1.0) for n in ops)
