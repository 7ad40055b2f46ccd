"""Auto-link L1: unlinked mentions of known nodes become additive `[[name|mention]]` links.

DESIGN §9 (auto-link L1), §5 (CAS with at most 3 redos, E-1), §4 (links are written in the
vault's link style, `engine.linkstyle`: ``[[bm25|BM25]]``, ``[[bm25]]`` when the mention is
the name itself, a path only when the name is ambiguous); seed auto_link_design.md §1.2 (additive, original text kept byte for byte),
§2.2 (ambiguous mentions: the model picks one candidate or none), §2.3 (concurrency via CAS).

The edit is planned on the raw body (frontmatter bytes and line endings untouched), then proved
mechanically: the new body minus every added ``[[target|`` and ``]]`` must equal the old body, each
insertion must parse as a link to its target, and no existing edge may be lost. A plan that
fails the proof is refused, never written.

Decisions where DESIGN is silent:

- "First mention per target per note" (`first_mention_only`, default on): a target the note
  already links to is not linked again; with it off, every unlinked mention is linked.
- One model decision per (note, ambiguous name): the first mention of the name is asked about,
  with its paragraph; the answer applies to the name's other mentions in that note.
- An ambiguous mention whose candidates include a node the note already links to is taken to
  mean that node (already linked: nothing to add), so the model is not asked.
- Without a judge, ambiguous mentions are skipped and listed in the result.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from reme_agent.engine.links import Link, LinkResolver, extract_links, line_kinds
from reme_agent.engine.linkstyle import link_target
from reme_agent.engine.parser import split_note
from reme_agent.errors import AdditiveCheckFailed, NoteNotFound, NotText
from reme_agent.maintenance.autolink.common import (
    Insertion,
    audit_refusal,
    cas_outcome,
    check_insertions,
    line_of,
    paragraph_at,
    source_refusal,
)
from reme_agent.maintenance.autolink.judge import Judge, MentionQuestion
from reme_agent.maintenance.autolink.matcher import Matcher, Mention
from reme_agent.maintenance.autolink.names import NameIndex

if TYPE_CHECKING:
    from reme_agent.vault import Vault

log = logging.getLogger("reme_agent.autolink")

__all__ = ["AddedLink", "AmbiguousMention", "L1Context", "L1Plan", "NoteResult", "apply_links", "check_additive",
           "link_note", "plan_links"]

Status = Literal["linked", "would_link", "unchanged", "skipped", "refused", "conflict"]


@dataclass(frozen=True)
class AddedLink:
    """A mention at [start, end) of the old body, to become ``[[written|text]]`` (or
    ``[[text]]`` when the mention is the link target itself); `target` is the note's path,
    `written` the target text in the vault's link style (the path until it is set)."""

    start: int
    end: int
    target: str
    text: str
    chosen_by: Literal["name", "model"] = "name"
    written: str | None = None

    @property
    def opening(self) -> str:
        shown = self.written or self.target
        return "[[" if shown == self.text else f"[[{shown}|"

    def insertions(self) -> tuple[Insertion, Insertion]:
        return Insertion(self.start, self.opening), Insertion(self.end, "]]")


@dataclass(frozen=True)
class AmbiguousMention:
    start: int
    end: int
    text: str
    key: str
    candidates: tuple[str, ...]


@dataclass
class L1Plan:
    links: list[AddedLink] = field(default_factory=list)
    old_links: list[Link] = field(default_factory=list)  # the body's links before the edit
    skipped: list[AmbiguousMention] = field(default_factory=list)  # no judge
    declined: list[AmbiguousMention] = field(default_factory=list)  # the judge chose none


