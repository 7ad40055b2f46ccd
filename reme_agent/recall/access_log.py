"""Recall's only write: the access log `meta/access_log.json` (DESIGN §7, §8; seed §9).

A search records the paths it returned into an in-process buffer, deduplicated per
(path, UTC day) so re-reading a node all day counts once. The buffer is flushed

- every `interval` seconds (10 min) by a daemon timer thread, started on the first record;
- at interpreter exit (atexit; the hook holds only a weak reference);
- on demand (`flush()`), and by `close()`.

A flush is read-merge-write under compare-and-swap (`FileStore.cas_edit`): two AccessLog
objects, threads or processes flushing at once redo the merge instead of overwriting each
other, so no entry is lost (a flush that still loses the race after 3 redos keeps its hits
for the next one). The merge unions
`hit_days`, keeps the latest `last_read`, prunes days older than `keep_days` and recomputes
`hits_30d`. A failed flush logs, puts the entries back and never raises into a search.
The buffer is bounded (`capacity`); past it the oldest (path, day) pairs are dropped.
"""

from __future__ import annotations

import atexit
import functools
import logging
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta

from reme_agent.engine.cas import MAX_REDOS
from reme_agent.engine.store import FileStore
from reme_agent.recall.signals import (
    SIGNALS,
    AccessEntry,
    AccessLogSignal,
    dump_signal,
    iso_utc,
    load_signal_text,
    parse_moment,
    utc_now,
)

log = logging.getLogger("reme_agent.recall")

ACCESS_LOG_PATH = SIGNALS["access_log"][0]
FLUSH_INTERVAL = 600.0


class AccessLog:
    """Ring buffer of (path, day) hits with a periodic, merging, atomic flush."""

    def __init__(self, store: FileStore, *, interval: float = FLUSH_INTERVAL,
                 capacity: int = 50_000, keep_days: int = 90,
                 max_redos: int = MAX_REDOS) -> None:
        self.store = store
        self.interval = interval
        self.capacity = capacity
        self.keep_days = keep_days
        self.max_redos = max_redos
        self._lock = threading.Lock()
        self._buffer: OrderedDict[tuple[str, str], datetime] = OrderedDict()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._dropped = 0
        self._exit_hook = functools.partial(_flush_ref, weakref.ref(self))
        atexit.register(self._exit_hook)

    # -- recording (called by every search: memory only) -----------------------------------
    def record(self, paths: Iterable[str], day: date | str | None = None,
               when: datetime | None = None) -> None:
        """Remember that these paths were returned now (a past `day` alone means its noon UTC)."""
        moment = when or utc_now()
        day_s = day.isoformat() if isinstance(day, date) else (day or moment.date().isoformat())
        if day is not None and when is None:
            moment = datetime.fromisoformat(day_s).replace(hour=12, tzinfo=UTC)
        with self._lock:
            for path in paths:
                key = (path, day_s)
                prev = self._buffer.pop(key, None)
                self._buffer[key] = max(prev, moment) if prev else moment
            while len(self._buffer) > self.capacity:
                self._buffer.popitem(last=False)
                self._dropped += 1
        self._start_timer()

    def pending(self) -> int:
        with self._lock:
            return len(self._buffer)

    # -- flushing ------------------------------------------------------------------------
    def flush(self) -> int:
        """Merge the buffer into meta/access_log.json; returns the (path, day) pairs written."""
        with self._lock:
            batch, self._buffer = self._buffer, OrderedDict()
        if not batch:
            return 0
        try:
            self._merge_into_file(batch)
        except Exception as exc:  # a flush never fails a search: keep the hits for next time
            log.warning("access log flush failed (%s: %s); %d hits kept for the next flush",
                        type(exc).__name__, exc, len(batch))
            with self._lock:
                newer, self._buffer = self._buffer, batch
                for key, moment in newer.items():
                    prev = self._buffer.pop(key, None)
                    self._buffer[key] = max(prev, moment) if prev else moment
                while len(self._buffer) > self.capacity:
                    self._buffer.popitem(last=False)
                    self._dropped += 1
            return 0
        return len(batch)

    def _merge_into_file(self, batch: OrderedDict[tuple[str, str], datetime]) -> None:
        today = utc_now().date()
        # Another flusher winning the race makes the merge start over on its version.
        self.store.cas_edit(ACCESS_LOG_PATH, lambda text: dump_signal(
            merge_hits(text, batch, today=today, keep_days=self.keep_days)),
            self.max_redos, create=True)

    # -- timer and lifetime --------------------------------------------------------------
    def _start_timer(self) -> None:
        if self._thread is not None or self._closed or self.interval <= 0:
            return
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=_timer_loop,
                                            args=(weakref.ref(self), self._stop, self.interval),
                                            name="reme-access-log", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the timer and flush what is left."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        atexit.unregister(self._exit_hook)
        self.flush()


def merge_hits(current: str | None, batch: dict[tuple[str, str], datetime], *, today: date,
               keep_days: int = 90) -> AccessLogSignal:
    """The access log after adding `batch` to the file text `current` (None = no file).

    A malformed file is replaced (it is derived data, and atomic writes never tear one); a
    file of another version is refused, so a newer writer's data is never clobbered.
    """
    signal = AccessLogSignal()
    if current is not None:
        try:
            old = load_signal_text("access_log", current)
        except ValueError as exc:
            if "version" in str(exc):
                raise
            log.warning("%s is unusable (%s); starting it afresh", ACCESS_LOG_PATH, exc)
        else:
            assert isinstance(old, AccessLogSignal)
            signal.entries = dict(old.entries)
    for (path, day), moment in batch.items():
        entry = signal.entries.get(path)
        days = set(entry.hit_days) if entry else set()
        days.add(day)
        last = parse_moment(entry.last_read) if entry else None
        newest = moment if last is None or moment > last else last
        signal.entries[path] = AccessEntry(last_read=iso_utc(newest), hit_days=sorted(days))
    horizon = (today - timedelta(days=keep_days)).isoformat()
    month = (today - timedelta(days=29)).isoformat()
    for path, entry in signal.entries.items():
        days = [d for d in entry.hit_days if d >= horizon]
        signal.entries[path] = entry.model_copy(update={
            "hit_days": days, "hits_30d": sum(1 for d in days if d >= month)})
    signal.entries = dict(sorted(signal.entries.items()))
    return signal


def _timer_loop(ref: weakref.ref[AccessLog], stop: threading.Event, interval: float) -> None:
    """Periodic flush; holds the AccessLog only weakly, so dropping the vault ends it."""
    while not stop.wait(interval):
        log_ = ref()
        if log_ is None:
            return
        log_.flush()
        del log_


def _flush_ref(ref: weakref.ref[AccessLog]) -> None:
    log_ = ref()
    if log_ is not None:
        log_.flush()
