"""Link retargeting inside a `Transaction`: rename or remove files without a dangling link.

DESIGN §4 (a `move` keeps each link's alias, anchor and predicate), §5 (multi-file changes
are all or nothing; E-1/E-2 compare resolved edges). The `move` tool, merge, split and the
archive move plan their link rewrites here, against one `VaultView`.

A link is rewritten only when its meaning would change: it resolved (from its note) to X,
and after the change it would not resolve to X's new path (X renamed, merged away, or its
short name now ambiguous). Only the target characters change (`links.rewrite_targets`);
dangling links stay as written. Two styles, chosen by the caller:
- `alias_bare=False` (the `move` tool): the new full path, nothing else;
- `alias_bare=True` (merge, archive): a bare short link `[[loser]]` becomes
  `[[knowledge/winner/winner.md|loser]]`, so the sentence still reads the same; links with a
  path, an anchor or inside a table row keep exactly the bytes they had.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from reme_agent.engine.links import (
    Edge,
    Link,
    LinkResolver,
    extract_links,
    rewrite_targets,
    target_key,
)
from reme_agent.engine.parser import split_note
from reme_agent.engine.transaction import Transaction
from reme_agent.engine.view import VaultView
from reme_agent.errors import WriteConflict

__all__ = ["edge_keys", "plan_move", "retarget", "rewrite_links"]


def _in_table(text: str, pos: int) -> bool:
    start = text.rfind("\n", 0, pos) + 1
    return text[start:pos].lstrip().startswith("|")


def rewrite_links(body: str, source: str, new_source: str, before: LinkResolver,
                  after: LinkResolver, path_map: Mapping[str, str],
                  force: Iterable[str] = (), *, alias_bare: bool = True) -> tuple[str, int]:
    """`body` with every link whose target's meaning changes rewritten to its full new path.

    A link that resolved (from `source`) to X must resolve (from `new_source`, with
    `after`) to path_map.get(X, X); links to a path in `force` are rewritten even when they
    would still resolve (e.g. through a new alias). Returns (new body, links rewritten).
    """
    forced = set(force)
    count = 0

    def mapping(link: Link) -> str | None:
        nonlocal count
        was = before.resolve(link.target, source)
        if was is None:
            return None
        want = path_map.get(was, was)
        if was not in forced and after.resolve(link.target, new_source) == want:
            return None
        count += 1
        if (alias_bare and link.alias is None and link.anchor is None
                and "/" not in link.target and not _in_table(body, link.start)):
            return f"{want}|{link.target}"
        return want

    return rewrite_targets(body, mapping), count


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
    changed: dict[str, int] = {}
    for source, meta in view.notes.items():
        if source in excluded or not meta.links or (skip is not None and skip(source)):
            continue
        new_source = path_map.get(source, source)
        if not any(_needs(link.target, source, new_source, view.resolver, after, path_map,
                          forced) for link in meta.links):
            continue
        if immutable is not None and immutable(source):
            raise WriteConflict(f"{source!r} links to a file this change renames or removes, "
                                "and it is immutable.", "Leave these notes as they are.")
        parts = split_note(tx.read(source), source)
        new_body, n = rewrite_links(parts.body, source, new_source, view.resolver, after,
                                    path_map, forced, alias_bare=alias_bare)
        if new_body != parts.body:
            tx.write(source, parts.head + new_body)
            changed[source] = n
    return changed


def _needs(target: str, source: str, new_source: str, before: LinkResolver,
           after: LinkResolver, path_map: Mapping[str, str], forced: frozenset[str]) -> bool:
    was = before.resolve(target, source)
    if was is None:
        return False
    if was in forced:
        return True
    return after.resolve(target, new_source) != path_map.get(was, was)


def plan_move(tx: Transaction, view: VaultView, src: str, dst: str, *,
              relink_all: bool = False, skip: Callable[[str], bool] | None = None,
              immutable: Callable[[str], bool] | None = None) -> dict[str, int]:
    """Plan moving `src` to `dst` with every link the move changes rewritten (the moved
    note's own relative links included). `relink_all`: every link to the moved file gets
    its new full path (the `move` tool), else only the links that would stop resolving to
    it, in the `alias_bare` style. Returns {path after the move: links rewritten}."""
    path_map = {src: dst}
    changed = retarget(tx, view, path_map, view.after(path_map),
                       force=[src] if relink_all else [], skip=skip, immutable=immutable,
                       alias_bare=not relink_all)
    tx.move(src, dst)
    return {dst if p == src else p: n for p, n in changed.items()}


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
