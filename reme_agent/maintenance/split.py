"""Step 5, split: an overloaded node -> K-means proposal -> LLM names + overview -> E-2/E-3 write.

DESIGN §5 (E-2, E-3, multi-file CAS), §9 split; seed "记忆节点的细胞分裂".

Detection (D3, no model): a knowledge node whose body is over `token_threshold` estimated
tokens or `block_threshold` blocks. The token estimate is the distiller's (one token per CJK
character plus one per four other non-space characters), so the queue and this step agree
on what "overloaded" means. Items the distiller queued are re-checked: a note that is no
longer overloaded is dropped.

Proposal (no model): K-means over the note's block embeddings (the vectors already in the
vector projection), K in 2..`k_max` chosen by the silhouette; below `min_silhouette` the
blocks do not fall into topics and nothing is proposed.

Decision (model): a `SplitPlanner` (the maintainer job) names each cluster (title, slug,
description), may tidy a child's body, and writes the parent's overview. The code then
builds the change and checks, **before anything is written**:
- E-2: parent_new ∪ children ⊇ parent_old, as resolved (target, predicate) edges;
- E-3: the parent's path, title and aliases stay, only the parent and the new children are
  written, and every link in the vault resolves exactly as before (a new child's name must
  not capture a link meant for another note);
- children are `knowledge/<child>/<child>.md` (a free slug, suffixed when taken), with
  `part_of:: [[parent]]` back to the parent, `split_from` in the frontmatter, the parent's
  axes; the parent keeps its H1, gets the overview and one `has_part::` line per child.
A plan that breaks E-2 goes back to the planner once, naming the dropped links; a second
failure is refused and written to `audit/<date>/refused.md` (DESIGN §5 E-1 rule). Done or
refused, the parent gets a cooldown. A committed split queues auto-link L1 for the parent
and each child (seed auto_link §1.4), so a new child gets its inbound links at once.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from reme_agent.engine.fmedit import edit_frontmatter
from reme_agent.engine.links import LinkResolver
from reme_agent.engine.linkstyle import format_link
from reme_agent.engine.names import note_aliases, note_title
from reme_agent.engine.parser import (
    Block,
    dump_note,
    normalize_eol,
    parse_note,
    restore_eol,
    split_note,
)
from reme_agent.engine.retarget import edge_keys, rewrite_links
from reme_agent.engine.stop import stop_reason
from reme_agent.engine.tokenize import estimate_tokens
from reme_agent.engine.transaction import Transaction
from reme_agent.engine.view import VaultView
from reme_agent.errors import (
    ConservationViolation,
    ReMeError,
    StaleProposal,
    StampChanged,
    WriteConflict,
)
from reme_agent.maintenance.followups import enqueue_autolink
from reme_agent.maintenance.kmeans import choose_k
from reme_agent.maintenance.merge import active_cooldowns, update_cooldowns
from reme_agent.maintenance.report import StepResult
from reme_agent.schema.audit import append_audit
from reme_agent.schema.frontmatter import type_errors
from reme_agent.schema.layout import KNOWLEDGE, knowledge_path, layer_of, slugify

if TYPE_CHECKING:
    from reme_agent.vault import Vault

log = logging.getLogger("reme_agent.maintenance")

__all__ = [
    "ChildPlan",
    "SplitParams",
    "SplitPlan",
    "SplitPlanner",
    "SplitProposal",
    "apply_split",
    "build_split",
    "estimate_tokens",
    "overload",
    "overloaded",
    "propose_split",
    "run_split",
]

SPLIT_ACTIONS = ("split", "split-refused")


@dataclass(frozen=True)
class SplitParams:
    token_threshold: int = 2000
    block_threshold: int = 40
    k_max: int = 6
    min_silhouette: float = 0.05
    max_per_run: int = 5
    cooldown_days: float = 30.0
    refused_cooldown_days: float = 7.0
    seed: int = 42


# -- detection -----------------------------------------------------------------------------


def overloaded(vault: Vault, view: VaultView, params: SplitParams,
               layers: tuple[str, ...] = (KNOWLEDGE,)) -> list[dict[str, Any]]:
    """D3: {path, tokens, blocks} of every node over a threshold, largest first."""
    out = []
    counts = Counter(vault.indexer.block_paths.values())   # blocks per note, in memory
    for path, row in view.notes.items():
        if layer_of(path) not in layers:
            continue
        # A token is at least one byte, so a small file can only be over on blocks.
        if row.size <= params.token_threshold and counts.get(path, 0) <= params.block_threshold:
            continue
        if (found := overload(vault, path, params)) is not None:
            out.append(found)
    out.sort(key=lambda d: (-d["tokens"], d["path"]))
    return out


def overload(vault: Vault, path: str, params: SplitParams) -> dict[str, Any] | None:
    """D3 for one indexed note: {path, tokens, blocks} when over a threshold, else None."""
    blocks = vault.state.blocks_of(path)
    tokens = estimate_tokens("\n".join(b.text for b in blocks))
    if tokens > params.token_threshold or len(blocks) > params.block_threshold:
        return {"path": path, "tokens": tokens, "blocks": len(blocks)}
    return None


# -- proposal ------------------------------------------------------------------------------


@dataclass
class SplitProposal:
    path: str
    title: str
    hashes: list[str]                 # block hashes the clusters refer to (stale check)
    blocks: list[dict[str, Any]]      # index, start_line, end_line, heading, text
    clusters: list[list[int]]         # block indices per cluster, document order
    k: int
    silhouette: float
    scores: dict[int, float]

    def summary(self) -> dict[str, Any]:
        return {"path": self.path, "k": self.k, "silhouette": round(self.silhouette, 4),
                "sizes": [len(c) for c in self.clusters],
                "headings": [[self.blocks[i]["heading"] for i in c if self.blocks[i]["heading"]]
                             [:3] for c in self.clusters]}


def propose_split(vault: Vault, path: str, params: SplitParams) -> tuple[SplitProposal | None, str]:
    """(proposal, why not): K-means over the note's block vectors, K by silhouette."""
    rows = vault.state.blocks_of(path)
    if len(rows) < 3:
        return None, f"only {len(rows)} block(s)"
    ids = [b.id for b in rows]
    stored = vault.vector.embeddings(ids)
    missing = [b for b in rows if b.id not in stored]
    if missing:  # not embedded (yet): embed the block texts directly
        vecs = vault.embedder.embed_documents([b.text for b in missing])
        stored.update({b.id: np.asarray(v, dtype=np.float32) for b, v in zip(missing, vecs,
                                                                           strict=True)})
    mat = np.stack([stored[i] for i in ids]).astype(np.float64)
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    mat = mat / np.where(norms > 0, norms, 1.0)
    best = choose_k(mat, 2, params.k_max, seed=params.seed)
    if best is None:
        return None, "the blocks are (nearly) identical"
    if best.silhouette < params.min_silhouette:
        return None, (f"no topical clusters (best silhouette {best.silhouette:.3f} < "
                      f"{params.min_silhouette})")
    clusters: dict[int, list[int]] = {}
    for i, lab in enumerate(best.labels.tolist()):
        clusters.setdefault(int(lab), []).append(i)
    ordered = sorted(clusters.values(), key=lambda c: c[0])
    fm = (vault.state.file(path).frontmatter if vault.state.file(path) else {}) or {}
    return SplitProposal(
        path=path, title=note_title(path, fm, ""), hashes=[b.hash for b in rows],
        blocks=[{"index": i, "start_line": b.start_line, "end_line": b.end_line,
                 "heading": b.heading, "text": b.text} for i, b in enumerate(rows)],
        clusters=ordered, k=best.k, silhouette=best.silhouette, scores=best.scores), ""


