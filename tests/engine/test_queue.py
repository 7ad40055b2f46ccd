"""The durable work queue: dedup, FIFO claims with leases, owner-only transitions, pruning.

Real SQLite files; time is an injected clock, so lease expiry is tested without waiting.
Cross-process behaviour (kill -9, two drainer processes) is in tests/jobs/test_followups.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reme_agent.config import Settings
from reme_agent.engine.queue import LEASE_SECONDS, MAX_ATTEMPTS, QUEUE_FILE, WorkQueue
from reme_agent.errors import StorageError
from reme_agent.vault import open_vault


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def queue(tmp_path: Path, clock: Clock) -> WorkQueue:
    q = WorkQueue(tmp_path / QUEUE_FILE, clock=clock)
    yield q
    q.close()


def test_a_pending_item_of_the_same_kind_and_note_is_not_added_twice(queue) -> None:
    a, added = queue.enqueue("split", "k/a.md", reason="big", payload={"tokens": 3000},
                             source="distiller")
    again, added_again = queue.enqueue("split", "k/a.md", reason="bigger")
    other, _ = queue.enqueue("autolink", "k/a.md")
    assert added and not added_again and again.id == a.id and again.reason == "big"
    assert other.id != a.id
    assert [(i.kind, i.status, i.payload, i.source) for i in queue.pending()] == [
        ("split", "pending", {"tokens": 3000}, "distiller"), ("autolink", "pending", {}, "")]


def test_claims_are_fifo_per_kind_and_a_running_item_does_not_block_a_new_one(queue) -> None:
    for path in ("one", "two"):
        queue.enqueue("autolink", path)
    queue.enqueue("split", "big")
    first = queue.claim(["autolink"], owner="w1")
    assert (first.path, first.status, first.attempts, first.lease_owner) == \
        ("one", "running", 1, "w1")
    # the note changes while its item runs: a new pending item, run after
    _, added = queue.enqueue("autolink", "one")
    assert added
    assert queue.claim(["autolink"], owner="w2").path == "two"
    assert queue.claim(["autolink"], owner="w2").path == "one"
    assert queue.claim(["autolink"], owner="w2") is None
    assert queue.claim([], owner="w2") is None
    assert queue.claim(["split", "autolink"], owner="w2").path == "big"


def test_only_the_lease_owner_completes_fails_or_releases(queue) -> None:
    item, _ = queue.enqueue("autolink", "a")
    queue.claim(["autolink"], owner="w1")
    assert not queue.complete(item.id, "w2") and not queue.fail(item.id, "w2", "x")
    assert not queue.release(item.id, "w2")
    assert queue.fail(item.id, "w1", "RuntimeError: boom")
    got = queue.get(item.id)
    assert (got.status, got.error, got.lease_owner) == ("failed", "RuntimeError: boom", None)
    assert not queue.complete(item.id, "w1")  # no longer running


def test_an_expired_lease_lets_another_drainer_take_the_item(queue, clock) -> None:
    item, _ = queue.enqueue("autolink", "a")
    queue.claim(["autolink"], owner="dead", lease=LEASE_SECONDS)
    clock.now += LEASE_SECONDS - 1
    assert queue.claim(["autolink"], owner="w2") is None      # still held
    clock.now += 2
    again = queue.claim(["autolink"], owner="w2")
    assert (again.id, again.attempts, again.lease_owner) == (item.id, 2, "w2")
    assert not queue.complete(item.id, "dead")                # the old owner lost it
    assert queue.complete(item.id, "w2") and queue.get(item.id).status == "done"


def test_a_heartbeat_keeps_the_lease(queue, clock) -> None:
    item, _ = queue.enqueue("split", "a")
    queue.claim(["split"], owner="w1", lease=10)
    for _ in range(5):
        clock.now += 8
        assert queue.heartbeat(item.id, "w1", lease=10)
    assert queue.claim(["split"], owner="w2") is None
    clock.now += 11
    assert queue.claim(["split"], owner="w2").lease_owner == "w2"
    assert not queue.heartbeat(item.id, "w1", lease=10)


def test_an_item_whose_drainer_dies_every_time_fails_after_max_attempts(queue, clock) -> None:
    item, _ = queue.enqueue("split", "a")
    for n in range(1, MAX_ATTEMPTS + 1):
        assert queue.claim(["split"], owner=f"w{n}", lease=5).attempts == n
        clock.now += 6
    assert queue.claim(["split"], owner="last") is None
    got = queue.get(item.id)
    assert got.status == "failed" and got.error.startswith(f"gave up after {MAX_ATTEMPTS} attempts")


def test_release_puts_an_item_back_unless_a_newer_one_covers_the_note(queue) -> None:
    a, _ = queue.enqueue("autolink", "a")
    b, _ = queue.enqueue("autolink", "b")
    queue.claim(["autolink"], owner="w")
    queue.claim(["autolink"], owner="w")
    newer, _ = queue.enqueue("autolink", "b")
    assert queue.release(a.id, "w") and queue.release(b.id, "w")
    assert [(i.id, i.path) for i in queue.pending()] == [(a.id, "a"), (newer.id, "b")]
    assert queue.get(b.id) is None


def test_failed_items_can_be_retried_once_per_note(queue) -> None:
    for path in ("a", "a", "b"):
        queue.enqueue("autolink", path)
        item = queue.claim(["autolink"], owner="w")
        queue.fail(item.id, "w", "boom")
    queue.enqueue("autolink", "b")                     # already covered by a pending item
    assert queue.retry_failed() == 1
    assert sorted((i.path, i.attempts, i.error) for i in queue.pending()) == \
        [("a", 0, None), ("b", 0, None)]
    assert queue.items("failed") == []


def test_prune_drops_old_done_and_failed_items_never_pending_ones(queue, clock) -> None:
    done, _ = queue.enqueue("autolink", "done")
    failed, _ = queue.enqueue("autolink", "failed")
    queue.complete(queue.claim(["autolink"], owner="w").id, "w")
    queue.fail(queue.claim(["autolink"], owner="w").id, "w", "boom")
    pending, _ = queue.enqueue("autolink", "pending")
    clock.now += 8 * 86400
    assert queue.prune() == 1 and queue.get(done.id) is None and queue.get(failed.id)
    clock.now += 30 * 86400
    assert queue.prune() == 1 and [i.id for i in queue.items()] == [pending.id]
    assert queue.counts() == {"autolink": {"pending": 1}}


def test_two_vault_objects_on_one_folder_share_one_queue(tmp_path: Path) -> None:
    settings = Settings(embedder={"name": "hash"}, index={"progress": False})
    one = open_vault(tmp_path / "v", settings, create=True)
    two = open_vault(tmp_path / "v", settings)
    try:
        assert one.queue.path == one.internal / QUEUE_FILE
        item, _ = one.queue.enqueue("autolink", "knowledge/a/a.md")
        assert [i.id for i in two.queue.pending()] == [item.id]
        assert two.queue.claim(["autolink"], owner="two").id == item.id
        assert one.queue.claim(["autolink"], owner="one") is None
    finally:
        one.close()
        two.close()


def test_a_queue_file_that_is_not_a_database_is_a_storage_error(tmp_path: Path) -> None:
    bad = tmp_path / QUEUE_FILE
    bad.write_bytes(b"not sqlite " * 200)
    with pytest.raises(StorageError, match=QUEUE_FILE):
        WorkQueue(bad)
