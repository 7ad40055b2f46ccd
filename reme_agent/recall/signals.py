"""Maintenance signals in `meta/*.json`: their models, reader and writer (DESIGN §7, §8).

Recall reads the signals the maintainer computes; the maintainer (and recall's access log)
writes them through `write_signal` here, so a schema lives in one place.

Reading is lazy and cached per file; the cache key is the file's (inode, mtime_ns, size), so
an atomic replace (new inode) or an edit is seen on the next call, while an unchanged file
costs one `stat` per search and no read. A missing file is a missing signal (cold start).
A malformed file or one with another `version` is also treated as missing (factor 1.0, no
filtering): it is logged ONCE per file state and reported in `warnings()` while it lasts, so
search always goes on (seed Re-4/Re-5). `computed_at` is exposed by `freshness()`; a signal
older than `max_age_days` (default 14) is still used, with a warning.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from reme_agent.engine.store import FileStore

log = logging.getLogger("reme_agent.recall")

SIGNAL_VERSION = 1


def utc_now() -> datetime:
    return datetime.now(UTC)


def iso_utc(moment: datetime) -> str:
    """ISO-8601 UTC with a `Z`, seconds precision: the one timestamp format of meta/."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def parse_moment(value: Any) -> datetime | None:
    """A frontmatter/meta date or datetime as an aware UTC datetime (naive = UTC), else None."""
    if isinstance(value, datetime):
        moment = value
    elif hasattr(value, "isoformat") and hasattr(value, "year"):   # a date
        moment = datetime(value.year, value.month, value.day)
    elif isinstance(value, str) and value.strip():
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            return None
    else:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


# -- models (DESIGN §8, version 1) ------------------------------------------------------


class SignalFile(BaseModel):
    """Common header of every meta file. Extra keys are kept (a newer writer may add some)."""

    model_config = ConfigDict(extra="allow")

    version: int = SIGNAL_VERSION
    computed_at: datetime = Field(default_factory=utc_now)

    @field_validator("computed_at")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class CommunitiesSignal(SignalFile):
    algorithm: str = "louvain"
    resolution: float = 1.0
    communities: dict[str, int] = Field(default_factory=dict)
    stats: dict[str, Any] = Field(default_factory=dict)


class AccessEntry(BaseModel):
    model_config = ConfigDict(extra="allow")

    last_read: str                                   # ISO-8601 UTC
    hit_days: list[str] = Field(default_factory=list)  # YYYY-MM-DD, sorted, unique
    hits_30d: int = 0


class AccessLogSignal(SignalFile):
    entries: dict[str, AccessEntry] = Field(default_factory=dict)


class RecencySignal(SignalFile):
    scores: dict[str, float] = Field(default_factory=dict)


class ArchivedSignal(SignalFile):
    threshold: float = 0.0
    archived: list[str] = Field(default_factory=list)
    # Notes whose frontmatter still says `status: archived` (the status never moves back)
    # but which the maintainer found warm again: live for recall (recall/archive.py).
    thawed: list[str] = Field(default_factory=list)


class CooldownEntry(BaseModel):
    model_config = ConfigDict(extra="allow")

    action: str
    until: str                                       # ISO-8601 UTC


class CooldownsSignal(SignalFile):
    entries: dict[str, CooldownEntry] = Field(default_factory=dict)


SIGNALS: dict[str, tuple[str, type[SignalFile]]] = {
    "communities": ("meta/communities.json", CommunitiesSignal),
    "access_log": ("meta/access_log.json", AccessLogSignal),
    "recency": ("meta/recency.json", RecencySignal),
    "archived": ("meta/archived.json", ArchivedSignal),
    "cooldowns": ("meta/cooldowns.json", CooldownsSignal),
}
"""name -> (vault-relative path, model)."""

# Recorded, not computed: its computed_at is the last flush, and a quiet vault is not stale.
_NO_STALENESS = frozenset({"access_log"})


def dump_signal(model: SignalFile) -> str:
    """The JSON text of a meta file (stable key order, UTF-8, `Z` timestamps)."""
    data = model.model_dump(mode="json")
    data["computed_at"] = iso_utc(model.computed_at)
    return json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True) + "\n"


def load_signal_text(name: str, text: str) -> SignalFile:
    """Parse and validate one meta file; ValueError says why it cannot be used."""
    _, model = SIGNALS[name]
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"malformed JSON ({exc.msg} at line {exc.lineno})") from exc
    if not isinstance(raw, dict):
        raise ValueError("the top level is not an object")
    version = raw.get("version")
    if version != SIGNAL_VERSION:
        raise ValueError(f"version {version!r} is not the supported {SIGNAL_VERSION}")
    if "computed_at" not in raw:
        raise ValueError("it has no computed_at")   # else its age would read as "just now"
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"bad value at {where}: {first['msg']}") from exc


class _Entry:
    __slots__ = ("key", "model", "problem", "stale_logged")

    def __init__(self, key: tuple[int, int, int] | None, model: SignalFile | None,
                 problem: str | None) -> None:
        self.key = key
        self.model = model
        self.problem = problem
        self.stale_logged = False


