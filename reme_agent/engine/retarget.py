"""Link retargeting inside a `Transaction`: rename or remove files without a dangling link.

DESIGN §4 (a `move` keeps each link's style, shown text, anchor and predicate), §5
(multi-file changes are all or nothing; E-1/E-2 compare resolved edges). The `move` tool,
merge, split and the archive move plan their link rewrites here, against one `VaultView`.

A link is rewritten only when its meaning would change: it resolved (from its note) to X,
and after the change it would not resolve to X's new path (X renamed, merged away, or its
short name now ambiguous). A link written by name that still resolves is not touched.
Only the target characters change (`links.rewrite_targets`), in the style the link was
written (`linkstyle.keep_style`: a name stays a name, a path stays a path); dangling links
stay as written. With `alias_bare=True` (merge, archive) a bare short link ``[[loser]]``
also gets its old text as shown text, ``[[winner|loser]]``, so the sentence still reads the
same; the `move` tool renames like Obsidian does (``[[Old]]`` -> ``[[New]]``).

Only notes that can be touched are checked link by link: a note that stays where it is and
has no link or reference whose `links.link_key` is among the keys the change touches
(`links.changed_keys`) keeps every link's meaning (`VaultView.names_any`).

Embeds (``![[x]]``) and Markdown links (``[t](x.md)``, ``[id]: x.md``) are not edges, so
the index does not hold them: `VaultView.refs` reads each note's from its file, and they
are rewritten by the same rule (a Markdown link stays relative, absolute or a name, encoded
as it was). Links in frontmatter values (``related: "[[x]]"``: no edges, DESIGN §4) come
from the note's frontmatter (`VaultView.props`) and are rewritten by the same rule through
`fmedit.edit_values`, which changes only those values' characters. A link inside an HTML
comment is none of these and is never rewritten (`engine.links`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from reme_agent.engine.fmedit import edit_values
from reme_agent.engine.links import (
    LINK,
    MARKDOWN,
    Edge,
    Link,
    LinkResolver,
    NewTarget,
    changed_keys,
    extract_links,
    rewrite_targets,
    target_key,
)
from reme_agent.engine.linkstyle import keep_style
from reme_agent.engine.parser import eol_of, on_lf, split_note
from reme_agent.engine.transaction import Transaction
from reme_agent.engine.view import VaultView
from reme_agent.errors import WriteConflict

__all__ = ["OBSIDIAN_TIERS", "edge_keys", "plan_move", "retarget", "rewrite_links",
           "rewrite_property_links"]


def rewrite_links(body: str, source: str, new_source: str, before: LinkResolver,
                  after: LinkResolver, path_map: Mapping[str, str],
                  force: Iterable[str] = (), *, alias_bare: bool = True) -> tuple[str, int]:
    """`body` with every link whose target's meaning changes rewritten to name its new path.

    A link that resolved (from `source`) to X must resolve (from `new_source`, with
    `after`) to path_map.get(X, X); links to a path in `force` are rewritten even when they
    would still resolve (e.g. through a new alias). Returns (new body, links rewritten).
    """
    mapping, count = _mapping(source, new_source, before, after, path_map, force, alias_bare)
    # an old-Mac (CR-only) body is scanned in its LF form, byte for byte
    return on_lf(body, eol_of(body), lambda b: rewrite_targets(b, mapping, refs=True)), count[0]


def rewrite_property_links(text: str, source: str, new_source: str, before: LinkResolver,
                           after: LinkResolver, path_map: Mapping[str, str],
                           force: Iterable[str] = (), *, alias_bare: bool = True
                           ) -> tuple[str, int]:
    """`text` (a whole note) with the wikilinks and embeds in its frontmatter values
    (`links.property_links`) rewritten by the rule `rewrite_links` applies to the body;
    only the changed values' characters change (`fmedit.edit_values`)."""
    mapping, count = _mapping(source, new_source, before, after, path_map, force, alias_bare)

    def rewrite(value: str) -> str | None:
        if "[[" not in value:
            return None
        return rewrite_targets(value, lambda x: None if x.kind == MARKDOWN else mapping(x),
                               refs=True)

    return edit_values(text, rewrite, source), count[0]


def _mapping(source: str, new_source: str, before: LinkResolver, after: LinkResolver,
             path_map: Mapping[str, str], force: Iterable[str], alias_bare: bool
             ) -> tuple[Callable[[Link], str | NewTarget | None], list[int]]:
    """The `rewrite_targets` mapping of a retarget, and the count of links it rewrote."""
    forced = set(force)
    count = [0]

    def mapping(link: Link) -> str | NewTarget | None:
        markdown = link.kind == MARKDOWN
        was, how = before.resolve_how(link.target, source, markdown=markdown)
        if was is None or _keeps_meaning(link.target, source, new_source, before, after,
                                         path_map, forced, markdown):
            return None
        want = path_map.get(was, was)
        count[0] += 1
        text = keep_style(link.target, want, after, new_source, markdown=markdown, how=how)
        if (alias_bare and link.kind == LINK and link.alias is None and link.anchor is None
                and "/" not in link.target and text != link.target):
            return NewTarget(text, shown=link.target)
        return text

    return mapping, count


