"""Step 4, merge: near-duplicate knowledge nodes -> LLM yes/no -> one transactional merge.

DESIGN §5 (multi-file CAS, conservation), §8 (cooldowns.json), §9; seed "实体消歧与合并".

Candidates (no model needed):
1. one summary per knowledge node, `title + "\\n" + description`, embedded with the vault's
   embedder; vectors are cached in `.reme/maintain.sqlite` by text hash, so a run re-embeds
   only summaries that changed (USE needs ~5 ms a summary);
2. cosine similarity (`maintenance.similarity.similar_pairs`, shared with auto-link L2/L4),
   pairs at or above `merge_similarity`, at most `merge_neighbors` per node (a cloud of
   look-alikes must not produce a quadratic pair list); with communities, only within each
   community and against the free nodes (3.), so O(sum n_c^2), not O(n^2);
3. the community gate: a pair is kept only when both nodes are in the same community.
   Decision: a node alone in its community (no links at all) has no community evidence
   either way, so it may pair with anyone — otherwise two unlinked copies of one concept,
   the commonest duplicate, could never be found;
4. union-find over the kept pairs; groups larger than `merge_max_group` are reported for a
   person to review and never merged automatically; nodes in a merge cooldown are skipped.

Without a model the groups are only reported, in `audit/<date>/duplicates.md`. With one, a
`MergeJudge` (the maintainer job, jobs/maintainer_job.py) answers yes/no with reasons for
each group; a yes is merged by `apply_merge`:
- winner = most inbound links (distinct notes), tie: the older (`created`, else mtime);
- merged body = winner body + one `## <loser heading>` section per loser; every outbound link
  of every member is kept (checked in code), links the new location would misread are
  rewritten to full paths, and `merged_from` records the losers;
- every inbound link to a loser, anywhere, is retargeted to the winner (alias, anchor and
  predicate kept); losers' titles and aliases become winner aliases; losers are deleted;
- all in one `engine.transaction.Transaction`: every stamp checked first, an intent journal,
  rollback on failure (or by the next opener after a crash), at most 3 redos from fresh
  reads when a file changes under the plan;
- cooldowns: the winner for `cooldown_days`, a rejected group for `rejected_cooldown_days`;
- the winner is queued for auto-link L1 (its merged text may mention nodes it does not link).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import logging
import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from reme_agent.engine.cas import MAX_REDOS
from reme_agent.engine.fmedit import edit_frontmatter
from reme_agent.engine.names import MERGED_FROM, merged_records, note_aliases, note_title
from reme_agent.engine.parser import normalize_eol, restore_eol, split_note
from reme_agent.engine.retarget import edge_keys, retarget, rewrite_links
from reme_agent.engine.stop import stop_reason
from reme_agent.engine.transaction import Transaction
from reme_agent.engine.view import VaultView
from reme_agent.errors import ConservationViolation, ReMeError, StampChanged, WriteConflict
from reme_agent.maintenance.access import rename_entries
from reme_agent.maintenance.followups import enqueue_autolink
from reme_agent.maintenance.report import StepResult
from reme_agent.maintenance.similarity import similar_pairs
from reme_agent.recall.signals import CooldownEntry, CooldownsSignal, iso_utc, parse_moment
from reme_agent.schema.audit import append_audit, audit_path
from reme_agent.schema.frontmatter import type_errors
from reme_agent.schema.layout import RESOURCE, is_record, layer_of

if TYPE_CHECKING:
    from reme_agent.vault import Vault

log = logging.getLogger("reme_agent.maintenance")

__all__ = [
    "DuplicateGroup",
    "MergeJudge",
    "MergeOutcome",
    "MergeParams",
    "MergeVerdict",
    "apply_merge",
    "find_duplicates",
    "run_merge",
]

MERGE_ACTIONS = ("merge", "merge-rejected")


@dataclass(frozen=True)
class MergeParams:
    similarity: float = 0.95
    layers: tuple[str, ...] = ("knowledge",)
    max_group: int = 5
    neighbors: int = 10
    max_per_run: int = 20
    cooldown_days: float = 30.0
    rejected_cooldown_days: float = 90.0


@dataclass
class DuplicateGroup:
    members: list[str]
    pairs: list[tuple[str, str, float]]
    community: int | None
    titles: dict[str, str] = field(default_factory=dict)

    @property
    def signature(self) -> str:
        return hashlib.sha1("\n".join(self.members).encode()).hexdigest()[:12]

    @property
    def max_similarity(self) -> float:
        return max((s for _, _, s in self.pairs), default=0.0)

    def as_dict(self) -> dict[str, Any]:
        return {"members": self.members, "community": self.community,
                "max_similarity": round(self.max_similarity, 4),
                "pairs": [[a, b, round(s, 4)] for a, b, s in self.pairs],
                "titles": self.titles}


@dataclass
class MergeVerdict:
    merge: bool
    reasons: str = ""


class MergeJudge(Protocol):
    """Decides whether a candidate group is one concept (the maintainer job implements it)."""

    def judge(self, group: DuplicateGroup, notes: dict[str, str]) -> MergeVerdict: ...


@dataclass
class MergeOutcome:
    winner: str
    losers: list[str]
    written: list[str]
    retargeted: dict[str, int]
    aliases_added: list[str]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- summary vectors -----------------------------------------------------------------------


class SummaryCache:
    """Cached summary embeddings in `.reme/maintain.sqlite` (derived; safe to delete)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, timeout=30)
        self._db.execute("CREATE TABLE IF NOT EXISTS summaries (path TEXT NOT NULL, "
                         "embedder TEXT NOT NULL, digest TEXT NOT NULL, vec BLOB NOT NULL, "
                         "PRIMARY KEY (path, embedder))")

    def vectors(self, embedder: Any, texts: dict[str, str], batch: int = 256) -> np.ndarray:
        """Normalised float32 rows in the order of `texts`; only new/changed texts embedded."""
        eid = str(getattr(embedder, "id", type(embedder).__name__))
        digests = {p: hashlib.sha1(t.encode("utf-8")).hexdigest() for p, t in texts.items()}
        have: dict[str, np.ndarray] = {}
        for path, digest, blob in self._db.execute(
                "SELECT path, digest, vec FROM summaries WHERE embedder=?", (eid,)):
            if digests.get(path) == digest:
                have[path] = np.frombuffer(blob, dtype=np.float32)
        missing = [p for p in texts if p not in have]
        for start in range(0, len(missing), batch):
            chunk = missing[start:start + batch]
            vecs = np.asarray(embedder.embed_documents([texts[p] for p in chunk]), dtype=np.float32)
            for p, v in zip(chunk, vecs, strict=True):
                have[p] = v
        with self._db:
            if missing:
                self._db.executemany("INSERT OR REPLACE INTO summaries VALUES (?,?,?,?)",
                                     [(p, eid, digests[p], have[p].tobytes()) for p in missing])
            stale = [(p,) for (p,) in self._db.execute(
                "SELECT path FROM summaries WHERE embedder=?", (eid,)) if p not in texts]
            self._db.executemany("DELETE FROM summaries WHERE path=? AND embedder=?",
                                 [(p, eid) for (p,) in stale])
        if not texts:
            return np.zeros((0, int(getattr(embedder, "dim", 1))), dtype=np.float32)
        mat = np.stack([have[p] for p in texts]).astype(np.float32)
        norms = np.linalg.norm(mat, axis=1, keepdims=True)
        return mat / np.where(norms > 0, norms, 1.0)

    def close(self) -> None:
        self._db.close()


