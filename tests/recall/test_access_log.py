"""Access log: (path, day) dedup, merging atomic flushes, timer/exit flush, no failure leaks."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from reme_agent.engine.store import FileStore
from reme_agent.recall.access_log import ACCESS_LOG_PATH, AccessLog, merge_hits


def _entries(root: Path) -> dict:
    return json.loads((root / ACCESS_LOG_PATH).read_text(encoding="utf-8"))["entries"]


@pytest.fixture
def store(tmp_path: Path) -> FileStore:
    return FileStore(tmp_path)


def test_one_hit_per_path_and_day(store: FileStore, tmp_path: Path) -> None:
    log = AccessLog(store, interval=0)
    for _ in range(50):
        log.record(["a.md", "b.md"])
    assert log.pending() == 2
    assert log.flush() == 2
    assert log.pending() == 0
    today = datetime.now(UTC).date().isoformat()
    entries = _entries(tmp_path)
    assert entries["a.md"]["hit_days"] == [today] and entries["a.md"]["hits_30d"] == 1
    for _ in range(5):
        log.record(["a.md"])
    log.flush()
    assert _entries(tmp_path)["a.md"]["hit_days"] == [today]   # merged, still one per day
    log.close()


def test_flush_merges_days_and_recomputes_hits_30d(store: FileStore, tmp_path: Path) -> None:
    log = AccessLog(store, interval=0)
    today = datetime.now(UTC).date()
    for ago in (0, 3, 29, 45, 200):
        log.record(["a.md"], day=today - timedelta(days=ago))
    log.flush()
    entry = _entries(tmp_path)["a.md"]
    kept = [(today - timedelta(days=ago)).isoformat() for ago in (45, 29, 3, 0)]
    assert entry["hit_days"] == kept                 # 200 days ago is past keep_days (90)
    assert entry["hits_30d"] == 3                    # today, 3 and 29 days ago
    assert entry["last_read"].startswith(today.isoformat())
    log.close()


def test_nothing_recorded_means_nothing_written(store: FileStore, tmp_path: Path) -> None:
    log = AccessLog(store, interval=0)
    assert log.flush() == 0
    log.close()
    assert not (tmp_path / ACCESS_LOG_PATH).exists()


def test_two_logs_flushing_concurrently_lose_nothing(store: FileStore, tmp_path: Path) -> None:
    logs = [AccessLog(FileStore(tmp_path), interval=0) for _ in range(2)]
    paths = [[f"n{i}-{k}.md" for k in range(40)] for i in range(2)]

    def work(i: int) -> None:
        for k, path in enumerate(paths[i]):
            logs[i].record([path])
            if k % 3 == 0:
                logs[i].flush()
        logs[i].flush()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    threads += [threading.Thread(target=logs[0].flush) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    entries = _entries(tmp_path)
    assert set(entries) == set(paths[0]) | set(paths[1])
    for log in logs:
        log.close()


def test_failed_flush_keeps_hits_and_never_raises(store: FileStore, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    log = AccessLog(store, interval=0)
    log.record(["a.md"])

    def boom(*args: object, **kwargs: object) -> str:
        raise OSError("disk full")

    monkeypatch.setattr(store, "write_if_unchanged", boom)
    monkeypatch.setattr(store, "create", boom)    # the first flush creates the file (O_EXCL)
    assert log.flush() == 0
    assert log.pending() == 1
    log.record(["b.md"])
    monkeypatch.undo()
    assert log.flush() == 2
    assert set(_entries(tmp_path)) == {"a.md", "b.md"}
    log.close()


def test_newer_version_file_is_never_clobbered(store: FileStore, tmp_path: Path) -> None:
    (tmp_path / "meta").mkdir()
    original = json.dumps({"version": 2, "computed_at": "2030-01-01T00:00:00Z", "rows": []})
    (tmp_path / ACCESS_LOG_PATH).write_text(original, encoding="utf-8")
    log = AccessLog(store, interval=0)
    log.record(["a.md"])
    assert log.flush() == 0
    assert (tmp_path / ACCESS_LOG_PATH).read_text(encoding="utf-8") == original
    assert log.pending() == 1
    log.close()                              # its final flush is refused the same way
    assert (tmp_path / ACCESS_LOG_PATH).read_text(encoding="utf-8") == original


def test_malformed_file_is_started_afresh() -> None:
    merged = merge_hits("{oops", {("a.md", "2024-05-01"): datetime(2024, 5, 1, tzinfo=UTC)},
                        today=date(2024, 5, 2))
    assert list(merged.entries) == ["a.md"]
    assert merged.entries["a.md"].last_read == "2024-05-01T00:00:00Z"


def test_existing_entries_are_kept_and_latest_read_wins() -> None:
    first = merge_hits(None, {("a.md", "2024-05-01"): datetime(2024, 5, 1, 9, tzinfo=UTC),
                              ("b.md", "2024-05-01"): datetime(2024, 5, 1, 9, tzinfo=UTC)},
                       today=date(2024, 5, 1))
    from reme_agent.recall.signals import dump_signal

    second = merge_hits(dump_signal(first),
                        {("a.md", "2024-05-01"): datetime(2024, 5, 1, 8, tzinfo=UTC),
                         ("a.md", "2024-05-02"): datetime(2024, 5, 2, 7, tzinfo=UTC)},
                        today=date(2024, 5, 2))
    assert second.entries["a.md"].hit_days == ["2024-05-01", "2024-05-02"]
    assert second.entries["a.md"].last_read == "2024-05-02T07:00:00Z"
    assert second.entries["a.md"].hits_30d == 2
    assert second.entries["b.md"].hit_days == ["2024-05-01"]


def test_timer_flushes_in_the_background(store: FileStore, tmp_path: Path) -> None:
    log = AccessLog(store, interval=0.05)
    log.record(["a.md"])
    deadline = time.monotonic() + 5
    while not (tmp_path / ACCESS_LOG_PATH).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert "a.md" in _entries(tmp_path)
    log.close()
    assert log._thread is not None and not log._thread.is_alive()


def test_exit_hook_flushes_and_holds_the_log_weakly(store: FileStore, tmp_path: Path) -> None:
    log = AccessLog(store, interval=0)
    log.record(["a.md"])
    hook = log._exit_hook
    hook()                                   # what atexit runs
    assert "a.md" in _entries(tmp_path)
    log.close()
    other = AccessLog(store, interval=0)
    other_hook = other._exit_hook
    del other
    other_hook()                             # object gone: a no-op, no error


def test_close_flushes_what_is_left(store: FileStore, tmp_path: Path) -> None:
    log = AccessLog(store, interval=600)
    log.record(["a.md"])
    log.close()
    assert "a.md" in _entries(tmp_path)
    log.close()                              # idempotent
