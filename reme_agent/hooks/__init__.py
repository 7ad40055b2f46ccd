"""Hooks for coding-agent hosts (DESIGN §9, seed "Hooks"): thin, and never block the host.

Three hooks, each usable from Python and as `reme-agent hook <name>` reading one JSON event
on stdin (the shape Claude Code sends; other hosts can send the same keys)::

    {"session_id": "abc123",                 optional; names the session (originSessionId)
     "transcript_path": "~/.../abc123.jsonl", a JSONL/JSON transcript file, or instead
     "messages": [{"role": "user", "content": "..."}, ...],
     "cwd": "/path/to/project",              base for a relative transcript_path and,
                                             without --vault / $REME_VAULT, <cwd>/vault
     "hook_event_name": "SessionEnd"}        ignored; any other key is ignored too

- `session_end`: the synchronizer on the session's messages, then the distiller on today's
  active daily notes (the distiller only when a model is configured).
- `pre_compact`: a synchronizer flush before the host compacts its context.
- `stop`: the active-daily check: reports daily notes still `active` (not yet distilled).

Sync mode: "llm" when a model is configured (or passed), else "transcript" (no model, raw
turns appended, never duplicated when the host re-sends a growing transcript).

Exit code and output (decision): a hook **always exits 0**, so a memory problem never blocks
or fails the host's session; an error is one line on stderr, `Error: reme-agent hook <name>:
<type>: <message>` (every command's errors start with `Error:`). On success stdout gets one
JSON object: `{"hook": <name>, ...report}`; `stop` adds a `systemMessage` line when notes
are active.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from reme_agent.errors import InvalidArgument

if TYPE_CHECKING:
    from reme_agent.jobs.guard import JobResult
    from reme_agent.vault import Vault

log = logging.getLogger("reme_agent.hooks")

SyncMode = Literal["auto", "llm", "transcript"]
_EVENT_HINT = ('Send one JSON object on stdin, e.g. {"session_id": "s1", "transcript_path": '
               '"/path/to/s1.jsonl"} or {"messages": [{"role": "user", "content": "..."}]}.')
HOOK_NAMES = ("session_end", "pre_compact", "stop")


class HookEvent(BaseModel):
    """The hook event a host sends on stdin (unknown keys are kept and ignored)."""

    model_config = ConfigDict(extra="allow")

    session_id: str | None = None
    transcript_path: str | None = None
    messages: list[Any] | None = None
    cwd: str | None = None
    hook_event_name: str | None = None


def parse_event(raw: str | bytes | dict[str, Any] | HookEvent | None) -> HookEvent:
    """A HookEvent from stdin text, a dict or None (an empty event)."""
    if isinstance(raw, HookEvent):
        return raw
    if raw is None:
        return HookEvent()
    if isinstance(raw, bytes | str):
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        if not text.strip():
            return HookEvent()
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidArgument(f"The hook event is not JSON ({exc.msg} at line {exc.lineno} "
                                  f"column {exc.colno}).", _EVENT_HINT) from None
    else:
        data = raw
    if not isinstance(data, dict):
        raise InvalidArgument("The hook event must be a JSON object.", _EVENT_HINT)
    try:
        return HookEvent.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InvalidArgument(f"The hook event's {where!r} is wrong: {first['msg']} "
                              f"(got {first['input']!r}).", _EVENT_HINT) from None


def event_messages(event: HookEvent) -> list[Any]:
    """The session's messages: `messages`, else the transcript file (a JSON list,
    `{"messages": [...]}` or JSONL; Claude Code's `{"type", "message"}` lines unwrapped)."""
    if event.messages is not None:
        return list(event.messages)
    if not event.transcript_path:
        return []
    path = Path(event.transcript_path).expanduser()
    if not path.is_absolute() and event.cwd:
        path = Path(event.cwd) / path
    return read_transcript(path)[0]


def read_transcript(path: Path) -> tuple[list[dict[str, Any]], str | None]:
    """A transcript file's messages (see `event_messages`) and the session id it names, if
    any: `session_id` / `sessionId` of a `{"messages": [...]}` object, else of the first
    item or JSONL line that has one (Claude Code writes `sessionId` on every line)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidArgument(f"The transcript file {str(path)!r} (transcript_path) does not "
                              "exist; nothing was recorded.",
                              "Send an existing transcript file, or the turns as `messages`."
                              ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"Cannot read the transcript file {str(path)!r}: {exc}; nothing "
                              "was recorded.") from None
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = [_jsonl_line(path, n, line) for n, line in enumerate(text.splitlines(), 1)
                 if line.strip()]
    # {"messages": [...]}, or one JSONL line (a transcript of one message) parsed whole
    items = whole.get("messages", [whole]) if isinstance(whole, dict) else whole
    if not isinstance(items, list):
        raise InvalidArgument(f"The transcript file {str(path)!r} holds no list of messages; "
                              "nothing was recorded.",
                              'Send a JSON list of messages ({"role", "content"} each), '
                              '{"messages": [...]}, or JSONL, one message a line.')
    out = []
    for item in items:
        # Claude Code lines wrap the message: {"type": "user", "message": {role, content}}
        msg = item.get("message") if isinstance(item, dict) else None
        out.append(msg if isinstance(msg, dict) else item)
    holders = [whole] if isinstance(whole, dict) and "messages" in whole else items
    return [m for m in out if isinstance(m, dict)], _session_of(holders)


def _session_of(items: list[Any]) -> str | None:
    for item in items:
        if isinstance(item, dict):
            for key in ("session_id", "sessionId"):
                value = item.get(key)
                if isinstance(value, str) and value.strip():
                    return value.strip()
    return None


def _jsonl_line(path: Path, number: int, line: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise InvalidArgument(f"Line {number} of the transcript file {str(path)!r} is not JSON "
                              f"({exc.msg}); nothing was recorded.",
                              "Send a JSON list of messages or JSONL, one message a line."
                              ) from None


def sync_mode(vault: Vault, mode: SyncMode, model: Any | None) -> Literal["llm", "transcript"]:
    from reme_agent.jobs.synchronizer import choose_mode

    return choose_mode(vault, mode, model)


def brief(result: JobResult | None) -> dict[str, Any] | None:
    """A job result without the per-call record (hook output stays short)."""
    return None if result is None else result.model_dump(mode="json", exclude={"tool_calls"})


def hooks() -> dict[str, Callable[..., dict[str, Any]]]:
    from reme_agent.hooks.pre_compact import pre_compact
    from reme_agent.hooks.session_end import session_end
    from reme_agent.hooks.stop import stop

    return {"session_end": session_end, "pre_compact": pre_compact, "stop": stop}


def run_hook(name: str, vault: Vault, event: Any = None, **kwargs: Any) -> dict[str, Any]:
    """Run one hook from Python; errors propagate (the CLI turns them into a stderr line)."""
    table = hooks()
    if name not in table:
        raise ValueError(f"unknown hook {name!r}; hooks: {', '.join(HOOK_NAMES)}")
    return {"hook": name, **table[name](vault, parse_event(event), **kwargs)}


def vault_for(event: HookEvent, explicit: str | Path | None) -> Path:
    """--vault / $REME_VAULT first, then `<event cwd>/vault`, then ./vault."""
    if explicit:
        return Path(explicit)
    if event.cwd:
        return Path(event.cwd) / "vault"
    return Path("vault")
