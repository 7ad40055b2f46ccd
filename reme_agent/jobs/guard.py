"""The job guard: every tool call of an LLM job passes through it (DESIGN §5, §9).

A job's model gets the registry tools, each wrapped here (same name, signature and docstring,
so the schema the model sees is unchanged). The wrapper enforces in code what the prompt only
asks for, and records what the tools did, which becomes the typed `JobResult`:

- **CAS** (§5): a rewrite of an existing note carries the stamp from the job's own last read
  of it (filled in when the model leaves it out; no read -> "read it first"). A concurrent
  edit between that read and the write -> StampChanged reaches the model, which re-reads and
  redoes. After `max_cas_redos` redos on one path the note is skipped, audited
  (`audit/<date>/skipped.md`) and reported in `skipped`.
- **E-1** (§5): a body rewrite must keep every outbound `(target, predicate)` edge. The tool
  checks it (the one check, made on the text it is about to replace); the guard turns its
  `ConservationViolation` into strikes. The first violation on a path returns the error
  naming exactly the dropped links, so the model can put them back; the second refuses the
  path for the rest of the job, leaves the old body intact, appends to
  `audit/<date>/refused.md` and reports it in `refused`. Jobs add their own rewrite rules
  (the synchronizer's section discipline) through `rewrite_problems`, checked before the
  tool runs; they count as the same strikes.
- Every write outcome is kept per path: a path whose last attempt failed is in `failed`, one
  that later succeeded is not.

Audit entries go through `schema.audit.append_audit`; jobs never import the store.
"""

from __future__ import annotations

import datetime as _dt
import functools
import inspect
import json
import logging
from collections import Counter
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from reme_agent.engine.links import missing_edges
from reme_agent.engine.parser import split_note
from reme_agent.engine.queue import QueueItem, WorkQueue
from reme_agent.errors import (
    ConservationViolation,
    NoteNotFound,
    ReadFirst,
    ReMeError,
    SectionViolation,
    StampChanged,
    WriteRefused,
    WriteSkipped,
)
from reme_agent.schema.audit import append_audit
from reme_agent.toolkit.daily import daily_write_path, entry_body
from reme_agent.toolkit.materials import material_path
from reme_agent.toolkit.results import ToolResult

if TYPE_CHECKING:
    from reme_agent.toolkit.registry import ToolSpec
    from reme_agent.vault import Vault

log = logging.getLogger("reme_agent.jobs")

WRITE_TOOLS = frozenset({"write", "daily_write", "daily_attach", "property_update",
                         "property_delete", "link_remove", "daily_status", "move", "copy",
                         "delete", "upload", "download"})
STAMPED_READS = frozenset({"read", "daily_read", "property_read"})
_AUDIT_BODY_CHARS = 4000


# -- result models ----------------------------------------------------------------------
class Issue(BaseModel):
    """A note the job did not (fully) write, and why."""

    path: str
    reason: str
    tool: str | None = None
    audit: str | None = Field(None, description="The audit note that records it, if any.")


class LinkEdge(BaseModel):
    """An outbound link a write added (target resolved to a vault path when possible)."""

    source: str
    target: str
    predicate: str | None = None


class ToolEvent(BaseModel):
    """One tool call as the guard saw it."""

    tool: str
    args: dict[str, Any]
    ok: bool
    path: str | None = None
    error: str | None = None
    note: str | None = None


