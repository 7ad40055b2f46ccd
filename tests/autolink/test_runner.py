"""Triggers: the post-write queue consumer (durable queue, background worker), manual, batch."""

from __future__ import annotations

import threading

from reme_agent.jobs.followups import FollowupWorker, Wiring, drain
from reme_agent.maintenance.autolink.runner import QUEUE_KIND, AutoLinker, parse_levels
from reme_agent.toolkit.notes import write_note
from tests.autolink.conftest import body_of, kpath, links_of, node

GW, RATE, AUTH = kpath("api-gateway"), kpath("rate-limit"), kpath("auth")
NOTES = {
    GW: node("API gateway", "The gateway enforces the rate limit and calls the auth service."),
    AUTH: node("Auth service", "Issues tokens; clients back off on rate limit errors."),
}
NEW = node("Rate limit", "A rate limit caps requests; the API gateway enforces it.")


def test_queue_item_links_the_new_node_and_its_mentions_elsewhere(make_vault) -> None:
    vault = make_vault(NOTES)
    # what the distiller does after a knowledge write
    write_note(vault, RATE, text=NEW)
    vault.queue.enqueue(QUEUE_KIND, RATE, reason="new or changed knowledge note",
                        payload={"level": "L1"}, source="distiller")
    (item,) = drain(vault).ran  # the default wiring: auto-link L1, no model needed
    assert item.status == "done", item.error
    assert "the [[api-gateway|API gateway]] enforces it" in body_of(vault, RATE)
    assert "enforces the [[rate-limit|rate limit]]" in body_of(vault, GW)
    assert "on [[rate-limit|rate limit]] errors" in body_of(vault, AUTH)
    # inbound links are visible in the graph at once (the notes were re-indexed)
    assert {s for s, _ in vault.graph.inbound(RATE)} == {GW, AUTH}


def test_the_worker_drains_in_the_background_without_blocking_the_writer(make_vault) -> None:
    vault = make_vault(NOTES)
    linker = AutoLinker(vault)
    started, release = threading.Event(), threading.Event()

    def slow_handle(item):  # type: ignore[no-untyped-def]
        started.set()
        assert release.wait(30)
        return [r.path for r in linker.handle(item)]

    write_note(vault, RATE, text=NEW)
    wiring = Wiring(vault, consumers={QUEUE_KIND: slow_handle})
    with FollowupWorker(vault, interval=0.05, wiring=wiring) as worker:
        vault.queue.enqueue(QUEUE_KIND, RATE)  # returns at once: the writer never waits
        worker.wake()
        assert started.wait(10)
        assert [i.status for i in vault.queue.items()] == ["running"]  # claimed, leased
        release.set()
    assert vault.queue.pending() == [] and [i.status for i in vault.queue.items()] == ["done"]
    assert [t for t, _, _ in links_of(vault, GW)] == [RATE]


def test_items_of_other_kinds_are_left_alone(make_vault) -> None:
    vault = make_vault(NOTES)
    vault.queue.enqueue("split", GW)
    report = drain(vault, Wiring(vault, use_model=False))
    assert report.ran == [] and len(vault.queue.pending("split")) == 1
    assert report.waiting == {"split": 1} and "no model" in report.why_waiting["split"]


def test_batch_can_be_limited_to_a_path(make_vault) -> None:
    vault = make_vault({**NOTES, RATE: NEW})
    report = AutoLinker(vault).run("L1", paths=[GW])
    assert [r["path"] for r in report.l1["changed"]] == [GW]
    assert "[[" not in body_of(vault, AUTH)


def test_levels_parse_in_order_and_reject_unknown_ones() -> None:
    assert parse_levels("l3, L1") == ["L1", "L3"]
    assert parse_levels(None, ["L4"]) == ["L4"]
    import pytest

    from reme_agent.errors import InvalidArgument

    with pytest.raises(InvalidArgument):
        parse_levels("L5")


def test_a_new_node_gets_inbound_links_from_variant_mentions_when_the_judge_agrees(
        make_vault) -> None:
    from reme_agent.maintenance.autolink.judge import ScriptedJudge

    cb = kpath("circuit-breaker")
    vault = make_vault({**NOTES, AUTH: node("Auth service", "Its ＣＩＲＣＵＩＴ-BREAKERS open fast.")})
    write_note(vault, cb, text=node("Circuit breaker", "Fails fast."))
    judge = ScriptedJudge(choices={"ＣＩＲＣＵＩＴ-BREAKERS": cb})
    results = AutoLinker(vault, judge=judge).handle(type("Item", (), {"path": cb})())
    assert [r.path for r in results if r.status == "linked"] == [AUTH]
    assert links_of(vault, AUTH) == [(cb, "ＣＩＲＣＵＩＴ-BREAKERS", None)]
