"""Decay and archive: the score on hand-computed cases, the status machine, thaw, moves."""

from __future__ import annotations

import math

import pytest

from reme_agent.engine.parser import split_frontmatter
from reme_agent.maintenance.decay import decay_score
from reme_agent.recall.search import search
from reme_agent.recall.signals import load_signal_text
from tests.maintenance.conftest import (
    NOW,
    VaultFactory,
    daily,
    days_ago,
    knowledge,
    maintainer,
    note,
    read_json,
    set_mtime,
)

OLD = "daily/2026-08-22/old-done/old-done.md"       # distilled, 100 days cold
ACTIVE = "daily/2026-08-22/old-open/old-open.md"    # active, 100 days cold
FRESH = "daily/2026-11-20/fresh/fresh.md"           # distilled, 10 days
HUB = "knowledge/hub/hub.md"                        # importance 8, updated now, 3 inbound
STALE = "knowledge/stale/stale.md"                  # evolving: never archived


def fm_status(vault, path: str) -> str:
    return split_frontmatter(vault.store.read_text(path))[0]["status"]


@pytest.fixture
def vault(make_vault: VaultFactory):
    old, fresh = days_ago(100).isoformat(), days_ago(10).isoformat()
    notes = {
        OLD: daily("Old done", f"About [[{HUB}]] and platypus venom.", "distilled", old),
        ACTIVE: daily("Old open", f"See [[{HUB}]].", "active", old),
        FRESH: daily("Fresh", f"See [[{HUB}]].", "distilled", fresh),
        HUB: knowledge("Hub", "The hub.", importance=8, updated=NOW.isoformat()),
        STALE: knowledge("Stale", "Forgotten.", updated=days_ago(1000).isoformat()),
    }
    mtimes = {OLD: days_ago(100), ACTIVE: days_ago(100), FRESH: days_ago(10), HUB: NOW,
              STALE: days_ago(1000)}
    return make_vault(notes, mtimes=mtimes)


def test_decay_formula_on_hand_computed_cases() -> None:
    assert decay_score(5, 0, 0, 0.03, 1.0) == pytest.approx(5.0)
    assert decay_score(5, 10, 0, 0.03, 1.0) == pytest.approx(5 * math.exp(-0.3))   # 3.704091
    assert decay_score(8, 0, 3, 0.03, 1.0) == pytest.approx(8 + math.log(4))       # 9.386294
    assert decay_score(5, 100, 1, 0.03, 0.5) == pytest.approx(
        5 * math.exp(-3) + 0.5 * math.log(2))                                      # 0.595509
    assert decay_score(5, -3, -1, 0.03, 1.0) == pytest.approx(5.0)   # clamped: no future, no <0


def test_scores_follow_the_formula_and_are_written_with_a_valid_schema(vault) -> None:
    report = maintainer(vault).run(["decay"])
    scores = read_json(vault, "meta/recency.json")["scores"]
    assert scores[OLD] == pytest.approx(5 * math.exp(-0.03 * 100), rel=1e-5)
    assert scores[FRESH] == pytest.approx(5 * math.exp(-0.03 * 10), rel=1e-5)
    assert scores[HUB] == pytest.approx(8 + math.log(4), rel=1e-5)
    assert scores[STALE] == pytest.approx(5 * math.exp(-30), abs=1e-5)
    for name in ("recency", "archived"):
        load_signal_text(name, (vault.root / f"meta/{name}.json").read_text(encoding="utf-8"))
    assert report.step("decay").found["scored"] == 5


def test_only_distilled_streaming_notes_are_archived(vault) -> None:
    report = maintainer(vault).run(["decay"])
    archived = read_json(vault, "meta/archived.json")
    assert archived["archived"] == [OLD] and archived["threshold"] == 1.0
    assert fm_status(vault, OLD) == "archived"
    assert fm_status(vault, ACTIVE) == "active"          # never skips distilled
    found = report.step("decay").found
    assert [s["path"] for s in found["stale_active"]] == [ACTIVE]
    assert found["below_threshold"] == 3                 # OLD, ACTIVE and STALE: cold, but
    assert fm_status(vault, OLD) == "archived"           # knowledge evolves, never archived
    assert "status" not in split_frontmatter(vault.store.read_text(STALE))[0]
    assert OLD not in [n.path for n in search(vault, "platypus venom", log_access=False).results]


