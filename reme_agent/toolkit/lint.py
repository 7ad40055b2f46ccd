"""Lint tools: lint_dangling, lint_orphans, lint_collisions, lint_schema, lint_alias_links,
lint_redirect_links (L4).

None rewrites; `fix_alias_links` and `fix_redirect_links` (run by `reme-agent lint --fix`)
apply the safe fixes.

All four read the files as they are now (`vault.view()`), not the possibly stale index.

Definitions:
- dangling: a link whose target resolves to no file (DESIGN §4 resolution order).
- orphan: a note under `knowledge/` that no other note links to *and* that links to no
  other file: an island the graph cannot reach. (A node with only outbound links is
  reachable from search and points into the graph, so it is not reported.)
- collision: one short name (file name without .md, alias or title) shared by several
  files, so a short `[[name]]` link cannot be resolved; `links` lists the links that are
  dangling today because of it.
- alias link: a link reme-agent resolves but Obsidian does not (DESIGN §4): through an
  `aliases:` entry or a `title:` (`[[Wang Fang]]` for `people/王芳.md`; Obsidian uses aliases
  only to *suggest* links), or through a folder note (`[[knowledge/bm25]]` for
  `knowledge/bm25/bm25.md`). The fix names the file and keeps the text as shown text,
  `[[王芳|Wang Fang]]`: same target, same sentence, now resolved in Obsidian too.
- redirect link: a link that resolves only through a merge redirect: it names a note that
  was merged away (its old path, file name, title or alias, kept in the winner's
  `merged_from`). It works, but only because of the record; the fix names the note it now
  reaches, in the vault's link style, keeping a name as shown text (`[[LLM]]` ->
  `[[large-language-model|LLM]]`) and dropping an old path (`[[knowledge/llm/llm]]` ->
  `[[large-language-model]]`), as merge itself retargets links.
- schema: at the note's strictness level (`lint.strictness`, `schema.frontmatter`).
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from collections.abc import Collection, Iterator
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from reme_agent.engine.links import (
    MARKDOWN,
    Link,
    LinkResolver,
    NewTarget,
    missing_edges,
    rewrite_targets,
)
from reme_agent.engine.linkstyle import link_target
from reme_agent.engine.names import merged_records, note_aliases, record_names
from reme_agent.engine.parser import on_lf, split_note
from reme_agent.engine.view import LinkRef, VaultView
from reme_agent.errors import ConservationViolation
from reme_agent.schema.frontmatter import NOTE_SUFFIXES, schema_level, validate_schema
from reme_agent.schema.layout import AUDIT, KNOWLEDGE, META
from reme_agent.toolkit.common import in_folder, norm_folder
from reme_agent.toolkit.results import ToolResult, tool

if TYPE_CHECKING:
    from reme_agent.engine.view import VaultView
    from reme_agent.vault import Vault


@tool
def lint_dangling(vault: Vault, folder: str = "") -> ToolResult:
    """Links that point to no file, with close matches to fix them.

    Args:
        folder: Only check notes under this folder, e.g. "knowledge"; "" for the whole vault.
    """
    base = norm_folder(vault, folder)
    view = vault.view()
    names = {PurePosixPath(p).stem.casefold(): p for p in view.files}
    items = []
    for src, meta in sorted(view.notes.items()):
        if not in_folder(src, base):
            continue
        for link in meta.links:
            if view.resolve(link, src) is None:
                items.append({"source": src, "line": link.line, "target": link.target,
                              "predicate": link.predicate,
                              "ambiguous": view.resolver.ambiguous(link.target),
                              "suggestions": _suggest(link.target, names)})
    lines = [f"{i['source']}:{i['line']} [[{i['target']}]]" + _why(i) for i in items]
    return _report("dangling links", items, lines)


@tool
def lint_orphans(vault: Vault, folder: str = KNOWLEDGE) -> ToolResult:
    """Knowledge notes that nothing links to and that link to nothing (isolated islands).

    Embeds, Markdown links and links in properties count here (Obsidian's graph draws them),
    though only [[wikilinks]] in the body are edges of our graph.

    Args:
        folder: Which notes to check; default "knowledge" (the whole vault when it has no
            knowledge/ folder, e.g. a plain Obsidian vault); "" for the whole vault.
    """
    if folder == KNOWLEDGE and not vault.store.is_dir(KNOWLEDGE):  # the default, not a typo:
        folder = ""  # the whole vault, as the curator's `maintain` prompt does
    base = norm_folder(vault, folder)
    reports = () if base else (f"{AUDIT}/", f"{META}/")  # the code's own, never linked to
    view = vault.view()
    linked_to: set[str] = set()
    links_out: set[str] = set()
    for src, meta in view.notes.items():
        for link in meta.links:
            hit = view.resolve(link, src)
            if hit is not None and hit != src:
                linked_to.add(hit)
                links_out.add(src)
    alone = [p for p in sorted(view.notes) if in_folder(p, base)
             and p.lower().endswith(NOTE_SUFFIXES) and not p.startswith(reports)
             and p not in linked_to and p not in links_out]
    reached = _joined_by_references(vault, view, alone)
    items = [{"path": p, "title": view.notes[p].title} for p in alone if p not in reached]
    lines = [f"{i['path']} — {i['title']}" for i in items]
    return _report("orphans", items, lines)


def _joined_by_references(vault: Vault, view: VaultView, paths: list[str]) -> set[str]:
    """Which of `paths` an embed, Markdown link or property link joins to another file, in
    either direction. Only the notes the index lists as naming one of their keys are read
    (`Vault.notes_naming`; every note on an index from before it kept them), and the
    candidates themselves."""
    if not paths:
        return set()
    resolver = view.resolver
    keys = {k for p in paths for k in resolver.keys_of(p)}
    wanted = set(paths)
    joined: set[str] = set()
    naming = vault.notes_naming(keys)
    naming = set(view.notes) if naming is None else naming & view.notes.keys()
    for source in sorted(set(paths) | naming):
        for ref in [*view.refs(source), *view.props(source)]:
            hit = resolver.resolve(ref.target, source, markdown=ref.kind == MARKDOWN)
            if hit is None or hit == source:
                continue
            if source in wanted:
                joined.add(source)      # it links out
            if hit in wanted:
                joined.add(hit)         # it is linked to
    return joined


@tool
def lint_collisions(vault: Vault, folder: str = "") -> ToolResult:
    """Short names (file name, alias or title) shared by several files: [[name]] is ambiguous.

    Args:
        folder: Only report collisions involving a file under this folder; "" for all.
    """
    base = norm_folder(vault, folder)
    view = vault.view()
    by_name: dict[str, set[str]] = defaultdict(set)
    shown: dict[str, str] = {}
    for path in view.files:
        name = PurePosixPath(path).name
        name = name[:-3] if name.lower().endswith(".md") else name
        by_name[name.casefold()].add(path)
        shown.setdefault(name.casefold(), name)
    for path, meta in view.notes.items():
        for alias in note_aliases(meta.frontmatter):
            by_name[alias.casefold()].add(path)
            shown.setdefault(alias.casefold(), alias)
    items = []
    for key, paths in sorted(by_name.items()):
        cands = view.resolver.ambiguous(shown[key])
        if len(paths) > 1 and len(cands) > 1 and any(in_folder(p, base) for p in cands):
            items.append({"name": shown[key], "paths": cands, "links": _uses(view, key)})
    lines = [f"[[{i['name']}]] -> {', '.join(i['paths'])}"
             + (f" ({len(i['links'])} link(s) affected)" if i["links"] else "") for i in items]
    return _report("name collisions", items, lines)


@tool
def lint_schema(vault: Vault, folder: str = "") -> ToolResult:
    """Frontmatter problems: missing axes, status/confidence/originSessionId rules, bad types.

    Notes the jobs write are checked strictly; hand-kept notes only for the types and values
    of the keys they have (per folder: the lint.strictness setting). Reports only; fix the
    notes with property_update.

    Args:
        folder: Only check notes under this folder, e.g. "knowledge"; "" for the whole vault.
    """
    base = norm_folder(vault, folder)
    strictness = vault.settings.lint.strictness
    checked = 0
    items = []
    for path, meta in sorted(vault.view().notes.items()):
        if not in_folder(path, base) or not path.lower().endswith(NOTE_SUFFIXES):
            continue
        if schema_level(path, strictness) == "off":
            continue
        checked += 1
        errors = ([f"frontmatter is not valid YAML: {meta.error}"] if meta.error else []) \
            + validate_schema(path, meta.frontmatter, strictness)
        if errors:
            items.append({"path": path, "errors": errors})
    lines = [f"{i['path']}:\n" + "\n".join(f"  - {e}" for e in i["errors"]) for i in items]
    result = _report("notes with schema errors", items, lines)
    return ToolResult(result.data | {"checked": checked}, result.text)


@tool
def lint_alias_links(vault: Vault, folder: str = "") -> ToolResult:
    """Links only reme-agent resolves (through an alias, a title or a folder note): Obsidian
    shows them as unresolved. Each comes with its fix, e.g. [[Wang Fang]] -> [[王芳|Wang Fang]]
    (same target, same shown text); `reme-agent lint --fix` applies them.

    Args:
        folder: Only check notes under this folder, e.g. "knowledge"; "" for the whole vault.
    """
    base = norm_folder(vault, folder)
    view = vault.view()
    items = []
    for src, link, hit, how in _links_by_tier(view, base, _ALIAS_TIERS):
        via = how if how == "folder_note" else _alias_kind(view, hit, link.target)
        new = _fixed(hit, link.target, link.alias, how, view.resolver, vault, src)
        items.append({"source": src, "line": link.line, "target": link.target,
                      "resolves_to": hit, "via": via, "fix": new})
    lines = [f"{i['source']}:{i['line']} [[{i['target']}]] -> {i['resolves_to']} "
             f"(by {i['via'].replace('_', ' ')}); fix: {i['fix']}" for i in items]
    return _report("links Obsidian does not resolve", items, lines)


@tool
def lint_redirect_links(vault: Vault, folder: str = "") -> ToolResult:
    """Links that name a note merged into another one (its old path, file name, title or
    alias): they still reach the kept note through its merge record (`merged_from`), but
    only because of it. Each comes with its fix, e.g. [[LLM]] -> [[large-language-model|LLM]];
    `reme-agent lint --fix` applies them.

    Args:
        folder: Only check notes under this folder, e.g. "knowledge"; "" for the whole vault.
    """
    base = norm_folder(vault, folder)
    view = vault.view()
    items = []
    for src, link, hit, how in _links_by_tier(view, base, {"redirect"}):
        new = _fixed(hit, link.target, link.alias, how, view.resolver, vault, src)
        items.append({"source": src, "line": link.line, "target": link.target,
                      "resolves_to": hit, "merged_from": _merged_path(view, hit, link.target),
                      "fix": new})
    lines = [f"{i['source']}:{i['line']} [[{i['target']}]] -> {i['resolves_to']} "
             f"(merged from {i['merged_from']}); fix: {i['fix']}" for i in items]
    return _report("links through a merge redirect", items, lines)


_ALIAS_TIERS = frozenset({"folder_note", "alias"})


def _links_by_tier(view: VaultView, base: str, tiers: Collection[str]
                   ) -> Iterator[tuple[str, LinkRef, str, str]]:
    """(source, link, resolved path, tier) of every link under `base` resolving by `tiers`."""
    for src, meta in sorted(view.notes.items()):
        if not in_folder(src, base):
            continue
        for link in meta.links:
            hit, how = view.resolver.resolve_how(link.target, src)
            if hit is not None and how in tiers:
                yield src, link, hit, how


def _new_target(hit: str, target: str, how: str, resolver: LinkResolver, style: str,
                source: str) -> NewTarget:
    """The fix of one link: its file in the vault's style; a name stays as shown text, an
    old path of a merged note does not (it was an address, not words of the sentence)."""
    shown = None if how == "redirect" and "/" in target.strip().strip("/") else target
    return NewTarget(link_target(hit, resolver, style, source), shown=shown)


def _fixed(hit: str, target: str, alias: str | None, how: str, resolver: LinkResolver,
           vault: Vault, source: str) -> str:
    new = _new_target(hit, target, how, resolver, vault.settings.links.style, source)
    shown = alias or new.shown
    return f"[[{new.target}|{shown}]]" if shown else f"[[{new.target}]]"


def _merged_path(view: VaultView, holder: str, target: str) -> str:
    """The old path of the merged note a redirect link names (the record it matched)."""
    meta = view.notes.get(holder)
    records = merged_records(meta.frontmatter) if meta else []
    for record in reversed(records):   # the newest record that matches
        one = LinkResolver([holder], redirects={holder: [record["path"], *record_names(record)]})
        if one.resolve(target) == holder:
            return str(record["path"])
    return str(records[-1]["path"]) if records else holder


def fix_alias_links(vault: Vault, folder: str = "", dry_run: bool = False) -> ToolResult:
    """Apply `lint_alias_links`' fixes: each such link names its file, in the vault's link
    style, and keeps its text as shown text (anchor and predicate kept). Safe and
    reversible: every link still resolves to the same file (checked, E-1), only the link
    markup changes, each note under CAS. Returns {count, files: [{path, links}]}."""
    return _fix_links(vault, folder, dry_run, lint_alias_links, _ALIAS_TIERS)


def fix_redirect_links(vault: Vault, folder: str = "", dry_run: bool = False) -> ToolResult:
    """Apply `lint_redirect_links`' fixes: each link through a merge redirect names the note
    it reaches, in the vault's link style (a name kept as shown text). Same safety as
    `fix_alias_links`: the link still resolves to the same file (E-1), each note under CAS."""
    return _fix_links(vault, folder, dry_run, lint_redirect_links, {"redirect"})


def _fix_links(vault: Vault, folder: str, dry_run: bool, lint: Any,
               tiers: Collection[str]) -> ToolResult:
    found = lint(vault, folder)["items"]
    by_source: dict[str, int] = defaultdict(int)
    for item in found:
        by_source[item["source"]] += 1
    style = vault.settings.links.style
    done: list[dict[str, Any]] = []
    for source in sorted(by_source):
        resolver = vault.view().resolver

        def mapping(link: Link, source: str = source, resolver: LinkResolver = resolver
                    ) -> NewTarget | None:
            hit, how = resolver.resolve_how(link.target, source)
            if hit is None or how not in tiers:
                return None
            return _new_target(hit, link.target, how, resolver, style, source)

        def edit(text: str, source: str = source, resolver: LinkResolver = resolver,
                 mapping: Any = mapping) -> str | None:
            parts = split_note(text, source)
            body = on_lf(parts.body, parts.eol, lambda b: rewrite_targets(b, mapping))
            if body == parts.body:
                return None
            lost = missing_edges(parts.body, body, lambda t: resolver.resolve(t, source))
            if lost:  # pragma: no cover - the mapping keeps every target; a bug would show here
                raise ConservationViolation(source, lost)
            return parts.head + body

        result = vault.store.cas_edit(source, edit, dry_run=dry_run)
        if result.status != "unchanged":
            done.append({"path": source, "links": by_source[source]})
    if done and not dry_run:
        vault.try_refresh([d["path"] for d in done])
    verb = "Would fix" if dry_run else "Fixed"
    text = f"{verb} {sum(d['links'] for d in done)} link(s) in {len(done)} file(s)" + "".join(
        f"\n  {d['path']} ({d['links']})" for d in done)
    return ToolResult({"count": sum(d["links"] for d in done), "files": done}, text)


def _alias_kind(view: VaultView, path: str, target: str) -> str:
    meta = view.notes.get(path)
    aliases = meta.frontmatter.get("aliases") if meta else None
    aliases = [aliases] if isinstance(aliases, str) else aliases if isinstance(aliases, list) else []
    key = target.strip().casefold()
    return "alias" if any(str(a).strip().casefold() == key for a in aliases) else "title"


# -- helpers ------------------------------------------------------------------------------
def _report(kind: str, items: list[dict[str, Any]], lines: list[str]) -> ToolResult:
    text = f"{kind.capitalize()} ({len(items)}):\n" + "\n".join(lines) if items else f"No {kind}."
    return ToolResult({"count": len(items), "items": items}, text)


def _suggest(target: str, names: dict[str, str]) -> list[str]:
    want = PurePosixPath(target.replace("\\", "/")).stem.casefold()
    return [names[n] for n in difflib.get_close_matches(want, list(names), n=3, cutoff=0.6)]


def _why(item: dict[str, Any]) -> str:
    if item["ambiguous"]:
        return f" (ambiguous: {', '.join(item['ambiguous'])})"
    if item["suggestions"]:
        return f" (did you mean {', '.join(item['suggestions'])}?)"
    return ""


def _uses(view: VaultView, key: str) -> list[dict[str, Any]]:
    """Links spelled as this short name that are unresolved because of the collision."""
    return [{"source": src, "line": link.line, "target": link.target}
            for src, meta in sorted(view.notes.items()) for link in meta.links
            if link.target.strip().casefold().removesuffix(".md") == key
            and view.resolve(link, src) is None]
