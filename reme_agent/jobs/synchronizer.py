"""Synchronizer (DESIGN §9, seed "Synchronizer"): conversation -> daily note, the hot path.

Input: messages (AgentScope `Msg` or dicts `{role, content}`; content a string or a list of
`{"type": "text", "text": ...}` blocks). Output: `daily/<YYYY-MM-DD>/<slug>/<slug>.md`:

- CREATE a note for a new task; UPDATE today's note of the same task; INHERIT: a task with an
  active note from an earlier day gets today's note with `inherits:: [[<that note>]]` (added
  in code when the model forgets it) and the Objective carried over.
- Section discipline, enforced in code: Objective is set once, Plan and Next are rewritten,
  Progress / Findings / Decisions are append-only, Materials is a union. `daily_write` with
  mode "append" on an existing note is turned into a section **merge** computed from the note
  as it is now (under CAS; a concurrent edit just redoes the merge). A "replace" that drops
  lines from an append-only section, or changes a set Objective, is refused like E-1
  (first time: the error names the lines; second time: refused + audit).
- Sibling materials: what is too long for the note (code, a long output or log the
  conversation holds) goes beside it with `daily_attach` (`toolkit/materials.py`), which
  links it under Materials; the guard fills in the date and session id as for `daily_write`.
- Never writes `knowledge/` (its tools are the daily tools only, checked when the prompt
  loads) and never runs `lint_schema` (hot path).

`mode="transcript"` needs no model: it appends the raw turns to the day's note
(`daily/<today>/<slug>/`, slug `session-<id>` or `transcript`), for offline use and evals.
It stores no materials: the note is the raw record, every turn whole and in order, and
deciding what deserves a file of its own is the model's judgement.

Both modes record each turn once (`jobs/turns.py`): the turns get stable ids, the ones an
earlier sync of the session already recorded are dropped, and the model (or the transcript
note) gets only the new ones. Re-sending a conversation, or a transcript that grew, is safe.
"""

from __future__ import annotations

import datetime as _dt
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from reme_agent.engine.cas import redo_on_stamp_change
from reme_agent.engine.queue import WorkQueue
from reme_agent.errors import InvalidArgument, ModelNotConfigured, ReMeError, StampChanged
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
from reme_agent.jobs.guard import Guard, JobResult, norm_path
from reme_agent.jobs.turns import Turn, TurnLedger, number_turns, session_key
from reme_agent.schema.layout import DAILY, parse_daily_path, slugify
from reme_agent.schema.sections import FENCE, H2, SECTIONS, section_key
from reme_agent.toolkit.daily import daily_list, entry_body, is_daily_note
from reme_agent.toolkit.registry import get_tool

if TYPE_CHECKING:
    from reme_agent.vault import Vault

log = logging.getLogger("reme_agent.jobs")

JOB = "synchronizer"
PLACEHOLDERS = Placeholders(
    system_allowed=frozenset({"vault_dir", "today", "hint", "session_id", "language"}),
    user_required=frozenset({"transcript"}),
    user_allowed=frozenset({"recent", "today", "session_id", "hint", "inherit_days"}))
FORBIDDEN_TOOLS = frozenset({"write", "property_update", "property_delete", "daily_status",
                             "lint_schema", "move", "copy", "delete", "upload", "download"})

Mode = Literal["llm", "transcript"]

# -- section discipline -------------------------------------------------------------------
RULES: dict[str, str] = {"objective": "once", "plan": "rewrite", "progress": "append",
                         "findings": "append", "decisions": "append", "next": "rewrite",
                         "materials": "union"}


class Section:
    def __init__(self, key: str, heading: str, lines: list[str]) -> None:
        self.key, self.heading, self.lines = key, heading, lines

    @property
    def content(self) -> list[str]:
        """Lines without leading/trailing blank lines."""
        lines = list(self.lines)
        while lines and not lines[0].strip():
            lines.pop(0)
        while lines and not lines[-1].strip():
            lines.pop()
        return lines