def summary_text(path: str, frontmatter: dict[str, Any]) -> str:
    title = note_title(path, frontmatter, "")
    desc = frontmatter.get("description")
    return f"{title}\n{desc.strip()}" if isinstance(desc, str) and desc.strip() else title


# -- pairs and groups ----------------------------------------------------------------------


class _UnionFind:
    """Union-find whose components carry one community label; a union that would join two
    different communities (through a node without one) is refused, keeping groups gated."""

    def __init__(self, labels: list[int | None]) -> None:
        self.parent = list(range(len(labels)))
        self.label = list(labels)

    def find(self, x: int) -> int:
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a: int, b: int) -> bool:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return True
        la, lb = self.label[ra], self.label[rb]
        if la is not None and lb is not None and la != lb:
            return False
        keep, drop = min(ra, rb), max(ra, rb)
        self.parent[drop] = keep
        self.label[keep] = la if la is not None else lb
        return True


def active_cooldowns(vault: Vault, now: datetime, actions: Iterable[str]) -> set[str]:
    wanted = set(actions)
    entries = vault.signals.cooldowns() or {}
    out = set()
    for path, entry in entries.items():
        until = parse_moment(entry.until)
        if entry.action in wanted and until is not None and until > now:
            out.add(path)
    return out


def find_duplicates(vault: Vault, view: VaultView, *, params: MergeParams,
                    communities: dict[str, int] | None, now: datetime,
                    ) -> tuple[list[DuplicateGroup], list[DuplicateGroup], dict[str, Any]]:
    """(groups to judge, groups too large to merge automatically, stats)."""
    cooling = active_cooldowns(vault, now, MERGE_ACTIONS)
    paths = sorted(p for p in view.notes if layer_of(p) in params.layers and p not in cooling)
    texts = {p: summary_text(p, view.notes[p].frontmatter) for p in paths}
    cache = SummaryCache(vault.internal / "maintain.sqlite")
    try:
        mat = cache.vectors(vault.embedder, texts)
    finally:
        cache.close()
    gate = free = None
    if communities:
        sizes: dict[int, int] = {}
        for cid in communities.values():
            sizes[cid] = sizes.get(cid, 0) + 1
        gate = np.array([communities.get(p, -1 - i) for i, p in enumerate(paths)])
        free = np.array([sizes.get(communities.get(p, -1), 0) <= 1 for p in paths])
    pairs = similar_pairs(mat, params.similarity, groups=gate, free=free,
                          neighbors=params.neighbors)
    pairs.sort(key=lambda t: (-t[2], t[0], t[1]))   # strongest evidence joins first
    labels: list[int | None] = [None] * len(paths)
    if gate is not None and free is not None:
        labels = [None if free[i] else int(gate[i]) for i in range(len(paths))]
    uf = _UnionFind(labels)
    kept = [(i, j, s) for i, j, s in pairs if uf.union(i, j)]
    members: dict[int, list[int]] = {}
    for node in sorted({k for a, b, _ in kept for k in (a, b)}):
        members.setdefault(uf.find(node), []).append(node)
    by_root: dict[int, list[tuple[str, str, float]]] = {}
    for i, j, s in kept:
        by_root.setdefault(uf.find(i), []).append((paths[i], paths[j], s))
    groups = [DuplicateGroup(members=[paths[i] for i in idx],
                             pairs=sorted(by_root[root], key=lambda t: (-t[2], t[0], t[1])),
                             community=uf.label[root],
                             titles={paths[i]: view.title(paths[i]) for i in idx})
              for root, idx in members.items()]
    groups.sort(key=lambda g: (-g.max_similarity, g.members))
    small = [g for g in groups if len(g.members) <= params.max_group]
    large = [g for g in groups if len(g.members) > params.max_group]
    stats = {"nodes": len(paths), "cooling": len(cooling), "pairs": len(kept),
             "groups": len(small), "too_large": len(large)}
    return small, large, stats


