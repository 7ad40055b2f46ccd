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
- Fuzzy proposals (`fuzzy.py`: variants such as "JWTs", near mentions such as "rotation of
  JWT keys") are never linked on string evidence: the judge decides each (kind "variant" or
  "near" in the question), and without a judge they are listed as proposals and nothing is
  written. An exact mention is linked without a model as before. A proposal is dropped when
  its target is already linked from the note or exactly named in it (the exact mention is the
  one linked), so a model is asked only about targets the note does not name exactly.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
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
from reme_agent.maintenance.autolink.fuzzy import FuzzyMatcher, Proposal, inside_cjk_word
from reme_agent.maintenance.autolink.judge import Judge, MentionQuestion
from reme_agent.maintenance.autolink.matcher import (
    Matcher,
    Mention,
    Unprotected,
    protected_spans,
    select_longest,
)
from reme_agent.maintenance.autolink.names import NameIndex
from reme_agent.maintenance.autolink.normalize import is_cjk, normalize

if TYPE_CHECKING:
    from reme_agent.vault import Vault

log = logging.getLogger("reme_agent.autolink")

__all__ = ["AddedLink", "AmbiguousMention", "L1Context", "L1Plan", "NoteResult", "apply_links", "check_additive",
           "link_note", "plan_links", "prefetch"]

MentionKind = Literal["exact", "variant", "near"]
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
    kind: MentionKind = "exact"
    written: str | None = None

    @property
    def opening(self) -> str:
        shown = self.written or self.target
        return "[[" if shown == self.text else f"[[{shown}|"

    def insertions(self) -> tuple[Insertion, Insertion]:
        return Insertion(self.start, self.opening), Insertion(self.end, "]]")


@dataclass(frozen=True)
class AmbiguousMention:
    """A mention L1 did not decide by itself: an ambiguous name, or a fuzzy proposal."""

    start: int
    end: int
    text: str
    key: str
    candidates: tuple[str, ...]
    kind: Literal["ambiguous", "variant", "near"] = "ambiguous"
    name: str = ""
    score: float | None = None


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
    proposals: list[dict[str, Any]] = field(default_factory=list)  # fuzzy, not linked
    redos: int = 0
    reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


Similarity = Callable[[Sequence[tuple[str, str]]], list[float]]


@dataclass
class L1Context:
    """Everything a run shares across notes: names, matchers, link resolver, judge.

    `fuzzy` (None: exact names only) finds variant and near proposals; `similarity` scores
    near ones against `near_similarity` (without it no near proposal is made).
    """

    index: NameIndex
    matcher: Matcher
    resolver: LinkResolver
    first_mention_only: bool = True
    judge: Judge | None = None
    max_redos: int = 3
    style: str = "shortest"
    fuzzy: FuzzyMatcher | None = None
    similarity: Similarity | None = None
    near_similarity: float = 0.7
    judge_batch: int = 10
    _found: dict[tuple[str, str], tuple[list[Mention], list[Proposal]]] = field(
        default_factory=dict)  # (path, body) -> candidates, filled by `prefetch`
    _answers: dict[tuple[str, str, str], str | None] = field(default_factory=dict)
    _judge_lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def build(cls, index: NameIndex, resolver: LinkResolver, *, first_mention_only: bool = True,
              judge: Judge | None = None, max_redos: int = 3, style: str = "shortest",
              fuzzy: bool = False, similarity: Similarity | None = None,
              near_similarity: float = 0.7, judge_batch: int = 10) -> L1Context:
        return cls(index, Matcher(index), resolver, first_mention_only, judge, max_redos, style,
                   FuzzyMatcher(index) if fuzzy else None, similarity, near_similarity,
                   max(1, judge_batch))