def parse_sections(body: str) -> tuple[list[str], list[Section]]:
    """(preamble lines, level-2 sections in order); unknown headings keep their own key."""
    preamble: list[str] = []
    sections: list[Section] = []
    fenced = False
    for line in body.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
        m = None if fenced else H2.match(line)
        if m:
            name = m.group(1).strip().rstrip(":：").strip()
            sections.append(Section(section_key(name), name, []))
        elif sections:
            sections[-1].lines.append(line)
        else:
            preamble.append(line)
    return preamble, sections


def rule_of(key: str) -> str:
    return RULES.get(key, "append")  # an unknown section is history: append-only


def merge_sections(old_body: str, new_body: str) -> str:
    """The note after adding `new_body` to `old_body` under the section discipline.

    A body without `##` sections counts as Progress lines. New lines already present in an
    append-only or union section are not repeated, so re-sending the whole note is harmless.
    """
    old_pre, old_secs = parse_sections(old_body)
    new_pre, new_secs = parse_sections(new_body)
    if not new_secs:
        new_secs = [Section("progress", "Progress", [ln for ln in new_pre if not _is_h1(ln)])]
        new_pre = []
    merged: dict[str, Section] = {}
    order: list[str] = []
    for sec in old_secs:
        if sec.key in merged:  # a repeated heading: fold it into the first one
            merged[sec.key].lines = merged[sec.key].content + sec.content
        else:
            merged[sec.key] = Section(sec.key, sec.heading, sec.content)
            order.append(sec.key)
    for sec in new_secs:
        new = sec.content
        if sec.key not in merged:
            merged[sec.key] = Section(sec.key, sec.heading, new)
            order.append(sec.key)
            continue
        cur = merged[sec.key]
        rule = rule_of(sec.key)
        if rule == "once":
            cur.lines = cur.content if _has_text(cur.content) else new
        elif rule == "rewrite":
            cur.lines = new if _has_text(new) else cur.content
        else:
            seen = {ln.strip() for ln in cur.content if ln.strip()}
            cur.lines = cur.content + [ln for ln in new if ln.strip() and ln.strip() not in seen]
    pre = _trim(old_pre)
    have = {ln.strip() for ln in pre}
    pre += [ln for ln in new_pre if ln.strip() and not _is_h1(ln) and ln.strip() not in have]
    known = [k for k in SECTIONS if k in merged]
    others = [k for k in order if k not in SECTIONS]
    parts = ["\n".join(pre)] if any(ln.strip() for ln in pre) else []
    for key in (*known, *others):
        sec = merged[key]
        parts.append(f"## {sec.heading}\n" + "\n".join(sec.content))
    return "\n\n".join(p.rstrip("\n") for p in parts) + "\n"


def section_problems(old_body: str, new_body: str) -> list[str]:
    """Why replacing `old_body` by `new_body` breaks the discipline ([] when it does not)."""
    old_pre, old_secs = parse_sections(old_body)
    new_pre, new_secs = parse_sections(new_body)
    new_by_key: dict[str, list[str]] = {}
    for sec in new_secs:
        new_by_key.setdefault(sec.key, []).extend(sec.content)
    problems = []
    kept_pre = {ln.strip() for ln in new_pre}
    lost_pre = [ln.strip() for ln in old_pre if ln.strip() and not _is_h1(ln)
                and ln.strip() not in kept_pre]
    if lost_pre:
        problems.append("The lines before the first section must be kept: "
                        + "; ".join(repr(x) for x in lost_pre) + ".")
    for sec in old_secs:
        old = [ln.strip() for ln in sec.content if ln.strip()]
        new = [ln.strip() for ln in new_by_key.get(sec.key, []) if ln.strip()]
        rule = rule_of(sec.key)
        if rule == "once" and old and old != new:
            problems.append(f"{sec.heading} is set once and cannot change; keep it as: "
                            + " / ".join(repr(x) for x in old) + ".")
        elif rule in ("append", "union"):
            lost = [ln for ln in old if ln not in set(new)]
            if lost:
                kind = "append-only" if rule == "append" else "a union (nothing is removed)"
                problems.append(f"{sec.heading} is {kind}; restore these lines: "
                                + "; ".join(repr(x) for x in lost) + ".")
    return problems


def _is_h1(line: str) -> bool:
    return line.startswith("# ")


