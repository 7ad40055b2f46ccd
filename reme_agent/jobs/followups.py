"""Who drains the follow-up queue, and the drainers (DESIGN §9; seed auto_link_design §1.4).

The queue (`vault.queue`, `engine/queue.py`) stores items and knows no consumer; producers
are listed in `maintenance/followups.py`. This module is the wiring, the one place that says
who runs which kind:

    autolink   `AutoLinker.handle`: L1 in the note and of the node in other notes. Needs no
               model; with one, ambiguous mentions go to the auto-link judge.
    split      the maintainer's split step for that note. Needs a model (the planner names the
               children and writes the overview), so without one split items stay pending,
               and every drain reports them as waiting.

Drainers, all built on `drain()` (claim -> run -> done/failed, until nothing claimable is left):
`reme-agent worker` (long-running, or `--once`), `reme-agent watch --worker`, the `followups`
step of `maintain` / `run_maintainer`, and `start_followup_worker(vault)`: an opt-in
background thread for a long-lived process (an MCP server, an AgentScope app), stopped by
`vault.close()`. Writers never wait for any of them: auto-link never blocks dream.

While a consumer runs, a heartbeat thread renews the item's lease (`engine.queue`), so a
long split keeps its item however long the model takes; a drainer that is killed stops
renewing, and the item runs again once the lease has expired.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from reme_agent.engine.queue import LEASE_SECONDS, QueueItem
from reme_agent.maintenance.followups import AUTOLINK, FOLLOWUPS_STEP, SPLIT

if TYPE_CHECKING:
    from reme_agent.maintenance.report import StepResult
    from reme_agent.vault import Vault

log = logging.getLogger("reme_agent.followups")

__all__ = ["Consumer", "DrainReport", "FollowupWorker", "Wiring", "drain",
           "start_followup_worker"]

Consumer = Callable[[QueueItem], Sequence[str] | None]
"""Runs one item; returns the vault paths it changed (None: nothing to report)."""
Echo = Callable[[str], None]


class Wiring:
    """The consumers of one vault, built on first use (a model is loaded only when an item
    needs it). `use_model=False` (or no model configured) leaves `split` unwired.
    `consumers` replaces the default table (custom kinds, tests)."""

    def __init__(self, vault: Vault, *, model: Any | None = None,
                 use_model: bool | None = None,
                 consumers: Mapping[str, Consumer] | None = None) -> None:
        self.vault = vault
        self.model = model
        self.use_model = (model is not None or vault.settings.model.configured) \
            if use_model is None else use_model
        self.fixed = consumers is not None
        self._built: dict[str, Consumer] = dict(consumers or {})

    @property
    def kinds(self) -> list[str]:
        """The kinds these consumers drain."""
        if self.fixed:
            return list(self._built)
        return [AUTOLINK, SPLIT] if self.use_model else [AUTOLINK]

    @property
    def waiting(self) -> dict[str, str]:
        """Kinds left pending here, and why."""
        if self.fixed or self.use_model:
            return {}
        return {SPLIT: "no model configured: the split planner names the children "
                       "(configure model.*, then run `reme-agent worker`)"}

    def consumer(self, kind: str) -> Consumer:
        if kind not in self._built:
            self._built[kind] = self._autolink() if kind == AUTOLINK else self._split()
        return self._built[kind]

    def _autolink(self) -> Consumer:
        from reme_agent.maintenance.autolink.runner import AutoLinker

        judge = None
        if self.use_model:
            from reme_agent.jobs.autolink_job import JobJudge

            judge = JobJudge(self.vault, self.model)
        linker = AutoLinker(self.vault, judge=judge)

        def consume(item: QueueItem) -> list[str]:
            return [r.path for r in linker.handle(item) if r.status == "linked"]
        return consume

    def _split(self) -> Consumer:
        from reme_agent.jobs.maintainer_job import ModelSplitPlanner
        from reme_agent.maintenance.maintainer import Maintainer

        vault, model = self.vault, self.model

        def consume(item: QueueItem) -> list[str]:
            cfg = vault.settings
            report = Maintainer(vault, cfg.maintain,
                                split_token_threshold=cfg.jobs.split_token_threshold,
                                split_block_threshold=cfg.jobs.split_block_threshold,
                                split_planner=ModelSplitPlanner(vault, model=model),
                                ).run(["split"], split_requests=[item.path])
            step = report.step("split")
            if step.skipped:  # the step caught its own failure: the item failed too
                raise RuntimeError(f"the split step {step.skipped}")
            return list(step.changed)
        return consume


@dataclass
class DrainReport:
    """What one or more drains ran, and what they left waiting."""

    ran: list[QueueItem] = field(default_factory=list)   # each item as it ended
    changed: list[str] = field(default_factory=list)     # vault paths the consumers changed
    waiting: dict[str, int] = field(default_factory=dict)   # kind -> pending items not run
    why_waiting: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def failed(self) -> list[QueueItem]:
        return [i for i in self.ran if i.status == "failed"]

    def add(self, other: DrainReport) -> None:
        self.ran += other.ran
        self.changed += [p for p in other.changed if p not in self.changed]
        self.waiting, self.why_waiting = other.waiting, other.why_waiting
        self.seconds = round(self.seconds + other.seconds, 3)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def render(self) -> str:
        done = len(self.ran) - len(self.failed)
        lines = [f"follow-ups: ran {len(self.ran)} ({done} done, {len(self.failed)} failed), "
                 f"changed {len(self.changed)} file(s) in {self.seconds:.1f} s"]
        lines += [f"  {line(i)}" for i in self.ran]
        lines += [f"  waiting: {kind} x{n}: {self.why_waiting.get(kind, 'not claimable yet')}"
                  for kind, n in self.waiting.items()]
        return "\n".join(lines)

    def step(self) -> StepResult:
        """This drain as a `maintain` step (text, JSON and the maintain.md audit entry)."""
        from reme_agent.maintenance.report import StepResult

        return StepResult(FOLLOWUPS_STEP, found={
            "ran": len(self.ran), "failed": len(self.failed), "waiting": sum(self.waiting.values()),
            "waiting_kinds": [f"{k} x{n}: {self.why_waiting.get(k, '')}".rstrip(": ")
                              for k, n in self.waiting.items()]},
            actions=[{"action": i.status, "kind": i.kind, "path": i.path, "attempts": i.attempts,
                      **({"error": i.error} if i.error else {})} for i in self.ran],
            changed=list(self.changed), seconds=self.seconds)


def line(item: QueueItem) -> str:
    """One progress line for an item."""
    tail = f": {item.error}" if item.error else ""
    return f"{item.status} {item.kind} {item.path} (#{item.id}, attempt {item.attempts}){tail}"


def new_owner() -> str:
    """A lease owner id: host, process, thread, and a random part (ids are never reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}:{uuid.uuid4().hex[:8]}"