# -- applying a merge ----------------------------------------------------------------------


def _created(view: VaultView, path: str) -> float:
    row = view.notes[path]
    moment = parse_moment(row.frontmatter.get("created"))
    return moment.timestamp() if moment is not None else row.mtime_ns / 1e9


def choose_winner(vault: Vault, view: VaultView, members: list[str]) -> str:
    """Most inbound links (distinct notes), tie: the older note, then the path."""
    return min(members, key=lambda p: (-vault.graph.in_degree(p), _created(view, p), p))


def _split_h1(body: str) -> tuple[str | None, str]:
    """(text of a leading `# ` heading, the rest) — the loser's H1 becomes its section title."""
    stripped = body.lstrip("\n")
    first, _, rest = stripped.partition("\n")
    if first.startswith("# "):
        return first[2:].strip(), rest
    return None, stripped


def _merged_frontmatter(view: VaultView, winner: str, losers: list[str], texts: dict[str, str],
                        now: datetime) -> dict[str, Any]:
    fms = {p: split_note(texts[p], p).frontmatter for p in [winner, *losers]}
    fm = dict(fms[winner])
    title = note_title(winner, fm, "")
    seen = {title.casefold()}
    own = fm.get("aliases")
    names = [own] if isinstance(own, str) else list(own) if isinstance(own, list) else []
    for p in losers:  # a loser's title first, then its other names
        names += [note_title(p, fms[p], ""), *note_aliases(fms[p])]
    aliases: list[str] = []
    for name in names:
        key = str(name).strip().casefold()
        if key and key not in seen:
            seen.add(key)
            aliases.append(str(name).strip())
    if aliases:
        fm["aliases"] = aliases
    tags: list[str] = []
    for p in [winner, *losers]:
        raw = fms[p].get("tags")
        for tag in [raw] if isinstance(raw, str) else raw or []:
            if isinstance(tag, str) and tag not in tags:
                tags.append(tag)
    if tags:
        fm["tags"] = tags
    imps = [v for p in [winner, *losers] if isinstance(v := fms[p].get("importance"), int)
            and not isinstance(v, bool) and 1 <= v <= 10]
    if imps:
        fm["importance"] = max(imps)
    created = [(m, fms[p]["created"]) for p in [winner, *losers]
               if (m := parse_moment(fms[p].get("created"))) is not None]
    if created:
        fm["created"] = min(created)[1]
    fm[MERGED_FROM] = _merge_records(fms, winner, losers, now)
    fm["updated"] = now.astimezone().replace(microsecond=0).isoformat()
    return fm


