"""The `recent` tool: notes changed or read lately, for an agent starting a session (L4).

Two sources, no index needed: the file's mtime (a change; "created" when the note's
`created` property falls in the timeframe, else "edited") and the access log
`meta/access_log.json` (a "read": the note was returned by a search; the log is flushed
every few minutes and at exit, so a search of the last minutes in another process may not
show yet). `audit/` and `meta/` are left out unless `folder` names them: reports about the
vault are not what a session starts from.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import TYPE_CHECKING, Any

from reme_agent.errors import InvalidArgument
from reme_agent.recall.signals import parse_moment
from reme_agent.schema.layout import AUDIT, META
from reme_agent.toolkit.common import in_folder, norm_folder, short
from reme_agent.toolkit.results import ToolResult, tool

if TYPE_CHECKING:
    from reme_agent.vault import Vault

_SPAN = re.compile(r"^\s*(\d+)\s*([mhdw])\s*$", re.IGNORECASE)
_UNIT = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


@tool
def recent(vault: Vault, timeframe: str = "7d", folder: str = "", limit: int = 20) -> ToolResult:
    """Notes changed or read lately, newest first: a place to start a session from.

    Each note says what happened last (created, edited, or read: returned by a search) and
    when.

    Args:
        timeframe: How far back: "24h", "7d", "2w", "today", or a day such as "2026-11-25" (from its start).
        folder: Only notes under this folder, e.g. "knowledge"; "" for the whole vault.
        limit: Maximum number of notes returned (1-200).
    """
    if not 1 <= limit <= 200:
        raise InvalidArgument(f"limit must be 1-200, got {limit}.")
    now = _dt.datetime.now().astimezone()
    since = parse_timeframe(timeframe, now)
    base = norm_folder(vault, folder)
    hidden = () if base.split("/")[0] in (AUDIT, META) else (AUDIT + "/", META + "/")
    reads = vault.signals.last_hits() or {}
    rows = vault.index_rows()
    exts = tuple(e.lower() for e in vault.settings.index.extensions)
    items = []
    for path, size, mtime_ns in vault.store.scan(exts, skipped=[]):
        if not in_folder(path, base) or path.startswith(hidden):
            continue
        changed = _dt.datetime.fromtimestamp(mtime_ns / 1e9).astimezone()
        read = reads.get(path)
        events = []
        if changed >= since:
            meta = vault.note_meta(path, rows.get(path), (size, mtime_ns))
            born = parse_moment(meta.frontmatter.get("created"))
            events.append(("created" if born and born >= since else "edited", changed, meta))
        if read is not None and read >= since:
            events.append(("read", read.astimezone(), None))
        if events:
            items.append(_item(vault, path, rows, events, size, mtime_ns))
    items.sort(key=lambda i: (i["when"], i["path"]), reverse=True)
    data = {"since": since.isoformat(timespec="seconds"), "timeframe": timeframe,
            "folder": base, "count": len(items), "truncated": len(items) > limit,
            "notes": items[:limit]}
    return ToolResult(data, _text(data))


def parse_timeframe(value: str, now: _dt.datetime) -> _dt.datetime:
    """The moment a timeframe starts: "7d" before `now`, or a day's local midnight."""
    text = (value or "").strip().lower()
    if text in ("today", "yesterday"):
        day = now.date() - _dt.timedelta(days=1 if text == "yesterday" else 0)
        return _dt.datetime.combine(day, _dt.time(), now.tzinfo)
    if m := _SPAN.match(text):
        try:
            return now - _dt.timedelta(**{_UNIT[m.group(2)]: int(m.group(1))})
        except OverflowError:  # "99999999d": further back than dates go, i.e. everything
            return _dt.datetime.min.replace(tzinfo=_dt.UTC)
    try:
        moment = _dt.datetime.fromisoformat(text)
    except ValueError:
        raise InvalidArgument(f"timeframe {value!r} is not understood.",
                              'Use e.g. "24h", "7d", "2w", "today" or a day "2026-11-25".') from None
    return moment if moment.tzinfo else moment.replace(tzinfo=now.tzinfo)


def _item(vault: Vault, path: str, rows: dict[str, Any], events: list[tuple[str, Any, Any]],
          size: int, mtime_ns: int) -> dict[str, Any]:
    meta = next((m for _, _, m in events if m is not None), None) or \
        vault.note_meta(path, rows.get(path), (size, mtime_ns))
    kind, when, _ = max(events, key=lambda e: e[1])
    desc = meta.frontmatter.get("description")
    return {"path": path, "title": meta.title, "event": kind,
            "when": when.isoformat(timespec="seconds"),
            "description": short(desc, 120) if isinstance(desc, str) else None,
            "events": [{"event": k, "when": w.isoformat(timespec="seconds")}
                       for k, w, _ in sorted(events, key=lambda e: e[1], reverse=True)]}


def _text(data: dict[str, Any]) -> str:
    where = f" under {data['folder']}/" if data["folder"] else ""
    since = data["since"][:16].replace("T", " ")
    if not data["notes"]:
        return f"No notes changed or read{where} since {since} ({data['timeframe']})."
    shown = len(data["notes"])
    head = (f"Recent activity{where} since {since} ({data['timeframe']}), newest first: "
            + (f"{shown} of {data['count']} notes" if data["truncated"] else f"{shown} notes"))
    lines = [head]
    for n in data["notes"]:
        also = [e["event"] for e in n["events"][1:]]
        what = n["event"] + (f" (also {', '.join(also)})" if also else "")
        title = f" \"{n['title']}\"" if n["title"] else ""
        lines.append(f"- {n['when'][:16].replace('T', ' ')}  {what}: {n['path']}{title}"
                     + (f" — {n['description']}" if n["description"] else ""))
    return "\n".join(lines)