def _has_text(lines: Iterable[str]) -> bool:
    return any(ln.strip() for ln in lines)


def _trim(lines: list[str]) -> list[str]:
    out = list(lines)
    while out and not out[-1].strip():
        out.pop()
    while out and not out[0].strip():
        out.pop(0)
    return out


# -- messages -----------------------------------------------------------------------------
def coerce_messages(messages: Iterable[Any]) -> list[dict[str, str]]:
    """[{role, name, text}] from AgentScope Msg objects or dicts; system/tool turns dropped."""
    out: list[dict[str, str]] = []
    for msg in messages or []:
        if isinstance(msg, dict):
            role = str(msg.get("role") or "user")
            name = str(msg.get("name") or role)
            text = _text_of(msg.get("content"))
        else:
            role = str(getattr(msg, "role", "user"))
            name = str(getattr(msg, "name", None) or role)
            getter = getattr(msg, "get_text_content", None)
            text = getter() if callable(getter) else _text_of(getattr(msg, "content", ""))
        if role not in ("user", "assistant") or not text or not text.strip():
            continue
        out.append({"role": role, "name": name, "text": text.strip()})
    return out


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and block.get("type", "text") == "text":
                parts.append(str(block.get("text") or ""))
            elif getattr(block, "type", None) == "text":
                parts.append(str(getattr(block, "text", "") or ""))
        return "\n".join(p for p in parts if p)
    return str(content)


def render_transcript(turns: Sequence[Turn | Mapping[str, str]],
                      max_chars: int | None = None) -> str:
    """`[role] text` per turn (numbered turns, or the dicts `coerce_messages` makes)."""
    text = "\n\n".join(f"[{_part(t, 'role')}] {_part(t, 'text')}" for t in turns)
    if max_chars and len(text) > max_chars:  # keep the end: the latest turns matter most
        text = "[... earlier turns cut ...]\n\n" + text[-max_chars:]
    return text


def _part(turn: Turn | Mapping[str, str], key: str) -> str:
    return str(turn[key]) if isinstance(turn, Mapping) else str(getattr(turn, key))