@dataclass
class NoteResult:
    """What L1 did to one note (JSON-able through `as_dict`)."""

    path: str
    status: Status
    links: list[dict[str, Any]] = field(default_factory=list)
    ambiguous: list[dict[str, Any]] = field(default_factory=list)
    redos: int = 0
    reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class L1Context:
    """Everything a run shares across notes: names, matcher, link resolver, judge."""

    index: NameIndex
    matcher: Matcher
    resolver: LinkResolver
    first_mention_only: bool = True
    judge: Judge | None = None
    max_redos: int = 3
    style: str = "shortest"
    _answers: dict[tuple[str, str, str], str | None] = field(default_factory=dict)
    _judge_lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def build(cls, index: NameIndex, resolver: LinkResolver, *, first_mention_only: bool = True,
              judge: Judge | None = None, max_redos: int = 3,
              style: str = "shortest") -> L1Context:
        return cls(index, Matcher(index), resolver, first_mention_only, judge, max_redos, style)


# -- planning (pure) --------------------------------------------------------------------------
def plan_links(ctx: L1Context, path: str, body: str,
               only_targets: Collection[str] | None = None) -> L1Plan:
    """Which mentions of `body` (the note at `path`) to link; asks the judge when ambiguous."""
    plan = L1Plan()
    kinds = line_kinds(body.split("\n"))  # one structure scan for the matcher and the links
    mentions = ctx.matcher.find(body, kinds)
    if not mentions:
        return plan
    plan.old_links = extract_links(body, kinds=kinds)
    linked = {hit for link in plan.old_links
              if (hit := ctx.resolver.resolve(link.target, path)) is not None}
    own = ctx.index.own_keys(path)
    decided: list[AddedLink] = []
    ambiguous: dict[str, list[tuple[Mention, tuple[str, ...]]]] = {}
    for m in mentions:
        if m.key in own:
            continue  # the note's own name: a self-mention
        cands = tuple(c for c in m.candidates if c != path)
        if only_targets is not None and not set(cands) & set(only_targets):
            continue
        if len(cands) == 1:
            decided.append(AddedLink(m.start, m.end, cands[0], m.text))
        elif cands and not linked.intersection(cands):
            ambiguous.setdefault(m.key, []).append((m, cands))
    if ambiguous:
        decided += _resolve_ambiguous(ctx, path, body, ambiguous, plan)
    seen: set[str] = set()
    for link in sorted(decided, key=lambda x: x.start):
        if only_targets is not None and link.target not in only_targets:
            continue
        if link.target in linked or (ctx.first_mention_only and link.target in seen):
            continue
        seen.add(link.target)
        written = link_target(link.target, ctx.resolver, ctx.style, path)
        plan.links.append(replace(link, written=written))
    return plan


def _resolve_ambiguous(ctx: L1Context, path: str, body: str,
                       groups: Mapping[str, list[tuple[Mention, tuple[str, ...]]]],
                       plan: L1Plan) -> list[AddedLink]:
    firsts = {key: group[0] for key, group in groups.items()}
    answers: dict[str, str | None] = {}
    if ctx.judge is not None:
        questions: list[MentionQuestion] = []
        keys: list[str] = []
        for key, (m, cands) in firsts.items():
            para = paragraph_at(body, m.start, m.end)
            cache = (path, key, para)
            if cache in ctx._answers:
                answers[key] = ctx._answers[cache]
                continue
            nodes = tuple(ctx.index.nodes[c] for c in cands if c in ctx.index.nodes)
            questions.append(MentionQuestion(len(questions), path, m.text, para, nodes))
            keys.append(key)
        if questions:
            with ctx._judge_lock:  # batch runs plan notes on several threads; ask one at a time
                got = ctx.judge.choose(questions)
            for q, key in zip(questions, keys, strict=True):
                choice = got.get(q.id)
                valid = {n.path for n in q.candidates}
                answers[key] = choice if choice in valid else None  # a stray answer is a skip
                ctx._answers[(path, key, q.paragraph)] = answers[key]
    out: list[AddedLink] = []
    for key, group in groups.items():
        if ctx.judge is None:
            m, cands = group[0]
            plan.skipped.append(AmbiguousMention(m.start, m.end, m.text, key, cands))
            continue
        target = answers.get(key)
        if target is None:
            m, cands = group[0]
            plan.declined.append(AmbiguousMention(m.start, m.end, m.text, key, cands))
            continue
        out += [AddedLink(m.start, m.end, target, m.text, "model") for m, _ in group]
    return out


