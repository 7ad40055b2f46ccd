"""The frontmatter model and the schema rules `lint_schema` reports (DESIGN §3).

The model is open (`extra="allow"`): any key may appear, and only the known keys are typed.
`write` uses `type_errors` to refuse a badly typed known key; completeness (the four axes and
the conditional fields) is `validate_schema`'s job, because the distiller writes first and
then fixes what `lint_schema` reports.

Decisions where DESIGN is silent:
- How strict a note is checked is a per-folder setting (`lint.strictness`, longest prefix
  wins). By default the notes the jobs write (`knowledge/<slug>/<slug>.md`,
  `daily/<date>/<slug>/<slug>.md`) are strict: the four axes and the conditional rules
  (`status`, `confidence`, `originSessionId`). Every other note (hand-kept notes beside
  them, sibling materials, an Obsidian vault's own notes) is relaxed: only the types and
  values of the keys it has are checked, so a person's vault is not flooded with "missing
  lifecycle".
- `title` is not required (a note without one shows its first H1 or file name).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any, Literal, get_args

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator

from reme_agent.config import LintSettings
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
DEFAULT_STRICTNESS: dict[str, str] = dict(LintSettings().strictness)


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


def in_job_layout(path: str) -> bool:
    """The notes the jobs write: knowledge/<slug>/<slug>.md and daily/<date>/<slug>/<slug>.md."""
    if not path.lower().endswith(NOTE_SUFFIXES):
        return False
    parts = PurePosixPath(path).parts
    if len(parts) == 3 and parts[0] == KNOWLEDGE and PurePosixPath(parts[2]).stem == parts[1]:
        return True
    return parse_daily_path(path) is not None


def _under(path: str, prefix: str) -> bool:
    p, pre = path.casefold(), prefix.strip().casefold()
    if not pre:
        return True
    return p.startswith(pre) if pre.endswith("/") else p == pre or p.startswith(pre + "/")


def schema_level(path: str, strictness: Mapping[str, str] | None = None) -> str:
    """"strict", "relaxed" or "off" for one note: the longest matching folder prefix of
    `strictness` (`lint.strictness`) wins; "layout" is strict for the notes in the job
    layout and relaxed for hand-kept notes beside them."""
    table = DEFAULT_STRICTNESS if strictness is None else strictness
    best = max((pre for pre in table if _under(path, pre)), key=len, default=None)
    level = table[best] if best is not None else "relaxed"
    if level == "layout":
        return "strict" if in_job_layout(path) else "relaxed"
    return level if level in ("strict", "relaxed", "off") else "relaxed"


def validate_schema(path: str, frontmatter: Mapping[str, Any],
                    strictness: Mapping[str, str] | None = None) -> list[str]:
    """Every DESIGN §3 violation of one note at its strictness level (`schema_level`), as
    messages a model can act on: strict = types + the four axes + the conditional keys;
    relaxed = types and values of the keys present; off = nothing."""
    level = schema_level(path, strictness)
    if level == "off":
        return []
    errors = type_errors(frontmatter)
    if not isinstance(frontmatter, Mapping) or level != "strict":
        return errors
    fm = dict(frontmatter)
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
