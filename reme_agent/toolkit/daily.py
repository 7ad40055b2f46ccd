"""Daily tools: daily_read, daily_list, daily_write, daily_status (L4, DESIGN §2-§3);
`daily_attach` (sibling materials) is `toolkit/materials.py`.

Two layouts, both supported (`schema.obsidian.detect_daily_layout` decides which one a
vault *writes*; both are always read and listed):

- reme-agent's workspaces: `daily/<YYYY-MM-DD>/<slug>/`, the summary note `<slug>.md` plus
  any sibling materials; `daily_write` upserts the summary note.
- Obsidian day notes: one note per day (`daily/2026-11-30.md`, or the folder and moment.js
  format of `.obsidian/daily-notes.json`). When a vault uses them, `daily_write` never
  starts a second, parallel `daily/<date>/<slug>/` system: it writes a section into the
  day's note, under the heading ``# <slug>`` (created at the end of the note when missing,
  after the template's text for a new day note), with the same CAS and E-1 rules; "append"
  adds to that section, "replace" replaces only that section.

`daily_status` moves `status` one step along active -> distilled -> archived. For an
Obsidian day note the status is the day note's own frontmatter `status` (one per day, as
the distiller distills a path): a distilled day note takes no new sections.

Decisions: only an active note takes new content (a distilled or archived one is history;
start a new slug); a note without `status` counts as active. New notes get the streaming
frontmatter (lifecycle, scope, source, role, status, created, updated); in an existing
person-kept day note only the keys a write changes are touched (`engine.fmedit`).
"""

from __future__ import annotations

import datetime as _dt
import re
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, Literal

from reme_agent.engine.fmedit import edit_frontmatter
from reme_agent.engine.parser import NoteParts, dump_note, normalize_eol, restore_eol, split_note
from reme_agent.errors import InvalidArgument, NoteExists, ReMeError, StampChanged
from reme_agent.schema.daynotes import section_body, section_names, with_section
from reme_agent.schema.frontmatter import status_move_error
from reme_agent.schema.layout import (
    DAILY,
    daily_path,
    is_slug,
    parse_daily_path,
    slugify,
    workspace_materials,
)
from reme_agent.schema.obsidian import DailyNotesLayout, detect_daily_layout, format_date
from reme_agent.toolkit.common import PAGE_STAMP, file_stamp, now_iso, parse_day
from reme_agent.toolkit.naming import note_path
from reme_agent.toolkit.notes import (
    check_new_keys,
    check_write,
    create_note,
    edit_properties,
    ends_nl,
    restyled,
    written,
)
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
    the body appended (or replaced) and `updated` refreshed. In a vault with Obsidian day
    notes (daily/<date>.md) the body goes into the day's note, under the heading "# <slug>".

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
    layout = daily_layout(vault)
    path = daily_path(day, slug) if layout is None else layout.path_of(day)
    new = {"title": title, "description": description, "tags": tags,
           "originSessionId": origin_session_id, **extra}
    created: list[bool] = []

    def edit(text: str | None) -> str:
        if layout is not None:
            new_text = _day_note_write(vault, layout, path, text, slug, body, new, mode)
        else:
            new_text = _new_note(slug, body, new) if text is None else \
                _appended(path, text, body, new, mode)
        new_text = restyled(vault, path, text, new_text)
        check_write(vault, path, text, new_text)
        created[:] = [text is None]
        return new_text

    if stamp is None and not vault.store.exists(path):
        new_text = edit(None)
        try:  # a new name may make other links ambiguous: `create_note` rewrites them too
            return written(vault, path, create_note(vault, path, new_text), new_text,
                           created=True)
        except NoteExists:
            pass  # created meanwhile by another writer: updated below instead
    if mode == "replace" and stamp is not None and stamp.startswith(PAGE_STAMP):
        raise InvalidArgument(f"Refused to replace the body of {path!r}: the stamp comes from "
                              "a partial read, so the lines you did not read would be lost.",
                              "Read the whole note first, or append (mode='append').")
    # One CAS edit: a note created meanwhile by another writer is updated instead.
    done = vault.store.cas_edit(path, edit, stamp=file_stamp(stamp), create=True)
    assert done.stamp is not None and done.text is not None
    if done.status == "unchanged":
        return ToolResult({"path": path, "stamp": done.stamp, "created": False, "bytes":
                           len(done.text.encode("utf-8")), "warning": None, "mode": mode},
                          f"No change to {path} (stamp {done.stamp})")
    result = written(vault, path, done.stamp, done.text, created=created[0],
                     verb="Appended to" if mode == "append" else None)
    return ToolResult(result.data | ({} if created[0] else {"mode": mode}), result.text)


