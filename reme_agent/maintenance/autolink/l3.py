"""Auto-link L3: the audited predicate upgrade `[[A]] -> is_a:: [[A]]` (the only drop + add).

DESIGN §5 ("Predicate upgrade ... is the only drop+add allowed, and only through the explicit
audited operation"), §4 (line and inline predicate forms), §9 (L3); seed auto_link_design.md
§2.1 (the upgrade changes the edge identity `(A, None)` -> `(A, is_a)`, so E-1 sees a drop; an
explicit audited operation allows exactly that drop, ordinary writes stay strict).

`upgrade_predicate` is that operation. It is not a toolkit tool, so no model can call it: the
model only *proposes* a predicate (`run_l3`), and code applies it. The edit is still textual
insertion only — ``pred:: `` before a link that is alone on its line (after an optional bullet),
else ``[pred:: `` before and ``]`` after it — proven mechanically like L1, and the E-1 check
allows exactly `{(A, None)}` to go and exactly `(A, pred)` to come. Every applied upgrade is
recorded in `audit/<date>/auto_link.md`.

Decisions where DESIGN is silent:

- All bare links from the note to A are upgraded together (the edge `(A, None)` is one edge).
- Candidates: bare links between two different knowledge nodes, with no predicated link to the
  same target in that note. At most `l3_max_links` per run, in an order that rotates daily, so
  repeated runs over a large vault reach different links (declines are not remembered).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import re
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

from reme_agent.config import AutoLinkSettings
from reme_agent.engine.links import PREDICATE_RE, LinkResolver, edges_of, extract_links
from reme_agent.engine.parser import split_note
from reme_agent.errors import AdditiveCheckFailed, InvalidArgument, NoteNotFound
from reme_agent.maintenance.autolink.common import (
    Insertion,
    append_report,
    apply_insertions,
    audit_refusal,
    cas_outcome,
    check_insertions,
    code_span,
)
from reme_agent.maintenance.autolink.judge import Judge, PredicateQuestion
from reme_agent.maintenance.autolink.names import NameIndex, is_knowledge_node

if TYPE_CHECKING:
    from reme_agent.engine.view import VaultView
    from reme_agent.vault import Vault

__all__ = ["AUDIT_NAME", "plan_upgrade", "run_l3", "upgrade_predicate"]

AUDIT_NAME = "auto_link"
_MAX_PREDICATE = 40
_ALONE_RE = re.compile(r"(?:[ \t]*>)*[ \t]*(?:(?:[-*+]|\d{1,9}[.)])[ \t]+(?:\[.\][ \t]+)?)?$")


def plan_upgrade(body: str, source: str, target: str, predicate: str,
                 resolve: LinkResolver) -> list[Insertion]:
    """Insertions that give every bare link from `source` to `target` the `predicate`."""
    out: list[Insertion] = []
    for link in extract_links(body):
        if link.predicate is not None or resolve.resolve(link.target, source) != target:
            continue
        line_start = body.rfind("\n", 0, link.start) + 1
        line_end = body.find("\n", link.end)
        rest = body[link.end:len(body) if line_end < 0 else line_end]
        if _ALONE_RE.fullmatch(body[line_start:link.start]) and not rest.strip():
            out.append(Insertion(link.start, f"{predicate}:: "))  # line form: one link per line
        else:
            out += [Insertion(link.start, f"[{predicate}:: "), Insertion(link.end, "]")]
    return out


def upgrade_predicate(vault: Vault, source: str, target: str, predicate: str, *,
                      reason: str = "", actor: str = "auto-link L3",
                      resolver: LinkResolver | None = None, max_redos: int = 3,
                      dry_run: bool = False) -> dict[str, Any]:
    """The audited operation: turn bare links `source -> target` into `predicate::` links.

    Refuses (InvalidArgument) a bad predicate or a missing bare link; refuses
    (AdditiveCheckFailed) any edit that is not exactly this upgrade. Returns what it did,
    with the audit note that records it.
    """
    if not PREDICATE_RE.fullmatch(predicate or "") or len(predicate) > _MAX_PREDICATE:
        raise InvalidArgument(f"{predicate!r} is not a predicate id.",
                              "Use letters, digits and _ (not first), e.g. is_a, part_of.")
    norm = vault.store.normalize(source)
    if not vault.store.exists(norm):
        raise NoteNotFound(norm, vault.store.suggest(norm))
    if resolver is None:
        resolver = vault.view().resolver
    tgt = resolver.resolve(target, norm) or target
    drop, add = (tgt, None), (tgt, predicate)
    found: list[int] = []

    def resolve(raw: str) -> str | None:
        return resolver.resolve(raw, norm)

    def edit(text: str) -> str | None:
        parts = split_note(text, norm)
        head, body = parts.head, parts.body
        if parts.error:
            raise AdditiveCheckFailed(norm, f"malformed frontmatter ({parts.error})")
        insertions = plan_upgrade(body, norm, tgt, predicate, resolver)
        found[:] = [len(insertions)]
        if not insertions:
            return None
        new_body = apply_insertions(body, insertions)
        check_insertions(norm, body, new_body, insertions, resolve=resolve,
                         allow_drop=frozenset({drop}))
        old_edges = edges_of(extract_links(body), resolve)
        new_edges = edges_of(extract_links(new_body), resolve)
        if new_edges - old_edges - {add} or add not in new_edges or drop in new_edges:
            raise AdditiveCheckFailed(norm, f"the edit is not exactly the upgrade {drop} -> {add}")
        return head + new_body

    try:
        outcome = cas_outcome(vault, norm, edit, max_redos=max_redos, dry_run=dry_run)
    except AdditiveCheckFailed as exc:
        audit_refusal(vault, actor, norm, str(exc))
        raise
    if outcome.status == "unchanged" and not found[0]:
        raise InvalidArgument(f"{norm!r} has no bare link to {tgt!r}.",
                              "Only a link without a predicate can be upgraded.")
    result: dict[str, Any] = {"source": norm, "target": tgt, "predicate": predicate,
                              "status": outcome.status, "redos": outcome.redos, "audit": None}
    if outcome.status == "conflict":
        result["audit"] = audit_refusal(vault, actor, norm, f"predicate upgrade to {predicate} "
                                        f"skipped: the note kept changing ({outcome.redos} redos)")
    elif outcome.status == "written":
        result["audit"] = append_report(
            vault, AUDIT_NAME, f"predicate upgrade in {norm}",
            f"- operation: predicate_upgrade (the only audited drop + add, DESIGN §5)\n"
            f"- source: `{norm}`\n- edge: `(target={tgt}, predicate=None)` -> "
            f"`(target={tgt}, predicate={predicate})`\n- by: {actor}\n"
            f"- reason: {code_span(reason) if reason.strip() else '(none given)'}")
        vault.try_refresh([norm])  # the write and its audit stand, whatever the index says
    return result


def candidates(scan: VaultView, index: NameIndex, limit: int, *,
               only: Collection[str] | None = None, today: _dt.date | None = None
               ) -> list[tuple[str, str, int]]:
    """(source, target, file line) of bare links between knowledge nodes, rotated daily."""
    seen: set[tuple[str, str]] = set()
    found: list[tuple[str, str, int]] = []
    for source, meta in scan.notes.items():
        if source not in index.nodes or (only is not None and source not in only):
            continue
        typed = {scan.resolve(x, source) for x in meta.links if x.predicate is not None}
        for link in meta.links:
            if link.predicate is not None:
                continue
            tgt = scan.resolve(link, source)
            if tgt is None or tgt == source or not is_knowledge_node(tgt) or tgt in typed \
                    or (source, tgt) in seen:
                continue
            seen.add((source, tgt))
            found.append((source, tgt, link.line))
    day = (today or _dt.date.today()).isoformat()
    found.sort(key=lambda c: hashlib.sha1(f"{day}\0{c[0]}\0{c[1]}".encode()).hexdigest())
    return found[:limit]


def run_l3(vault: Vault, scan: VaultView, index: NameIndex, judge: Judge,
           settings: AutoLinkSettings, *, dry_run: bool = False, max_redos: int = 3,
           only: Collection[str] | None = None) -> dict[str, Any]:
    """Ask the judge for predicates of bare links; apply each through `upgrade_predicate`."""
    cands = candidates(scan, index, settings.l3_max_links, only=only)
    questions: list[PredicateQuestion] = []
    for i, (source, target, line) in enumerate(cands):
        try:
            lines = vault.store.read_text(source).split("\n")
        except Exception:
            continue
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        questions.append(PredicateQuestion(i, index.nodes[source], index.nodes[target],
                                           text.strip()))
    answers = _ask(judge, questions, settings.judge_batch)
    upgraded: list[dict[str, Any]] = []
    declined: list[dict[str, Any]] = []
    for q in questions:
        pred = answers.get(q.id)
        row = {"source": q.source.path, "target": q.target.path}
        if not pred or not PREDICATE_RE.fullmatch(pred) or len(pred) > _MAX_PREDICATE:
            declined.append(row)
            continue
        try:
            done = upgrade_predicate(vault, q.source.path, q.target.path, pred,
                                     reason=f"model proposal for the line {q.line!r}",
                                     resolver=scan.resolver, max_redos=max_redos,
                                     dry_run=dry_run)
        except (InvalidArgument, AdditiveCheckFailed) as exc:
            declined.append({**row, "error": str(exc)})
            continue
        if done["status"] in ("written", "dry_run"):
            upgraded.append({**row, "predicate": pred, "audit": done["audit"]})
        else:
            declined.append({**row, "status": done["status"]})
    return {"candidates": len(questions), "upgraded": upgraded, "declined": declined}


def _ask(judge: Judge, questions: Sequence[PredicateQuestion], batch: int) -> dict[int, str | None]:
    out: dict[int, str | None] = {}
    for lo in range(0, len(questions), max(1, batch)):
        got = judge.predicate(questions[lo:lo + batch])
        out.update({k: (v.strip() if isinstance(v, str) else None) for k, v in got.items()})
    return out
