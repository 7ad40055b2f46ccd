"""The follow-up queue: FIFO, dedup of pending items, named consumers, failures recorded."""

from __future__ import annotations

from reme_agent.jobs.queue import JobQueue, default_queue


def test_items_wait_until_a_consumer_for_their_kind_is_registered() -> None:
    q = JobQueue()
    a = q.enqueue("split", "knowledge/a/a.md", reason="big", payload={"tokens": 3000})
    b = q.enqueue("autolink", "knowledge/a/a.md")
    assert q.enqueue("split", "knowledge/a/a.md") is a  # a pending duplicate is not added
    assert q.drain() == [] and q.pending() == [a, b]

    seen: list[str] = []
    q.register("split", lambda item: seen.append(f"split {item.path}"))
    assert [i.id for i in q.drain()] == [a.id] and seen == ["split knowledge/a/a.md"]
    assert a.status == "done" and q.pending() == [b] and q.consumers == ["split"]


def test_consumers_run_fifo_and_a_failure_does_not_stop_the_rest() -> None:
    q = JobQueue()
    order: list[str] = []

    def consume(item):  # type: ignore[no-untyped-def]
        if item.path == "bad":
            raise RuntimeError("boom")
        order.append(item.path)

    q.register("autolink", consume)
    for path in ("one", "bad", "two"):
        q.enqueue("autolink", path)
    ran = q.drain()
    assert order == ["one", "two"] and [i.status for i in ran] == ["done", "failed", "done"]
    assert ran[1].error == "RuntimeError: boom" and len(q.items()) == 3
    q.enqueue("autolink", "one")  # done items do not block a new one for the same path
    assert len(q.pending()) == 1


def test_there_is_one_default_queue() -> None:
    assert default_queue() is default_queue()