@tool
def daily_read(vault: Vault, path: str) -> ToolResult:
    """Read one daily workspace: its summary note and the list of sibling materials.

    Args:
        path: The summary note or its folder, e.g. "daily/2026-11-28/search-tuning", or an
            Obsidian day note, e.g. "daily/2026-11-30.md" (or just "2026-11-30").
    """
    note, day_note = _daily_note(vault, path)
    text, stamp = vault.store.read_stamped(note)
    parts = split_note(text, note)
    # a workspace's materials share its folder; a day note's lie in a folder named like it
    # (`daily_attach`, toolkit/materials.py)
    folder = note[:-3] if day_note else PurePosixPath(note).parent.as_posix()
    found = vault.store.list(folder) if vault.store.is_dir(folder) else []
    carried = ([p for p in found if parse_daily_path(p) is None] if day_note
               else workspace_materials(note, found))   # what an archive move takes along
    materials = [{"path": p, "size": vault.store.stat(p).size} for p in carried]
    data = {"path": note, "stamp": stamp, "frontmatter": parts.frontmatter, "body": parts.body,
            "text": text, "materials": materials,
            "parse_error": str(parts.error) if parts.error else None}
    if day_note:
        data |= {"layout": "obsidian", "sections": section_names(normalize_eol(parts.body))}
    listing = "\n".join(f"  {m['path']} ({m['size']} bytes)" for m in materials) or "  (none)"
    return ToolResult(data, f"[{note} | stamp {stamp}]\n{text}\n\nMaterials:\n{listing}")


@tool
def daily_list(vault: Vault, start: str | None = None, end: str | None = None,
               status: Literal["active", "distilled", "archived"] | None = None,
               limit: int = 200) -> ToolResult:
    """List daily notes by date range and status, oldest first (Obsidian day notes too).

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
    for day, slug, note in _daily_notes(vault, lo, hi):
        fm = vault.note_meta(note, rows.get(note)).frontmatter
        st = fm.get("status") or "active"
        if status is None or st == status:
            item = {"path": note, "date": day, "slug": slug, "status": st,
                    "title": fm.get("title") or slug or PurePosixPath(note).stem,
                    "description": fm.get("description")}
            items.append(item if slug else item | {"layout": "obsidian"})
    items.sort(key=lambda i: (i["date"], i["path"]))
    shown = items[:limit]
    text = "\n".join(f"{i['date']} [{i['status']}] {i['path']} — {i['title']}" for i in shown)
    return ToolResult({"count": len(items), "truncated": len(items) > limit, "notes": shown},
                      text or "No daily notes match.")


@tool
def daily_status(vault: Vault, path: str,
                 status: Literal["active", "distilled", "archived"],
                 stamp: str | None = None) -> ToolResult:
    """Move a daily note's status one step forward: active -> distilled -> archived.

    Moving back or skipping a step is refused. An Obsidian day note has one status for the
    whole day (its frontmatter `status`).

    Args:
        path: The summary note or its folder, e.g. "daily/2026-11-28/search-tuning", or an
            Obsidian day note, e.g. "daily/2026-11-30.md".
        status: The new status.
        stamp: Optional stamp from `read`; refused if the note changed since.
    """
    note, _ = _daily_note(vault, path)
    text, stamp_now = vault.store.read_stamped(note)
    if stamp is not None and file_stamp(stamp) != stamp_now:
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


def daily_write_path(vault: Vault, date: str, slug: str) -> str:
    """The note `daily_write` writes for (date, slug): the workspace note, or the Obsidian
    day note its section goes into (ValueError for a bad date)."""
    layout = daily_layout(vault)
    if layout is None:
        return daily_path(date, slug)
    return layout.path_of(_dt.date.fromisoformat(date))


def entry_body(vault: Vault, path: str, text: str, slug: str | None) -> str:
    """What a task's daily entry holds now: a workspace note's body, or (in an Obsidian day
    note) the content of its ``# <slug>`` section ("" when there is none yet)."""
    body = split_note(text, path).body
    if parse_daily_path(path) is not None or not slug or not is_daily_note(vault, path):
        return body
    return section_body(normalize_eol(body), slug) or ""


