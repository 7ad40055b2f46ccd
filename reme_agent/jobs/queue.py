"""Follow-up job queue: split (D3 overload) and auto-link L1 after a knowledge write (DESIGN §9).

An in-process FIFO. The distiller enqueues; later features (F6 split, F7 auto-link) register
a consumer per kind with `register`. Until a kind has a consumer its items stay `pending`, so
they are still visible (in the job result and through `pending()`), and nothing is lost.

Workers are CAS-safe by construction: a consumer is an ordinary job or tool call, and every
write it makes goes through the L4 tools (stamp check, E-1/E-2). `drain()` runs consumers
one item at a time in FIFO order on the caller's thread, so two consumers never rewrite the
same note at once inside one process; across processes the stamps keep writes safe.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import logging
import threading
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, Field

log = logging.getLogger("reme_agent.jobs")

Status = Literal["pending", "done", "failed"]


class QueueItem(BaseModel):
    """One follow-up job for one note."""

    id: int
    kind: str = Field(description='"split" or "autolink" (open: consumers pick their kinds).')
    path: str
    reason: str = ""
    payload: dict[str, Any] = Field(default_factory=dict)
    source: str = Field("", description="The job that enqueued it, e.g. 'distiller'.")
    created_at: str
    status: Status = "pending"
    error: str | None = None


Consumer = Callable[[QueueItem], Any]


class JobQueue:
    """FIFO of follow-up jobs with named consumers (one consumer per kind)."""

    def __init__(self) -> None:
        self._items: list[QueueItem] = []
        self._consumers: dict[str, Consumer] = {}
        self._ids = itertools.count(1)
        self._lock = threading.RLock()

    # -- consumers ---------------------------------------------------------------------
    def register(self, kind: str, consumer: Consumer) -> None:
        """Make `consumer(item)` handle every item of `kind` (replaces an earlier one)."""
        with self._lock:
            self._consumers[kind] = consumer

    @property
    def consumers(self) -> list[str]:
        return sorted(self._consumers)

    # -- items -------------------------------------------------------------------------
    def enqueue(self, kind: str, path: str, *, reason: str = "",
                payload: dict[str, Any] | None = None, source: str = "") -> QueueItem:
        """Add an item; a pending item of the same kind and path is returned instead (dedup)."""
        with self._lock:
            for item in self._items:
                if item.status == "pending" and item.kind == kind and item.path == path:
                    return item
            item = QueueItem(id=next(self._ids), kind=kind, path=path, reason=reason,
                             payload=dict(payload or {}), source=source,
                             created_at=_dt.datetime.now().astimezone().isoformat())
            self._items.append(item)
            return item

    def pending(self, kind: str | None = None) -> list[QueueItem]:
        with self._lock:
            return [i for i in self._items if i.status == "pending"
                    and (kind is None or i.kind == kind)]

    def items(self) -> list[QueueItem]:
        """Every item ever enqueued (pending, done and failed), oldest first."""
        with self._lock:
            return list(self._items)

    def drain(self, kinds: list[str] | None = None) -> list[QueueItem]:
        """Run the consumer of each pending item (FIFO); items without one stay pending.

        A consumer that raises marks its item `failed` (with the error) and the rest still
        run: one bad note must not stop the others. Returns the items that ran.
        """
        ran: list[QueueItem] = []
        while True:
            with self._lock:
                item = next((i for i in self._items if i.status == "pending"
                             and i.kind in self._consumers
                             and (kinds is None or i.kind in kinds)), None)
                if item is None:
                    return ran
                consumer = self._consumers[item.kind]
                item.status = "done"  # claimed: a re-entrant drain will not run it twice
            try:
                consumer(item)
            except Exception as exc:
                log.warning("queue consumer %r failed on %s: %s", item.kind, item.path, exc)
                item.status = "failed"
                item.error = f"{type(exc).__name__}: {exc}"
            ran.append(item)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


_DEFAULT = JobQueue()


def default_queue() -> JobQueue:
    """The process-wide queue jobs use when none is passed."""
    return _DEFAULT


def queue_for(vault: Any) -> JobQueue:
    """The vault's own follow-up queue, with the default consumers registered on first use.

    One queue per Vault object, so two vaults in one process never hand each other's items
    to the wrong consumer. Consumers: auto-link L1 (no model needed; ambiguous mentions go
    to the model when one is configured) and split (the maintainer's split step; its LLM
    part needs a model, so without one split items stay pending and are reported).
    """
    q = vault.__dict__.get("_job_queue")
    if q is None:
        q = vault.__dict__.setdefault("_job_queue", JobQueue())
        _register_default_consumers(q, vault)
    return q


def _register_default_consumers(q: JobQueue, vault: Any) -> None:
    configured = vault.settings.model.configured
    try:
        from reme_agent.autolink.runner import register_consumer
    except ImportError:  # pragma: no cover - the package ships it
        pass
    else:
        judge = None
        if configured:
            from reme_agent.autolink.job import JobJudge

            judge = JobJudge(vault)
        register_consumer(q, vault, judge)
    if configured:
        from reme_agent.jobs.maintainer_job import register_split_consumer

        register_split_consumer(vault, q)