def test_the_maintainers_own_write_does_not_thaw_and_a_rerun_changes_nothing(vault) -> None:
    maintainer(vault).run(["decay"])
    text = vault.store.read_text(OLD)
    report = maintainer(vault).run(["decay"])
    assert read_json(vault, "meta/archived.json")["archived"] == [OLD]
    assert vault.store.read_text(OLD) == text
    assert report.step("decay").actions == []


def test_a_read_thaws_an_archived_note_on_the_next_run(vault) -> None:
    maintainer(vault).run(["decay"])
    vault.access_log.record([OLD], when=NOW)   # e.g. search(include_archived=True) found it
    report = maintainer(vault).run(["access", "decay"])
    assert read_json(vault, "meta/archived.json")["archived"] == []
    assert {"action": "thaw", "path": OLD} in [
        {k: a[k] for k in ("action", "path")} for a in report.step("decay").actions]
    assert fm_status(vault, OLD) == "archived"          # the status never moves back
    assert OLD in [n.path for n in search(vault, "platypus venom", log_access=False).results]


def test_an_edit_thaws_an_archived_note_on_the_next_run(vault) -> None:
    maintainer(vault).run(["decay"])
    vault.store.write(OLD, vault.store.read_text(OLD) + "\nA late correction.\n")
    set_mtime(vault, OLD, days_ago(1))
    maintainer(vault).run(["decay"])
    assert read_json(vault, "meta/archived.json")["archived"] == []


def test_move_archived_moves_the_note_and_rewrites_links_then_thaw_moves_it_back(
        make_vault: VaultFactory) -> None:
    old = days_ago(200).isoformat()
    ref = "knowledge/ref/ref.md"
    vault = make_vault({
        OLD: daily("Old done", "Cold notes.", "distilled", old),
        ref: knowledge("Ref", f"source:: [[{OLD}|the old day]] and [[old-done]]"),
    }, mtimes={OLD: days_ago(200)})
    moved = "archive/" + OLD
    report = maintainer(vault).run(["decay"], move_archived=True)
    assert not vault.store.exists(OLD) and vault.store.exists(moved)
    assert read_json(vault, "meta/archived.json")["archived"] == [moved]
    assert fm_status(vault, moved) == "archived"
    text = vault.store.read_text(ref)
    assert "source:: [[" in text and "|the old day]]" in text and "[[old-done]]" in text
    for target in vault.graph.outbound(ref):
        assert target[0] == moved                     # every link still lands on the note
    assert any(a["action"] == "move" for a in report.step("decay").actions)

    vault.access_log.record([moved], when=NOW)
    maintainer(vault).run(["access", "decay"], move_archived=True)
    assert vault.store.exists(OLD) and not vault.store.exists(moved)
    assert read_json(vault, "meta/archived.json")["archived"] == []
    assert {t for t, _ in vault.graph.outbound(ref)} == {OLD}


