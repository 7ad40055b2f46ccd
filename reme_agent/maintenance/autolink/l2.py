"""Auto-link L2: related knowledge nodes with no link either way get a "See also" link.

DESIGN §9 (L2 related-but-unlinked -> "See also" line after LLM judgement), §5 (CAS, E-1);
seed auto_link_design.md §1.3 (L2: LLM judges, then a reference sentence is appended at the end
of the body: additive).

Decisions where DESIGN is silent:

- A node's vector is the normalised mean of its stored block embeddings (nothing is
  re-embedded); a node without stored blocks is embedded from its title and description.
- Candidates: similarity >= `l2_similarity`, or >= `l2_community_similarity` when both nodes
  are in the same community (meta/communities.json), and no link between them in either
  direction. Pairs at or above `l4_similarity` are left to the L4 duplicate report: duplicates
  should be merged, not cross-referenced. At most `l2_max_pairs` pairs per run, most similar
  first, so a run's model cost is bounded.
- The line goes into the first node of the pair in path order and links the other. If the
  body already ends with our "See also" line, the link is added to that line; otherwise a new
  paragraph ``<label>: [[name|title]]`` is appended (the link in the vault's link style). Rerunning adds nothing: the pair is
  linked now, and the writer also checks the note does not link the target yet.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from reme_agent.config import AutoLinkSettings
from reme_agent.engine.links import LinkResolver, extract_links
from reme_agent.engine.linkstyle import format_link
from reme_agent.engine.parser import split_note
from reme_agent.errors import AdditiveCheckFailed
from reme_agent.maintenance.autolink.common import (
    Insertion,
    apply_insertions,
    audit_refusal,
    cas_outcome,
    check_insertions,
)
from reme_agent.maintenance.autolink.judge import Judge, PairQuestion
from reme_agent.maintenance.autolink.names import NameIndex, Node
from reme_agent.maintenance.similarity import similar_paths

if TYPE_CHECKING:
    from reme_agent.vault import Vault

__all__ = ["append_see_also", "node_vectors", "run_l2", "see_also_insertion"]



def node_vectors(vault: Vault, index: NameIndex) -> dict[str, np.ndarray]:
    """One L2-normalised vector per knowledge node (mean of its stored block vectors)."""
    ids_of = {p: vault.state.block_ids(p) for p in index.nodes}
    stored = vault.vector.embeddings([i for ids in ids_of.values() for i in ids])
    out: dict[str, np.ndarray] = {}
    missing: list[str] = []
    for path, ids in ids_of.items():
        vecs = [stored[i] for i in ids if i in stored]
        if vecs:
            out[path] = np.mean(np.stack(vecs), axis=0)
        else:
            missing.append(path)
    if missing:
        texts = [f"{index.nodes[p].title}\n{index.nodes[p].description}" for p in missing]
        for path, vec in zip(missing, vault.embedder.embed_documents(texts), strict=True):
            out[path] = np.asarray(vec, dtype=np.float32)
    for path, vec in out.items():
        norm = float(np.linalg.norm(vec))
        out[path] = vec / norm if norm > 0 else vec
    return out


def _linked(vault: Vault, a: str, b: str) -> bool:
    return any(t == b for t, _ in vault.graph.outbound(a)) or \
        any(t == a for t, _ in vault.graph.outbound(b))


def _alias(node: Node) -> str:
    title = " ".join(node.title.split())
    return title if title and not set("[]|") & set(title) else node.path.rsplit("/", 1)[-1][:-3]


def see_also_insertion(body: str, link: str, label: str) -> Insertion:
    """Where and what to insert so `body` ends with a "See also" `link` (``[[...]]``)."""
    stripped = body.rstrip("\n")
    last_line = stripped.rsplit("\n", 1)[-1]
    if stripped and last_line.startswith(f"{label}: [["):
        return Insertion(len(stripped), f", {link}")
    if not body:
        return Insertion(0, f"{label}: {link}\n")
    return Insertion(len(body), _tail(body, label, link))


def _tail(body: str, label: str, link: str) -> str:
    if body.endswith("\n\n"):
        return f"{label}: {link}\n"
    if body.endswith("\n"):
        return f"\n{label}: {link}\n"
    return f"\n\n{label}: {link}\n"


def append_see_also(vault: Vault, source: str, target: Node, *, label: str,
                    resolver: LinkResolver, max_redos: int = 3,
                    dry_run: bool = False, style: str = "shortest") -> str:
    """Additively link `target` from the end of `source`; 'written', 'unchanged', ... ."""
    def edit(text: str) -> str | None:
        parts = split_note(text, source)
        head, body = parts.head, parts.body
        if parts.error:
            raise AdditiveCheckFailed(source, f"malformed frontmatter ({parts.error})")
        if any(resolver.resolve(x.target, source) == target.path for x in extract_links(body)):
            return None  # linked already (idempotent rerun)
        link = format_link(target.path, resolver, style, _alias(target), source)
        ins = see_also_insertion(body, link, label)
        new_body = apply_insertions(body, [ins])
        check_insertions(source, body, new_body, [ins])
        if not any(resolver.resolve(x.target, source) == target.path
                   for x in extract_links(new_body)):
            raise AdditiveCheckFailed(source, "the See-also link would not parse as a link")
        return head + new_body

    try:
        return cas_outcome(vault, source, edit, max_redos=max_redos, dry_run=dry_run).status
    except AdditiveCheckFailed as exc:
        audit_refusal(vault, "auto-link L2", source, str(exc))
        return "refused"


def run_l2(vault: Vault, index: NameIndex, resolver: LinkResolver, judge: Judge,
           settings: AutoLinkSettings, *, dry_run: bool = False, max_redos: int = 3,
           only: Collection[str] | None = None) -> dict[str, Any]:
    """Mine related-unlinked pairs, ask the judge, append "See also" links for the yeses."""
    vectors = node_vectors(vault, index)
    floor = min(settings.l2_similarity, settings.l2_community_similarity)
    communities = vault.signals.communities() or {}
    pairs: list[tuple[str, str, float, bool | None]] = []
    for a, b, sim in similar_paths(vectors, floor):
        if sim >= settings.l4_similarity:
            continue  # a duplicate: L4 reports it for merging
        if only is not None and a not in only and b not in only:
            continue
        same = (communities[a] == communities[b]) if a in communities and b in communities \
            else None
        if sim < settings.l2_similarity and not same:
            continue
        if _linked(vault, a, b):
            continue
        pairs.append((a, b, sim, same))
        if len(pairs) >= settings.l2_max_pairs:
            break
    questions = [PairQuestion(i, index.nodes[a], index.nodes[b], sim, same)
                 for i, (a, b, sim, same) in enumerate(pairs)]
    answers = _ask(judge, questions, settings.judge_batch)
    added: list[dict[str, Any]] = []
    declined: list[dict[str, Any]] = []
    for q in questions:
        row = {"source": q.source.path, "target": q.target.path, "similarity": q.similarity,
               "same_community": q.same_community}
        if not answers.get(q.id):
            declined.append(row)
            continue
        status = append_see_also(vault, q.source.path, q.target, label=settings.see_also_label,
                                 style=vault.settings.links.style,
                                 resolver=resolver, max_redos=max_redos, dry_run=dry_run)
        if status in ("written", "dry_run"):
            added.append(row)
            if status == "written":
                vault.try_refresh([q.source.path])
        else:
            declined.append({**row, "status": status})
    return {"candidates": len(pairs), "added": added, "declined": declined}


def _ask(judge: Judge, questions: Sequence[PairQuestion], batch: int) -> dict[int, bool]:
    out: dict[int, bool] = {}
    for lo in range(0, len(questions), max(1, batch)):
        got = judge.related(questions[lo:lo + batch])
        out.update({k: v is True for k, v in got.items()})
    return out
