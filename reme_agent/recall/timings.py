"""Where a search spends its time: cheap stage timers, off unless someone collects them.

The bench (`bench/bench_search.py`) needs a breakdown of one search (query embedding, ANN,
BM25, names, freshness, factors, grouping, expansion, rendering, ...) without a profiler,
whose overhead distorts a 5 ms call. Code marks a stage with `with stage("bm25"):`; the
times go to the `Timings` of the enclosing `collect()` in the same context (a contextvar,
so concurrent searches in other threads do not mix). With no collector, `stage` returns one
shared do-nothing context manager: a contextvar read per stage, no clock, no allocation.

Times are exclusive: a stage nested in another is not counted twice (the outer one pauses),
so the stages of one search add up to at most its wall time.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

__all__ = ["Timings", "active", "collect", "stage"]


class Timings:
    """Exclusive seconds per stage name (summed over every entry), for one or more searches."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.overlapped: dict[str, float] = {}   # seconds on worker threads, not wall time
        self._stack: list[list[Any]] = []     # [name, start, time spent in children]

    def enter(self, name: str) -> None:
        self._stack.append([name, time.perf_counter(), 0.0])

    def leave(self) -> None:
        name, start, children = self._stack.pop()
        spent = time.perf_counter() - start
        self.seconds[name] = self.seconds.get(name, 0.0) + spent - children
        self.calls[name] = self.calls.get(name, 0) + 1
        if self._stack:
            self._stack[-1][2] += spent

    def add(self, name: str, seconds: float, *, overlapped: bool = False) -> None:
        """Record time measured elsewhere. `overlapped`: it ran on another thread while this
        one worked, so it is kept apart (`overlapped`) and not part of the wall time."""
        table = self.overlapped if overlapped else self.seconds
        table[name] = table.get(name, 0.0) + seconds
        if not overlapped:
            self.calls[name] = self.calls.get(name, 0) + 1

    def ms(self) -> dict[str, float]:
        """Milliseconds per stage of the calling thread (they add up to its wall time)."""
        return {name: s * 1000.0 for name, s in self.seconds.items()}

    def overlapped_ms(self) -> dict[str, float]:
        """Milliseconds per stage that ran on worker threads meanwhile."""
        return {name: s * 1000.0 for name, s in self.overlapped.items()}


_current: ContextVar[Timings | None] = ContextVar("reme_recall_timings", default=None)


class _Stage:
    __slots__ = ("name", "timings")

    def __init__(self, timings: Timings, name: str) -> None:
        self.timings = timings
        self.name = name

    def __enter__(self) -> None:
        self.timings.enter(self.name)

    def __exit__(self, *exc: object) -> None:
        self.timings.leave()


_OFF = contextlib.nullcontext()


def active() -> Timings | None:
    """The collector of this context, if any (for times measured outside `stage`)."""
    return _current.get()


def stage(name: str) -> contextlib.AbstractContextManager[Any]:
    """Time the block as `name` when a `collect()` is active in this context; else nothing."""
    timings = _current.get()
    return _OFF if timings is None else _Stage(timings, name)


@contextlib.contextmanager
def collect(timings: Timings | None = None) -> Iterator[Timings]:
    """Collect the stage times of the searches run inside the block (in this context)."""
    t = timings if timings is not None else Timings()
    token = _current.set(t)
    try:
        yield t
    finally:
        _current.reset(token)
