"""The Maintainer: the six maintenance steps in their fixed order (DESIGN §9 maintainer).

    1 access        ring buffer + meta/access_log.json -> new access log         access.py
    2 communities   Louvain over the knowledge-link graph -> communities.json    communities.py
    3 decay         score -> recency.json, archived.json, status: archived       decay.py
    4 merge         near-duplicates -> (model yes/no) -> transactional merge      merge.py
    5 split         overloaded nodes -> K-means -> (model names) -> E-2/E-3 split split.py
    6 health        D1 dangling, D3 overloaded, D10 broken provenance -> health   health.py

Each step is idempotent: run twice on an unchanged vault, the second run writes no note and
no new finding (the meta/*.json files are rewritten with a new `computed_at`, so recall can
tell they are fresh). Each step appends what it found and did to `audit/<date>/maintain.md`.
Steps 1–3 and 6 and the candidate detection of 4–5 never need a model: without a
`merge_judge` / `split_planner` (the maintainer job supplies both when a model is
configured) merge and split only report. `dry_run` computes everything and writes nothing.

A step that fails is recorded (and logged) and the later steps still run: a broken
communities file must not stop the health report.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from reme_agent.config import MaintainSettings
from reme_agent.engine.progress import SILENT, Progress
from reme_agent.engine.stop import stop_reason
from reme_agent.errors import InvalidArgument
from reme_agent.maintenance.access import aggregate_access, last_reads
from reme_agent.maintenance.communities import detect_communities
from reme_agent.maintenance.decay import DecayParams, run_decay
from reme_agent.maintenance.health import run_health
from reme_agent.maintenance.merge import MergeJudge, MergeParams, run_merge
from reme_agent.maintenance.report import STEPS, StepResult
from reme_agent.maintenance.split import SplitParams, SplitPlanner, run_split
from reme_agent.recall.archive import archived_now
from reme_agent.recall.signals import iso_utc, utc_now
from reme_agent.schema.audit import append_audit

if TYPE_CHECKING:
    from reme_agent.engine.view import VaultView
    from reme_agent.vault import Vault

log = logging.getLogger("reme_agent.maintenance")

__all__ = ["STEPS", "MaintainReport", "Maintainer"]


@dataclass
class MaintainReport:
    started_at: str
    dry_run: bool
    steps: list[StepResult] = field(default_factory=list)
    seconds: float = 0.0
    stopped: str | None = None   # why the run ended early (a stop request), else None

    @property
    def changed(self) -> list[str]:
        return sorted({p for s in self.steps for p in s.changed})

    def step(self, name: str) -> StepResult:
        return next(s for s in self.steps if s.step == name)

    def as_dict(self) -> dict[str, Any]:
        return {"started_at": self.started_at, "dry_run": self.dry_run,
                "seconds": round(self.seconds, 3), "changed": self.changed,
                "stopped": self.stopped, "steps": [s.as_dict() for s in self.steps]}

    def text(self) -> str:
        head = f"maintain{' (dry run)' if self.dry_run else ''}: {len(self.steps)} step(s) " \
               f"in {self.seconds:.2f} s"
        lines = [head] + [f"  {s.summary()}" for s in self.steps]
        lines += [f"  warning ({s.step}): {w}" for s in self.steps for w in s.warnings]
        if self.stopped:
            lines.append(f"  stopped early ({self.stopped}): the rest runs next time")
        return "\n".join(lines)

    def stop(self, step: str, why: str) -> None:
        """Record a step not run because the run was asked to stop."""
        self.steps.append(StepResult(step, dry_run=self.dry_run, skipped=f"stopped: {why}"))
        self.stopped = why


class Maintainer:
    """Runs the maintenance steps over one vault; LLM decisions are injected, never required."""

    def __init__(self, vault: Vault, settings: MaintainSettings | None = None, *,
                 split_token_threshold: int = 2000, split_block_threshold: int = 40,
                 merge_judge: MergeJudge | None = None, split_planner: SplitPlanner | None = None,
                 clock: Callable[[], datetime] = utc_now) -> None:
        self.vault = vault
        self.settings = settings or MaintainSettings()
        self.merge_judge = merge_judge
        self.split_planner = split_planner
        self.clock = clock
        s = self.settings
        self.decay_params = DecayParams(lam=s.decay_lambda, alpha=s.decay_alpha,
                                        threshold=s.archive_threshold, use_mtime=s.decay_use_mtime,
                                        archive_dir=s.archive_dir)
        self.merge_params = MergeParams(similarity=s.merge_similarity,
                                        layers=tuple(s.merge_layers), max_group=s.merge_max_group,
                                        neighbors=s.merge_neighbors,
                                        max_per_run=s.merge_max_per_run,
                                        cooldown_days=s.cooldown_days,
                                        rejected_cooldown_days=s.rejected_cooldown_days)
        self.split_params = SplitParams(token_threshold=split_token_threshold,
                                        block_threshold=split_block_threshold, k_max=s.split_k_max,
                                        min_silhouette=s.split_min_silhouette,
                                        max_per_run=s.split_max_per_run,
                                        cooldown_days=s.cooldown_days, seed=s.seed)

    def run(self, only: Iterable[str] | None = None, *, dry_run: bool = False,
            move_archived: bool = False, split_requests: Sequence[str] = (),
            progress: Progress = SILENT, stop: threading.Event | None = None) -> MaintainReport:
        """Run the steps (all, or `only` these, always in the fixed order).

        `progress` shows the index run and the steps (none by default). `stop`, once set,
        ends the run at the next safe point: between two steps, or between two actions
        (transactions) of decay, merge and split; the report says where (`stopped`).
        """
        wanted = list(only) if only else list(STEPS)
        unknown = [s for s in wanted if s not in STEPS]
        if unknown:
            raise InvalidArgument(f"Unknown maintenance step(s) {unknown}.",
                                  f"Steps: {', '.join(STEPS)}.")
        now = self.clock()
        started = time.perf_counter()
        report = MaintainReport(started_at=iso_utc(now), dry_run=dry_run)
        self._communities: dict[str, int] | None = None
        # the steps read the index state and graph: bring them up to date
        self.vault.index(progress=progress)
        view = self.vault.view()
        bar = progress("maintain", sum(1 for s in STEPS if s in wanted), "step")
        try:
            for name in STEPS:
                if name not in wanted:
                    continue
                if why := stop_reason(stop):
                    report.stop(name, why)
                    continue
                view = self._run_step(name, view, now, report, dry_run=dry_run,
                                      move_archived=move_archived,
                                      split_requests=split_requests, stop=stop)
                report.stopped = report.stopped or report.steps[-1].stopped
                bar.update(1)
        finally:
            bar.close()
        report.seconds = time.perf_counter() - started
        return report

    def _run_step(self, name: str, view: VaultView, now: datetime, report: MaintainReport, *,
                  dry_run: bool, move_archived: bool, split_requests: Sequence[str],
                  stop: threading.Event | None = None) -> VaultView:
        """One step, timed and audited; returns the view the next step plans against."""
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            result = self._step(name, view, now, dry_run=dry_run, move_archived=move_archived,
                                split_requests=split_requests, stop=stop)
        except Exception as exc:  # one broken step must not stop the others
            log.exception("maintenance step %s failed", name)
            result = StepResult(name, dry_run=dry_run,
                                skipped=f"failed: {type(exc).__name__}: {exc}")
        result.seconds = round(time.perf_counter() - t0, 3)
        result.cpu_seconds = round(time.process_time() - c0, 3)
        report.steps.append(result)
        if any(not p.startswith(("meta/", "audit/")) for p in result.changed):
            view = self.vault.view()  # notes changed: later steps see them
        if not dry_run:
            self._audit(result, now)
        return view

    def _step(self, name: str, view: VaultView, now: datetime, *, dry_run: bool,
              move_archived: bool, split_requests: Sequence[str],
              stop: threading.Event | None) -> StepResult:
        vault, s = self.vault, self.settings
        if name == "access":
            return aggregate_access(vault, today=now.date(), existing=set(view.files),
                                    keep_days=s.access_keep_days, dry_run=dry_run)
        if name == "communities":
            archived = archived_now(vault)   # as recall sees it (`run` indexed first)
            archived.prefetch(view.notes)     # one status lookup (none with the status index)
            result, signal = detect_communities(vault, view.notes, layers=s.community_layers,
                                                resolution=s.louvain_resolution, seed=s.seed,
                                                dry_run=dry_run, archived=archived)
            self._communities = dict(signal.communities)  # merge gates on this run's map
            return result
        if name == "decay":
            return run_decay(vault, view, now=now, params=self.decay_params,
                             last_read=last_reads(vault), move_archived=move_archived,
                             dry_run=dry_run, stop=stop)
        if name == "merge":
            return run_merge(vault, view, params=self.merge_params,
                             communities=self._communities or vault.signals.communities(),
                             judge=self.merge_judge,
                             now=now, dry_run=dry_run, stop=stop)
        if name == "split":
            return run_split(vault, view, params=self.split_params, planner=self.split_planner,
                             now=now, requested=list(split_requests), dry_run=dry_run,
                             stop=stop)
        return run_health(vault, view, params=self.split_params, now=now, dry_run=dry_run)

    def _audit(self, result: StepResult, now: datetime) -> None:
        try:
            append_audit(self.vault, "maintain", f"maintain: {result.step}", result.markdown(),
                         now=now.astimezone())
        except Exception as exc:  # the report is a courtesy; the step's work is done
            log.warning("could not write the maintain audit entry: %s", exc)
