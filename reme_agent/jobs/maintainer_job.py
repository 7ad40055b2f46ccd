"""The maintainer's LLM decisions as jobs (DESIGN §9): merge yes/no, split naming + overview.

The maintenance package runs without a model and takes its two decisions through interfaces
(`maintenance.merge.MergeJudge`, `maintenance.split.SplitPlanner`). This module implements
them as jobs on the job framework: a YAML prompt (`prompts/maintainer.yaml`,
`prompts/split.yaml`) and an AgentScope ReAct agent over **read-only** L4 tools (a write tool
in the prompt is refused at load time). The model answers with one JSON object; the code in
`maintenance/` does every write, with the conservation checks (merge link conservation, split
E-2/E-3) and the transaction, so the prompt never carries an invariant.

`run_maintainer` runs the steps and then drains the vault's follow-up queue (the
`followups` step: auto-link L1, and split items when a model decides; `jobs/followups.py`).
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import json
import logging
import re
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from reme_agent.engine.stop import stop_reason
from reme_agent.errors import NoDecision
from reme_agent.jobs.base import (
    Placeholders,
    PromptOverride,
    guarded,
    load_prompt,
    protocol_text,
    resolve_model,
    run_agent,
    run_sync,
)
from reme_agent.jobs.guard import WRITE_TOOLS, Guard
from reme_agent.maintenance.merge import DuplicateGroup, MergeVerdict
from reme_agent.maintenance.split import ChildPlan, SplitPlan, SplitProposal

if TYPE_CHECKING:
    from reme_agent.engine.progress import Progress
    from reme_agent.maintenance.maintainer import MaintainReport
    from reme_agent.vault import Vault

log = logging.getLogger("reme_agent.maintenance")

__all__ = ["ModelMergeJudge", "ModelSplitPlanner", "NoDecision", "run_maintainer"]

MERGE_JOB = "maintainer"
SPLIT_JOB = "split"
MERGE_PLACEHOLDERS = Placeholders(
    system_allowed=frozenset({"vault_dir", "today", "language"}),
    user_required=frozenset({"group", "notes"}),
    user_allowed=frozenset({"similarity", "today"}))
SPLIT_PLACEHOLDERS = Placeholders(
    system_allowed=frozenset({"vault_dir", "today", "language"}),
    user_required=frozenset({"path", "title", "clusters"}),
    user_allowed=frozenset({"count", "feedback", "today"}))
_NOTE_CHARS = 6000      # per note shown to the merge judge (it can `read` the rest)
_CLUSTER_CHARS = 4000   # per cluster shown to the split planner


def parse_json_answer(text: str) -> dict[str, Any]:
    """The last JSON object in a model's final text (fenced or bare)."""
    candidates = re.findall(r"```(?:json)?\s*(\{.*?\})\s*```", text, flags=re.S)
    start, end = text.find("{"), text.rfind("}")
    if start >= 0 and end > start:
        candidates.append(text[start:end + 1])
    for raw in reversed(candidates):
        try:
            data = json.loads(raw)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict):
            return data
    raise NoDecision("The model's answer held no JSON object; nothing was changed.",
                     "It is asked again on the next maintenance run.")


class _Job:
    """What both deciders share: a validated prompt, a model, one read-only agent per call."""

    job = ""
    placeholders = Placeholders()

    def __init__(self, vault: Vault, *, model: Any | None = None, language: str | None = None,
                 prompt: PromptOverride = None, today: _dt.date | None = None) -> None:
        self.vault = vault
        self.today = today or _dt.date.today()
        self.spec = load_prompt(self.job, language or vault.settings.jobs.language, prompt,
                                placeholders=self.placeholders, forbidden_tools=WRITE_TOOLS)
        self.model = resolve_model(vault, model, self.job)  # ModelNotConfigured: nothing ran
        self.transcripts: list[str] = []

    def ask(self, user_values: dict[str, Any]) -> dict[str, Any]:
        values = {"protocol": protocol_text(), "vault_dir": str(self.vault.root),
                  "today": self.today.isoformat(), "language": self.spec.language,
                  **user_values}
        guard = Guard(self.vault, self.job, today=self.today,
                      max_cas_redos=self.vault.settings.jobs.max_cas_redos)

        def agent() -> Any:
            return guarded(run_agent(self.spec, guard, self.model, system_values=values,
                                     user_values=values,
                                     retries=self.vault.settings.model.retries))

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            summary, _reason, error = run_sync(agent(), self.job)
        else:
            # Called from inside an event loop (the distiller drains its queue there): the
            # decision runs on its own loop in a worker thread; the caller waits for it.
            with ThreadPoolExecutor(max_workers=1) as pool:
                summary, _reason, error = pool.submit(asyncio.run, agent()).result()
        self.transcripts.append(summary)
        if error:
            raise NoDecision(f"The {self.job} job stopped: {error}",
                             "Nothing was changed; it is retried on the next run.")
        return parse_json_answer(summary)