class _Heartbeat:
    """Renews an item's lease every third of its length while the consumer runs."""

    def __init__(self, vault: Vault, item: QueueItem, owner: str, lease: float) -> None:
        self.args = (vault, item, owner, lease)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="reme-lease", daemon=True)

    def _beat(self) -> None:
        vault, item, owner, lease = self.args
        while not self._done.wait(lease / 3):
            try:
                if not vault.queue.heartbeat(item.id, owner, lease):
                    log.warning("lost the lease of %s %s (#%d): another drainer took it",
                                item.kind, item.path, item.id)
                    return
            except Exception as exc:  # the queue is unreachable: the lease runs out
                log.warning("could not renew the lease of #%d: %s", item.id, exc)

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()


def drain(vault: Vault, wiring: Wiring | None = None, *, max_items: int | None = None,
          lease: float = LEASE_SECONDS, stop: threading.Event | None = None,
          echo: Echo | None = None) -> DrainReport:
    """Run pending items (oldest first) until none of the wired kinds is claimable.

    A consumer that raises marks its item failed with the error, and the rest still run.
    Ctrl-C (or any BaseException) mid-item hands the item back to pending and propagates.
    """
    started = time.perf_counter()
    wiring = wiring or Wiring(vault)
    kinds = wiring.kinds
    queue = vault.queue
    queue.prune()
    owner = new_owner()
    report = DrainReport()
    while (max_items is None or len(report.ran) < max_items) and not (stop and stop.is_set()):
        item = queue.claim(kinds, owner=owner, lease=lease)
        if item is None:
            break
        if echo:
            echo(f"running {item.kind} {item.path} (#{item.id}, attempt {item.attempts})")
        with _Heartbeat(vault, item, owner, lease):
            try:
                changed = wiring.consumer(item.kind)(item) or []
            except Exception as exc:
                log.warning("follow-up %s on %s failed: %s", item.kind, item.path, exc)
                queue.fail(item.id, owner, f"{type(exc).__name__}: {exc}")
            except BaseException:
                queue.release(item.id, owner)
                raise
            else:
                queue.complete(item.id, owner)
                report.changed += [p for p in changed if p not in report.changed]
        ended = queue.get(item.id) or item
        report.ran.append(ended)
        if echo:
            echo(line(ended))
    for kind, states in queue.counts().items():
        if kind not in kinds and states.get("pending"):
            report.waiting[kind] = states["pending"]
    report.why_waiting = {k: why for k, why in wiring.waiting.items() if k in report.waiting}
    report.seconds = round(time.perf_counter() - started, 3)
    return report