def daily_layout(vault: Vault) -> DailyNotesLayout | None:
    """The Obsidian day-note layout this vault writes, or None (reme-agent workspaces)."""
    return detect_daily_layout(vault.root)


def _daily_note(vault: Vault, path: str) -> tuple[str, bool]:
    """(summary note or day note, is an Obsidian day note) for a daily tool's `path`."""
    try:
        return summary_path(path), False
    except InvalidArgument:
        pass
    layout = daily_layout(vault) or DailyNotesLayout("daily")
    note = note_path(vault, path)
    if layout.date_of(note) is not None or DailyNotesLayout("daily").date_of(note) is not None:
        return note, True
    raise InvalidArgument(f"{path!r} is not a daily note.",
                          "Use daily/<YYYY-MM-DD>/<slug> (or its <slug>.md), an Obsidian day "
                          "note such as daily/2026-11-30.md, or see daily_list.")


def is_daily_note(vault: Vault, path: str) -> bool:
    """A daily summary note or an Obsidian day note (what the synchronizer may write)."""
    if parse_daily_path(path) is not None:
        return True
    layout = daily_layout(vault)
    return layout is not None and layout.date_of(path) is not None


def _daily_notes(vault: Vault, lo: _dt.date | None,
                 hi: _dt.date | None) -> list[tuple[str, str, str]]:
    """(date, slug or "", path) of every daily note in range: workspaces and day notes."""
    out = []
    root = vault.root / DAILY
    for day_dir in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        try:
            day = _dt.date.fromisoformat(day_dir.name)
        except ValueError:
            continue
        if (lo and day < lo) or (hi and day > hi):
            continue
        for slug_dir in sorted(p for p in day_dir.iterdir() if p.is_dir()):
            if (slug_dir / f"{slug_dir.name}.md").is_file():
                out.append((day_dir.name, slug_dir.name,
                            f"{DAILY}/{day_dir.name}/{slug_dir.name}/{slug_dir.name}.md"))
    layouts = {DailyNotesLayout(DAILY)}  # daily/<date>.md is a day note in every vault
    if (found := daily_layout(vault)) is not None:
        layouts.add(DailyNotesLayout(found.folder, found.format))
    seen = {path for _, _, path in out}
    for layout in layouts:
        if layout.folder and not vault.store.is_dir(layout.folder):
            continue
        for path in vault.store.list(layout.folder, recursive="/" in layout.format):
            day = layout.date_of(path)
            if day is None or path in seen or (lo and day < lo) or (hi and day > hi):
                continue
            seen.add(path)
            out.append((day.isoformat(), "", path))
    return out


def _default_frontmatter(new: dict[str, Any], title: str | None) -> dict[str, Any]:
    """The streaming frontmatter of a new daily note (title first when given)."""
    check_new_keys(new)
    now = now_iso()
    fm: dict[str, Any] = {"title": title} if title else {}
    fm |= {k: new[k] for k in ("description", "tags") if new.get(k)}
    fm |= {"lifecycle": "streaming", "scope": "instance", "source": "auto",
           "role": "observation", "status": "active", "created": now, "updated": now}
    if new.get("originSessionId"):
        fm["originSessionId"] = new["originSessionId"]
    fm |= {k: v for k, v in new.items() if k not in fm and k not in
           ("title", "description", "tags", "originSessionId")}
    return fm


def _new_note(slug: str, body: str, new: dict[str, Any]) -> str:
    """A new daily note: default streaming frontmatter, an H1 if the body has none."""
    title = new.get("title") or slug
    fm = _default_frontmatter(new, title)
    text = body.strip("\n")
    if not text.lstrip().startswith("# "):
        text = f"# {title}\n\n{text}"
    return dump_note(fm, ends_nl(text))