def _merge_records(fms: dict[str, dict[str, Any]], winner: str, losers: list[str],
                   now: datetime) -> list[Any]:
    """The winner's `merged_from`: its own entries as written, each loser's entries (a chain
    A -> B -> C leaves A's record in C, so A's old path still resolves), then one entry per
    loser. An old path keeps only its newest entry."""
    own = fms[winner].get(MERGED_FROM)
    entries: list[Any] = list(own) if isinstance(own, list) else [own] if own else []
    day = now.astimezone().date().isoformat()
    for loser in losers:
        entries += merged_records(fms[loser])
        entry: dict[str, Any] = {"path": loser, "title": note_title(loser, fms[loser], "")}
        aliases = [a for a in note_aliases(fms[loser]) if a != entry["title"]]
        if aliases:
            entry["aliases"] = aliases
        entries.append(entry | {"date": day})
    newest = {p: i for i, item in enumerate(entries) if (p := _entry_path(item))}
    return [item for i, item in enumerate(entries)
            if (p := _entry_path(item)) is None or (newest[p] == i and p != winner)]


def _entry_path(item: Any) -> str | None:
    path = item if isinstance(item, str) else item.get("path") if isinstance(item, dict) else None
    return path.strip() if isinstance(path, str) and path.strip() else None


def plan_merge(vault: Vault, view: VaultView, members: list[str], now: datetime,
               tx: Transaction) -> MergeOutcome:
    """Plan the whole merge into `tx` (checked, not committed)."""
    winner = choose_winner(vault, view, members)
    losers = [p for p in members if p != winner]
    path_map = {p: winner for p in losers}
    texts = {p: tx.read(p) for p in [winner, *losers]}
    fm = _merged_frontmatter(view, winner, losers, texts, now)
    errors = type_errors(fm)
    if errors:
        raise WriteConflict(f"Merged frontmatter of {winner!r} would be invalid: "
                            + "; ".join(errors) + ".")
    after = view.after(path_map, frontmatters={winner: fm})
    body_w = split_note(texts[winner], winner).body
    new_body, _ = rewrite_links(body_w, winner, winner, view.resolver, after, path_map, losers)
    parts = [new_body.rstrip("\n")]
    for loser in losers:
        body_l = split_note(texts[loser], loser).body
        moved, _ = rewrite_links(body_l, loser, winner, view.resolver, after, path_map, losers)
        heading, rest = _split_h1(moved)
        parts.append(f"## {heading or view.title(loser)}\n\n{rest.strip()}".rstrip())
    win = split_note(texts[winner], winner)
    merged_body = restore_eol("\n\n".join(normalize_eol(p) for p in parts if p) + "\n", win.eol)
    # Conservation (DESIGN §5): every outbound edge of every member survives the merge.
    old: set[tuple[str, str | None]] = set()
    for p in [winner, *losers]:
        old |= edge_keys(split_note(texts[p], p).body, p, view.resolver, path_map)
    new = edge_keys(merged_body, winner, after, raw_too=True)
    lost = old - new
    if lost:
        raise ConservationViolation(winner, {(t.lstrip("\0"), pr) for t, pr in lost})
    old_fm = win.frontmatter
    tx.write(winner, edit_frontmatter(win.with_body(merged_body), fm,
                                      [k for k in old_fm if k not in fm], winner))
    for loser in losers:
        tx.delete(loser)
    retargeted = retarget(tx, view, path_map, after, force=losers, exclude={winner, *losers},
                          skip=is_record, immutable=lambda p: layer_of(p) == RESOURCE)
    old_aliases = {a.casefold() for a in note_aliases(view.notes[winner].frontmatter)}
    added = [a for a in fm.get("aliases") or [] if a.casefold() not in old_aliases]
    return MergeOutcome(winner, losers, [], retargeted, added)


