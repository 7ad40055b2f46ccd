"""Lint tools: lint_dangling, lint_orphans, lint_collisions, lint_schema (L4). None rewrites.

All four read the files as they are now (`vault.view()`), not the possibly stale index.

Definitions:
- dangling: a link whose target resolves to no file (DESIGN §4 resolution order).
- orphan: a note under `knowledge/` that no other note links to *and* that links to no
  other file: an island the graph cannot reach. (A node with only outbound links is
  reachable from search and points into the graph, so it is not reported.)
- collision: one short name (file name without .md, alias or title) shared by several
  files, so a short `[[name]]` link cannot be resolved; `links` lists the links that are
  dangling today because of it.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from reme_agent.engine.names import note_aliases
from reme_agent.engine.view import VaultView
from reme_agent.schema.frontmatter import NOTE_SUFFIXES, validate_schema
from reme_agent.schema.layout import KNOWLEDGE
from reme_agent.toolkit.common import in_folder, norm_folder
from reme_agent.toolkit.results import ToolResult, tool

if TYPE_CHECKING:
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

    Args:
        folder: Which notes to check; default "knowledge".
    """
    base = norm_folder(vault, folder)
    view = vault.view()
    linked_to: set[str] = set()
    links_out: set[str] = set()
    for src, meta in view.notes.items():
        for link in meta.links:
            hit = view.resolve(link, src)
            if hit is not None and hit != src:
                linked_to.add(hit)
                links_out.add(src)
    items = [{"path": p, "title": m.title} for p, m in sorted(view.notes.items())
             if in_folder(p, base) and p.lower().endswith(NOTE_SUFFIXES)
             and p not in linked_to and p not in links_out]
    lines = [f"{i['path']} — {i['title']}" for i in items]
    return _report("orphans", items, lines)


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

    Reports only; fix the notes with property_update.

    Args:
        folder: Only check notes under this folder, e.g. "knowledge"; "" for the whole vault.
    """
    base = norm_folder(vault, folder)
    checked = 0
    items = []
    for path, meta in sorted(vault.view().notes.items()):
        if not in_folder(path, base) or not path.lower().endswith(NOTE_SUFFIXES):
            continue
        checked += 1
        errors = ([f"frontmatter is not valid YAML: {meta.error}"] if meta.error else []) \
            + validate_schema(path, meta.frontmatter)
        if errors:
            items.append({"path": path, "errors": errors})
    lines = [f"{i['path']}:\n" + "\n".join(f"  - {e}" for e in i["errors"]) for i in items]
    result = _report("notes with schema errors", items, lines)
    return ToolResult(result.data | {"checked": checked}, result.text)


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