def _appended(path: str, text: str, body: str, new: dict[str, Any], mode: str) -> str:
    """The active note `text` with `body` appended (or replacing it) and `updated` bumped;
    only the frontmatter lines of the keys that change are rewritten, and the note keeps
    its line ending."""
    parts, changes = _update_of(path, text, new, day_note=False)
    old_body = normalize_eol(parts.body)
    merged = body if mode == "replace" else old_body.rstrip("\n") + "\n\n" + body.strip("\n") + "\n"
    new_body = restore_eol(ends_nl(normalize_eol(merged)), parts.eol)
    return edit_frontmatter(parts.with_body(new_body), changes, path=path)


# -- Obsidian day notes ---------------------------------------------------------------------
def _update_of(path: str, text: str, new: dict[str, Any], *,
               day_note: bool) -> tuple[NoteParts, dict[str, Any]]:
    """(the note cut, the frontmatter changes) of a write into an existing active daily
    note: `updated` bumped, tags added, the first session id kept, extra keys set; a
    workspace note also takes a new title/description (a day note has no per-task title)."""
    parts = split_note(text, path)
    fm = parts.frontmatter
    if parts.error:
        raise InvalidArgument(f"{path!r} has malformed frontmatter: {parts.error}",
                              "Fix it in an editor (or with `write` text=...) first.")
    check_new_keys(new, keep=fm)
    if (fm.get("status") or "active") != "active":
        if day_note:
            raise InvalidArgument(f"The day note {path!r} is {fm['status']}; only an active "
                                  "day note takes new sections.", "Write to another date.")
        raise InvalidArgument(f"{path!r} is {fm['status']}; only active daily notes take new "
                              "content.", "Write to a new slug (e.g. add '-2') or another date.")
    changes: dict[str, Any] = {} if day_note else \
        {k: new[k] for k in ("title", "description") if new.get(k)}
    if new.get("tags"):
        old_tags = fm.get("tags") if isinstance(fm.get("tags"), list) else []
        changes["tags"] = list(dict.fromkeys([*old_tags, *new["tags"]]))
    if new.get("originSessionId") and not fm.get("originSessionId"):
        changes["originSessionId"] = new["originSessionId"]
    changes |= {k: v for k, v in new.items() if k not in
                ("title", "description", "tags", "originSessionId")}
    changes["updated"] = now_iso()
    return parts, changes


def _day_note_write(vault: Vault, layout: DailyNotesLayout, path: str, text: str | None,
                    slug: str, body: str, new: dict[str, Any], mode: str) -> str:
    """The day note's new text with `body` in its ``# <slug>`` section (see the module doc)."""
    if text is None:
        start = _template_text(vault, layout, path)
        parts = split_note(start, path)
        fm = _default_frontmatter(new, title=None)
        merged = with_section(normalize_eol(parts.body), slug, body, mode)
        return edit_frontmatter(parts.with_body(restore_eol(merged, parts.eol)),
                                {k: v for k, v in fm.items() if k not in parts.frontmatter},
                                path=path)
    parts, changes = _update_of(path, text, new, day_note=True)
    merged = with_section(normalize_eol(parts.body), slug, body, mode)
    return edit_frontmatter(parts.with_body(restore_eol(merged, parts.eol)), changes,
                            path=path)


def _template_text(vault: Vault, layout: DailyNotesLayout, path: str) -> str:
    """The text a new day note starts with: Obsidian's template (``{{date}}``, ``{{time}}``,
    ``{{title}}`` and ``{{date:FORMAT}}`` filled in, as Obsidian does), else nothing."""
    if not layout.template:
        return ""
    name = layout.template if layout.template.lower().endswith(".md") else layout.template + ".md"
    try:
        raw = vault.store.read_text(name)
    except ReMeError:
        return ""  # a missing or unreadable template: Obsidian starts an empty note too
    day = layout.date_of(path) or _dt.date.today()
    now = _dt.datetime.now()

    def fill(match: re.Match[str]) -> str:
        kind, fmt = match.group(1), match.group(2)
        if kind == "title":
            return PurePosixPath(path).stem
        moment = day if kind == "date" else now
        if fmt:
            return format_date(fmt, moment if isinstance(moment, _dt.date) else day)
        return format_date(layout.format, day) if kind == "date" else now.strftime("%H:%M")

    return re.sub(r"\{\{\s*(date|time|title)\s*(?::([^}]*))?\}\}", fill, raw)