class SignalStore:
    """Cached, validated access to the maintenance signals of one vault."""

    def __init__(self, store: FileStore, *, max_age_days: float = 14.0) -> None:
        self.store = store
        self.max_age_days = max_age_days
        self._lock = threading.Lock()
        self._cache: dict[str, _Entry] = {}
        self._derived: dict[tuple[str, str, tuple[int, int, int]], Any] = {}

    # -- raw access ----------------------------------------------------------------------
    def get(self, name: str) -> SignalFile | None:
        """The validated model of signal `name`, or None when it is missing or unusable."""
        return self._entry(name).model

    def _entry(self, name: str) -> _Entry:
        rel, _ = SIGNALS[name]
        try:
            st = os.stat(self.store.root / rel)
            key: tuple[int, int, int] | None = (st.st_ino, st.st_mtime_ns, st.st_size)
        except OSError:
            key = None
        with self._lock:   # reads happen only on a new file state, so holding it is cheap
            cached = self._cache.get(name)
            if cached is not None and cached.key == key:
                return cached
            entry = self._cache[name] = self._read(name, rel, key)
            return entry

    def _read(self, name: str, rel: str, key: tuple[int, int, int] | None) -> _Entry:
        if key is None:
            return _Entry(None, None, None)
        try:
            text = (self.store.root / rel).read_text(encoding="utf-8")
            model = load_signal_text(name, text)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            # Degrade to "signal missing" (factor 1.0); logged once per file state.
            problem = f"{rel} ignored: {exc}; its factor is 1.0 until the maintainer rewrites it."
            log.warning("%s", problem)
            return _Entry(key, None, problem)
        return _Entry(key, model, None)

    def _stale(self, name: str, entry: _Entry) -> str | None:
        """A staleness warning, judged now (a long-lived process sees a file age)."""
        if entry.model is None or name in _NO_STALENESS:
            return None
        age = utc_now() - entry.model.computed_at
        if age <= timedelta(days=self.max_age_days):
            return None
        message = (f"{SIGNALS[name][0]} was computed {age.days} days ago (over "
                   f"{self.max_age_days:g}); still used. Run the maintainer to refresh it.")
        if not entry.stale_logged:
            entry.stale_logged = True
            log.warning("%s", message)
        return message

    def file_key(self, name: str) -> tuple[int, int, int] | None:
        """(inode, mtime_ns, size) of the signal's file, None when missing: changes whenever
        the file does, for callers caching something derived from it."""
        return self._entry(name).key

    def _derive(self, name: str, view: str, build: Any) -> Any:
        """Cache a view (set, dict) of a signal per file state, so searches rebuild nothing."""
        entry = self._entry(name)
        if entry.model is None or entry.key is None:
            return None
        slot = (name, view, entry.key)
        with self._lock:
            if slot in self._derived:
                return self._derived[slot]
        value = build(entry.model)
        with self._lock:
            for old in [k for k in self._derived if k[:2] == (name, view)]:
                del self._derived[old]
            self._derived[slot] = value
        return value

    # -- the signals recall uses (cached views: read-only for callers) --------------------
    def communities(self) -> dict[str, int] | None:
        return self._derive("communities", "map", lambda m: dict(m.communities))

    def recency(self) -> dict[str, float] | None:
        """The maintainer's decay scores (recency.json); search computes its own, see factors."""
        return self._derive("recency", "map", lambda m: dict(m.scores))

    def access_log(self) -> dict[str, AccessEntry] | None:
        return self._derive("access_log", "map", lambda m: dict(m.entries))

    def last_hits(self) -> dict[str, datetime] | None:
        """path -> last read time from the access log (parsed once per file state)."""
        def build(m: AccessLogSignal) -> dict[str, datetime]:
            out = {}
            for path, entry in m.entries.items():
                moment = parse_moment(entry.last_read)
                if moment is not None:
                    out[path] = moment
            return out
        return self._derive("access_log", "last_hits", build)

    def archived(self) -> set[str] | None:
        return self._derive("archived", "set", lambda m: set(m.archived))

    def cooldowns(self) -> dict[str, CooldownEntry] | None:
        return self._derive("cooldowns", "map", lambda m: dict(m.entries))

    # -- reporting -----------------------------------------------------------------------
    def freshness(self, names: tuple[str, ...] = ("communities", "access_log", "recency",
                                                   "archived")) -> dict[str, str | None]:
        """name -> computed_at (ISO-8601 UTC) of each usable signal, None when missing."""
        out: dict[str, str | None] = {}
        for name in names:
            model = self._entry(name).model
            out[name] = iso_utc(model.computed_at) if model is not None else None
        return out

    def warnings(self, names: tuple[str, ...] = ("communities", "access_log", "recency",
                                                  "archived")) -> list[str]:
        """Current problems (unusable or stale files); the log saw each once already."""
        out = []
        for name in names:
            entry = self._entry(name)
            out += [w for w in (entry.problem, self._stale(name, entry)) if w]
        return out

    # -- writing (the maintainer, and recall's access log) --------------------------------
    def write_signal(self, name: str, model: SignalFile) -> str:
        """Write `meta/<name>.json` atomically (temp + rename); returns the new stamp."""
        rel, expected = SIGNALS[name]
        if not isinstance(model, expected):
            raise TypeError(f"{name} takes a {expected.__name__}, not {type(model).__name__}")
        stamp = self.store.write(rel, dump_signal(model))
        self.invalidate(name)
        return stamp

    def invalidate(self, name: str | None = None) -> None:
        with self._lock:
            if name is None:
                self._cache.clear()
                self._derived.clear()
            else:
                self._cache.pop(name, None)
                for old in [k for k in self._derived if k[0] == name]:
                    del self._derived[old]