def apply_merge(vault: Vault, members: list[str], *, now: datetime,
                max_redos: int = MAX_REDOS) -> MergeOutcome:
    """Plan and commit one merge; a file changing under the plan discards it and redoes it."""
    def build(tx: Transaction) -> MergeOutcome:
        view = vault.view()
        missing = [p for p in members if p not in view.notes]
        if missing:
            raise WriteConflict(f"Cannot merge: {', '.join(missing)} no longer exist(s).")
        return plan_merge(vault, view, members, now, tx)

    try:
        outcome, written = Transaction.run(vault.store, build, max_redos)
    except StampChanged as exc:
        raise WriteConflict(f"Merge of {', '.join(members)} skipped: files kept changing during "
                            f"{max_redos} redos ({exc}).", "It is retried on the next run.") from exc
    outcome.written = written
    vault.try_refresh(written)
    rename_entries(vault, {p: outcome.winner for p in outcome.losers})
    enqueue_autolink(vault, [outcome.winner], source="merge",
                     reason="merge: the kept note holds the merged text")
    return outcome


# -- the step ------------------------------------------------------------------------------


def update_cooldowns(vault: Vault, now: datetime, new: dict[str, tuple[str, float]]) -> None:
    """Add cooldowns {path: (action, days)} and drop expired entries."""
    entries = dict(vault.signals.cooldowns() or {})
    entries = {p: e for p, e in entries.items()
               if (u := parse_moment(e.until)) is not None and u > now}
    for path, (action, days) in new.items():
        entries[path] = CooldownEntry(action=action, until=iso_utc(now + timedelta(days=days)))
    vault.signals.write_signal("cooldowns", CooldownsSignal(entries=dict(sorted(entries.items()))))