def retarget(tx: Transaction, view: VaultView, path_map: Mapping[str, str], after: LinkResolver,
             *, force: Iterable[str] = (), exclude: Iterable[str] = (),
             skip: Callable[[str], bool] | None = None,
             immutable: Callable[[str], bool] | None = None,
             alias_bare: bool = True) -> dict[str, int]:
    """Inside `tx`, rewrite the links of every note whose links `path_map` would change.

    `exclude`: notes the caller rewrites itself; `skip(path)`: notes never rewritten (e.g.
    records of the past). A note for which `immutable(path)` is true must not need a
    rewrite: WriteConflict (nothing written yet). Returns {path: links rewritten}.
    """
    forced = frozenset(force)
    excluded = set(exclude)
    keys = changed_keys(view.resolver, after)
    for path in forced:
        keys |= view.resolver.keys_of(path)
    changed: dict[str, int] = {}
    for source in view.notes:   # paths only: a note's NoteMeta is made when it is checked
        if source in excluded or (skip is not None and skip(source)):
            continue
        new_source = path_map.get(source, source)
        if new_source == source and not view.names_any(source, keys):
            continue   # no link of it can resolve differently: nothing to check
        meta = view.notes[source]
        props = not all(_keeps_meaning(x.target, source, new_source, view.resolver, after,
                                       path_map, forced) for x in view.props(source))
        if not props and all(
                _keeps_meaning(link.target, source, new_source, view.resolver, after, path_map,
                               forced) for link in meta.links) and all(
                _keeps_meaning(ref.target, source, new_source, view.resolver, after, path_map,
                               forced, ref.kind == MARKDOWN) for ref in view.refs(source)):
            continue
        if immutable is not None and immutable(source):
            raise WriteConflict(f"{source!r} links to a file this change renames or removes, "
                                "and it is immutable.", "Leave these notes as they are.")
        old = tx.read(source)
        parts = split_note(old, source)
        new_body, n = rewrite_links(parts.body, source, new_source, view.resolver, after,
                                    path_map, forced, alias_bare=alias_bare)
        new = parts.head + new_body
        if props:   # DESIGN §4: no edges, but Obsidian renames them too
            new, m = rewrite_property_links(new, source, new_source, view.resolver, after,
                                            path_map, forced, alias_bare=alias_bare)
            n += m
        if new != old:
            tx.write(source, new)
            changed[source] = n
    return changed


OBSIDIAN_TIERS = frozenset({"path", "relative", "name"})
"""Resolution tiers Obsidian shares with us (`LinkResolver.resolve_how`)."""


def _keeps_meaning(target: str, source: str, new_source: str, before: LinkResolver,
                   after: LinkResolver, path_map: Mapping[str, str],
                   forced: Iterable[str], markdown: bool = False) -> bool:
    """True when a link needs no rewrite: it was dangling, or after the change it still
    names the same file, and not only through a tier Obsidian lacks (a name that now
    resolves just as someone's alias or title would look dangling in Obsidian).
    `markdown`: `target` is a Markdown link's decoded path."""
    was, how = before.resolve_how(target, source, markdown=markdown)
    if was is None:
        return True
    if was in forced:
        return False
    now, how_now = after.resolve_how(target, new_source, markdown=markdown)
    return now == path_map.get(was, was) and (how_now == how or how_now in OBSIDIAN_TIERS)


def plan_move(tx: Transaction, view: VaultView, src: str, dst: str, *,
              alias_bare: bool = True, skip: Callable[[str], bool] | None = None,
              immutable: Callable[[str], bool] | None = None) -> dict[str, int]:
    """Plan moving `src` to `dst` with every link the move changes rewritten (the moved
    note's own relative links included), each in its own style. `alias_bare=False` (the
    `move` tool): a renamed bare link just names the new file, as Obsidian renames it.
    Returns {path after the move: links rewritten}."""
    return plan_moves(tx, view, {src: dst}, alias_bare=alias_bare, skip=skip,
                      immutable=immutable)


def plan_moves(tx: Transaction, view: VaultView, path_map: Mapping[str, str], *,
               alias_bare: bool = True, skip: Callable[[str], bool] | None = None,
               immutable: Callable[[str], bool] | None = None) -> dict[str, int]:
    """`plan_move` for several files at once (old path -> new, e.g. a note and the
    materials of its folder): one retarget for the whole map, then every move."""
    changed = retarget(tx, view, path_map, view.after(path_map), skip=skip,
                       immutable=immutable, alias_bare=alias_bare)
    for old, new in path_map.items():
        tx.move(old, new)
    return {path_map.get(p, p): n for p, n in changed.items()}


def edge_keys(body: str, source: str, resolver: LinkResolver,
              path_map: Mapping[str, str] | None = None, *, raw_too: bool = False) -> set[Edge]:
    """Resolved (target, predicate) edges of a body, mapped through `path_map` (E-1/E-2).

    Dangling targets are keyed by "\\0" + `target_key`; `raw_too` adds that key for resolved
    links as well, so a link dangling before a change and resolving after it (or the
    reverse) still counts as kept.
    """
    keys: set[Edge] = set()
    for link in extract_links(body):
        hit = resolver.resolve(link.target, source)
        if hit is not None:
            keys.add(((path_map or {}).get(hit, hit), link.predicate))
        if hit is None or raw_too:
            keys.add(("\0" + target_key(link.target), link.predicate))
    return keys
