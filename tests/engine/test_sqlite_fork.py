"""The index's SQLite files after a fork (engine/perprocess.py): a child opens its own.

A worker forked after the parent opened the vault (multiprocessing 'fork', gunicorn
--preload, Celery prefork) must neither hang on a lock a parent thread held at the fork nor
share the parent's connection. Each holder is tested with a real `os.fork()`; the child runs
under an alarm, so a hang fails the test instead of stalling CI.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import signal
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from reme_agent.engine.projections.vector_copy import VectorCopy
from reme_agent.engine.queue import WorkQueue
from reme_agent.engine.state import IndexState
from reme_agent.recall.namestore import NameStore

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


@dataclass
class Holder:
    """One SQLite holder: how to open it, write row `i` through it, and count its rows."""
    name: str
    open: Callable[[Path], Any]
    write: Callable[[Any, int], None]
    read: Callable[[Any], int]
    table: str


def _names_write(store: NameStore, i: int) -> None:
    with store.writing() as writer:
        writer.set_stamp(f"n{i}.md", f"s{i}")


def _names_count(store: NameStore) -> int:
    with store.writing() as writer:
        return len(writer.stamps())


HOLDERS = [
    Holder("index state", lambda p: IndexState(p), lambda h, i: h.set_meta(f"k{i}", "v"),
           lambda h: sum(h.get_meta(f"k{i}") is not None for i in range(100)), "meta"),
    Holder("work queue", lambda p: WorkQueue(p), lambda h, i: h.enqueue("k", f"p{i}.md"),
           lambda h: sum(h.counts().get("k", {}).values()), "items"),
    Holder("name store", lambda p: NameStore(p), _names_write, _names_count, "files"),
    Holder("vector copy", lambda p: VectorCopy(p),
           lambda h, i: h.put("c", [f"b{i}"], np.ones((1, 4), dtype=np.float32), [f"p{i}.md"]),
           lambda h: h.count("c") or 0, "vectors"),
]


def _rows(path: Path, table: str) -> int:
    # closed here, not by the GC: a connection left open at the fork is inherited too
    with contextlib.closing(sqlite3.connect(path)) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


def _fork(child: Callable[[], Any]) -> tuple[int, int]:
    """(pid, read end): the child runs `child()` under a 20 s alarm, writes its JSON-able
    result (or error) to the pipe and leaves without the parent's cleanup."""
    # garbage earlier tests left (a vault never closed) must not be collected in the child:
    # a chroma client's native code hangs there (seen: a child stuck in its dealloc)
    gc.collect()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        signal.alarm(20)
        try:
            out = {"ok": child()}
        except BaseException as exc:  # noqa: BLE001 - reported to the parent as such
            out = {"error": f"{type(exc).__name__}: {exc}"}
        os.write(write, json.dumps(out).encode())
        os._exit(0)
    os.close(write)
    return pid, read


def _result(pid: int, read: int) -> Any:
    _, status = os.waitpid(pid, 0)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"child hung or died: {status}"
    out = json.loads(data)
    assert "ok" in out, out
    return out["ok"]


@pytest.mark.parametrize("holder", HOLDERS, ids=lambda h: h.name)
def test_a_child_works_while_a_parent_thread_holds_the_connection(
        tmp_path: Path, holder: Holder) -> None:
    """A parent thread inside a call at the fork (holding the lock; for the index state and
    the names, inside a read transaction too): the lock never comes free in the child, the
    connection is mid-transaction there. The child uses its own of both."""
    path = tmp_path / "db.sqlite"
    h = holder.open(path)
    holder.write(h, 0)
    base = _rows(path, holder.table)
    entered, leave = threading.Event(), threading.Event()

    def busy() -> None:
        span = h.reading() if hasattr(h, "reading") else contextlib.nullcontext()
        with h._lock, span:   # what every call holds while it runs; a read span besides
            entered.set()
            leave.wait(30)

    thread = threading.Thread(target=busy)
    thread.start()
    assert entered.wait(10)
    try:
        def child() -> int:
            for i in range(1, 6):
                holder.write(h, i)
            return holder.read(h)
        pid, read = _fork(child)
        assert _result(pid, read) >= 5   # (the parent's thread still holds its span)
    finally:
        leave.set()
        thread.join()
    holder.write(h, 99)   # the parent still works
    h.close()
    assert _rows(path, holder.table) == base + 6


@pytest.mark.parametrize("holder", HOLDERS, ids=lambda h: h.name)
def test_a_childs_writes_survive_the_parent_closing_first(tmp_path: Path,
                                                          holder: Holder) -> None:
    """The parent closes its connection (the last one it has) while the child still writes.
    A child sharing the parent's connection, or SQLite's lock records for it, loses what it
    writes after that: the parent's close checkpoints and deletes the WAL."""
    path = tmp_path / "db.sqlite"
    h = holder.open(path)
    holder.write(h, 0)
    base = _rows(path, holder.table)
    go_read, go_write = os.pipe()
    done_read, done_write = os.pipe()

    def child() -> int:
        for i in range(1, 11):
            holder.write(h, i)
        os.write(done_write, b"1")          # ten rows written: the parent may close now
        os.read(go_read, 1)                 # the parent has closed
        for i in range(11, 31):
            holder.write(h, i)
        return holder.read(h)
    pid, read = _fork(child)
    assert os.read(done_read, 1) == b"1"
    for i in range(100, 110):   # the parent goes on writing, then closes
        holder.write(h, i)
    h.close()
    os.write(go_write, b"1")
    _result(pid, read)
    assert _rows(path, holder.table) == base + 40
