"""The auto-link LLM job: a `Judge` answered by an AgentScope agent (DESIGN §9, jobs framework).

The follow-up queue's `autolink` items reach an `AutoLinker` (with this judge when a model is
configured) through the wiring in `jobs/followups.py`.

The algorithms (L1-L4, names, matcher) live in `maintenance/autolink/` and ask a `Judge`;
this module implements it with the model, as `jobs/maintainer_job.py` does for merge/split.

Prompt `prompts/autolink.yaml`, loaded and checked by `jobs.base.load_prompt`; the agent runs
over a job-scoped toolkit of *read-only* tools (write tools are forbidden at load time, so an
override cannot add one) behind the jobs `Guard`. The model never writes: it answers a batch
of questions with JSON, and the auto-link code validates every answer and makes the edits.
No model configured -> ModelNotConfigured when the judge is built, before any file is read.
An agent failure or an unparsable reply answers nothing, so those questions are skipped.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime as _dt
import json
import logging
import re
from collections.abc import Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from reme_agent.jobs.base import (
    Placeholders,
    PromptOverride,
    guarded,
    load_prompt,
    protocol_text,
    resolve_model,
    run_agent,
)
from reme_agent.jobs.guard import WRITE_TOOLS, Guard, JobResult
from reme_agent.maintenance.autolink.judge import (
    MentionQuestion,
    PairQuestion,
    PredicateQuestion,
)
from reme_agent.maintenance.autolink.names import Node

if TYPE_CHECKING:
    from reme_agent.vault import Vault

log = logging.getLogger("reme_agent.autolink")

__all__ = ["JOB", "PLACEHOLDERS", "JobJudge", "parse_answers"]

JOB = "autolink"
PLACEHOLDERS = Placeholders(
    system_allowed=frozenset({"vault_dir", "today"}),
    user_required=frozenset({"task", "questions"}),
    user_allowed=frozenset({"predicates", "answer_format"}))

_FORMATS = {
    "choose": '{"answers": [{"id": 0, "answer": "knowledge/<slug>/<slug>.md" or null}]}',
    "related": '{"answers": [{"id": 0, "answer": true or false}]}',
    "predicate": '{"answers": [{"id": 0, "answer": "is_a" or null}]}',
}
_FENCE_RE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def parse_answers(text: str) -> dict[int, Any]:
    """`{"answers": [{"id", "answer"}]}` (or `{"0": ...}` / a bare list) -> {id: answer}."""
    blob = text.strip()
    fenced = _FENCE_RE.findall(blob)
    if fenced:
        blob = fenced[-1].strip()
    lo, hi = min((i for i in (blob.find("{"), blob.find("[")) if i >= 0), default=-1), \
        max(blob.rfind("}"), blob.rfind("]"))
    if lo < 0 or hi < lo:
        return {}
    try:
        data = json.loads(blob[lo:hi + 1])
    except json.JSONDecodeError:
        return {}
    if isinstance(data, dict) and "answers" in data:
        data = data["answers"]
    out: dict[int, Any] = {}
    if isinstance(data, list):
        for item in data:
            if isinstance(item, dict) and "id" in item:
                try:
                    out[int(item["id"])] = item.get("answer")
                except (TypeError, ValueError):
                    continue
    elif isinstance(data, dict):
        for key, value in data.items():
            if str(key).isdigit():
                out[int(key)] = value
    return out


def _node(node: Node) -> str:
    desc = f": {node.description}" if node.description else ""
    return f"`{node.path}` — {node.title}{desc}"


def _close_to(q: MentionQuestion) -> str:
    """For a fuzzy proposal: the name the mention resembles (and how close it is)."""
    if q.kind == "ambiguous" or not q.name:
        return ""
    score = f", similarity {q.score:.2f}" if q.score is not None else ""
    return f" — not written as a name; it resembles {q.name!r}{score}"


def _quote(text: str) -> str:
    return "\n".join("> " + line for line in text.split("\n"))


class _ReadOnlyGuard(Guard):
    def check_allowed(self, name: str, path: str, args: dict[str, Any]) -> None:
        from reme_agent.errors import InvalidArgument

        raise InvalidArgument("The auto-link job never writes.", "Answer with JSON instead.")


class JobJudge:
    """`Judge` backed by the auto-link LLM job; one agent run per batch of questions."""

    def __init__(self, vault: Vault, model: Any | None = None, *,
                 prompt: PromptOverride = None, language: str | None = None,
                 predicates: Sequence[str] | None = None) -> None:
        self.vault = vault
        self.spec = load_prompt(JOB, language or vault.settings.jobs.language, prompt,
                                placeholders=PLACEHOLDERS, forbidden_tools=WRITE_TOOLS)
        self.model = resolve_model(vault, model, "auto-link")  # ModelNotConfigured: nothing read
        self.predicates = list(predicates if predicates is not None
                               else vault.settings.autolink.l3_predicates)
        self.runs: list[JobResult] = []

    # -- the Judge interface -----------------------------------------------------------
    def choose(self, questions: Sequence[MentionQuestion]) -> Mapping[int, str | None]:
        text = "\n\n".join(
            f"Question {q.id} ({q.kind}) — note `{q.note}`\nMention: {q.text!r}{_close_to(q)}\n"
            f"Paragraph:\n{_quote(q.paragraph)}\nCandidates:\n"
            + "\n".join(f"- {_node(c)}" for c in q.candidates)
            for q in questions)
        got = self._ask("choose", text)
        return {q.id: v if isinstance(v := got.get(q.id), str) else None for q in questions}

    def related(self, questions: Sequence[PairQuestion]) -> Mapping[int, bool]:
        text = "\n\n".join(
            f"Question {q.id} — similarity {q.similarity:.2f}, same community: "
            f"{ {True: 'yes', False: 'no', None: 'unknown'}[q.same_community] }\n"
            f"First: {_node(q.source)}\nSecond: {_node(q.target)}" for q in questions)
        got = self._ask("related", text)
        return {q.id: got.get(q.id) is True for q in questions}

    def predicate(self, questions: Sequence[PredicateQuestion]) -> Mapping[int, str | None]:
        text = "\n\n".join(
            f"Question {q.id}\nSource: {_node(q.source)}\nLine: {q.line!r}\n"
            f"Target: {_node(q.target)}" for q in questions)
        got = self._ask("predicate", text)
        return {q.id: v if isinstance(v := got.get(q.id), str) else None for q in questions}

    # -- one agent run -----------------------------------------------------------------
    def _ask(self, task: str, questions: str) -> dict[int, Any]:
        if not questions:
            return {}
        today = _dt.date.today()
        guard = _ReadOnlyGuard(self.vault, JOB, today=today)
        values = {"protocol": protocol_text(), "vault_dir": str(self.vault.root),
                  "today": today.isoformat(), "task": task, "questions": questions,
                  "answer_format": _FORMATS[task],
                  "predicates": ("Suggested predicates: " + ", ".join(self.predicates) + "\n")
                  if task == "predicate" and self.predicates else ""}
        summary, reason, error = _run(guarded(run_agent(
            self.spec, guard, self.model, system_values=values, user_values=values,
            retries=self.vault.settings.model.retries)))
        self.runs.append(guard.result(summary=summary, finished_reason=reason, error=error))
        if error:
            log.warning("auto-link %s questions skipped: %s", task, error)
            return {}
        answers = parse_answers(summary)
        if not answers:
            log.warning("auto-link %s: the model's reply held no answers: %.200s", task, summary)
        return answers


def _run(coro: Coroutine[Any, Any, tuple[str, str | None, str | None]]
         ) -> tuple[str, str | None, str | None]:
    """Run the agent from sync code, also when called inside an event loop (queue consumer)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()