class JobResult(BaseModel):
    """What an LLM job did, built from the recorded tool calls (not from the model's words)."""

    job: str
    mode: str = "llm"
    read: list[str] = Field(default_factory=list)
    written: list[str] = Field(default_factory=list, description="Every path changed (created too).")
    created: list[str] = Field(default_factory=list)
    linked: list[LinkEdge] = Field(default_factory=list)
    flipped: list[str] = Field(default_factory=list, description="Daily notes set to distilled.")
    skipped: list[Issue] = Field(default_factory=list)
    failed: list[Issue] = Field(default_factory=list)
    refused: list[Issue] = Field(default_factory=list)
    enqueued: list[QueueItem] = Field(default_factory=list,
                                      description="Follow-up items queued (as they were then).")
    lint: list[dict[str, Any]] = Field(default_factory=list,
                                       description="Schema errors left in written notes.")
    turns: dict[str, int] | None = Field(None, description='Synchronizer: {"new": n, '
                                         '"already_synced": m} turns of the messages given.')
    summary: str = ""
    finished_reason: str | None = None
    error: str | None = Field(None, description="Why the agent stopped early, if it did.")
    tool_calls: list[ToolEvent] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None and not self.failed and not self.refused

    def render(self) -> str:
        """A short human report (the CLI's text output)."""
        lines = [f"{self.job} ({self.mode}): {self.summary.strip() or '(no summary)'}"]
        for label, paths in (("read", self.read), ("created", self.created),
                             ("written", [p for p in self.written if p not in self.created]),
                             ("flipped", self.flipped)):
            if paths:
                lines.append(f"  {label}: {', '.join(paths)}")
        if self.linked:
            lines.append("  linked: " + ", ".join(
                f"{e.source} -> {e.predicate + ':: ' if e.predicate else ''}{e.target}"
                for e in self.linked))
        for label, issues in (("skipped", self.skipped), ("failed", self.failed),
                              ("refused", self.refused)):
            lines += [f"  {label}: {i.path}: {i.reason}" for i in issues]
        lines += [f"  queued {i.kind}: {i.path} ({i.status})" for i in self.enqueued]
        lines += [f"  lint: {d['path']}: {'; '.join(d['errors'])}" for d in self.lint]
        if self.turns and self.turns.get("already_synced"):
            lines.append(f"  turns: {self.turns['new']} new, {self.turns['already_synced']} "
                         "already recorded")
        if self.error:
            lines.append(f"  error: {self.error}")
        return "\n".join(lines)


class Done(str):
    """A guard's own answer to a call it handled without running the tool."""


