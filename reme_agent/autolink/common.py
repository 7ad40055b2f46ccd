"""Shared pieces of auto-link: which notes it may write, the additive check, its audit notes.

DESIGN §5 (CAS, E-1: an additive edit keeps every edge by construction, and the code proves
it mechanically), §2 (daily / knowledge / resource), seed auto_link_design.md §1.2 and §3.

Decisions where DESIGN is silent:

- Sources L1 may write: knowledge notes, and daily summary notes whose `status` is
  `distilled` or `archived` (the daily note is closed, so its single author is done with it).
  Active daily notes, notes without a status under daily/, resource/, meta/ and audit/ are
  never written.
- Audit notes keep the names the seed gives them (`audit/<date>/auto_link.md`,
  `auto_link_l4.md`); `schema.audit.append_audit` accepts only kebab-case names, so the
  append is done here, with the same CAS retry.
"""

from __future__ import annotations

import datetime as _dt
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from reme_agent.engine.links import Edge, Link, edges_of, missing_edges
from reme_agent.errors import StampChanged, WriteConflict
from reme_agent.schema.layout import DAILY, KNOWLEDGE, layer_of, parse_daily_path

if TYPE_CHECKING:
    from reme_agent.vault import Vault

log = logging.getLogger("reme_agent.autolink")

CLOSED_DAILY = ("distilled", "archived")


class AdditiveCheckFailed(WriteConflict):
    """An auto-link edit changed more than the link markup it meant to add; nothing written."""

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(f"Refused auto-link write of {path!r}: {detail}; nothing was written.",
                         "This is a bug in the planned edit; the note is left as it was.")
        self.path = path
        self.detail = detail


@dataclass(frozen=True)
class Insertion:
    """Text inserted at offset `pos` of the old body."""

    pos: int
    text: str


def apply_insertions(old: str, insertions: Sequence[Insertion]) -> str:
    """The old text with every insertion placed (positions refer to the old text)."""
    pieces: list[str] = []
    last = 0
    for ins in sorted(insertions, key=lambda i: i.pos):
        pieces.append(old[last:ins.pos])
        pieces.append(ins.text)
        last = ins.pos
    pieces.append(old[last:])
    return "".join(pieces)


def check_insertions(path: str, old: str, new: str, insertions: Sequence[Insertion], *,
                     resolve: Callable[[str], str | None] | None = None,
                     allow_drop: frozenset[Edge] = frozenset(),
                     links: tuple[Sequence[Link], Sequence[Link]] | None = None) -> None:
    """Prove `new` is `old` plus exactly these insertions: remove them and compare.

    Works on `new` itself (not on a rebuilt copy), so a planner bug that changed any other
    character is caught. Then E-1: no existing edge is lost, except those in `allow_drop`
    (only the audited L3 predicate upgrade passes one). `links` may pass the already
    extracted (old, new) links; insertions never rewrite a link, so raw targets compare.
    """
    kept: list[str] = []
    cursor = 0  # in new
    shift = 0
    for ins in sorted(insertions, key=lambda i: i.pos):
        at = ins.pos + shift
        if at < cursor or new[at:at + len(ins.text)] != ins.text:
            raise AdditiveCheckFailed(path, f"expected {ins.text!r} at offset {at}")
        kept.append(new[cursor:at])
        cursor = at + len(ins.text)
        shift += len(ins.text)
    kept.append(new[cursor:])
    if "".join(kept) != old:
        raise AdditiveCheckFailed(path, "the text outside the added links differs from the old body")
    if links is not None:
        lost = edges_of(links[0], resolve) - edges_of(links[1], resolve) - allow_drop
    else:
        lost = missing_edges(old, new, resolve) - allow_drop
    if lost:
        raise AdditiveCheckFailed(path, f"existing links would be lost: {sorted(lost, key=str)}")


@dataclass(frozen=True)
class CasOutcome:
    status: Literal["written", "unchanged", "dry_run", "conflict"]
    redos: int


