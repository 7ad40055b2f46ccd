"""The frontmatter model and the schema rules `lint_schema` reports (DESIGN §3).

The model is open (`extra="allow"`): any key may appear, and only the known keys are typed.
`write` uses `type_errors` to refuse a badly typed known key; completeness (the four axes and
the conditional fields) is `validate_schema`'s job, because the distiller writes first and
then fixes what `lint_schema` reports.

Decisions where DESIGN is silent:
- "Knowledge and daily notes" means every Markdown file under `knowledge/` and the daily
  summary notes `daily/<date>/<slug>/<slug>.md`; sibling materials in a daily folder are raw
  and are checked for key types only.
- `title` is not required (a note without one shows its first H1 or file name).
- The conditional rules (`status`, `confidence`, `originSessionId`) apply to every note.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any, Literal, get_args

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator

from reme_agent.schema.layout import KNOWLEDGE, parse_daily_path

Lifecycle = Literal["streaming", "evolving", "frozen"]
Scope = Literal["instance", "class"]
Source = Literal["auto", "curated", "derived"]
Role = Literal["observation", "claim", "question", "profile", "concept", "method", "reference",
               "fundamentals"]
Status = Literal["active", "distilled", "archived"]
Confidence = Literal["✅", "⏳", "❌"]

AXES: dict[str, tuple[str, ...]] = {
    "lifecycle": get_args(Lifecycle),
    "scope": get_args(Scope),
    "source": get_args(Source),
    "role": get_args(Role),
}
STATUSES: tuple[str, ...] = get_args(Status)
CONFIDENCES: tuple[str, ...] = get_args(Confidence)
NOTE_SUFFIXES = (".md", ".markdown")


class Frontmatter(BaseModel):
    """Open frontmatter: typed known keys, anything else kept as is."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    title: str | None = Field(None, validation_alias=AliasChoices("title", "name"))
    description: str | None = None
    tags: list[str] | None = None
    created: str | None = None
    updated: str | None = None
    importance: int = Field(5, ge=1, le=10)
    aliases: list[str] | None = None
    lifecycle: Lifecycle | None = None
    scope: Scope | None = None
    source: Source | None = None
    role: Role | None = None
    status: Status | None = None
    confidence: Confidence | None = None
    originSessionId: str | None = None  # the key as written in notes

    @field_validator("tags", "aliases", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        # `tags: people` in YAML is one tag, as Obsidian reads it.
        return [value] if isinstance(value, str) else value

    @field_validator("created", "updated", mode="before")
    @classmethod
    def _iso_time(cls, value: Any) -> Any:
        if isinstance(value, _dt.date):  # datetime is a date too
            return value.isoformat()
        if isinstance(value, str):
            text = value.strip().replace("Z", "+00:00")
            try:
                _dt.datetime.fromisoformat(text)
            except ValueError:
                raise ValueError("must be an ISO-8601 date or time, e.g. 2026-11-30 or "
                                 "2026-11-30T09:15:00+00:00") from None
        return value

    @field_validator("importance", mode="before")
    @classmethod
    def _no_bool(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("must be an integer from 1 to 10")
        return value


_ALLOWED = {**AXES, "status": STATUSES, "confidence": CONFIDENCES}


def type_errors(frontmatter: Mapping[str, Any]) -> list[str]:
    """One readable message per badly typed known key ([] when the types are fine)."""
    if not isinstance(frontmatter, Mapping):
        return [f"frontmatter must be a mapping of keys to values, not {type(frontmatter).__name__}"]
    try:
        Frontmatter.model_validate(dict(frontmatter))
    except ValidationError as exc:
        first: dict[Any, str] = {}
        for err in exc.errors():  # one message per key: the first problem is enough to act on
            first.setdefault(err["loc"][0] if err["loc"] else None, _message(err, frontmatter))
        return list(first.values())
    return []


def _message(err: Any, frontmatter: Mapping[str, Any]) -> str:
    key = str(err["loc"][0]) if err["loc"] else "frontmatter"
    if key == "title" and "title" not in frontmatter and "name" in frontmatter:
        key = "name"
    got = frontmatter.get(key)
    if key in _ALLOWED:
        return f"{key}: {got!r} is not one of {', '.join(_ALLOWED[key])}"
    if key == "importance":
        return f"importance: must be an integer from 1 to 10 (got {got!r})"
    detail = str(err["msg"]).removeprefix("Value error, ")
    if len(err["loc"]) > 1 and isinstance(got, list):  # one bad item of a list
        return f"{key}: every item must be a string (got {got!r})"
    return f"{key}: {detail} (got {got!r})"


def requires_axes(path: str) -> bool:
    """Knowledge notes and daily summary notes must carry the four axes."""
    if not path.lower().endswith(NOTE_SUFFIXES):
        return False
    return PurePosixPath(path).parts[0] == KNOWLEDGE or parse_daily_path(path) is not None


def validate_schema(path: str, frontmatter: Mapping[str, Any]) -> list[str]:
    """Every DESIGN §3 violation of one note, as messages a model can act on."""
    errors = type_errors(frontmatter)
    if not isinstance(frontmatter, Mapping):
        return errors
    fm = dict(frontmatter)
    if requires_axes(path):
        for axis, values in AXES.items():
            if fm.get(axis) is None:
                errors.append(f"missing required key '{axis}' (one of {', '.join(values)})")
    errors += conditional_errors(fm)
    return errors


def conditional_errors(fm: Mapping[str, Any]) -> list[str]:
    """The DESIGN §3 conditional fields: status, confidence and originSessionId."""
    errors: list[str] = []
    lifecycle, has_status = fm.get("lifecycle"), fm.get("status") is not None
    if lifecycle == "streaming" and not has_status:
        errors.append("missing 'status': required when lifecycle is streaming "
                      f"(one of {', '.join(STATUSES)})")
    if has_status and lifecycle != "streaming":
        errors.append(f"'status' is only allowed when lifecycle is streaming (lifecycle is "
                      f"{lifecycle!r}); remove it")
    if fm.get("role") == "claim" and fm.get("confidence") is None:
        errors.append(f"missing 'confidence': required when role is claim "
                      f"(one of {' '.join(CONFIDENCES)})")
    if fm.get("source") == "auto" and not fm.get("originSessionId"):
        errors.append("missing 'originSessionId': required when source is auto "
                      "(the session the note came from)")
    return errors


def status_move_error(old: Any, new: Any) -> str | None:
    """Why `old -> new` breaks the one-way status machine, or None when it is allowed.

    Status moves `active -> distilled -> archived`, one step at a time; staying put is
    allowed. A note without a status counts as active.
    """
    if new is None or new == old:
        return None
    if new not in STATUSES:
        return f"status {new!r} is not one of {', '.join(STATUSES)}"
    current = old if old in STATUSES else "active"
    step = STATUSES.index(new) - STATUSES.index(current)
    if step in (0, 1):
        return None
    nxt = STATUSES[STATUSES.index(current) + 1] if current != STATUSES[-1] else None
    why = "moving back is not allowed" if step < 0 else "skipping a step is not allowed"
    then = f"the only allowed next status is {nxt!r}" if nxt else "it is final"
    return (f"status cannot move from {current!r} to {new!r}: it only moves forward "
            f"{' -> '.join(STATUSES)}, one step at a time ({why}); {then}")
