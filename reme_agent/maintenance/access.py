"""Step 1, access-log aggregation: ring buffer + previous meta/access_log.json -> new file.

DESIGN §8 (access_log.json) and §9 (maintainer). Recall records hits in memory and flushes
them with a merging CAS write (`recall/access_log.py`); this step flushes this process's
buffer, then re-aggregates the file as of today: `hits_30d` is recomputed (it ages even
when nothing is read), days older than `keep_days` are pruned, and entries of files that no
longer exist are dropped. The file is only rewritten when an entry changed, under the store's
CAS edit like a flush, so a search process flushing at the same moment loses nothing.

`rename_entries` moves entries along when merge or an archive move renames a note, so a
merged node keeps the reading history of both.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import date, datetime
from typing import TYPE_CHECKING

from reme_agent.errors import NoteNotFound, NotText, WriteConflict
from reme_agent.maintenance.report import StepResult
from reme_agent.recall.access_log import ACCESS_LOG_PATH, merge_hits
from reme_agent.recall.signals import (
    AccessEntry,
    AccessLogSignal,
    dump_signal,
    iso_utc,
    load_signal_text,
    parse_moment,
)

if TYPE_CHECKING:
    from reme_agent.vault import Vault

log = logging.getLogger("reme_agent.maintenance")

__all__ = ["aggregate_access", "last_reads", "rename_entries"]



def _read(vault: Vault) -> str | None:
    """The file's text; None when it is missing or unreadable (derived data)."""
    try:
        return vault.store.read_text(ACCESS_LOG_PATH)
    except (NoteNotFound, NotText):
        return None


def _entries(text: str | None) -> dict[str, AccessEntry] | None:
    """The entries of the file text; None when missing or unusable."""
    if text is None:
        return None
    try:
        signal = load_signal_text("access_log", text)
    except ValueError:
        return None
    assert isinstance(signal, AccessLogSignal)
    return dict(signal.entries)


def _update(vault: Vault, change: Callable[[str | None], AccessLogSignal | None]) -> bool:
    """One CAS edit of the file (a search process flushing meanwhile makes it merge again
    on that version); `change` returns None for 'nothing to write'."""
    def edit(text: str | None) -> str | None:
        new = change(text)
        return None if new is None else dump_signal(new)

    return vault.store.cas_edit(ACCESS_LOG_PATH, edit, create=True).status == "written"


def aggregate_access(vault: Vault, *, today: date, existing: set[str], keep_days: int = 90,
                     dry_run: bool = False) -> StepResult:
    """Flush + re-aggregate meta/access_log.json (see the module docstring)."""
    result = StepResult("access", dry_run=dry_run)
    flushed = 0
    if not dry_run:
        flushed = vault.access_log.flush()
    summary: dict[str, object] = {}

    def change(text: str | None) -> AccessLogSignal | None:
        before = _entries(text)
        try:
            merged = merge_hits(text, {}, today=today, keep_days=keep_days)
        except ValueError as exc:  # another version: never clobber a newer writer's file
            result.warnings.append(f"{ACCESS_LOG_PATH} left alone: {exc}")
            return None
        gone = sorted(p for p in merged.entries if p not in existing)
        for path in gone:
            del merged.entries[path]
        summary.update(entries=len(merged.entries), pruned_paths=gone,
                       hits_30d=sum(e.hits_30d for e in merged.entries.values()))
        if text is None and not merged.entries:
            return None
        if before is not None and before == merged.entries:
            return None
        return merged

    wrote = change(_read(vault)) is not None if dry_run else _update(vault, change)
    result.found = {"flushed": flushed, **summary}
    if wrote:
        result.changed.append(ACCESS_LOG_PATH)
        result.actions.append({"action": "rewrite", "path": ACCESS_LOG_PATH})
    return result


def rename_entries(vault: Vault, mapping: Mapping[str, str]) -> bool:
    """Move access-log entries old path -> new path (merging into an existing entry)."""
    if not mapping:
        return False

    def change(text: str | None) -> AccessLogSignal | None:
        entries = _entries(text)
        if not entries or not any(p in entries for p in mapping):
            return None
        out = dict(entries)
        for old, new in mapping.items():
            entry = out.pop(old, None)
            if entry is not None:
                out[new] = _merge(out.get(new), entry)
        return AccessLogSignal(entries=dict(sorted(out.items())))

    try:
        return _update(vault, change)
    except WriteConflict as exc:  # history is a signal, not content: never fail a merge for it
        log.warning("access log rename failed: %s", exc)
        return False


def _merge(a: AccessEntry | None, b: AccessEntry) -> AccessEntry:
    if a is None:
        return b
    times = [t for t in (parse_moment(a.last_read), parse_moment(b.last_read)) if t is not None]
    last = max(times) if times else None
    days = sorted(set(a.hit_days) | set(b.hit_days))
    return AccessEntry(last_read=iso_utc(last) if last else a.last_read, hit_days=days,
                       hits_30d=max(a.hits_30d, b.hits_30d))


def last_reads(vault: Vault) -> dict[str, datetime]:
    """path -> last read time, straight from the file (the signal cache may lag a rename)."""
    entries = _entries(_read(vault)) or {}
    out = {}
    for path, entry in entries.items():
        moment = parse_moment(entry.last_read)
        if moment is not None:
            out[path] = moment
    return out