def cas_edit(vault: Vault, path: str, edit: Callable[[str], str | None], *,
             max_redos: int = 3, dry_run: bool = False) -> CasOutcome:
    """DESIGN §5 CAS: read + stamp, plan with `edit`, write only if the stamp still holds.

    `edit(text)` returns the new text or None (nothing to do) and raises to refuse. A changed
    stamp discards the plan and redoes it on the new text, at most `max_redos` times.
    """
    redos = 0
    while True:
        text, stamp = vault.store.read_stamped(path)
        new = edit(text)
        if new is None or new == text:
            return CasOutcome("unchanged", redos)
        if dry_run:
            return CasOutcome("dry_run", redos)
        try:
            vault.store.write_if_unchanged(path, new, stamp)
        except StampChanged:
            if redos >= max_redos:
                return CasOutcome("conflict", redos)
            redos += 1  # another writer got in between: discard the plan, redo on its text
            continue
        return CasOutcome("written", redos)


def audit_refusal(vault: Vault, job: str, path: str, why: str) -> str | None:
    """`audit/<date>/refused.md` entry for a write auto-link gave up; never raises."""
    from reme_agent.schema.audit import append_audit

    try:
        return append_audit(vault, "refused", f"{job}: {path}", f"- path: `{path}`\n- job: "
                            f"{job}\n\n{why}")
    except Exception as exc:  # the refusal stands even if its audit entry cannot be written
        log.warning("could not write the audit entry for %s: %s", path, exc)
        return None


def split_head(text: str) -> tuple[str, str]:
    """(frontmatter block, body) with head + body == text, without parsing the YAML.

    Finds the same boundaries as `parser.split_frontmatter` (``---`` first line, then the
    next ``---`` or ``...`` line; CRLF kept), for notes whose frontmatter values do not matter.
    """
    if not text.startswith("---"):
        return "", text
    nl = text.find("\n")
    if nl < 0 or text[:nl].rstrip("\r").rstrip(" \t") != "---":
        return "", text
    pos = nl + 1
    while pos < len(text):
        nl = text.find("\n", pos)
        end = len(text) if nl < 0 else nl
        if text[pos:end].rstrip("\r").rstrip(" \t") in ("---", "..."):
            cut = len(text) if nl < 0 else nl + 1
            return text[:cut], text[cut:]
        if nl < 0:
            break
        pos = nl + 1
    return "", text


def source_refusal(path: str, frontmatter: Mapping[str, Any]) -> str | None:
    """Why auto-link must not write `path`, or None when it may."""
    layer = layer_of(path)
    if layer == KNOWLEDGE:
        return None if path.lower().endswith(".md") else "not a Markdown note"
    if layer == DAILY:
        if parse_daily_path(path) is None:
            return "a daily material, not a daily note"
        status = frontmatter.get("status")
        if status in CLOSED_DAILY:
            return None
        return f"an open daily note (status {status or 'missing'}); linked once it is distilled"
    if layer is None:
        return "outside knowledge/ and daily/"
    return f"{layer}/ is never written by auto-link"


def append_report(vault: Vault, name: str, title: str, body: str, *,
                  now: _dt.datetime | None = None) -> str:
    """Append `## <time> — <title>` + `body` to `audit/<day>/<name>.md` under CAS; its path."""
    from reme_agent.schema.audit import append_audit

    return append_audit(vault, name, title, body, now=now)


def code_span(text: str) -> str:
    """`text` as one inline code span, so an audit note quoting a link adds no edge."""
    flat = " ".join(text.split())
    ticks = "`" * (max((len(r) for r in re.findall(r"`+", flat)), default=0) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{ticks}{pad}{flat}{pad}{ticks}"


def line_of(text: str, offset: int, first_line: int = 1) -> int:
    return first_line + text.count("\n", 0, offset)


def paragraph_at(text: str, start: int, end: int, limit: int = 1200) -> str:
    """The blank-line-delimited paragraph around [start, end), cut to about `limit` chars."""
    lo = text.rfind("\n\n", 0, start)
    lo = 0 if lo < 0 else lo + 2
    hi = text.find("\n\n", end)
    hi = len(text) if hi < 0 else hi
    if hi - lo > limit:
        lo = max(lo, start - limit // 2)
        hi = min(hi, end + limit // 2)
    return text[lo:hi].strip()
