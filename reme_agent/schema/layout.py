"""Vault layout and slugs (DESIGN §2): where daily notes, knowledge nodes and the rest live.

This is vault meaning, so it lives above the engine. Slugs are kebab-case, at most 60
characters, any script (Chinese allowed), and unique under `knowledge/`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from datetime import date
from pathlib import Path, PurePosixPath

DAILY = "daily"
KNOWLEDGE = "knowledge"
RESOURCE = "resource"
META = "meta"
AUDIT = "audit"
LAYERS = (KNOWLEDGE, DAILY, RESOURCE)
TOP_FOLDERS = (DAILY, KNOWLEDGE, RESOURCE, META, AUDIT)
SLUG_MAX = 60

_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_SLUG_DROP = re.compile(r"[^\w\s-]", re.UNICODE)
_SLUG_DASH = re.compile(r"[\s_-]+")


def init_layout(root: Path, daily: bool = True) -> list[str]:
    """Create the standard top folders (`daily=False`: not `daily/`, for a vault whose day
    notes live elsewhere); returns those that were new."""
    made = []
    for name in TOP_FOLDERS if daily else tuple(f for f in TOP_FOLDERS if f != DAILY):
        folder = root / name
        if not folder.exists():
            folder.mkdir(parents=True)
            made.append(name)
    return made


def slugify(text: str, max_len: int = SLUG_MAX) -> str:
    """Kebab-case slug keeping any script: 'JWT Key Rotation' -> 'jwt-key-rotation', '向量 检索' -> '向量-检索'."""
    norm = unicodedata.normalize("NFKC", text).strip().lower()
    norm = _SLUG_DROP.sub(" ", norm)
    slug = _SLUG_DASH.sub("-", norm).strip("-")
    if len(slug) > max_len:
        slug = slug[:max_len].rstrip("-")
    return slug or "note"


def is_slug(text: str) -> bool:
    return bool(text) and len(text) <= SLUG_MAX and slugify(text) == text


def knowledge_path(slug: str) -> str:
    return f"{KNOWLEDGE}/{slug}/{slug}.md"


def daily_path(day: date | str, slug: str) -> str:
    day_s = day.isoformat() if isinstance(day, date) else day
    if not _DATE_RE.match(day_s):
        raise ValueError(f"not a YYYY-MM-DD date: {day_s!r}")
    return f"{DAILY}/{day_s}/{slug}/{slug}.md"


def layer_of(path: str) -> str | None:
    """'knowledge', 'daily', 'resource', 'meta', 'audit' or None for anything else."""
    head = PurePosixPath(path).parts[0] if path else ""
    return head if head in TOP_FOLDERS else None


def is_record(path: str) -> bool:
    """A record of the past (an audit/ report, a meta/ signal): never rewritten by a change
    elsewhere, so a link there keeps saying what it said."""
    return layer_of(path) in (AUDIT, META)


def parse_daily_path(path: str) -> tuple[str, str] | None:
    """(date, slug) for a daily summary note path, else None."""
    parts = PurePosixPath(path).parts
    if len(parts) == 4 and parts[0] == DAILY and _DATE_RE.match(parts[1]) \
            and parts[3] == f"{parts[2]}.md":
        return parts[1], parts[2]
    return None


def workspace_materials(note: str, files: Iterable[str], under: str = "") -> list[str]:
    """What a daily workspace carries: every other file in its summary note's folder
    (`daily/<date>/<slug>/`, where `daily_attach` puts materials), sorted. The folder is the
    workspace's own: no other summary note can lie in it. `under`: the note lies below this
    folder prefix (an archive folder). [] when `note` is no workspace summary."""
    inner = note[len(under):] if under and note.startswith(under) else note
    if parse_daily_path(inner) is None:
        return []
    folder = note.rsplit("/", 1)[0] + "/"
    return sorted(f for f in files if f.startswith(folder) and f != note)

