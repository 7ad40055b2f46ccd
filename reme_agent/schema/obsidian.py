"""What an Obsidian vault says about itself in `.obsidian/` (DESIGN §2): daily notes, excluded files.

This is vault meaning, so it lives above the engine; and `.obsidian/` belongs to Obsidian, so
no *tool* may touch it: this module alone reads two of its files, and `init` alone (asked,
with the user's consent) merges two folders into one key of `app.json`.

Daily notes. Obsidian's core Daily notes plugin keeps its settings in
``.obsidian/daily-notes.json``: ``folder`` (vault-relative, "" = the vault root),
``format`` (a moment.js date format, default ``YYYY-MM-DD``; ``/`` in it makes sub-folders) and
``template`` (a note whose text starts each new day note). `detect_daily_layout` decides
which layout a vault uses:

1. the Periodic Notes community plugin is enabled (``periodic-notes`` in
   ``.obsidian/community-plugins.json``) with its daily notes on: the folder and format in
   its ``.obsidian/plugins/periodic-notes/data.json`` (``daily``, or in 1.x the active
   calendar set's ``day``), as the plugin then makes the day notes;
2. else ``.obsidian/daily-notes.json`` exists: its folder and format;
3. else files ``daily/YYYY-MM-DD.md`` exist (DESIGN §2): folder ``daily``;
4. else, in a vault Obsidian has opened (``.obsidian/`` exists), ``YYYY-MM-DD.md`` files at
   the root (Obsidian's defaults);
5. else None: reme-agent's own ``daily/<date>/<slug>/<slug>.md`` workspaces.

Dates are formatted and parsed with the moment.js tokens a daily-note format uses (English
names, as moment's default locale); a file is a day note when its path parses *and*
formats back to itself.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import logging
import os
import re
import stat
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import regex

from reme_agent.engine.atomic import replaced

log = logging.getLogger("reme_agent.schema")

__all__ = [
    "DailyNotesLayout",
    "add_excluded_folders",
    "detect_daily_layout",
    "excluded_folders",
    "format_date",
    "parse_date",
]

OBSIDIAN_DIR = ".obsidian"
DAILY_SETTINGS = "daily-notes.json"
APP_SETTINGS = "app.json"
PERIODIC_PLUGIN = "periodic-notes"
PERIODIC_SOURCE = "the Periodic Notes plugin (.obsidian/plugins/periodic-notes/data.json)"
DEFAULT_FORMAT = "YYYY-MM-DD"
_MAX_SETTINGS_BYTES = 256 * 1024
_ISO_NAME = re.compile(r"^\d{4}-\d{2}-\d{2}\.md$")


@dataclass(frozen=True)
class DailyNotesLayout:
    """Where Obsidian keeps day notes: `folder` ("" = root) + moment `format` + `.md`."""

    folder: str = ""
    format: str = DEFAULT_FORMAT
    template: str | None = None
    source: str = DAILY_SETTINGS  # what the layout was read from (for messages and docs)

    def path_of(self, day: _dt.date) -> str:
        """The vault path of the day note for `day`."""
        name = f"{format_date(self.format, day)}.md"
        return f"{self.folder}/{name}" if self.folder else name

    def date_of(self, path: str) -> _dt.date | None:
        """The day of a day-note path, or None when `path` is not one."""
        prefix = f"{self.folder}/" if self.folder else ""
        if not path.startswith(prefix) or not path.lower().endswith(".md"):
            return None
        day = parse_date(self.format, path[len(prefix):-3])
        return day if day is not None and self.path_of(day) == path else None


# -- reading Obsidian's settings ---------------------------------------------------------
def _read_json(path: Path) -> dict[str, Any] | None:
    """A small JSON settings object, or None (missing, not a regular file, too big, invalid)."""
    data = _read_json_value(path)
    return data if isinstance(data, dict) else None


def _read_json_value(path: Path) -> Any:
    """A small JSON settings file's value, or None (missing, not a regular file, too big,
    invalid).

    Opened non-blocking and checked with fstat, so a FIFO planted as a settings file never
    blocks a tool."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_SETTINGS_BYTES:
            return None
        try:
            data = json.loads(fh.read(_MAX_SETTINGS_BYTES + 1).decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            return None
    return data


def _clean_folder(raw: Any) -> str:
    folder = str(raw or "").strip().replace("\\", "/").strip("/")
    parts = [p for p in folder.split("/") if p not in ("", ".")]
    if any(p == ".." or p.startswith(".") for p in parts):
        return ""  # never a folder outside the vault or a hidden one
    return "/".join(parts)


def _layout(settings: dict[str, Any], source: str) -> DailyNotesLayout:
    fmt = str(settings.get("format") or "").strip() or DEFAULT_FORMAT
    template = str(settings.get("template") or settings.get("templatePath") or "").strip() \
        or None
    return DailyNotesLayout(_clean_folder(settings.get("folder")), fmt, template, source)


def _periodic_daily(root: Path) -> dict[str, Any] | None:
    """Periodic Notes' daily settings when the plugin is enabled with daily notes on."""
    enabled = _read_json_value(root / OBSIDIAN_DIR / "community-plugins.json")
    if not isinstance(enabled, list) or PERIODIC_PLUGIN not in enabled:
        return None
    data = _read_json(root / OBSIDIAN_DIR / "plugins" / PERIODIC_PLUGIN / "data.json") or {}
    daily = data.get("daily")
    sets = data.get("calendarSets")
    if isinstance(sets, list):  # 1.x: calendar sets, one of them active
        live = [c for c in sets if isinstance(c, dict)]
        active = next((c for c in live if c.get("id") == data.get("activeCalendarSet")),
                      live[0] if live else {})
        daily = active.get("day")
    if isinstance(daily, dict) and daily.get("enabled") is True:
        return daily
    return None


def detect_daily_layout(root: Path) -> DailyNotesLayout | None:
    """The Obsidian daily-note layout of the vault at `root`, or None (see the module doc)."""
    periodic = _periodic_daily(root)
    if periodic is not None:
        return _layout(periodic, PERIODIC_SOURCE)
    settings = _read_json(root / OBSIDIAN_DIR / DAILY_SETTINGS)
    if settings is not None:
        return _layout(settings, DAILY_SETTINGS)
    daily = root / "daily"
    if daily.is_dir() and any(_ISO_NAME.match(p.name) and p.is_file() for p in daily.iterdir()):
        return DailyNotesLayout("daily", source="daily/YYYY-MM-DD.md files")
    if (root / OBSIDIAN_DIR).is_dir() and any(
            _ISO_NAME.match(p.name) and p.is_file() for p in root.iterdir()):
        return DailyNotesLayout("", source="YYYY-MM-DD.md files at the vault root")
    return None


# -- new link format (app.json newLinkFormat) ----------------------------------------------
LINK_FORMATS = {"shortest": "shortest", "absolute": "path", "relative": "path"}
"""Obsidian's "New link format" -> ours. We write no relative links (`[[../x]]` breaks when
the linking note moves); a vault set to relative gets full vault paths, which Obsidian
resolves as well and which never need rewriting when the source moves."""


def link_style(root: Path) -> str | None:
    """Our link style for the vault's `newLinkFormat` in .obsidian/app.json; None when
    Obsidian has not set one (its default is shortest)."""
    data = _read_json(root / OBSIDIAN_DIR / APP_SETTINGS) or {}
    return LINK_FORMATS.get(str(data.get("newLinkFormat", "")))


# -- excluded files (app.json userIgnoreFilters) -------------------------------------------
def excluded_folders(root: Path) -> list[str]:
    """Obsidian's "Excluded files" (`userIgnoreFilters` in .obsidian/app.json)."""
    data = _read_json(root / OBSIDIAN_DIR / APP_SETTINGS) or {}
    got = data.get("userIgnoreFilters")
    return [x for x in got if isinstance(x, str)] if isinstance(got, list) else []   # not `None`


_excluded_cache: dict[Path, tuple[tuple[int, int], Callable[[str], bool] | None]] = {}


def excluded_matcher(root: Path) -> Callable[[str], bool] | None:
    """path -> True for Obsidian's "Excluded files" (None: nothing excluded).

    A filter `/.../` is a regular expression searched in the path; anything else is a path
    prefix (`Templates/`, `Templates` and `/Templates` all exclude the folder), as Obsidian
    applies them. Kept per vault until app.json's size or mtime changes (a search asks every
    time; Obsidian may change it while we run). An invalid regex is skipped."""
    target = root / OBSIDIAN_DIR / APP_SETTINGS
    try:
        st = target.stat()
        key = (st.st_size, st.st_mtime_ns)
    except OSError:
        key = (-1, -1)
    cached = _excluded_cache.get(root)
    if cached is not None and cached[0] == key:
        return cached[1]
    matcher = _matcher(excluded_folders(root)) if key != (-1, -1) else None
    _excluded_cache[root] = (key, matcher)
    return matcher


_MAX_FILTERS = 1000
_MAX_PATTERN_CHARS = 1000
_REGEX_TIMEOUT_S = 0.05
"""Bounds on what app.json may ask of every search: a filter list or pattern past these is
cut (so is a pattern whose counted repeats multiply past `_MAX_REPEATS`), and a pattern
that runs longer than this on one path (catastrophic backtracking, e.g. `/(a+)+$/`) is
dropped for the rest of the process, with one warning."""


_MAX_REPEATS = 10_000
_COUNT_RE = re.compile(r"\{(\d*)(?:,(\d*))?\}")


def _repeat_product(pattern: str) -> int:
    """The product of a pattern's counted repeats (`{600}`, `{2,9}`): compiling costs about
    that much (`(?:x{6000}){600}` took 1.5 s, `(?:x{60000}){60000}` did not finish), and no
    timeout covers compiling."""
    product = 1
    for m in _COUNT_RE.finditer(pattern):
        product *= max(1, int(m.group(2) or m.group(1) or 1))
        if product > _MAX_REPEATS:
            break
    return product


def _matcher(filters: list[str]) -> Callable[[str], bool] | None:
    prefixes: list[str] = []
    patterns: list[regex.Pattern[str]] = []
    for raw in filters[:_MAX_FILTERS]:
        text = unicodedata.normalize("NFC", raw.strip())
        if len(text) > 2 and text.startswith("/") and text.endswith("/"):
            if len(text) > _MAX_PATTERN_CHARS or _repeat_product(text) > _MAX_REPEATS:
                log.warning("Obsidian excluded-files filter %.60r is too big to apply", text)
                continue
            try:
                patterns.append(regex.compile(text[1:-1]))
            except (regex.error, OverflowError, RecursionError):
                log.debug("Obsidian excluded-files filter %r is not a valid regex", text)
        else:
            prefix = text.replace("\\", "/").lstrip("/")   # a filter typed on Windows
            if prefix.strip("/"):
                prefixes.append(prefix)
    if not prefixes and not patterns:
        return None
    starts = tuple(prefixes)

    def excluded(path: str) -> bool:
        if not path.isascii():
            path = unicodedata.normalize("NFC", path)   # macOS file names come as NFD
        if path.startswith(starts):
            return True
        for pattern in list(patterns):
            try:
                if pattern.search(path, timeout=_REGEX_TIMEOUT_S):
                    return True
            except TimeoutError:
                log.warning("Obsidian excluded-files filter /%s/ took over %.0f ms on one "
                            "path and is ignored", pattern.pattern, _REGEX_TIMEOUT_S * 1000)
                with contextlib.suppress(ValueError):   # another search dropped it first
                    patterns.remove(pattern)
        return False
    return excluded


def add_excluded_folders(root: Path, folders: list[str]) -> list[str]:
    """Merge `folders` (e.g. ["audit/", "meta/"]) into Obsidian's excluded files; returns
    the ones added. Other keys of app.json stay as they are; the file is replaced
    atomically (temp file, fsync, rename). No `.obsidian/` folder: nothing is done."""
    folder = root / OBSIDIAN_DIR
    if not folder.is_dir() or folder.is_symlink():
        return []
    target = folder / APP_SETTINGS
    if target.exists() and (target.is_symlink() or not target.is_file()):
        return []  # not a plain settings file: leave it to Obsidian
    data = _read_json(target) if target.exists() else {}
    if data is None:
        return []  # unreadable or invalid JSON: never overwrite what we cannot read
    have = data.get("userIgnoreFilters")
    have = list(have) if isinstance(have, list) else []
    known = {str(x).strip("/") for x in have}
    added = [f for f in folders if f.strip("/") not in known]
    if not added:
        return []
    data["userIgnoreFilters"] = [*have, *added]
    with replaced(target, prefix=".app.json.", text=True, fsync=True) as fh:
        json.dump(data, fh, indent=2, ensure_ascii=False)
        fh.write("\n")
    return added


# -- moment.js dates -----------------------------------------------------------------------
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December"]
_DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
_TOKEN_RE = re.compile(r"\[[^\]]*\]|YYYY|YY|Qo|Q|MMMM|MMM|MM|Mo|M|DDDD|DDDo|DDD|Do|DD|D|"
                       r"dddd|ddd|dd|do|d|E|e|GGGG|GG|gggg|gg|WW|Wo|W|ww|wo|w|.", re.S)


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _locale_week(day: _dt.date) -> tuple[int, int]:
    """(week-year, week) in moment's default (en) locale: weeks start on Sunday and week 1
    holds January 1st."""
    def week1(year: int) -> _dt.date:
        jan1 = _dt.date(year, 1, 1)
        return jan1 - _dt.timedelta(days=(jan1.weekday() + 1) % 7)

    year = day.year
    if day >= week1(year + 1):
        year += 1
    return year, (day - week1(year)).days // 7 + 1


def _render(token: str, day: _dt.date) -> str:
    sunday0 = (day.weekday() + 1) % 7
    iso_year, iso_week, iso_day = day.isocalendar()
    doy = day.timetuple().tm_yday
    week_year, week = _locale_week(day)
    table = {
        "YYYY": f"{day.year:04d}", "YY": f"{day.year % 100:02d}",
        "Q": str((day.month - 1) // 3 + 1), "Qo": _ordinal((day.month - 1) // 3 + 1),
        "MMMM": _MONTHS[day.month - 1], "MMM": _MONTHS[day.month - 1][:3],
        "MM": f"{day.month:02d}", "M": str(day.month), "Mo": _ordinal(day.month),
        "DDDD": f"{doy:03d}", "DDD": str(doy), "DDDo": _ordinal(doy),
        "DD": f"{day.day:02d}", "D": str(day.day), "Do": _ordinal(day.day),
        "dddd": _DAYS[sunday0], "ddd": _DAYS[sunday0][:3], "dd": _DAYS[sunday0][:2],
        "d": str(sunday0), "do": _ordinal(sunday0), "E": str(iso_day), "e": str(sunday0),
        "GGGG": f"{iso_year:04d}", "GG": f"{iso_year % 100:02d}",
        "gggg": f"{week_year:04d}", "gg": f"{week_year % 100:02d}",
        "WW": f"{iso_week:02d}", "W": str(iso_week), "Wo": _ordinal(iso_week),
        "ww": f"{week:02d}", "w": str(week), "wo": _ordinal(week),
    }
    if token.startswith("["):
        return token[1:-1]
    return table.get(token, token)


def format_date(fmt: str, day: _dt.date) -> str:
    """`day` formatted with a moment.js format, e.g. "YYYY/MMMM/YYYY-MM-DD"."""
    return "".join(_render(t, day) for t in _TOKEN_RE.findall(fmt))


_NAMES = "|".join([*_MONTHS, *(m[:3] for m in _MONTHS)])
_DAY_NAMES = "|".join([*_DAYS, *(d[:3] for d in _DAYS), *(d[:2] for d in _DAYS)])
_PATTERNS = {
    "YYYY": r"(?P<Y>\d{4})", "YY": r"(?P<y>\d{2})", "MMMM": rf"(?P<N>{_NAMES})",
    "MMM": rf"(?P<N>{_NAMES})", "MM": r"(?P<M>\d{2})", "M": r"(?P<M>\d{1,2})",
    "Mo": r"(?P<M>\d{1,2})(?:st|nd|rd|th)", "DDDD": r"(?P<J>\d{3})", "DDD": r"(?P<J>\d{1,3})",
    "DDDo": r"(?P<J>\d{1,3})(?:st|nd|rd|th)", "DD": r"(?P<D>\d{2})", "D": r"(?P<D>\d{1,2})",
    "Do": r"(?P<D>\d{1,2})(?:st|nd|rd|th)",
}


def parse_date(fmt: str, text: str) -> _dt.date | None:
    """The date `text` was formatted from with `fmt`, or None.

    Needs a year and a month + day (or a day of the year) in the format; every other token
    matches loosely, and `format_date` must give `text` back exactly.
    """
    pattern, seen = [], set()
    for token in _TOKEN_RE.findall(fmt):
        if token.startswith("["):
            pattern.append(re.escape(token[1:-1]))
        elif token in _PATTERNS:
            group = re.search(r"\?P<(\w)>", _PATTERNS[token]).group(1)  # type: ignore[union-attr]
            pattern.append(_PATTERNS[token] if group not in seen
                           else _PATTERNS[token].replace(f"?P<{group}>", "?:"))
            seen.add(group)
        elif token in ("dddd", "ddd", "dd"):
            pattern.append(f"(?:{_DAY_NAMES})")
        elif re.fullmatch(r"[A-Za-z]+", token) and token not in ("T",):
            pattern.append(r"\w+")
        else:
            pattern.append(re.escape(token))
    match = re.fullmatch("".join(pattern), text)
    if match is None:
        return None
    got = match.groupdict()
    try:
        year = int(got["Y"]) if got.get("Y") else 2000 + int(got["y"]) if got.get("y") else None
        if year is None:
            return None
        if got.get("J"):
            day = _dt.date(year, 1, 1) + _dt.timedelta(days=int(got["J"]) - 1)
        else:
            month = int(got["M"]) if got.get("M") else (
                [m.lower() for m in _MONTHS].index(_full_month(got["N"])) + 1 if got.get("N")
                else None)
            if month is None or not got.get("D"):
                return None
            day = _dt.date(year, month, int(got["D"]))
    except (ValueError, OverflowError):
        return None
    return day if format_date(fmt, day) == text else None


def _full_month(name: str) -> str:
    low = name.lower()
    return next(m.lower() for m in _MONTHS if m.lower().startswith(low[:3]))
