"""Names as paths, and links written in the vault's style (DESIGN §4).

- `note_path`: tools take a note *name* wherever they take a path (``read "BM25"``,
  ``read "王芳"``): a path that exists wins; otherwise the name is resolved by the same rules
  as a ``[[link]]`` (`engine.links.LinkResolver`: path, folder note, file name, alias or
  title, then a merge redirect: the old path or name of a note merged into another one
  reaches the note it was merged into); several candidates -> `AmbiguousName` listing
  them; none -> the path as given, so the tool answers its usual "No file at ..." with
  suggestions. `delete` and `move` never act through a redirect (it would delete or move the
  note that absorbed the old one): the old path is "No file at ...", suggesting the note.
- `link_to`: the text of a new link to a note, in the vault's `links.style`.
- `restyle_named_links`: jobs name link targets by full vault path (``[[knowledge/x/x.md]]``,
  as the protocol asks); what lands in the file follows the vault's style (``[[x]]``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reme_agent.engine.links import Link, LinkResolver, extract_links, rewrite_targets, target_key
from reme_agent.engine.linkstyle import format_link, link_target
from reme_agent.errors import AmbiguousName, NoteNotFound, PathEscape

if TYPE_CHECKING:
    from reme_agent.vault import Vault

__all__ = ["link_to", "note_path", "restyle_named_links"]


def note_path(vault: Vault, name: str, *, redirects: bool = True) -> str:
    """The vault path `name` stands for (see the module docstring); `redirects=False`
    refuses a name that reaches its note only through a merge redirect."""
    try:
        norm = vault.store.normalize(name)
        if vault.store.resolve(norm).exists():
            return norm
    except PathEscape:
        norm = None  # not a usable path, but maybe a name ("a/../b" is neither)
    resolver = vault.view().resolver
    hit, how = resolver.resolve_how(name)
    if hit is not None and how == "redirect" and not redirects:
        raise NoteNotFound(norm or name, [hit])
    if hit is not None:
        return hit
    candidates = resolver.ambiguous(name)
    if len(candidates) > 1:
        raise AmbiguousName(name, candidates)
    if norm is None:
        return vault.store.normalize(name)  # raises the PathEscape with its reason
    return norm


def link_to(vault: Vault, path: str, shown: str | None = None, source: str | None = None,
            resolver: LinkResolver | None = None) -> str:
    """``[[target]]`` / ``[[target|shown]]`` for a new link to `path` in the vault's style."""
    return format_link(path, resolver or vault.view().resolver, vault.settings.links.style,
                       shown, source)


def restyle_named_links(vault: Vault, source: str, old_body: str | None, new_body: str) -> str:
    """`new_body` with each link that is new in it and names an existing file by its full
    vault path with extension (``[[knowledge/bm25/bm25.md]]``) written in the vault's link
    style instead; shown text, anchors and predicates are kept, links already in
    `old_body` and any other spelling are left as written."""
    if "[[" not in new_body or ".md" not in new_body.lower():
        return new_body
    old = {target_key(x.target) for x in extract_links(old_body or "")}
    named = [x for x in extract_links(new_body) if _is_full_path(x) and target_key(x.target) not in old]
    if not named:
        return new_body
    view = vault.view()
    # a note being created counts: `[[jwt-rotation]]` written into a new jwt-rotation.md
    # must name yesterday's note by path, or the new file would make it ambiguous
    resolver = view.resolver if source in view.resolver else view.after({}, added={source: []})
    style = vault.settings.links.style

    def mapping(link: Link) -> str | None:
        if link not in named:
            return None
        hit, how = resolver.resolve_how(link.target, source)
        if hit is None or how != "path":
            return None
        return link_target(hit, resolver, style, source)

    return rewrite_targets(new_body, mapping)


def _is_full_path(link: Link) -> bool:
    t = link.target.strip()
    return "/" in t and t.lower().endswith(".md") and not t.startswith(("./", "../"))
