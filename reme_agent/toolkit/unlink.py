"""`link_remove`: the one explicit, audited way to take a link out of a note (DESIGN §5).

Every other rewrite must keep all outbound links (E-1), so without this no tool could remove
a wrong link. Here the caller names each link and gives a reason; exactly those links go
(the removal is checked against the edges before and after), the note is written under CAS,
and `audit/<date>/unlinked.md` records the note, the links, the reason and who asked.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from reme_agent.engine.links import Link, missing_edges, remove_links, target_key
from reme_agent.engine.parser import split_note
from reme_agent.errors import InvalidArgument
from reme_agent.schema.audit import append_audit
from reme_agent.toolkit.actor import current_actor
from reme_agent.toolkit.common import file_stamp
from reme_agent.toolkit.policy import check_change
from reme_agent.toolkit.results import ToolResult, tool

if TYPE_CHECKING:
    from collections.abc import Callable

    from reme_agent.vault import Vault

_NAMED_RE = re.compile(r"^\s*(?:([A-Za-z_][A-Za-z0-9_]*)\s*::\s*)?"
                       r"(?:\[\[([^\[\]|#^]+)(?:[#^][^\[\]|]*)?(?:\|[^\[\]]*)?\]\]|([^\[\]|]+?))\s*$")

Key = tuple[str, "str | None"]


@tool
def link_remove(vault: Vault, path: str, links: list[str], reason: str,
                stamp: str | None = None) -> ToolResult:
    """Remove named [[links]] from a note on purpose, with a reason (audited).

    The only way to drop a link: every other rewrite must keep all links. Name each link as
    "[[target]]" (a bare link) or "predicate:: [[target]]"; all its occurrences go. A bare
    link becomes its shown text; a predicate link is removed with its separator. The note,
    links, reason and caller are recorded in audit/<date>/unlinked.md.

    Args:
        path: Vault-relative path of the note, e.g. "knowledge/bm25/bm25.md".
        links: The links to remove, e.g. ["[[Old project]]", "owner:: [[王芳]]"].
        reason: Why they go (kept in the audit note), e.g. "owner changed to 李雷".
        stamp: Optional stamp from `read`; the change is refused if the note changed since.
    """
    norm = vault.store.normalize(path)
    check_change(vault, norm, "write", exists=True, want="note")
    if not reason.strip():
        raise InvalidArgument("`reason` is empty.", "Say why the links go; it is audited.")
    if not links:
        raise InvalidArgument("`links` is empty.", 'Pass e.g. ["[[Old project]]"].')
    resolver = vault.view().resolver
    resolve: Callable[[str], str | None] = lambda t: resolver.resolve(t, norm)  # noqa: E731
    wanted = {_key(_parse(entry), resolve) for entry in links}
    removed: list[Link] = []

    def edit(text: str) -> str | None:
        parts = split_note(text, norm)
        body, gone = remove_links(parts.body, lambda link: _key(
            (link.predicate, link.target), resolve) in wanted)
        found = {_key((link.predicate, link.target), resolve) for link in gone}
        if found != wanted:
            raise InvalidArgument(f"{norm!r} has no link {_missing(wanted - found)}; nothing "
                                  "was changed.", "Its links: " + _listing(parts.body))
        dropped = {_key((p, t), resolve) for t, p in missing_edges(parts.body, body, resolve)}
        if not dropped <= wanted:  # pragma: no cover - remove_links touches only chosen links
            raise InvalidArgument(f"Refused: removing {links} would also drop {dropped - wanted}.")
        removed[:] = gone
        return parts.head + body

    result = vault.store.cas_edit(norm, edit, stamp=file_stamp(stamp))
    shown = sorted({_edge_text(link) for link in removed})
    audit = append_audit(vault, "unlinked", f"{current_actor.get()}: {norm}",
                         f"- note: `{norm}`\n- removed: {', '.join(_code(s) for s in shown)}\n"
                         f"- reason: {' '.join(reason.split())}\n- by: {current_actor.get()}\n"
                         f"- stamp: {result.stamp}")
    warning = vault.try_refresh([norm])
    data = {"path": norm, "stamp": result.stamp, "removed": shown,
            "occurrences": len(removed), "audit": audit, "warning": warning}
    text = (f"Removed {len(removed)} link(s) from {norm}: {', '.join(shown)} (stamp "
            f"{result.stamp}); recorded in {audit}")
    return ToolResult(data, text + (f"; {warning}" if warning else ""))


def _parse(entry: str) -> tuple[str | None, str]:
    m = _NAMED_RE.match(entry or "")
    target = (m.group(2) or m.group(3)).strip() if m else ""
    if not target:
        raise InvalidArgument(f"Cannot read {entry!r} as a link.",
                              'Name it as "[[target]]" or "predicate:: [[target]]".')
    return m.group(1), target


def _key(named: tuple[str | None, str], resolve: Callable[[str], str | None]) -> Key:
    predicate, target = named
    hit = resolve(target)
    return (hit if hit else "\0" + target_key(target), predicate)


def _edge_text(link: Link) -> str:
    return f"{link.predicate}:: [[{link.target}]]" if link.predicate else f"[[{link.target}]]"


def _code(text: str) -> str:
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _missing(keys: set[Key]) -> str:
    return ", ".join(sorted(f"{p}:: [[{t.lstrip(chr(0))}]]" if p else f"[[{t.lstrip(chr(0))}]]"
                            for t, p in keys))


def _listing(body: str) -> str:
    from reme_agent.engine.links import extract_links

    seen = sorted({_edge_text(link) for link in extract_links(body)})
    return ", ".join(seen) if seen else "(none)"