# -- the plan (from the model) -------------------------------------------------------------


@dataclass
class ChildPlan:
    title: str
    description: str = ""
    slug: str | None = None
    body: str | None = None           # None: the cluster's blocks, as written


@dataclass
class SplitPlan:
    children: list[ChildPlan]
    overview: str


class SplitPlanner(Protocol):
    """Names the clusters and writes the overview (the maintainer job implements it).

    `feedback` is None on the first call; on the retry it says what the last plan broke.
    """

    def plan(self, proposal: SplitProposal, note: str, feedback: str | None) -> SplitPlan: ...


@dataclass
class SplitOutcome:
    parent: str
    children: list[str]
    written: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- building and checking -----------------------------------------------------------------


def _h1(body: str) -> str | None:
    for line in body.split("\n"):
        if line.strip():
            return line if line.startswith("# ") else None
    return None


def _child_default_body(blocks: list[Block], idx: list[int], h1: str | None) -> str:
    texts = []
    for i in idx:
        text = blocks[i].text
        if h1 is not None and text.startswith(h1):
            text = text[len(h1):].lstrip("\n")   # the parent keeps its own H1
        if text.strip():
            texts.append(text)
    return "\n\n".join(texts)


def _slugs(vault: Vault, view: VaultView, plan: SplitPlan, parent: str) -> list[str]:
    taken = {p.split("/")[1] for p in view.files if p.startswith(KNOWLEDGE + "/") and
             p.count("/") >= 2}
    taken.add(parent.split("/")[1] if parent.count("/") >= 2 else parent)
    out = []
    for child in plan.children:
        base = slugify(child.slug or child.title)
        slug, n = base, 2
        while slug in taken or vault.store.resolve(f"{KNOWLEDGE}/{slug}").exists():
            slug = f"{base[:55]}-{n}"
            n += 1
        taken.add(slug)
        out.append(slug)
    return out