class FollowupWorker:
    """`drain()` on a background thread, every `interval` seconds (or at once on `wake()`)."""

    def __init__(self, vault: Vault, *, interval: float = 2.0, model: Any | None = None,
                 use_model: bool | None = None, wiring: Wiring | None = None,
                 lease: float = LEASE_SECONDS, echo: Echo | None = None,
                 stop_timeout: float | None = 60.0) -> None:
        self.vault = vault
        self.wiring = wiring or Wiring(vault, model=model, use_model=use_model)
        self.interval = interval
        self.lease = lease
        self.echo = echo
        self.stop_timeout = stop_timeout
        self.report = DrainReport()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> FollowupWorker:
        self._thread = threading.Thread(target=self._loop, name="reme-followups", daemon=True)
        self._thread.start()
        return self

    def wake(self) -> None:
        """Drain now instead of at the next poll (e.g. right after enqueueing)."""
        self._wake.set()

    def stop(self) -> None:
        """Stop after the item in progress (waits up to `stop_timeout` s; an item still
        running then keeps its lease until it expires, and another drainer reruns it)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(self.stop_timeout)
            if self._thread.is_alive():
                log.warning("the follow-up worker is still running an item; leaving it")

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.report.add(drain(self.vault, self.wiring, lease=self.lease,
                                      stop=self._stop, echo=self.echo))
            except Exception:  # keep draining: one broken round must not end the worker
                log.exception("follow-up drain failed")
            self._wake.wait(self.interval)
            self._wake.clear()

    def __enter__(self) -> FollowupWorker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_followup_worker(vault: Vault, *, interval: float = 2.0, model: Any | None = None,
                          use_model: bool | None = None,
                          echo: Echo | None = None) -> FollowupWorker:
    """Drain `vault`'s follow-up queue on a background thread until `vault.close()`.

    Opt-in, for a long-lived process that already holds the vault (an MCP server, an
    AgentScope app with `MemoryMiddleware`): auto-link L1 runs within `interval` seconds of
    a distiller write instead of at the next `reme-agent worker` or `maintain`. Split items
    run only with a model (`model=`, or one configured).
    """
    worker = FollowupWorker(vault, interval=interval, model=model, use_model=use_model,
                            echo=echo).start()
    vault.on_close(worker.stop)
    return worker
