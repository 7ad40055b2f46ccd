"""Auto-link runs: batch over the vault, one note by hand, and the post-write queue consumer.

DESIGN §9 (auto-link; the distiller enqueues auto-link L1 after each knowledge write);
seed auto_link_design.md §1.4 (triggers: inline post-write, periodic batch, manual).

- Batch (`AutoLinker.run`): L1 over every writable note (knowledge + closed daily), then L2,
  L3 and L4 over knowledge nodes, as asked. Re-indexing happens once, after the L1 pass.
- Manual (`AutoLinker.link_note`): L1 on one note.
- Inline (`AutoLinker.handle`): one `autolink` item of the follow-up queue (the wiring and
  the drainers live in `jobs/followups.py`; writers never wait for them). For an item about
  a knowledge node it links mentions *in* the node and mentions *of* the node in other notes
  (a new split child gets its inbound links at once, §1.4).

L1 and L4 need no model. L2 and L3 need one: asking for them without a judge raises
ModelNotConfigured before any file is touched.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from reme_agent.config import AutoLinkSettings
from reme_agent.engine.parser import split_note
from reme_agent.engine.progress import SILENT, Progress
from reme_agent.errors import InvalidArgument, ModelNotConfigured, ReMeError
from reme_agent.maintenance.autolink.common import source_refusal
from reme_agent.maintenance.autolink.judge import Judge
from reme_agent.maintenance.autolink.l1 import L1Context, NoteResult, link_note, prefetch
from reme_agent.maintenance.autolink.names import NameIndex, fold, is_knowledge_node
from reme_agent.maintenance.autolink.normalize import name_keys, normalize
from reme_agent.maintenance.autolink.semantic import NameSimilarity
from reme_agent.maintenance.followups import AUTOLINK

if TYPE_CHECKING:
    from reme_agent.engine.view import VaultView
    from reme_agent.vault import Vault

log = logging.getLogger("reme_agent.autolink")

__all__ = ["LEVELS", "QUEUE_KIND", "AutoLinkReport", "AutoLinker", "parse_levels"]

LEVELS = ("L1", "L2", "L3", "L4")
QUEUE_KIND = AUTOLINK


class Item(Protocol):
    """What `handle` needs of a queue item (the queue itself lives in the job layer)."""

    path: str


def parse_levels(levels: str | Iterable[str] | None, default: Iterable[str] = ("L1",)) -> list[str]:
    """'L1,L3' / ['l1', 'L3'] -> ['L1', 'L3'] (in level order); InvalidArgument when unknown."""
    if levels is None:
        raw = list(default)
    elif isinstance(levels, str):
        raw = [p for p in levels.replace(" ", ",").split(",") if p]
    else:
        raw = list(levels)
    wanted = {str(x).strip().upper() for x in raw}
    bad = sorted(wanted - set(LEVELS))
    if bad:
        raise InvalidArgument(f"Unknown auto-link level(s) {bad}.", "Use L1, L2, L3 and/or L4.")
    return [lv for lv in LEVELS if lv in wanted]


@dataclass
class AutoLinkReport:
    """What one run did, per level (JSON-able through `as_dict`)."""

    levels: list[str]
    dry_run: bool
    l1: dict[str, Any] = field(default_factory=dict)
    l2: dict[str, Any] = field(default_factory=dict)
    l3: dict[str, Any] = field(default_factory=dict)
    l4: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def render(self) -> str:
        verb = "would add" if self.dry_run else "added"
        lines = [f"auto-link {','.join(self.levels)}{' (dry run)' if self.dry_run else ''}"
                 f" in {self.seconds:.1f} s"]
        if self.l1:
            d = self.l1
            lines.append(f"L1: {d['notes_scanned']} notes scanned, {verb} {d['links_added']} "
                         f"links in {d['notes_changed']} notes; {len(d['ambiguous'])} ambiguous "
                         f"mentions and {len(d['proposals'])} fuzzy proposals left, "
                         f"{len(d['refused'])} refused/skipped")
            for r in d["changed"][:50]:
                lines += [f"  {r['path']}:{x['line']}  {x['text']} -> {x['target']}"
                          for x in r["links"]]
            lines += [f"  ambiguous {a['path']}:{a['line']} {a['text']!r} "
                      f"({a['outcome']}): {', '.join(a['candidates'])}" for a in d["ambiguous"][:50]]
            lines += [f"  {a['kind']} {a['path']}:{a['line']} {a['text']!r} ~ {a['name']!r} "
                      f"({a['outcome']}): {', '.join(a['candidates'])}" for a in d["proposals"][:50]]
            lines += [f"  {r['status']} {r['path']}: {r['reason']}" for r in d["refused"]]
        if self.l2:
            lines.append(f"L2: {self.l2['candidates']} related-unlinked pairs, {verb} "
                         f"{len(self.l2['added'])} See-also links")
            lines += [f"  {a['source']} -> {a['target']}" for a in self.l2["added"]]
        if self.l3:
            lines.append(f"L3: {self.l3['candidates']} bare links asked, "
                         f"{'would upgrade' if self.dry_run else 'upgraded'} "
                         f"{len(self.l3['upgraded'])}")
            lines += [f"  {u['source']}: [[{u['target']}]] -> {u['predicate']}:: "
                      for u in self.l3["upgraded"]]
        if self.l4:
            lines.append(f"L4: {len(self.l4['pairs'])} possible duplicates, "
                         f"{len(self.l4['shared_names'])} shared names"
                         + (f"; report {self.l4['report']}" if self.l4.get("report") else ""))
        return "\n".join(lines)


class AutoLinker:
    """Runs auto-link on one vault with one settings object and an optional judge (model)."""

    def __init__(self, vault: Vault, settings: AutoLinkSettings | None = None,
                 judge: Judge | None = None, *, max_redos: int | None = None) -> None:
        self.vault = vault
        self.settings = settings or vault.settings.autolink
        self.judge = judge
        self.max_redos = vault.settings.jobs.max_cas_redos if max_redos is None else max_redos
        self._similarity: NameSimilarity | None = None

    # -- shared state ------------------------------------------------------------------
    def scan(self) -> VaultView:
        return self.vault.view()

    def context(self, scan: VaultView | None = None) -> L1Context:
        """Names, matcher and resolver as the vault is now."""
        scan = scan or self.scan()
        index = NameIndex.from_frontmatter({p: m.frontmatter for p, m in scan.notes.items()},
                                           self.settings.min_name_chars)
        return L1Context.build(index, scan.resolver,
                               first_mention_only=self.settings.first_mention_only,
                               judge=self.judge, max_redos=self.max_redos,
                               style=self.vault.settings.links.style,
                               fuzzy=self.settings.fuzzy, similarity=self.similarity,
                               near_similarity=self.settings.near_similarity,
                               judge_batch=self.settings.judge_batch)

    @property
    def similarity(self) -> NameSimilarity:
        """Near-mention scorer over the vault's embedder; its cache lives as long as the linker
        (the queue worker keeps one linker, so names are embedded once)."""
        if self._similarity is None:
            self._similarity = NameSimilarity(self.vault.embedder)
        return self._similarity

    # -- L1 ----------------------------------------------------------------------------
    def link_note(self, path: str, *, dry_run: bool = False,
                  ctx: L1Context | None = None) -> NoteResult:
        """Manual trigger: L1 on one note."""
        return link_note(self.vault, path, ctx or self.context(), dry_run=dry_run)

    def link_mentions_of(self, node: str, *, dry_run: bool = False,
                         ctx: L1Context | None = None, refresh: bool = True) -> list[NoteResult]:
        """Link mentions of `node` in every other writable note (inbound links for a new node)."""
        ctx = ctx or self.context()
        keys = ctx.index.own_keys(node)
        if not keys:
            return []
        variant_keys = {k for name in ctx.index.nodes[node].names for k in name_keys(name)} \
            if ctx.fuzzy is not None else set()
        out: list[NoteResult] = []
        for path in self._sources(None):
            if path == node:
                continue
            try:
                text = self.vault.store.read_text(path)
            except ReMeError:
                continue
            folded = fold(text)
            if any(k in folded for k in keys) or (
                    variant_keys and any(k in normalize(text).joined for k in variant_keys)):
                res = link_note(self.vault, path, ctx, dry_run=dry_run, only_targets={node},
                                refresh=refresh)
                if res.status != "skipped":
                    out.append(res)
        return out

    def _sources(self, paths: Collection[str] | None) -> list[str]:
        """Notes L1 may look at: Markdown under knowledge/ and daily/ (refusals come later)."""
        if paths:
            found: list[str] = []
            for p in paths:
                norm = self.vault.store.normalize(p)
                found += self.vault.store.list(norm) if self.vault.store.is_dir(norm) else [norm]
            listed = sorted(dict.fromkeys(found))
        else:
            listed = self.vault.store.list("knowledge") + self.vault.store.list("daily")
        return [p for p in listed if p.lower().endswith(".md")]

    def _bodies(self, paths: list[str]) -> Iterable[tuple[str, str]]:
        """(path, body) of the notes L1 may write; others are left to `link_note` to report."""
        for path in paths:
            try:
                parts = split_note(self.vault.store.read_text(path), path)
            except ReMeError:
                continue
            if not parts.error and source_refusal(path, parts.frontmatter) is None:
                yield path, parts.body

    def run_l1(self, paths: Collection[str] | None = None, *, dry_run: bool = False,
               refresh: bool = True, ctx: L1Context | None = None,
               progress: Progress = SILENT) -> dict[str, Any]:
        """L1 over the given notes or folders (default: the whole vault)."""
        ctx = ctx or self.context()
        changed: list[dict[str, Any]] = []
        refused: list[dict[str, Any]] = []
        ambiguous: list[dict[str, Any]] = []
        proposals: list[dict[str, Any]] = []
        scanned = added = 0
        explicit = bool(paths)
        sources = self._sources(paths)

        bar = progress("auto-link L1", len(sources), "note")

        def one(path: str) -> NoteResult:
            try:
                return link_note(self.vault, path, ctx, dry_run=dry_run, refresh=False)
            finally:
                bar.update(1)

        if ctx.fuzzy is not None and len(sources) > 1:
            prefetch(ctx, self._bodies(sources))  # near windows embedded in large batches

        # Notes are independent and each write is its own CAS, so threads are safe; they pay
        # off because the store fsyncs every write and fsyncs overlap (planning holds the GIL).
        workers = min(self.settings.workers, max(1, len(sources)))
        try:
            if workers > 1:
                with ThreadPoolExecutor(workers, thread_name_prefix="reme-autolink") as pool:
                    results = list(pool.map(one, sources))
            else:
                results = [one(p) for p in sources]
        finally:
            bar.close()
        for path, res in zip(sources, results, strict=True):
            if res.status == "skipped":
                if explicit and res.reason:
                    refused.append({"path": path, "status": "skipped", "reason": res.reason})
                continue
            scanned += 1
            ambiguous += [{"path": path, **a} for a in res.ambiguous]
            proposals += [{"path": path, **a} for a in res.proposals]
            if res.status in ("linked", "would_link"):
                added += len(res.links)
                changed.append(res.as_dict())
            elif res.status in ("refused", "conflict"):
                refused.append({"path": path, "status": res.status, "reason": res.reason})
        if refresh and not dry_run and changed:
            self.vault.try_refresh([r["path"] for r in changed])
        return {"notes_scanned": scanned, "notes_changed": len(changed), "links_added": added,
                "changed": changed, "ambiguous": ambiguous, "proposals": proposals,
                "refused": refused,
                "names": len(list(ctx.index.keys())), "nodes": len(ctx.index)}

    # -- the batch ---------------------------------------------------------------------
    def run(self, levels: str | Iterable[str] | None = None, *,
            paths: Collection[str] | None = None, dry_run: bool = False,
            refresh: bool = True, progress: Progress = SILENT) -> AutoLinkReport:
        """Run the given levels (default: settings.levels) in order L1, L2, L3, L4.

        `progress` shows L1's notes, the index run and the L2-L4 levels (none by default).
        """
        wanted = parse_levels(levels, self.settings.levels)
        if self.judge is None and {"L2", "L3"} & set(wanted):
            raise ModelNotConfigured("auto-link " + "/".join(lv for lv in wanted
                                                            if lv in ("L2", "L3")))
        started = time.perf_counter()
        report = AutoLinkReport(wanted, dry_run)
        if "L1" in wanted:
            report.l1 = self.run_l1(paths, dry_run=dry_run, refresh=refresh,
                                    progress=progress)
        later = [lv for lv in wanted if lv != "L1"]
        if later:
            from reme_agent.maintenance.autolink import l2, l3, l4

            # vectors and graph must reflect the files (and the L1 links)
            self.vault.index(progress=progress)
            scan = self.scan()
            ctx = self.context(scan)
            only = {p for p in self._sources(paths) if is_knowledge_node(p)} if paths else None
            bar = progress("auto-link " + "/".join(later), len(later), "level")
            try:
                if "L2" in wanted:
                    assert self.judge is not None
                    report.l2 = l2.run_l2(self.vault, ctx.index, ctx.resolver, self.judge,
                                          self.settings, dry_run=dry_run,
                                          max_redos=self.max_redos, only=only)
                    bar.update(1)
                if "L3" in wanted:
                    assert self.judge is not None
                    report.l3 = l3.run_l3(self.vault, scan, ctx.index, self.judge, self.settings,
                                          dry_run=dry_run, max_redos=self.max_redos, only=only)
                    bar.update(1)
                if "L4" in wanted:
                    report.l4 = l4.run_l4(self.vault, ctx.index, self.settings, dry_run=dry_run)
                    bar.update(1)
            finally:
                bar.close()
        report.seconds = round(time.perf_counter() - started, 3)
        return report

    # -- the queue consumer ------------------------------------------------------------
    def handle(self, item: Item) -> list[NoteResult]:
        """Consume one `autolink` queue item: L1 in the note, and of the node in other notes."""
        ctx = self.context()
        path = self.vault.store.normalize(item.path)
        results: list[NoteResult] = []
        if self.vault.store.exists(path):
            results.append(link_note(self.vault, path, ctx))
        if is_knowledge_node(path) and path in ctx.index:
            results += self.link_mentions_of(path, ctx=ctx)
        log.info("auto-link L1 for %s: %s", path,
                 ", ".join(f"{r.path} {r.status}" for r in results) or "nothing to do")
        return results
