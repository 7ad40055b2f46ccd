"""Daily tools: daily_read, daily_list, daily_write, daily_status (L4, DESIGN §2-§3).

A daily workspace is `daily/<YYYY-MM-DD>/<slug>/`: the summary note `<slug>.md` plus any
sibling materials. `daily_write` upserts the summary note with the default streaming
frontmatter; `daily_status` moves `status` one step along active -> distilled -> archived.

Decisions: only an active note takes new content (a distilled or archived one is history;
start a new slug); a note without `status` counts as active.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, Literal

from reme_agent.engine.parser import dump_note, split_note
from reme_agent.engine.view import note_meta
from reme_agent.errors import InvalidArgument, StampChanged
from reme_agent.schema.frontmatter import status_move_error
from reme_agent.schema.layout import DAILY, daily_path, is_slug, parse_daily_path, slugify
from reme_agent.toolkit.common import now_iso, parse_day
from reme_agent.toolkit.notes import check_write, edit_properties, ends_nl, written
from reme_agent.toolkit.results import ToolResult, tool

if TYPE_CHECKING:
    from reme_agent.vault import Vault

_MANAGED = ("lifecycle", "status")


@tool
def daily_write(vault: Vault, slug: str, body: str, date: str | None = None,
                title: str | None = None, description: str | None = None,
                tags: list[str] | None = None, origin_session_id: str | None = None,
                properties: dict[str, Any] | None = None,
                mode: Literal["append", "replace"] = "append", stamp: str | None = None) -> ToolResult:
    """Create or add to today's (or a given day's) daily note daily/<date>/<slug>/<slug>.md.

    A new note gets the default frontmatter (lifecycle streaming, scope instance, source
    auto, role observation, status active, created/updated). An existing active note gets
    the body appended (or replaced) and `updated` refreshed.

    Args:
        slug: Kebab-case topic name, e.g. "search-tuning" or "项目x-重构".
        body: Markdown to write (a "# title" heading is added to a new note if missing).
        date: Day as YYYY-MM-DD; default today.
        title: Title of a new note (default: the slug); replaces the title if given.
        description: One-sentence summary; replaces the description if given.
        tags: Tags to add, e.g. ["search"].
        origin_session_id: Id of the conversation the note comes from (originSessionId).
        properties: Extra frontmatter keys, e.g. {"role": "question"} (not lifecycle/status).
        mode: "append" adds the body after the existing one; "replace" replaces it (existing
            links must be kept).
        stamp: Optional stamp from `read` for an existing note.
    """
    if not body.strip():
        raise InvalidArgument("`body` is empty.", "Pass the Markdown to write.")
    if not is_slug(slug):
        raise InvalidArgument(f"{slug!r} is not a slug.", f"Use kebab-case, e.g. {slugify(slug)!r}.")
    day = parse_day(date, "date") if date else _dt.date.today()
    extra = dict(properties or {})
    bad = [k for k in _MANAGED if k in extra]
    if bad:
        raise InvalidArgument(f"`properties` may not set {', '.join(bad)}.",
                              "lifecycle is always streaming; change status with daily_status.")
    path = daily_path(day, slug)
    new = {"title": title, "description": description, "tags": tags,
           "originSessionId": origin_session_id, **extra}
    created: list[bool] = []

    def edit(text: str | None) -> str:
        new_text = _new_note(slug, body, new) if text is None else \
            _appended(path, text, body, new, mode)
        check_write(vault, path, text, new_text)
        created[:] = [text is None]
        return new_text

    # One CAS edit: a note created meanwhile by another writer is updated instead.
    done = vault.store.cas_edit(path, edit, stamp=stamp, create=True)
    assert done.stamp is not None and done.text is not None
    if done.status == "unchanged":
        return ToolResult({"path": path, "stamp": done.stamp, "created": False, "bytes":
                           len(done.text.encode("utf-8")), "warning": None, "mode": mode},
                          f"No change to {path} (stamp {done.stamp})")
    result = written(vault, path, done.stamp, done.text, created=created[0])
    return ToolResult(result.data | ({} if created[0] else {"mode": mode}), result.text)


@tool
def daily_read(vault: Vault, path: str) -> ToolResult:
    """Read one daily workspace: its summary note and the list of sibling materials.

    Args:
        path: The summary note or its folder, e.g. "daily/2026-11-28/search-tuning".
    """
    note = summary_path(path)
    text, stamp = vault.store.read_stamped(note)
    parts = split_note(text, note)
    folder = PurePosixPath(note).parent.as_posix()
    materials = [{"path": p, "size": vault.store.stat(p).size}
                 for p in vault.store.list(folder) if p != note]
    data = {"path": note, "stamp": stamp, "frontmatter": parts.frontmatter, "body": parts.body,
            "text": text, "materials": materials,
            "parse_error": str(parts.error) if parts.error else None}
    listing = "\n".join(f"  {m['path']} ({m['size']} bytes)" for m in materials) or "  (none)"
    return ToolResult(data, f"[{note} | stamp {stamp}]\n{text}\n\nMaterials:\n{listing}")


@tool
def daily_list(vault: Vault, start: str | None = None, end: str | None = None,
               status: Literal["active", "distilled", "archived"] | None = None,
               limit: int = 200) -> ToolResult:
    """List daily notes by date range and status, oldest first.

    Args:
        start: First day (YYYY-MM-DD, inclusive); omit for no lower bound.
        end: Last day (YYYY-MM-DD, inclusive); omit for no upper bound.
        status: Only notes with this status (a note without status counts as active).
        limit: Maximum number of notes returned (1-5000).
    """
    lo = parse_day(start, "start") if start else None
    hi = parse_day(end, "end") if end else None
    if lo and hi and lo > hi:
        raise InvalidArgument(f"start {lo} is after end {hi}.")
    if not 1 <= limit <= 5000:
        raise InvalidArgument(f"limit must be between 1 and 5000, got {limit}.")
    rows = vault.index_rows()
    items = []
    for note in _daily_notes(vault, lo, hi):
        fm = note_meta(vault.store, note, rows.get(note)).frontmatter
        st = fm.get("status") or "active"
        if status is None or st == status:
            day, slug = parse_daily_path(note) or ("", "")
            items.append({"path": note, "date": day, "slug": slug, "status": st,
                          "title": fm.get("title") or slug, "description": fm.get("description")})
    shown = items[:limit]
    text = "\n".join(f"{i['date']} [{i['status']}] {i['path']} — {i['title']}" for i in shown)
    return ToolResult({"count": len(items), "truncated": len(items) > limit, "notes": shown},
                      text or "No daily notes match.")


@tool
def daily_status(vault: Vault, path: str,
                 status: Literal["active", "distilled", "archived"],
                 stamp: str | None = None) -> ToolResult:
    """Move a daily note's status one step forward: active -> distilled -> archived.

    Moving back or skipping a step is refused.

    Args:
        path: The summary note or its folder, e.g. "daily/2026-11-28/search-tuning".
        status: The new status.
        stamp: Optional stamp from `read`; refused if the note changed since.
    """
    note = summary_path(path)
    text, stamp_now = vault.store.read_stamped(note)
    if stamp is not None and stamp != stamp_now:
        raise StampChanged(note, stamp, stamp_now)
    fm = split_note(text, note).frontmatter
    if fm.get("lifecycle") not in (None, "streaming"):
        raise InvalidArgument(f"{note!r} has lifecycle {fm['lifecycle']!r}; only streaming "
                              "notes have a status.")
    why = status_move_error(fm.get("status"), status)
    if why:
        raise InvalidArgument(f"Refused status change of {note!r}: {why}.")
    old = fm.get("status")
    if old == status:
        data = {"path": note, "old_status": old, "status": status, "changed": False,
                "stamp": stamp_now}
        return ToolResult(data, f"{note}: already {status}; nothing changed")
    result = edit_properties(vault, note, set_={"status": status, "updated": now_iso()},
                             stamp=stamp)
    data = {"path": note, "old_status": old or "active", "status": status, "changed": True,
            "stamp": result["stamp"]}
    return ToolResult(data, f"{note}: status {old or 'active'} -> {status} (stamp {result['stamp']})")


# -- helpers ------------------------------------------------------------------------------
def summary_path(path: str) -> str:
    """The summary note of a daily workspace, from the note or its folder path."""
    raw = path.strip().strip("/").replace("\\", "/")
    parts = PurePosixPath(raw).parts
    if len(parts) == 3 and parts[0] == DAILY:
        raw = f"{raw}/{parts[2]}.md"
    if parse_daily_path(raw) is None:
        raise InvalidArgument(f"{path!r} is not a daily workspace.",
                              "Use daily/<YYYY-MM-DD>/<slug> or its <slug>.md; see daily_list.")
    return raw


def _daily_notes(vault: Vault, lo: _dt.date | None, hi: _dt.date | None) -> list[str]:
    root = vault.root / DAILY
    if not root.is_dir():
        return []
    out = []
    for day_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        try:
            day = _dt.date.fromisoformat(day_dir.name)
        except ValueError:
            continue
        if (lo and day < lo) or (hi and day > hi):
            continue
        for slug_dir in sorted(p for p in day_dir.iterdir() if p.is_dir()):
            if (slug_dir / f"{slug_dir.name}.md").is_file():
                out.append(f"{DAILY}/{day_dir.name}/{slug_dir.name}/{slug_dir.name}.md")
    return out


def _new_note(slug: str, body: str, new: dict[str, Any]) -> str:
    """A new daily note: default streaming frontmatter, an H1 if the body has none."""
    now = now_iso()
    title = new.get("title") or slug
    fm: dict[str, Any] = {"title": title}
    fm |= {k: new[k] for k in ("description", "tags") if new.get(k)}
    fm |= {"lifecycle": "streaming", "scope": "instance", "source": "auto",
           "role": "observation", "status": "active", "created": now, "updated": now}
    if new.get("originSessionId"):
        fm["originSessionId"] = new["originSessionId"]
    fm |= {k: v for k, v in new.items() if k not in fm and k not in
           ("title", "description", "tags", "originSessionId")}
    text = body.strip("\n")
    if not text.lstrip().startswith("# "):
        text = f"# {title}\n\n{text}"
    return dump_note(fm, ends_nl(text))


def _appended(path: str, text: str, body: str, new: dict[str, Any], mode: str) -> str:
    """The active note `text` with `body` appended (or replacing it) and `updated` bumped."""
    parts = split_note(text, path)
    fm = parts.frontmatter
    if parts.error:
        raise InvalidArgument(f"{path!r} has malformed frontmatter: {parts.error}",
                              "Fix it with `write` (text=...) first.")
    if (fm.get("status") or "active") != "active":
        raise InvalidArgument(f"{path!r} is {fm['status']}; only active daily notes take new "
                              "content.", "Write to a new slug (e.g. add '-2') or another date.")
    fm = dict(fm)
    for key in ("title", "description"):
        if new.get(key):
            fm[key] = new[key]
    if new.get("tags"):
        old_tags = fm.get("tags") if isinstance(fm.get("tags"), list) else []
        fm["tags"] = list(dict.fromkeys([*old_tags, *new["tags"]]))
    if new.get("originSessionId") and not fm.get("originSessionId"):
        fm["originSessionId"] = new["originSessionId"]
    fm |= {k: v for k, v in new.items() if k not in
           ("title", "description", "tags", "originSessionId")}
    fm["updated"] = now_iso()
    merged = body if mode == "replace" else parts.body.rstrip("\n") + "\n\n" + body.strip("\n") + "\n"
    return dump_note(fm, ends_nl(merged))