# -- planning (pure) --------------------------------------------------------------------------
def _found(ctx: L1Context, body: str, kinds: bytearray) -> tuple[list[Mention], list[Proposal]]:
    """Exact mentions and fuzzy proposals, without overlaps.

    Exact matches and variants compete longest first ("JWT key rotations" beats the exact
    "JWT" inside it; at the same span the exact match wins). Near proposals, the loosest, take
    free text or wrap whole matches ("rotation of JWT keys"), never part of one.
    """
    memo: list[list[tuple[int, int]]] = []

    def spans() -> list[tuple[int, int]]:
        if not memo:
            memo.append(protected_spans(body, kinds))
        return memo[0]

    exact = ctx.matcher.raw(body, spans)
    if ctx.fuzzy is None:
        return select_longest(exact), []
    norm = normalize(body)
    free = Unprotected(spans())
    split = [m for m in exact if _cjk_edge(m.text) and inside_cjk_word(body, m.start, m.end)]
    if split:  # 支付 inside 支付宝: the judge decides, as for "JWT" inside "JWTs"
        exact = [m for m in exact if m not in split]
    exact_spans = {(m.start, m.end) for m in exact}
    variants = [v for v in ctx.fuzzy.variants(body, norm, free)
                if (v.start, v.end) not in exact_spans]
    variants += [Proposal(m.start, m.end, m.text, m.key, m.candidates, "variant",
                          ctx.index.entries(m.key)[0].name) for m in split]
    chosen = select_longest([*exact, *variants])
    taken = bytearray(len(body) + 1)
    for m in chosen:
        taken[m.start:m.end] = b"\x01" * (m.end - m.start)
    near = [p for p in select_longest(ctx.fuzzy.near(body, norm, free, taken))
            if _free_or_containing(p, chosen, taken)]
    mentions = [m for m in chosen if isinstance(m, Mention)]
    return mentions, [p for p in chosen if isinstance(p, Proposal)] + near


def prefetch(ctx: L1Context, bodies: Iterable[tuple[str, str]], batch: int = 256) -> int:
    """For a batch run: find every note's candidates first and embed all near windows in a few
    large calls (USE costs ~30 ms a call but ~3 ms a text in a batch of 200); `plan_links`
    reuses both. Returns the number of near windows scored."""
    pairs: list[tuple[str, str]] = []
    for path, body in bodies:
        found = _found(ctx, body, line_kinds(body.split("\n")))
        ctx._found[(path, body)] = found
        pairs += [(p.text, p.name) for p in found[1] if p.kind == "near"]
    if ctx.similarity is not None:
        for lo in range(0, len(pairs), batch):
            ctx.similarity(pairs[lo:lo + batch])
    return len(pairs)


def _cjk_edge(text: str) -> bool:
    return is_cjk(text[0]) or is_cjk(text[-1])


def _free_or_containing(p: Proposal, chosen: Sequence[Mention | Proposal],
                        taken: bytearray) -> bool:
    """A near proposal may cover whole exact/variant mentions ("rotation of JWT keys" holds
    "JWT"), never part of one; if the judge accepts it, it replaces them (`_settle`)."""
    if not any(taken[p.start:p.end]):
        return True
    inside = [m for m in chosen if m.start < p.end and p.start < m.end]
    return all(p.start <= m.start and m.end <= p.end and (m.start, m.end) != (p.start, p.end)
               and not set(p.candidates) & set(m.candidates) for m in inside)


def plan_links(ctx: L1Context, path: str, body: str,
               only_targets: Collection[str] | None = None) -> L1Plan:
    """Which mentions of `body` (the note at `path`) to link; asks the judge when ambiguous
    or fuzzy (without a judge those are listed in the plan, never linked)."""
    plan = L1Plan()
    kinds = line_kinds(body.split("\n"))  # one structure scan for the matcher and the links
    mentions, proposals = ctx._found.pop((path, body), None) or _found(ctx, body, kinds)
    if not mentions and not proposals:
        return plan
    plan.old_links = extract_links(body, kinds=kinds)
    linked = {hit for link in plan.old_links
              if (hit := ctx.resolver.resolve(link.target, path)) is not None}
    own = ctx.index.own_keys(path)
    decided: list[AddedLink] = []
    asks: dict[str, list[AmbiguousMention]] = {}
    for m in mentions:
        if m.key in own:
            continue  # the note's own name: a self-mention
        cands = tuple(c for c in m.candidates if c != path)
        if only_targets is not None and not set(cands) & set(only_targets):
            continue
        if len(cands) == 1:
            decided.append(AddedLink(m.start, m.end, cands[0], m.text))
        elif cands and not linked.intersection(cands):
            asks.setdefault(m.key, []).append(
                AmbiguousMention(m.start, m.end, m.text, m.key, cands))
    near_spans = [(p.start, p.end) for p in proposals if p.kind == "near"]
    named = linked | {x.target for x in decided  # an exact link inside a near proposal may yet
                      if not any(a <= x.start and x.end <= b for a, b in near_spans)}  # yield
    fuzzy: list[AmbiguousMention] = []
    for p in proposals:
        if path in p.candidates:
            continue  # a variant of the note's own name
        cands = tuple(c for c in p.candidates if c not in named)
        if only_targets is not None:
            cands = tuple(c for c in cands if c in only_targets)
        if cands and len(cands) == len(p.candidates):  # nothing is already linked or named
            fuzzy.append(AmbiguousMention(p.start, p.end, p.text, p.key, cands, p.kind,
                                          p.name))
    for a in _scored(ctx, fuzzy):
        asks.setdefault(f"{a.kind}:{a.key}", []).append(a)
    if asks:
        decided = _settle(decided + _ask(ctx, path, body, asks, plan))
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


