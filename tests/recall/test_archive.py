"""Archive semantics in recall: `status: archived` in a file counts at once, archived notes'
links are suspended in centrality, the maintainer's list and thaw, un-archiving restores."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from reme_agent.recall.archive import archived_now
from reme_agent.recall.search import SearchResponse, search
from tests.recall.conftest import SETTINGS, VaultFactory, note, write_meta

QUERY = "platypus venom spurs"
HIT = "Platypus venom spurs are found on the hind legs of males."
TARGET = "knowledge/target/target.md"
OTHER = "knowledge/other/other.md"
LINKER = "daily/2026-01-05/linker/linker.md"
STREAM = {"lifecycle": "streaming", "scope": "instance", "source": "auto",
          "role": "observation", "originSessionId": "s-1"}


def _archived(vault) -> set[str]:
    now = archived_now(vault)
    return {p for p in (TARGET, OTHER, LINKER) if p in now}


def _results(response: SearchResponse) -> dict[str, dict[str, float]]:
    return {n.path: n.factors for n in response.results}


def _set_status(vault, path: str, status: str | None) -> None:
    """Edit the file as a person would in Obsidian: no tool, no maintain, no index call."""
    file: Path = vault.root / path
    lines = [x for x in file.read_text(encoding="utf-8").split("\n")
             if not x.startswith("status:")]
    if status is not None:
        lines.insert(1, f"status: {status}")
    file.write_text("\n".join(lines), encoding="utf-8")


def _vault(make_vault: VaultFactory):
    return make_vault({
        TARGET: note(HIT, title="Target"),
        OTHER: note(HIT + " Also seen in zoos.", title="Other", status="distilled", **STREAM),
        LINKER: note("Gardening notes about tomatoes; see [[target]].", title="Linker",
                     status="distilled", **STREAM),
    })


def test_a_hand_set_status_archived_hides_the_note_at_once_and_unarchiving_restores_it(
        make_vault: VaultFactory) -> None:
    vault = _vault(make_vault)
    assert OTHER in _results(search(vault, QUERY, log_access=False))
    _set_status(vault, OTHER, "archived")
    assert OTHER not in _results(search(vault, QUERY, log_access=False))
    assert OTHER in _results(search(vault, QUERY, include_archived=True, log_access=False))
    _set_status(vault, OTHER, "distilled")
    assert OTHER in _results(search(vault, QUERY, log_access=False))


def test_centrality_drops_when_the_only_linker_is_archived(make_vault: VaultFactory) -> None:
    vault = _vault(make_vault)
    linked = 1 + SETTINGS.search.alpha * math.log(2)
    factors = _results(search(vault, QUERY, log_access=False))
    assert math.isclose(factors[TARGET]["centrality"], linked, rel_tol=1e-5)
    _set_status(vault, LINKER, "archived")
    vault.refresh([LINKER])    # not a search candidate: re-indexed as any edit is (watcher)
    assert _results(search(vault, QUERY, log_access=False))[TARGET]["centrality"] == 1.0
    _set_status(vault, LINKER, "distilled")
    vault.refresh([LINKER])
    got = _results(search(vault, QUERY, log_access=False))[TARGET]["centrality"]
    assert math.isclose(got, linked, rel_tol=1e-5)


def test_an_archived_note_shown_on_request_has_its_inbound_links_suspended(
        make_vault: VaultFactory) -> None:
    vault = _vault(make_vault)
    _set_status(vault, TARGET, "archived")
    factors = _results(search(vault, QUERY, include_archived=True, log_access=False))
    assert factors[TARGET]["centrality"] == 1.0       # the live linker's edge is suspended too


def test_the_maintainers_list_counts_and_a_hand_unarchive_of_a_listed_note_restores_it(
        make_vault: VaultFactory) -> None:
    vault = _vault(make_vault)
    _set_status(vault, OTHER, "archived")
    vault.refresh([OTHER])
    write_meta(vault, "archived", {"threshold": 1.0, "archived": [OTHER, TARGET],
                                   "state": {OTHER: {"stamp": "x", "activity": "2026-01-01"}}})
    assert _archived(vault) == {OTHER, TARGET}   # TARGET: listed, without a status
    _set_status(vault, OTHER, "distilled")
    assert OTHER in _results(search(vault, QUERY, log_access=False))
    assert _archived(vault) == {TARGET}


def test_a_thawed_note_is_live_though_its_status_still_says_archived(
        make_vault: VaultFactory) -> None:
    vault = _vault(make_vault)
    _set_status(vault, OTHER, "archived")
    _set_status(vault, LINKER, "archived")
    vault.index()
    write_meta(vault, "archived", {"threshold": 1.0, "archived": [], "thawed": [OTHER]})
    assert _archived(vault) == {LINKER}
    assert OTHER in _results(search(vault, QUERY, log_access=False))


def test_the_archived_set_is_remade_when_the_index_or_the_list_changes(
        make_vault: VaultFactory) -> None:
    vault = _vault(make_vault)
    first = archived_now(vault)
    assert archived_now(vault) is first and _archived(vault) == set()
    write_meta(vault, "archived", {"archived": [OTHER]})
    assert archived_now(vault) is not first and _archived(vault) == {OTHER}
    _set_status(vault, LINKER, "archived")
    vault.refresh([LINKER])
    assert _archived(vault) == {OTHER, LINKER}


def test_the_status_index_decides_like_the_per_path_lookup() -> None:
    """With every `status: archived` path listed up front (the state's status index), each
    path is decided as the per-path frontmatter lookup decides it (randomised)."""
    import random

    from reme_agent.recall.archive import Archived
    from reme_agent.recall.signals import ArchivedSignal

    for seed in range(40):
        rng = random.Random(seed)
        paths = [f"knowledge/n{i}/n{i}.md" for i in range(60)]
        status = {p: rng.choice([None, "archived", "distilled", "streaming"])
                  for p in paths if rng.random() < 0.85}           # the rest: no note
        signal = None
        if rng.random() < 0.8:
            listed = rng.sample(paths, 15)
            signal = ArchivedSignal(archived=listed, thawed=rng.sample(paths, 8),
                                    state={p: {"was": "distilled"} for p in rng.sample(listed, 6)})

        def lookup(asked: list[str], status: dict = status) -> dict:
            return {p: status[p] for p in asked if p in status}

        lazy = Archived(signal, lookup)
        indexed = Archived(signal, lookup, {p for p, s in status.items() if s == "archived"})
        asked = [*paths, "knowledge/missing/missing.md"]
        rng.shuffle(asked)
        indexed.prefetch(asked[:20])
        assert [p in indexed for p in asked] == [p in lazy for p in asked], seed
        listed = signal.archived if signal is not None else []
        assert indexed.nothing == (not any(s == "archived" for s in status.values())
                                   and not listed)
        if indexed.nothing:
            assert not any(p in lazy for p in asked)
    assert Archived(None, lambda asked: {}, set()).nothing
    assert not Archived(None, lambda asked: {}, {"a.md"}).nothing
    assert not Archived(None, lambda asked: {}).nothing     # unknown without the index


def test_a_read_only_index_without_the_status_index_falls_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlite3

    from reme_agent.engine import state as state_mod
    from reme_agent.engine.state import IndexState

    db = tmp_path / "index.sqlite"
    IndexState(db).close()
    with sqlite3.connect(db) as raw:
        raw.execute("DROP INDEX files_status")
    connect = sqlite3.connect

    def read_only(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        conn = connect(*args, **kwargs)
        conn.execute("PRAGMA query_only=ON")    # as a read-only copy of the vault refuses
        return conn
    monkeypatch.setattr(state_mod.sqlite3, "connect", read_only)
    state = IndexState(db)
    assert state.paths_with_status("archived") is None     # lookups per path instead
    state.close()
    monkeypatch.setattr(state_mod.sqlite3, "connect", connect)
    state = IndexState(db)                                  # writable: index made again
    assert state.paths_with_status("archived") == set()
    state.close()