def apply_links(body: str, links: list[AddedLink]) -> str:
    """The body with each planned mention wrapped as ``[[target|mention]]``."""
    pieces: list[str] = []
    last = 0
    for link in sorted(links, key=lambda x: x.start):
        pieces += [body[last:link.start], link.opening, body[link.start:link.end], "]]"]
        last = link.end
    pieces.append(body[last:])
    return "".join(pieces)


def check_additive(path: str, old_body: str, new_body: str, links: list[AddedLink], *,
                   old_links: list[Link] | None = None) -> None:
    """Refuse (AdditiveCheckFailed) unless `new_body` is `old_body` plus exactly these links.

    The body minus each added ``[[target|`` and ``]]`` must equal the old body, each added
    link must parse as a link to its target showing the original text, and no edge is lost.
    `old_links` may pass ``extract_links(old_body)`` when the caller has it.
    """
    insertions = [ins for link in links for ins in link.insertions()]
    new_links = extract_links(new_body)
    before = extract_links(old_body) if old_links is None else old_links
    check_insertions(path, old_body, new_body, insertions, links=(before, new_links))
    parsed = {link.start: link for link in new_links}
    shift = 0
    for link in sorted(links, key=lambda x: x.start):
        got = parsed.get(link.start + shift)
        if got is None or got.target != (link.written or link.target) \
                or (got.alias or got.target) != link.text.strip():
            raise AdditiveCheckFailed(path, f"{link.opening}{link.text}]] would not parse "
                                            "as that link")
        shift += len(link.opening) + 2


# -- writing (CAS) ----------------------------------------------------------------------------
class _NotEligible(Exception):
    """Internal: the note is not one auto-link may write (the reason is the message)."""


def link_note(vault: Vault, path: str, ctx: L1Context, *, dry_run: bool = False,
              only_targets: Collection[str] | None = None, refresh: bool = True) -> NoteResult:
    """Run L1 on one note: plan, prove additive, CAS-write; redo on a concurrent change."""
    norm = vault.store.normalize(path)
    last: list[NoteResult] = []

    def edit(text: str) -> str | None:
        parts = split_note(text, norm)
        head, body = parts.head, parts.body
        why = (f"malformed frontmatter ({parts.error})" if parts.error
               else source_refusal(norm, parts.frontmatter))
        if why:
            raise _NotEligible(why)
        plan = plan_links(ctx, norm, body, only_targets)
        last[:] = [_result(norm, body, head, plan)]
        if not plan.links:
            return None
        new_body = apply_links(body, plan.links)
        check_additive(norm, body, new_body, plan.links, old_links=plan.old_links)
        return head + new_body

    try:
        outcome = cas_outcome(vault, norm, edit, max_redos=ctx.max_redos, dry_run=dry_run)
    except (NoteNotFound, NotText, _NotEligible) as exc:
        return NoteResult(norm, "skipped", reason=str(exc))
    except AdditiveCheckFailed as exc:
        audit_refusal(vault, "auto-link L1", norm, str(exc))
        return NoteResult(norm, "refused", reason=str(exc))
    result = last[0]
    result.redos = outcome.redos
    if outcome.status == "conflict":
        why = f"it changed during {outcome.redos + 1} attempts (CAS); skipped"
        audit_refusal(vault, "auto-link L1", norm, why)
        result.status, result.reason, result.links = "conflict", why, []
    elif outcome.status == "dry_run":
        result.status = "would_link"
    elif outcome.status == "written":
        result.status = "linked"
        if refresh:
            vault.try_refresh([norm])
    return result


def _result(path: str, body: str, head: str, plan: L1Plan) -> NoteResult:
    first = head.count("\n") + 1
    links = [{"target": x.target, "text": x.text, "line": line_of(body, x.start, first),
              "chosen_by": x.chosen_by} for x in plan.links]
    amb = [{"text": a.text, "line": line_of(body, a.start, first), "candidates": list(a.candidates),
            "outcome": outcome}
           for outcome, group in (("skipped: no model", plan.skipped),
                                  ("declined by the model", plan.declined))
           for a in group]
    return NoteResult(path, "unchanged", links, amb)