def _settle(links: list[AddedLink]) -> list[AddedLink]:
    """An accepted near link replaces the exact/variant links inside it."""
    near = [x for x in links if x.kind == "near"]
    if not near:
        return links
    return [x for x in links if x.kind == "near" or not any(
        n.start <= x.start and x.end <= n.end for n in near)]


def _scored(ctx: L1Context, fuzzy: list[AmbiguousMention]) -> list[AmbiguousMention]:
    """Variants as they are; near proposals with their similarity, kept at the threshold."""
    near = [a for a in fuzzy if a.kind == "near"]
    if not near:
        return fuzzy
    if ctx.similarity is None:
        return [a for a in fuzzy if a.kind != "near"]
    scores = ctx.similarity([(a.text, a.name) for a in near])
    kept = {id(a): replace(a, score=round(s, 3)) for a, s in zip(near, scores, strict=True)
            if s >= ctx.near_similarity}
    return [kept[id(a)] if a.kind == "near" else a for a in fuzzy
            if a.kind != "near" or id(a) in kept]


def _ask(ctx: L1Context, path: str, body: str, groups: Mapping[str, list[AmbiguousMention]],
         plan: L1Plan) -> list[AddedLink]:
    """One judge question per group (its first mention, with its paragraph); the answer
    applies to the group's other mentions. Without a judge every group is listed, skipped."""
    if ctx.judge is None:
        plan.skipped += [group[0] for group in groups.values()]
        return []
    answers: dict[str, str | None] = {}
    questions: list[MentionQuestion] = []
    keys: list[str] = []
    for key, group in groups.items():
        m = group[0]
        para = paragraph_at(body, m.start, m.end)
        cache = (path, key, para)
        if cache in ctx._answers:
            answers[key] = ctx._answers[cache]
            continue
        nodes = tuple(ctx.index.nodes[c] for c in m.candidates if c in ctx.index.nodes)
        questions.append(MentionQuestion(len(questions), path, m.text, para, nodes, kind=m.kind,
                                         name=m.name, start=m.start, score=m.score))
        keys.append(key)
    if questions:
        got: dict[int, str | None] = {}
        with ctx._judge_lock:  # batch runs plan notes on several threads; ask one at a time
            for lo in range(0, len(questions), ctx.judge_batch):  # fuzzy ones can be many
                got.update(ctx.judge.choose(questions[lo:lo + ctx.judge_batch]))
        for q, key in zip(questions, keys, strict=True):
            choice = got.get(q.id)
            valid = {n.path for n in q.candidates}
            answers[key] = choice if choice in valid else None  # a stray answer is a skip
            ctx._answers[(path, key, q.paragraph)] = answers[key]
    out: list[AddedLink] = []
    for key, group in groups.items():
        target = answers.get(key)
        if target is None:
            plan.declined.append(group[0])
            continue
        kind: MentionKind = "exact" if group[0].kind == "ambiguous" else group[0].kind
        out += [AddedLink(m.start, m.end, target, m.text, "model", kind) for m in group]
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
              "chosen_by": x.chosen_by, "kind": x.kind} for x in plan.links]
    amb: list[dict[str, Any]] = []
    fuzzy: list[dict[str, Any]] = []
    for outcome, group in (("skipped: no model", plan.skipped),
                           ("declined by the model", plan.declined)):
        for a in group:
            row = {"text": a.text, "line": line_of(body, a.start, first),
                   "candidates": list(a.candidates), "outcome": outcome}
            if a.kind == "ambiguous":
                amb.append(row)
            else:
                fuzzy.append({**row, "kind": a.kind, "name": a.name, "score": a.score})
    return NoteResult(path, "unchanged", links, amb, fuzzy)
