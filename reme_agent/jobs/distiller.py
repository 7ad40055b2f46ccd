"""Distiller + dream (DESIGN §9, seed "Distiller R-M-W"): daily notes -> knowledge nodes.

Input `daily_paths`, `hint`, `flip_status=True`. The model follows the protocol's
Read-Modify-Write tree (SKIP / CONTRADICT / EXTEND / CREATE / cross-linked CREATE / LINK)
with the L4 tools; the code around it enforces what must not depend on the model:

- writes go to `knowledge/` only; daily notes change only by the status flip;
- CAS and E-1 on every rewrite (see `jobs.guard`);
- the status flip is **decided in code** after the agent finishes. The model's
  `daily_status(..., "distilled")` (or a `status` property update) is recorded as a request;
  a daily note is flipped only if `flip_status`, the model asked for it, the job read it, the
  agent did not stop on an error, and every write made while it was the current daily note
  (the last daily note read) ended in success. Others are reported in `skipped`;
- after each knowledge write: D3 overload check -> enqueue `split`; enqueue `autolink` (L1),
  into the vault's durable queue (`vault.queue`). The job returns without running them
  (seed auto_link §1.4: auto-link never blocks dream); `result.enqueued` lists them and the
  drainers of `jobs/followups.py` run them;
- at the end `lint_schema` runs on every note written; errors left are in `result.lint`.

Token estimate for D3 (no tokenizer dependency, deliberately rough): one token per CJK
character (Han, kana, hangul) plus one per four other non-space characters.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from reme_agent.engine.parser import split_blocks, split_note
from reme_agent.engine.tokenize import estimate_tokens
from reme_agent.errors import InvalidArgument, ReMeError
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
from reme_agent.jobs.guard import Done, Guard, Issue, JobResult
from reme_agent.maintenance.followups import AUTOLINK, SPLIT
from reme_agent.schema.layout import KNOWLEDGE
from reme_agent.toolkit.daily import daily_read, daily_status, is_daily_note
from reme_agent.toolkit.lint import lint_schema

if TYPE_CHECKING:
    from reme_agent.vault import Vault

JOB = "distiller"
PLACEHOLDERS = Placeholders(
    system_allowed=frozenset({"vault_dir", "today", "hint", "language"}),
    user_required=frozenset({"daily_paths"}),
    user_allowed=frozenset({"hint", "today", "flip_note"}))
FORBIDDEN_TOOLS = frozenset({"delete", "move", "upload", "download", "daily_write",
                             "daily_attach"})



class DistillGuard(Guard):
    """Knowledge-only writes, deferred status flips, per-daily attribution, follow-up queue."""

    def __init__(self, *args: Any, dailies: Sequence[str], split_tokens: int,
                 split_blocks: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.dailies = list(dailies)
        self.split_tokens = split_tokens
        self.split_blocks = split_blocks
        self.current_daily: str | None = None
        self.requested: list[str] = []
        self.touched: dict[str, set[str]] = {}  # written path -> dailies it was written for

    def check_allowed(self, name: str, path: str, args: dict[str, Any]) -> None:
        if name in ("write", "property_update", "property_delete") \
                and not path.startswith(KNOWLEDGE + "/"):
            raise InvalidArgument(f"Refused: the distiller writes only knowledge/ notes, not "
                                  f"{path!r}.", "Daily notes change only by the status flip "
                                  "(daily_status).")

    def dispatch(self, name: str, fn: Callable[..., Any], args: dict[str, Any],
                 path: str | None) -> Any:
        if name in ("read", "daily_read") and path in self.dailies:
            self.current_daily = path
        if name in ("write", "property_update", "property_delete") and path:
            self.touched.setdefault(path, set()).add(self.current_daily or "*")
        if name == "daily_status":
            return self._request_flip(path, args.get("status"))
        if name in ("property_update", "property_delete") and path \
                and is_daily_note(self.vault, path):
            return self._daily_property(name, fn, args, path)
        return super().dispatch(name, fn, args, path)

    def _daily_property(self, name: str, fn: Callable[..., Any], args: dict[str, Any],
                        path: str) -> Any:
        props = args.get("properties") if name == "property_update" else None
        if isinstance(props, dict) and set(props) == {"status"}:
            return self._request_flip(path, props["status"])
        raise InvalidArgument(f"Refused: the distiller changes daily notes only by flipping "
                              f"their status, not {name} on {path!r}.",
                              f'Call daily_status(path={path!r}, status="distilled") when done.')

    def _request_flip(self, path: str | None, status: Any) -> Done:
        if path is None or path not in self.dailies:
            raise InvalidArgument(f"Refused: {path!r} is not one of this job's daily notes.",
                                  "Flip only: " + ", ".join(self.dailies) + ".")
        if status != "distilled":
            raise InvalidArgument(f"Refused: the distiller only sets status 'distilled', "
                                  f"not {status!r}.")
        if path not in self.requested:
            self.requested.append(path)
        return Done(f"Noted: {path} will be set to distilled when the job ends, if every "
                    "write made for it succeeded.")

    def after_write(self, path: str, created: bool) -> None:
        """D3 overload check -> split; every knowledge write -> auto-link L1."""
        if not path.startswith(KNOWLEDGE + "/"):
            return
        try:
            # the whole note: `read` pages notes over its cap
            body = split_note(self.vault.store.read_stamped(path)[0], path).body
        except ReMeError:
            return
        tokens = estimate_tokens(body)
        blocks = len(split_blocks(body))
        if tokens > self.split_tokens or blocks > self.split_blocks:
            self.enqueue(SPLIT, path, f"overloaded (D3): ~{tokens} tokens, {blocks} blocks",
                         tokens=tokens, blocks=blocks, token_threshold=self.split_tokens,
                         block_threshold=self.split_blocks)
        self.enqueue(AUTOLINK, path, "new or changed knowledge note", level="L1")

    def flip_verdicts(self, flip_status: bool, agent_error: str | None) -> dict[str, str | None]:
        """daily -> None (flip it) or the reason it stays active."""
        failing = set(self.failures) | set(self.blocked)
        out: dict[str, str | None] = {}
        for daily in self.dailies:
            bad = sorted(p for p, owners in self.touched.items()
                         if p in failing and (daily in owners or "*" in owners))
            if not flip_status:
                out[daily] = "flip_status is off"
            elif agent_error:
                out[daily] = f"not flipped: the job stopped early ({agent_error})"
            elif daily not in self.read:
                out[daily] = "not flipped: the job never read it"
            elif daily not in self.requested:
                out[daily] = "not flipped: the model did not mark it distilled"
            elif bad:
                out[daily] = "not flipped: writes did not succeed for " + ", ".join(bad)
            else:
                out[daily] = None
        return out


async def arun_distiller(vault: Vault, daily_paths: Sequence[str], *, hint: str = "",
                         flip_status: bool = True, model: Any | None = None,
                         today: _dt.date | None = None, language: str | None = None,
                         prompt: PromptOverride = None) -> JobResult:
    """Distill daily notes into knowledge (see the module docstring)."""
    day = today or _dt.date.today()
    cfg = vault.settings.jobs
    spec = load_prompt(JOB, language or cfg.language, prompt, placeholders=PLACEHOLDERS,
                       forbidden_tools=FORBIDDEN_TOOLS)
    chat = resolve_model(vault, model, JOB)  # ModelNotConfigured here: nothing touched yet
    dailies = check_dailies(vault, daily_paths)
    guard = DistillGuard(vault, JOB, today=day, max_cas_redos=cfg.max_cas_redos,
                         queue=vault.queue, dailies=dailies,
                         split_tokens=cfg.split_token_threshold,
                         split_blocks=cfg.split_block_threshold)
    values = {"protocol": protocol_text(), "vault_dir": str(vault.root),
              "today": day.isoformat(), "hint": hint or "(none)", "language": spec.language,
              "daily_paths": "\n".join(f"- {p}" for p in dailies),
              "flip_note": flip_note(spec.language, flip_status)}
    summary, reason, error = await guarded(run_agent(
        spec, guard, chat, system_values=values, user_values=values,
        retries=vault.settings.model.retries))

    flipped: list[str] = []
    for daily, why in guard.flip_verdicts(flip_status, error).items():
        if why is None:
            try:
                if daily_status(vault, daily, "distilled")["changed"]:
                    flipped.append(daily)
            except ReMeError as exc:
                guard.skipped.append(Issue(path=daily, reason=f"not flipped: {exc}",
                                           tool="daily_status"))
        elif flip_status:
            guard.skipped.append(Issue(path=daily, reason=why, tool="daily_status"))
    lint = _lint(vault, [p for p in guard.written if p.startswith(KNOWLEDGE + "/")])
    result = guard.result(summary=summary, finished_reason=reason, error=error,
                          flipped=flipped, lint=lint)
    result.written += [p for p in flipped if p not in result.written]
    return result


def run_distiller(vault: Vault, daily_paths: Sequence[str], **kwargs: Any) -> JobResult:
    """Synchronous `arun_distiller` (not for use inside a running event loop)."""
    return run_sync(arun_distiller(vault, daily_paths, **kwargs), "distiller")


def check_dailies(vault: Vault, daily_paths: Sequence[str]) -> list[str]:
    """Normalised summary-note paths; a missing one fails the job before the model runs."""
    if isinstance(daily_paths, str):
        daily_paths = [daily_paths]
    if not daily_paths:
        raise InvalidArgument("No daily notes to distill.", "Pass daily/<date>/<slug> paths; "
                              "see `daily_list`.")
    out = []
    for raw in daily_paths:
        path = daily_read(vault, raw)["path"]  # a workspace or an Obsidian day note; raises
        # NoteNotFound with close matches
        if path not in out:
            out.append(path)
    return out


def flip_note(language: str, flip_status: bool) -> str:
    """The user template's `{flip_note}`: whether the model should mark dailies distilled."""
    if language == "zh":
        return ("每篇日记处理完后调用 daily_status 标记为 distilled。" if flip_status
                else "不要修改这些日记的 status。")
    return ("When a daily note is fully handled, call daily_status with status \"distilled\"."
            if flip_status else "Do not change the status of these daily notes.")


def _lint(vault: Vault, paths: list[str]) -> list[dict[str, Any]]:
    """Schema errors left in the written notes (the job's self-check, done once more in code)."""
    if not paths:
        return []
    try:
        report = lint_schema(vault, KNOWLEDGE)
    except ReMeError:
        return []
    return [item for item in report["items"] if item["path"] in paths]