class ModelMergeJudge(_Job):
    """`MergeJudge` backed by the configured (or given) chat model."""

    job = MERGE_JOB
    placeholders = MERGE_PLACEHOLDERS

    def judge(self, group: DuplicateGroup, notes: dict[str, str]) -> MergeVerdict:
        shown = "\n\n".join(f"=== {p} ===\n{_cut(t, _NOTE_CHARS)}" for p, t in notes.items())
        listing = "\n".join(f"- {p} — {group.titles.get(p, p)}" for p in group.members)
        data = self.ask({"group": listing, "notes": shown,
                         "similarity": f"{group.max_similarity:.3f}"})
        decision = data.get("merge", data.get("decision"))
        if isinstance(decision, str):
            decision = decision.strip().lower() in ("yes", "true", "merge")
        if not isinstance(decision, bool):
            raise NoDecision('The merge answer has no "merge": true/false.',
                             "The group is asked about again on the next run.")
        return MergeVerdict(merge=decision, reasons=str(data.get("reasons") or "").strip())


class ModelSplitPlanner(_Job):
    """`SplitPlanner` backed by the configured (or given) chat model."""

    job = SPLIT_JOB
    placeholders = SPLIT_PLACEHOLDERS

    def plan(self, proposal: SplitProposal, note: str, feedback: str | None) -> SplitPlan:
        parts = []
        for n, idx in enumerate(proposal.clusters, 1):
            text = "\n\n".join(proposal.blocks[i]["text"] for i in idx)
            parts.append(f"### Cluster {n} ({len(idx)} paragraphs)\n\n{_cut(text, _CLUSTER_CHARS)}")
        data = self.ask({"path": proposal.path, "title": proposal.title,
                         "count": len(proposal.clusters), "clusters": "\n\n".join(parts),
                         "feedback": feedback or "(none: this is the first plan)"})
        children = data.get("children")
        if not isinstance(children, list) or not all(isinstance(c, dict) for c in children):
            raise NoDecision('The split answer has no "children" list.',
                             "The note is proposed again on the next run.")
        return SplitPlan(
            children=[ChildPlan(title=str(c.get("title") or f"Part {i}").strip(),
                                description=str(c.get("description") or "").strip(),
                                slug=c.get("slug") if isinstance(c.get("slug"), str) else None,
                                body=c.get("body") if isinstance(c.get("body"), str) else None)
                      for i, c in enumerate(children, 1)],
            overview=str(data.get("overview") or "").strip())


def run_maintainer(vault: Vault, only: Sequence[str] | None = None, *, dry_run: bool = False,
                   move_archived: bool = False, model: Any | None = None,
                   use_model: bool | None = None, progress: Progress | None = None,
                   stop: threading.Event | None = None) -> MaintainReport:
    """The whole maintainer as one job: the model decides merges and names splits when one is
    given or configured (`use_model=False`: report only). Pending `split` items of the
    follow-up queue are split first; the last step, `followups`, drains the queue (with
    `only`, just when it is named; never in a dry run). `stop`, once set, ends the run at
    the next safe point (between steps, actions or queue items; `report.stopped` says why)."""
    from reme_agent.jobs.followups import Wiring, drain
    from reme_agent.maintenance.followups import FOLLOWUPS_STEP, SPLIT
    from reme_agent.maintenance.maintainer import Maintainer, MaintainReport
    from reme_agent.recall.signals import iso_utc, utc_now
    from reme_agent.schema.audit import append_audit

    wants_model = (model is not None or vault.settings.model.configured) if use_model is None \
        else use_model
    steps = [s for s in only if s != FOLLOWUPS_STEP] if only else None
    cfg = vault.settings
    if only and not steps:  # only the follow-ups
        report = MaintainReport(started_at=iso_utc(utc_now()), dry_run=dry_run)
    else:
        judge = ModelMergeJudge(vault, model=model) if wants_model else None
        planner = ModelSplitPlanner(vault, model=model) if wants_model else None
        report = Maintainer(vault, cfg.maintain, split_token_threshold=cfg.jobs.split_token_threshold,
                            split_block_threshold=cfg.jobs.split_block_threshold,
                            merge_judge=judge, split_planner=planner).run(
            steps, dry_run=dry_run, move_archived=move_archived,
            split_requests=[i.path for i in vault.queue.pending(SPLIT)], stop=stop,
            **({"progress": progress} if progress is not None else {}))
    if dry_run or (only and FOLLOWUPS_STEP not in only):
        return report
    if why := stop_reason(stop):
        report.stop(FOLLOWUPS_STEP, why)
        return report
    drained = drain(vault, Wiring(vault, model=model, use_model=wants_model), stop=stop)
    step = drained.step()
    if why := stop_reason(stop):   # the drain stopped before the next item
        step.stopped = report.stopped = why
    report.steps.append(step)
    report.seconds += step.seconds
    try:
        append_audit(vault, "maintain", f"maintain: {step.step}", step.markdown())
    except Exception as exc:  # the report is a courtesy; the items ran
        log.warning("could not write the maintain audit entry: %s", exc)
    return report


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "\n… (cut; `read` the note for the rest)"