# -- the guard --------------------------------------------------------------------------
class Guard:
    """Wraps a job's tools: CAS stamps, E-1 strikes, write policy, and the record."""

    def __init__(self, vault: Vault, job: str, *, today: _dt.date, max_cas_redos: int = 3,
                 queue: WorkQueue | None = None) -> None:
        self.vault = vault
        self.job = job
        self.today = today
        self.max_cas_redos = max_cas_redos
        self.queue = queue
        self.stamps: dict[str, str] = {}      # path -> stamp of the job's own last read/write
        self.events: list[ToolEvent] = []
        self.read: list[str] = []
        self.written: list[str] = []
        self.created: list[str] = []
        self.linked: list[LinkEdge] = []
        self.strikes: Counter[str] = Counter()
        self.redos: Counter[str] = Counter()
        self.blocked: dict[str, Issue] = {}   # refused or skipped paths
        self.refused: list[Issue] = []
        self.skipped: list[Issue] = []
        self.failures: dict[str, Issue] = {}  # path -> last failed write (cleared by success)
        self.enqueued: list[QueueItem] = []
        self._old: dict[str, str | None] = {}  # path -> text before the write in flight

    # -- wrapping ----------------------------------------------------------------------
    def wrap(self, spec: ToolSpec) -> Callable[..., str]:
        """The spec bound to the vault, routed through the guard; same schema for the model."""
        bound = spec.bind(self.vault, actor=self.job)

        @functools.wraps(bound)
        def call(**kwargs: Any) -> str:
            return self.call(spec.name, bound, kwargs)

        call.__dict__.pop("__wrapped__", None)  # the schema comes from __signature__
        call.__signature__ = inspect.signature(bound).replace(  # type: ignore[attr-defined]
            return_annotation=str)
        call.__annotations__ = {**bound.__annotations__, "return": str}
        return call

    def call(self, name: str, fn: Callable[..., Any], kwargs: dict[str, Any]) -> str:
        """Run one tool call under the job's rules; errors propagate to the model as text."""
        args = dict(kwargs)
        path = self.path_of(name, args)
        try:
            result = self.dispatch(name, fn, args, path)
        except Exception as exc:
            err = self.on_error(name, args, path, exc) if isinstance(exc, ReMeError) else exc
            if name in WRITE_TOOLS and path and path not in self.blocked:
                self.failures[path] = Issue(path=path, reason=str(err), tool=name)
            self.events.append(ToolEvent(tool=name, args=_short(args), ok=False, path=path,
                                         error=str(err)))
            if err is exc:
                raise
            raise err from exc
        if isinstance(result, Done):
            self.events.append(ToolEvent(tool=name, args=_short(args), ok=True, path=path,
                                         note=str(result)))
            return str(result)
        self.after(name, args, result)
        data = dict(result) if isinstance(result, dict) else {}
        self.events.append(ToolEvent(tool=name, args=_short(args), ok=True,
                                     path=data.get("path") or path))
        if isinstance(result, ToolResult):
            return result.text
        return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False,
                                                                 default=str)

    # -- hooks for jobs ----------------------------------------------------------------
    def dispatch(self, name: str, fn: Callable[..., Any], args: dict[str, Any],
                 path: str | None) -> Any:
        """Check, then run the tool. Jobs override to reroute or defer some calls."""
        if name in WRITE_TOOLS and path:
            self.check_allowed(name, path, args)
            self.check_blocked(path)
        if name == "write" and path:
            self.before_rewrite(path, args, new_body=_new_body(args, path),
                                replacing=bool(args.get("overwrite")))
        elif name == "daily_write" and path:
            self.before_rewrite(path, args, new_body=args.get("body"),
                                replacing=args.get("mode") == "replace")
        return fn(**args)

    def check_allowed(self, name: str, path: str, args: dict[str, Any]) -> None:
        """The job's write policy (which folders, which tools); raise InvalidArgument."""

    def check_blocked(self, path: str) -> None:
        """A refused or skipped path stays untouched for the rest of the job."""
        if path in self.blocked:
            issue = self.blocked[path]
            raise WriteRefused(path, f"it was already {issue.reason}.", issue.audit)

    def rewrite_problems(self, path: str, old_body: str, new_body: str) -> list[str]:
        """Extra rewrite rules of a job (besides E-1); each problem is one sentence."""
        return []

    def after_write(self, path: str, created: bool) -> None:
        """Called after every successful body write (create or rewrite)."""

    # -- CAS and the job's rewrite rules -----------------------------------------------
    def before_rewrite(self, path: str, args: dict[str, Any], *, new_body: str | None,
                       replacing: bool) -> None:
        """Stamp check and the job's own rewrite rules for a write that may replace an
        existing note (E-1 is the tool's check; `on_error` counts its strikes)."""
        current = self.current(path)
        self._old[path] = current[0] if current else None
        if current is None or not replacing:
            return  # a create (O_EXCL in the store), or a refusal the tool itself explains
        text, stamp_now = current
        # CAS: the write carries the stamp of the job's own read; a changed file is refused.
        stamp = args.get("stamp") or self.stamps.get(path)
        if stamp is None:
            raise ReadFirst(path)
        args["stamp"] = stamp
        if stamp != stamp_now:
            raise StampChanged(path, stamp, stamp_now)
        if new_body is None:
            return  # frontmatter only: the body (and so every link) stays byte for byte
        old_body = entry_body(self.vault, path, text, args.get("slug"))  # a day note: its section
        problems = self.rewrite_problems(path, old_body, new_body)
        if problems:
            raise SectionViolation(path, problems)

    def on_error(self, name: str, args: dict[str, Any], path: str | None,
                 exc: ReMeError) -> ReMeError:
        """Count strikes (E-1, section rules) and CAS redos; convert the 2nd/Nth into a stop."""
        if not path or name not in WRITE_TOOLS:
            return exc
        if isinstance(exc, ConservationViolation | SectionViolation):
            self.strikes[path] += 1
            if self.strikes[path] == 1:
                return exc  # E-1 retry: the model is told exactly which links it dropped
            audit = self.audit("refused", path, f"{self.job}: refused rewrite of {path}",
                               f"Second refused rewrite in one job. {exc}", args)
            issue = Issue(path=path, reason=f"refused: {exc.message}", tool=name, audit=audit)
            self.blocked[path] = issue
            self.refused.append(issue)
            self.failures.pop(path, None)
            return WriteRefused(path, f"a second rewrite broke the rules ({exc.message})", audit)
        if isinstance(exc, StampChanged):
            self.redos[path] += 1
            self.stamps.pop(path, None)  # the next write must follow a fresh read
            if self.redos[path] <= self.max_cas_redos:
                return exc  # CAS redo: re-read and redo the edit on the new text
            return self.skip(name, path, args, self.redos[path])
        return exc

    def skip(self, name: str, path: str, args: dict[str, Any], tries: int) -> WriteSkipped:
        """Give up on a note that keeps changing under the job: audit it and block it."""
        audit = self.audit("skipped", path, f"{self.job}: skipped {path}",
                           f"The note changed between read and write {tries} times "
                           f"(max_cas_redos={self.max_cas_redos}).", args)
        issue = Issue(path=path, reason=f"skipped after {self.max_cas_redos} CAS redos",
                      tool=name, audit=audit)
        self.blocked[path] = issue
        self.skipped.append(issue)
        self.failures.pop(path, None)
        return WriteSkipped(path, tries, audit)

    # -- recording ---------------------------------------------------------------------
    def after(self, name: str, args: dict[str, Any], result: Any) -> None:
        data = dict(result) if isinstance(result, dict) else {}
        path = data.get("path")
        if not path:
            return
        if name in STAMPED_READS:
            self.stamps[path] = data["stamp"]
            _add(self.read, path)
            return
        if name not in WRITE_TOOLS:
            return
        self.failures.pop(path, None)
        if data.get("stamp") and (name in ("write", "daily_write") or path in self.stamps):
            self.stamps[path] = data["stamp"]  # the job knows what it just wrote
        if name == "daily_attach":
            self._after_attach(data)
            return
        if name == "daily_status" and not data.get("changed", True):
            return
        if name in ("property_update", "property_delete") and not data.get("changed", True):
            return
        _add(self.written, path)
        if name in ("write", "daily_write"):
            if data.get("created"):
                _add(self.created, path)
            self.record_links(path, self._old.pop(path, None))
            self.after_write(path, bool(data.get("created")))

    def _after_attach(self, data: dict[str, Any]) -> None:
        """A material stored (created) and linked from its daily note (written)."""
        path, note = data["path"], data["note"]
        if data.get("created"):
            _add(self.written, path)
            _add(self.created, path)
        if data.get("linked"):
            _add(self.written, note)
            self.linked.append(LinkEdge(source=note, target=path))

    def record_links(self, path: str, old_text: str | None) -> None:
        """Edges the write added: new (target, predicate) pairs not in the old body."""
        try:
            new_text = self.vault.store.read_stamped(path)[0]
        except ReMeError:
            return
        old_body = split_note(old_text, path).body if old_text else ""
        new_body = split_note(new_text, path).body
        if not missing_edges(new_body, old_body):
            return  # no link spelled anew, so no new edge: no need to resolve anything
        for target, predicate in sorted(missing_edges(new_body, old_body, self.resolver(path)),
                                        key=lambda e: (e[0], e[1] or "")):
            self.linked.append(LinkEdge(source=path, target=target, predicate=predicate))

    def enqueue(self, kind: str, path: str, reason: str, **payload: Any) -> None:
        if self.queue is None:
            return
        try:
            item, _ = self.queue.enqueue(kind, path, reason=reason, payload=payload,
                                         source=self.job)
        except ReMeError as exc:  # the write happened; `maintain` and `autolink` find it again
            log.warning("could not queue %s for %s: %s", kind, path, exc)
            return
        if all(i.id != item.id for i in self.enqueued):
            self.enqueued.append(item)

    def audit(self, name: str, path: str, title: str, body: str,
              args: dict[str, Any] | None = None) -> str | None:
        """Append an audit entry; a failure to audit is logged, never raised into the job."""
        proposed = (args or {}).get("text") or (args or {}).get("body")
        if isinstance(proposed, str) and proposed:
            shown = proposed if len(proposed) <= _AUDIT_BODY_CHARS else \
                proposed[:_AUDIT_BODY_CHARS] + "\n…"
            body += f"\n\nProposed body (not written):\n\n````markdown\n{shown}\n````"
        try:
            return append_audit(self.vault, name, title, f"- path: `{path}`\n- job: {self.job}"
                                f"\n\n{body}")
        except ReMeError as exc:
            log.warning("could not write the %s audit entry for %s: %s", name, path, exc)
            return None

    # -- helpers -----------------------------------------------------------------------
    def path_of(self, name: str, args: dict[str, Any]) -> str | None:
        """The vault path a call is about (daily_write: the note it will write)."""
        if name in ("daily_write", "daily_attach"):
            slug = args.get("slug")
            day = str(args.get("date") or self.today.isoformat()).strip()
            try:  # the workspace note, or the Obsidian day note the section goes into; a
                # material's own path
                if not slug:
                    return None
                if name == "daily_attach":
                    return material_path(self.vault, day, str(slug), str(args.get("filename")))[0]
                return daily_write_path(self.vault, day, str(slug))
            except (ValueError, ReMeError):
                return None
        raw = args.get("path")
        if not isinstance(raw, str) or not raw.strip():
            return None
        if name in ("daily_read", "daily_status"):
            from reme_agent.toolkit.daily import summary_path

            try:
                return summary_path(raw)
            except ReMeError:
                return norm_path(raw)  # an Obsidian day note is its own path
        return norm_path(raw)

    def current(self, path: str) -> tuple[str, str] | None:
        """(text, stamp) of the whole note now (not the `read` tool, which pages notes over
        its cap: merging into one page would drop the rest); None when it does not exist."""
        try:
            return self.vault.store.read_stamped(path)
        except NoteNotFound:
            return None

    def resolver(self, path: str) -> Callable[[str], str | None]:
        resolver = self.vault.view().resolver
        return lambda target: resolver.resolve(target, path)

    def result(self, **fields: Any) -> JobResult:
        return JobResult(job=self.job, read=list(self.read), written=list(self.written),
                         created=list(self.created), linked=list(self.linked),
                         skipped=list(self.skipped), failed=list(self.failures.values()),
                         refused=list(self.refused), enqueued=list(self.enqueued),
                         tool_calls=list(self.events), **fields)


def norm_path(raw: str) -> str:
    """The store's canonical form of a vault path (validation is left to the tools)."""
    parts = PurePosixPath(raw.strip().replace("\\", "/")).parts
    return "/".join(p for p in parts if p not in ("", ".", "/"))


def _new_body(args: dict[str, Any], path: str) -> str | None:
    if isinstance(args.get("text"), str):
        return split_note(args["text"], path).body
    body = args.get("body")
    return body if isinstance(body, str) else None


def _add(items: list[str], path: str) -> None:
    if path not in items:
        items.append(path)


def _short(args: dict[str, Any]) -> dict[str, Any]:
    """Arguments for the record, with long texts cut (the record is for people)."""
    out: dict[str, Any] = {}
    for key, value in args.items():
        if isinstance(value, str) and len(value) > 200:
            value = value[:199] + "…"
        out[key] = value
    return out