def _report_groups(vault: Vault, title: str, groups: list[DuplicateGroup], note: str,
                   now: _dt.datetime) -> bool:
    """Append to duplicates.md unless this exact set of groups was reported today."""
    if not groups:
        return False
    sig = hashlib.sha1("|".join(g.signature for g in groups).encode()).hexdigest()[:12]
    path = audit_path("duplicates", now.date())
    if vault.store.exists(path) and f"<!-- sig:{sig} -->" in vault.store.read_text(path):
        return False
    lines = [note, ""]
    for g in groups:
        lines.append(f"- similarity {g.max_similarity:.3f}"
                     + (f", community {g.community}" if g.community is not None else "") + ":")
        lines += [f"  - `{p}` — {g.titles.get(p, p)}" for p in g.members]
    lines.append(f"\n<!-- sig:{sig} -->")
    append_audit(vault, "duplicates", title, "\n".join(lines), now=now)
    return True


def run_merge(vault: Vault, view: VaultView, *, params: MergeParams,
              communities: dict[str, int] | None, judge: MergeJudge | None, now: datetime,
              dry_run: bool = False, stop: threading.Event | None = None) -> StepResult:
    """Find duplicate groups; with a judge, ask and merge them one by one (`stop` set: no
    further group is asked about or merged; the cooldowns of those done are written)."""
    result = StepResult("merge", dry_run=dry_run)
    groups, large, stats = find_duplicates(vault, view, params=params, communities=communities,
                                           now=now)
    result.found = {**stats, "candidates": [g.as_dict() for g in groups],
                    "review": [g.as_dict() for g in large]}
    if communities is None:
        result.warnings.append("no meta/communities.json: the community gate is off")
    local = now.astimezone()
    if not dry_run:
        if _report_groups(vault, "merge candidates", groups,
                          "Near-duplicate knowledge nodes (title + description similarity, "
                          "same community)." + ("" if judge else " No model is configured: "
                                                "report only, nothing merged."), local):
            result.changed.append(audit_path("duplicates", local.date()))
        if _report_groups(vault, "groups too large to merge automatically", large,
                          f"More than {params.max_group} look-alikes chained together: "
                          "review by hand.", local):
            result.changed.append(audit_path("duplicates", local.date()))
    if judge is None:
        if groups:
            result.warnings.append("no model configured: duplicates reported only")
        return result
    cooldowns: dict[str, tuple[str, float]] = {}
    for group in groups[:params.max_per_run]:
        if why := stop_reason(stop):
            result.stopped = why
            break
        if dry_run:
            result.actions.append({"action": "ask", "members": group.members})
            continue
        try:
            notes = {p: vault.store.read_text(p) for p in group.members}
            verdict = judge.judge(group, notes)
        except ReMeError as exc:
            result.warnings.append(f"judge failed on {group.members}: {exc}")
            continue
        entry: dict[str, Any] = {"members": group.members, "merge": verdict.merge,
                                 "reasons": verdict.reasons}
        append_audit(vault, "duplicates", "merge decision",
                     f"{'MERGE' if verdict.merge else 'KEEP APART'}: "
                     + ", ".join(f"`{p}`" for p in group.members)
                     + f"\n\nReasons: {verdict.reasons or '(none given)'}", now=local)
        if not verdict.merge:
            entry["action"] = "kept-apart"
            cooldowns.update({p: ("merge-rejected", params.rejected_cooldown_days)
                              for p in group.members})
            result.actions.append(entry)
            continue
        try:
            outcome = apply_merge(vault, group.members, now=now)
        except ReMeError as exc:
            entry["action"] = "refused"
            entry["error"] = str(exc)
            append_audit(vault, "refused", f"merge of {len(group.members)} notes",
                         "- job: maintainer (merge)\n- notes: "
                         + ", ".join(f"`{p}`" for p in group.members) + f"\n\n{exc}", now=local)
            result.warnings.append(str(exc))
            result.actions.append(entry)
            continue
        entry.update(action="merged", **outcome.as_dict())
        result.actions.append(entry)
        result.changed += [p for p in outcome.written if p not in result.changed]
        cooldowns[outcome.winner] = ("merge", params.cooldown_days)
    if cooldowns:
        update_cooldowns(vault, now, cooldowns)
        result.changed.append("meta/cooldowns.json")
    return result