def build_split(vault: Vault, view: VaultView, proposal: SplitProposal, plan: SplitPlan,
                now: datetime, tx: Transaction) -> SplitOutcome:
    """Plan the split into `tx` (not committed); raises if E-2 or E-3 would break."""
    parent = proposal.path
    if len(plan.children) != len(proposal.clusters):
        raise WriteConflict(f"The plan names {len(plan.children)} children for "
                            f"{len(proposal.clusters)} clusters.",
                            "Give exactly one child per cluster, in order.")
    if not plan.overview.strip():
        raise WriteConflict("The plan has no parent overview.", "Write the overview.")
    text = tx.read(parent)
    src = split_note(text, parent)
    fm, body = src.frontmatter, normalize_eol(src.body)
    note = parse_note(parent, text)
    if [b.hash for b in note.blocks] != proposal.hashes:
        raise StaleProposal(f"{parent!r} changed since the split was proposed.",
                            "It is proposed again on the next run.")
    title = note_title(parent, fm, body)
    slugs = _slugs(vault, view, plan, parent)
    paths = [knowledge_path(s) for s in slugs]
    child_fms: dict[str, dict[str, Any]] = {}
    stamp = now.astimezone().replace(microsecond=0).isoformat()
    for child, path in zip(plan.children, paths, strict=True):
        cfm: dict[str, Any] = {"title": child.title.strip(),
                               "description": child.description.strip() or
                               f"Part of {title}: {child.title.strip()}.",
                               "lifecycle": "evolving", "scope": fm.get("scope") or "class",
                               "source": "derived", "role": fm.get("role") or "concept"}
        if fm.get("tags"):
            cfm["tags"] = fm["tags"]
        cfm.update(created=stamp, updated=stamp, split_from=parent)
        errors = type_errors(cfm)
        if errors:
            raise WriteConflict(f"Child {path!r} would have invalid frontmatter: "
                                + "; ".join(errors) + ".")
        child_fms[path] = cfm
    after = view.after({}, added={p: note_aliases(f) for p, f in child_fms.items()})
    h1 = _h1(body)
    style = vault.settings.links.style
    child_texts: dict[str, str] = {}
    for child, path, idx in zip(plan.children, paths, proposal.clusters, strict=True):
        raw = child.body if child.body is not None else _child_default_body(note.blocks, idx, h1)
        fixed, _ = rewrite_links(raw, parent, path, view.resolver, after, {})
        up = format_link(parent, after, style, title, path)
        cbody = f"# {child.title.strip()}\n\n{fixed.strip()}\n\npart_of:: {up}\n"
        child_texts[path] = dump_note(child_fms[path], cbody)
    part_lines = "\n".join(f"- has_part:: {format_link(p, after, style, c.title.strip(), parent)}"
                           for p, c in zip(paths, plan.children, strict=True))
    overview = plan.overview.strip()
    new_body = (f"{h1}\n\n" if h1 else "") + f"{overview}\n\n## Parts\n\n{part_lines}\n"
    if body.startswith("\n"):
        new_body = "\n" + new_body

    # E-2: parent_new ∪ children ⊇ parent_old (resolved edges, before anything is written).
    old_edges = edge_keys(body, parent, view.resolver)
    new_edges = edge_keys(new_body, parent, after, raw_too=True)
    for path, ctext in child_texts.items():
        new_edges |= edge_keys(split_note(ctext, path).body, path, after, raw_too=True)
    lost = old_edges - new_edges
    if lost:
        raise ConservationViolation(parent, {(t.lstrip("\0"), p) for t, p in lost})
    # E-3: nothing else is written, and every existing link resolves as before.
    _check_resolution(view, after)
    tx.write(parent, edit_frontmatter(src.with_body(restore_eol(new_body, src.eol)),
                                      {"updated": stamp}, path=parent))
    for path, ctext in child_texts.items():
        tx.create(path, ctext)
    planned = tx.planned
    assert planned.get(parent) == "write" and all(
        planned[p] == "create" for p in paths) and len(planned) == len(paths) + 1  # E-3
    return SplitOutcome(parent, paths)


def _check_resolution(view: VaultView, after: LinkResolver) -> None:
    moved = []
    for source, meta in view.notes.items():
        for link in meta.links:
            was = view.resolver.resolve(link.target, source)
            if was is not None and after.resolve(link.target, source) != was:
                moved.append(f"{source}: [[{link.target}]] -> {was}")
    if moved:
        raise WriteConflict("Refused split (E-3): a child's name would change where existing "
                            "links point: " + "; ".join(moved[:5]) + ".",
                            "Give the children titles that are not used by other notes.")


