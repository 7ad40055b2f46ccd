"""Triggers: the post-write queue consumer (FIFO, background worker), manual, batch by path."""

from __future__ import annotations

import threading

from reme_agent.jobs.autolink_job import AutoLinkWorker, register_consumer
from reme_agent.jobs.queue import JobQueue
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
    queue = JobQueue()
    register_consumer(queue, vault)
    # what the distiller does after a knowledge write
    write_note(vault, RATE, text=NEW)
    queue.enqueue(QUEUE_KIND, RATE, reason="new or changed knowledge note",
                  payload={"level": "L1"}, source="distiller")
    (item,) = queue.drain()
    assert item.status == "done", item.error
    assert "the [[api-gateway|API gateway]] enforces it" in body_of(vault, RATE)
    assert "enforces the [[rate-limit|rate limit]]" in body_of(vault, GW)
    assert "on [[rate-limit|rate limit]] errors" in body_of(vault, AUTH)
    # inbound links are visible in the graph at once (the notes were re-indexed)
    assert {s for s, _ in vault.graph.inbound(RATE)} == {GW, AUTH}


def test_the_worker_drains_in_the_background_without_blocking_the_writer(make_vault) -> None:
    vault = make_vault(NOTES)
    queue = JobQueue()
    linker = AutoLinker(vault)
    started = threading.Event()
    real = linker.handle

    def slow_handle(item):
        started.set()
        return real(item)

    linker.handle = slow_handle  # type: ignore[method-assign]
    write_note(vault, RATE, text=NEW)
    with AutoLinkWorker(queue, linker, interval=0.05) as worker:
        queue.enqueue(QUEUE_KIND, RATE)  # returns at once: the writer never waits
        worker.notify()
        assert started.wait(10)
    assert queue.pending() == []
    assert [t for t, _, _ in links_of(vault, GW)] == [RATE]


def test_items_of_other_kinds_are_left_alone(make_vault) -> None:
    vault = make_vault(NOTES)
    queue = JobQueue()
    register_consumer(queue, vault)
    queue.enqueue("split", GW)
    assert queue.drain() == [] and len(queue.pending("split")) == 1


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