def test_a_workspace_moves_whole_with_its_materials_and_comes_back_whole(
        make_vault: VaultFactory) -> None:
    """`daily_attach` puts materials beside the summary; archiving the workspace must not
    leave them behind in daily/ (links to them still resolve, nothing is lost)."""
    old = days_ago(200).isoformat()
    folder = OLD.rsplit("/", 1)[0]
    material, log = f"{folder}/query.sql.md", f"{folder}/run.log"
    ref = "knowledge/ref/ref.md"
    vault = make_vault({
        OLD: daily("Old done", "Cold notes, see [[query.sql]] and [[run.log]].", "distilled",
                   old),
        material: "---\nlifecycle: frozen\nrole: reference\n---\nSELECT 1;\n",
        ref: knowledge("Ref", f"[[{material}|the query]] from [[old-done]]"),
    }, mtimes={OLD: days_ago(200)})
    (vault.root / log).write_text("line 1\n", encoding="utf-8")
    dry = maintainer(vault).run(["decay"], move_archived=True, dry_run=True)
    moves = [a for a in dry.step("decay").actions if a["action"] == "move"]
    assert moves == [{"action": "move", "from": OLD, "to": "archive/" + OLD,
                      "with": sorted([material, log])}]
    assert vault.store.exists(material)   # a dry run moves nothing

    maintainer(vault).run(["decay"], move_archived=True)
    for path in (OLD, material, log):
        assert not vault.store.exists(path) and vault.store.exists("archive/" + path)
    assert not (vault.root / folder).exists() or not any((vault.root / folder).iterdir())
    assert vault.store.read_text("archive/" + log) == "line 1\n"
    targets = {t for t, _ in vault.graph.outbound(ref)}
    assert targets == {"archive/" + material, "archive/" + OLD}   # links follow
    assert {t for t, _ in vault.graph.outbound("archive/" + OLD)} >= {"archive/" + material}

    vault.access_log.record(["archive/" + OLD], when=NOW)
    maintainer(vault).run(["access", "decay"], move_archived=True)
    for path in (OLD, material, log):
        assert vault.store.exists(path) and not vault.store.exists("archive/" + path)
    assert {t for t, _ in vault.graph.outbound(ref)} == {material, OLD}


def test_dry_run_reports_the_archive_without_writing(vault) -> None:
    before = vault.store.read_text(OLD)
    report = maintainer(vault).run(["decay"], dry_run=True)
    assert [a["path"] for a in report.step("decay").actions] == [OLD]
    assert vault.store.read_text(OLD) == before
    assert not (vault.root / "meta").exists()


def test_importance_out_of_range_counts_as_the_default(make_vault: VaultFactory) -> None:
    path = "knowledge/odd/odd.md"
    vault = make_vault({path: note("# Odd", title="Odd", importance=99, updated=NOW.isoformat())},
                       mtimes={path: NOW})
    maintainer(vault).run(["decay"])
    assert read_json(vault, "meta/recency.json")["scores"][path] == pytest.approx(5.0)


def test_a_thawed_note_stays_live_on_later_runs_and_a_cold_spell_lists_it_again(vault) -> None:
    maintainer(vault).run(["decay"])
    vault.access_log.record([OLD], when=NOW)
    maintainer(vault).run(["access", "decay"])
    maintainer(vault).run(["access", "decay"])              # still warm: still thawed
    listed = read_json(vault, "meta/archived.json")
    assert listed["archived"] == [] and listed["thawed"] == [OLD]
    assert fm_status(vault, OLD) == "archived"
    assert OLD in [n.path for n in search(vault, "platypus venom", log_access=False).results]
    maintainer(vault, now=days_ago(-200)).run(["decay"])     # 200 days later: cold again
    listed = read_json(vault, "meta/archived.json")
    assert OLD in listed["archived"] and listed["thawed"] == []


def test_a_note_archived_by_hand_is_hidden_at_once_and_not_thawed_by_maintain(vault) -> None:
    assert FRESH in [n.path for n in search(vault, "See Hub fresh", log_access=False).results]
    text = vault.store.read_text(FRESH).replace("status: \"distilled\"", "status: \"archived\"")
    (vault.root / FRESH).write_text(text, encoding="utf-8")   # as a person would, in Obsidian
    set_mtime(vault, FRESH, days_ago(10))
    found = [n.path for n in search(vault, "See Hub fresh", log_access=False).results]
    assert FRESH not in found
    maintainer(vault).run(["decay"])                          # warm: scores above threshold
    assert FRESH not in read_json(vault, "meta/archived.json")["thawed"]
    assert FRESH not in [n.path for n in search(vault, "See Hub fresh", log_access=False).results]


def test_archived_notes_links_keep_nothing_warm(vault) -> None:
    maintainer(vault).run(["decay"])                          # archives OLD (links to HUB)
    maintainer(vault).run(["decay"])
    scores = read_json(vault, "meta/recency.json")["scores"]
    assert scores[HUB] == pytest.approx(8 + math.log(3), rel=1e-5)   # ACTIVE, FRESH; not OLD