def apply_split(vault: Vault, proposal: SplitProposal, plan: SplitPlan, *,
                now: datetime) -> SplitOutcome:
    """Build, check and commit one split (redone from fresh reads if a file changes)."""
    try:
        outcome, written = Transaction.run(
            vault.store, lambda tx: build_split(vault, vault.view(), proposal, plan, now, tx))
    except StampChanged as exc:
        raise WriteConflict(f"Split of {proposal.path} skipped: files kept changing "
                            f"({exc}).") from exc
    outcome.written = written
    vault.try_refresh(written)
    # seed auto_link §1.4: a new child gets its inbound links at once, not at the next batch
    enqueue_autolink(vault, [outcome.parent, *outcome.children], source="split",
                     reason="split: the parent's overview or a new child")
    return outcome


# -- the step ------------------------------------------------------------------------------


def run_split(vault: Vault, view: VaultView, *, params: SplitParams,
              planner: SplitPlanner | None, now: datetime, requested: Sequence[str] = (),
              dry_run: bool = False, stop: threading.Event | None = None) -> StepResult:
    """Propose splits of overloaded notes; with a planner, apply them one by one (`stop`
    set: no further proposal or split starts; the cooldowns of those done are written)."""
    result = StepResult("split", dry_run=dry_run)
    found = overloaded(vault, view, params)
    over = {d["path"]: d for d in found}
    dropped = [p for p in requested if p not in over]
    cooling = active_cooldowns(vault, now, SPLIT_ACTIONS)
    order = [p for p in dict.fromkeys([*requested, *over]) if p in over and p not in cooling]
    proposals: list[SplitProposal] = []
    unsplittable: list[dict[str, str]] = []
    for path in order[:params.max_per_run]:
        if halt := stop_reason(stop):
            result.stopped = halt
            break
        proposal, why = propose_split(vault, path, params)
        if proposal is None:
            unsplittable.append({"path": path, "reason": why})
        else:
            proposals.append(proposal)
    result.found = {"overloaded": len(found), "cooling": len([p for p in over if p in cooling]),
                    "candidates": found, "proposals": [p.summary() for p in proposals],
                    "unsplittable": unsplittable, "queued_not_overloaded": dropped}
    if planner is None:
        if proposals:
            result.warnings.append("no model configured: split proposals reported only")
        return result
    cooldowns: dict[str, tuple[str, float]] = {}
    for proposal in proposals:
        if halt := stop_reason(stop):
            result.stopped = halt
            break
        if dry_run:
            result.actions.append({"action": "ask", "path": proposal.path, "k": proposal.k})
            continue
        entry: dict[str, Any] = {"path": proposal.path, "k": proposal.k}
        try:
            outcome = _plan_and_apply(vault, proposal, planner, now)
        except StaleProposal as exc:
            entry.update(action="stale", error=str(exc))
            result.warnings.append(str(exc))
        except WriteConflict as exc:  # E-2 / E-3 broken twice, or an unusable plan
            entry.update(action="refused", error=str(exc))
            append_audit(vault, "refused", f"split of {proposal.path}",
                         f"- path: `{proposal.path}`\n- job: maintainer (split)\n\n"
                         f"The second plan was refused too: {exc}", now=now.astimezone())
            cooldowns[proposal.path] = ("split-refused", params.refused_cooldown_days)
            result.warnings.append(str(exc))
        except ReMeError as exc:
            entry.update(action="failed", error=str(exc))
            cooldowns[proposal.path] = ("split-refused", params.refused_cooldown_days)
            result.warnings.append(f"split of {proposal.path} failed: {exc}")
        else:
            entry.update(action="split", **outcome.as_dict())
            result.changed += [p for p in outcome.written if p not in result.changed]
            cooldowns[proposal.path] = ("split", params.cooldown_days)
        result.actions.append(entry)
    if cooldowns and not dry_run:
        update_cooldowns(vault, now, cooldowns)
        result.changed.append("meta/cooldowns.json")
    return result


def _plan_and_apply(vault: Vault, proposal: SplitProposal, planner: SplitPlanner,
                    now: datetime) -> SplitOutcome:
    """Ask the planner; on an E-2/E-3 refusal ask once more, naming what broke."""
    note = vault.store.read_text(proposal.path)
    feedback: str | None = None
    for attempt in (1, 2):
        plan = planner.plan(proposal, note, feedback)
        try:
            return apply_split(vault, proposal, plan, now=now)
        except StaleProposal:
            raise
        except WriteConflict as exc:
            if attempt == 2:
                raise
            feedback = str(exc)  # one retry, told exactly what broke (DESIGN §5)
    raise AssertionError("unreachable")  # pragma: no cover