# -- the guard ----------------------------------------------------------------------------
class SyncGuard(Guard):
    """Daily notes only, session id filled in, appends merged by section, INHERIT link."""

    def __init__(self, *args: Any, session_id: str, recent: list[dict[str, Any]],
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.session_id = session_id
        self.recent = recent

    def check_allowed(self, name: str, path: str, args: dict[str, Any]) -> None:
        if name == "daily_attach":
            return  # the tool itself writes only a material beside a daily note, and its link
        if not is_daily_note(self.vault, path):
            raise InvalidArgument(f"Refused: the synchronizer writes only daily notes, not "
                                  f"{path!r}.", "Use daily_write; the distiller writes knowledge.")

    def rewrite_problems(self, path: str, old_body: str, new_body: str) -> list[str]:
        return section_problems(old_body, new_body)

    def dispatch(self, name: str, fn: Callable[..., Any], args: dict[str, Any],
                 path: str | None) -> Any:
        if name not in ("daily_write", "daily_attach"):
            return super().dispatch(name, fn, args, path)
        args.setdefault("date", None)
        args["date"] = args["date"] or self.today.isoformat()
        if not args.get("origin_session_id"):
            args["origin_session_id"] = self.session_id
        if name == "daily_attach":
            return super().dispatch(name, fn, args, path)
        if path is None or args.get("mode", "append") == "replace":
            return super().dispatch(name, fn, args, path)
        self.check_allowed(name, path, args)
        self.check_blocked(path)
        current = self.current(path)
        if current is None:
            self._add_inherits(path, args)
            return super().dispatch(name, fn, args, path)
        return self._merge_append(name, fn, args, path)

    def _merge_append(self, name: str, fn: Callable[..., Any], args: dict[str, Any],
                      path: str) -> Any:
        """An append as a section merge on the note as it is now; CAS redo in code."""
        def attempt(redo: int) -> Any:
            current = self.current(path)
            if current is None:
                return Guard.dispatch(self, name, fn, args, path)
            text, stamp = current
            # merged into the task's own text: the note's body, or its day-note section
            merged = merge_sections(entry_body(self.vault, path, text, args.get("slug")),
                                    args["body"])
            self._old[path] = text
            return fn(**dict(args, body=merged, mode="replace", stamp=stamp))

        try:  # another writer got in between: merge again on the new text
            return redo_on_stamp_change(attempt, self.max_cas_redos)
        except StampChanged:
            raise self.skip(name, path, args, self.max_cas_redos + 1) from None

    def _add_inherits(self, path: str, args: dict[str, Any]) -> None:
        """INHERIT: a new note of a task with an earlier active note links it (in code)."""
        parsed = parse_daily_path(path)
        if parsed is None:
            return
        day, slug = parsed
        earlier = [r["path"] for r in self.recent
                   if r.get("slug") == slug and r.get("date", "") < day]
        body = args.get("body") or ""
        if not earlier or "inherits::" in body:
            return
        link = f"inherits:: [[{earlier[-1]}]]"
        lines = body.split("\n")
        at = 1 if lines and _is_h1(lines[0]) else 0
        args["body"] = "\n".join([*lines[:at], link, "", *lines[at:]])


# -- entry points -------------------------------------------------------------------------
async def arun_synchronizer(vault: Vault, messages: Iterable[Any], *, mode: Mode = "llm",
                            model: Any | None = None, session_id: str | None = None,
                            hint: str = "", slug: str | None = None,
                            today: _dt.date | None = None, language: str | None = None,
                            prompt: PromptOverride = None, queue: WorkQueue | None = None,
                            seen: Mapping[str, int] | None = None,
                            fallback_to_transcript: bool = False) -> JobResult:
    """Record a conversation's new turns in today's daily note (see the module docstring).

    `messages` is the conversation from its start (or a prefix of it); `seen` is for a
    caller that passes one reply at a time: how often each turn (`Turn.base`) came before.
    `fallback_to_transcript`: when the model fails before writing anything (a server that
    is down, a refused request), record the raw turns instead (transcript mode) and say so;
    for callers that get no later chance (the session-end and pre-compact hooks).
    """
    day = today or _dt.date.today()
    cfg = vault.settings.jobs
    turns = coerce_messages(messages)
    if mode not in ("llm", "transcript"):
        raise InvalidArgument(f"Unknown synchronizer mode {mode!r}.", 'Use "llm" or "transcript".')
    if mode == "llm":
        spec = load_prompt(JOB, language or cfg.language, prompt, placeholders=PLACEHOLDERS,
                           forbidden_tools=FORBIDDEN_TOOLS)
        try:
            chat = resolve_model(vault, model, JOB)  # nothing touched yet
        except ModelNotConfigured as exc:
            raise ModelNotConfigured(JOB, alternative=TRANSCRIPT_HINT) from exc
    if not turns:
        return JobResult(job=JOB, mode=mode, summary="No user or assistant messages to record.")
    session = session_key(session_id, turns)
    ledger = TurnLedger(vault, session)
    numbered = number_turns(session, turns, seen)
    fresh = ledger.claim(numbered)
    counts = {"new": len(fresh), "already_synced": len(numbered) - len(fresh)}
    if not fresh:
        return JobResult(job=JOB, mode=mode, turns=counts, summary="Nothing new to record.")
    try:
        if mode == "transcript":
            result = transcript_sync(vault, fresh, session_id=session_id, slug=slug, today=day)
        else:
            sid = session_id or f"sync-{_dt.datetime.now():%Y%m%d-%H%M%S}"
            recent = recent_active(vault, day, cfg.inherit_days)
            guard = SyncGuard(vault, JOB, today=day, max_cas_redos=cfg.max_cas_redos,
                              queue=queue, session_id=sid, recent=recent)
            values = {"protocol": protocol_text(), "vault_dir": str(vault.root),
                      "today": day.isoformat(), "hint": hint or "(none)", "session_id": sid,
                      "language": spec.language,
                      "transcript": render_transcript(fresh, cfg.sync_max_chars),
                      "recent": render_recent(recent), "inherit_days": cfg.inherit_days}
            summary, reason, error = await guarded(run_agent(
                spec, guard, chat, system_values=values, user_values=values,
                retries=vault.settings.model.retries))
            result = guard.result(summary=summary, finished_reason=reason, error=error)
            if fallback_to_transcript and result.error and not result.written:
                log.warning("the model failed (%s); recording the raw turns instead",
                            result.error)
                raw = transcript_sync(vault, fresh, session_id=session_id, slug=slug, today=day)
                result = raw.model_copy(update={"summary": (
                    f"The model failed ({result.error}); recorded the raw turns instead "
                    f"(transcript mode). {raw.summary}").strip()})
    except BaseException:
        ledger.release(fresh)
        raise
    if result.error and not result.written:  # nothing recorded: the next sync tries again
        ledger.release(fresh)
    else:
        ledger.commit(fresh, result.written)
    return result.model_copy(update={"turns": counts})


def choose_mode(vault: Vault, mode: str, model: Any | None = None) -> Mode:
    """"auto" -> "llm" when a model is given or configured, else "transcript" (no model)."""
    if mode != "auto":
        return mode  # type: ignore[return-value]
    return "llm" if model is not None or vault.settings.model.configured else "transcript"


def run_synchronizer(vault: Vault, messages: Iterable[Any], **kwargs: Any) -> JobResult:
    """Synchronous `arun_synchronizer` (not for use inside a running event loop)."""
    return run_sync(arun_synchronizer(vault, messages, **kwargs), "synchronizer")


TRANSCRIPT_HINT = ('Or record the raw turns without a model: mode "transcript" '
                   "(`reme-agent sync --mode transcript`).")


def transcript_slug(session_id: str | None, slug: str | None = None) -> str:
    if slug:
        return slugify(slug)
    return slugify(f"session-{session_id}") if session_id else "transcript"


def transcript_sync(vault: Vault, turns: Sequence[Turn], *, session_id: str | None,
                    slug: str | None, today: _dt.date) -> JobResult:
    """The deterministic no-LLM mode: append the (new) raw turns to the day's note."""
    note_slug = transcript_slug(session_id, slug)
    guard = Guard(vault, JOB, today=today, max_cas_redos=vault.settings.jobs.max_cas_redos)
    path = guard.path_of("daily_write", {"slug": note_slug})
    stamp = _dt.datetime.now().astimezone().strftime("%H:%M:%S")
    body = f"## Transcript {stamp}\n\n" + "\n\n".join(
        (f"**{t.role}**" if t.name == t.role else f"**{t.name}** ({t.role})")
        + f": {t.text}" for t in turns)
    args: dict[str, Any] = {
        "slug": note_slug, "body": body, "date": today.isoformat(), "mode": "append",
        "title": f"Session {session_id}" if session_id and not slug else None,
        "description": "Raw conversation turns recorded without a model (transcript mode).",
        "origin_session_id": session_id or f"transcript-{today.isoformat()}"}
    fn = get_tool("daily_write").bind(vault)
    try:
        guard.call("daily_write", fn, {k: v for k, v in args.items() if v is not None})
    except ReMeError as exc:
        return guard.result(mode="transcript", error=str(exc))
    return guard.result(mode="transcript",
                        summary=f"Appended {len(turns)} turn(s) to {path}.")


def recent_active(vault: Vault, day: _dt.date, days: int) -> list[dict[str, Any]]:
    """Active daily notes of the last `days` days up to `day` (candidates for UPDATE/INHERIT)."""
    start = (day - _dt.timedelta(days=max(days, 0))).isoformat()
    try:
        found = daily_list(vault, start=start, end=day.isoformat(), status="active", limit=200)
    except ReMeError:
        return []
    return [n for n in found["notes"] if norm_path(n["path"]).startswith(DAILY + "/")]


def render_recent(recent: list[dict[str, Any]]) -> str:
    """The user template's `{recent}`: one line per recent active daily note."""
    if not recent:
        return "(none)"
    return "\n".join(f"- {n['path']} ({n['date']}) — {n.get('title') or n['slug']}"
                     + (f": {n['description']}" if n.get("description") else "")
                     for n in recent[-30:])
