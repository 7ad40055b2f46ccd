"""Turn ids and the synced-turn ledger: a turn is stored once, whatever path brings it.

The middleware, the hooks, `reme-agent sync`, the MCP `synchronizer` tool, LLM or transcript
mode: each hands the synchronizer what it has (one reply, a whole transcript, the same file
twice, a transcript that grew). The synchronizer keeps only the turns no sync has claimed.

**Turn id** = sha256 over (session key, role, normalised text, occurrence), 16 hex digits:

- normalised text: Unicode NFC, runs of whitespace collapsed to one space, stripped; the
  speaker's display name is left out (a host's transcript may not carry it);
- occurrence: how many earlier turns of the same conversation have the same role and text,
  so "ok" said twice is two turns. A batch is read as the conversation from its start (or
  a prefix of it); a caller that sees one reply at a time (the middleware) passes its running
  counts as `seen`;
- session key: the session id; without one, `first:` + the hash of the first turn, so the
  same chat file synced twice is the same conversation.

Host message ids (AgentScope `Msg.id`, Claude Code's line uuids) are not part of the id: the
paths that bring the same turn do not share them (the middleware sees `Msg` objects, a hook
gets `{role, content}` dicts from the host's transcript file).

**Ledger**: `<internal>/sync/<hash of the session key>.json` (`.reme/sync/` beside the index,
or a read-only vault's cache folder), one file per session: `{"version": 1, "session":
key, "turns": {id: {"state": "claimed" | "synced", "at": ISO time, "notes": [paths]}}}`.
Not in the note's frontmatter: a session outlives a day's note, the LLM mode writes notes the
model names, and hundreds of ids do not belong in a note people read. A sync first *claims*
its new turns (one read-modify-write under the ledger's lock: compare-and-swap, so of two
concurrent syncs each turn goes to exactly one), then writes, then marks them `synced`; a
failed write gives the claim back. A claim left by a killed process expires after
`LEASE_SECONDS`, and a later sync records those turns. Deleting `.reme/` forgets the ledger:
a transcript re-sent after that is recorded again.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reme_agent.vault import Vault

log = logging.getLogger("reme_agent.jobs")

LEDGER_DIR = "sync"
LEASE_SECONDS = 3600.0
"""A claim older than this (its sync was killed between claim and write) is free again."""

_WS = re.compile(r"\s+")


@dataclass(frozen=True)
class Turn:
    """One user or assistant turn with its stable id."""

    id: str
    base: str  # role + text, without the occurrence (the middleware counts these)
    role: str
    name: str
    text: str


def normalise(text: str) -> str:
    return _WS.sub(" ", unicodedata.normalize("NFC", text)).strip()


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:16]


def base_key(role: str, text: str) -> str:
    """The id's occurrence-independent part: same role and same normalised text."""
    return _digest(role, normalise(text))


def session_key(session_id: str | None, turns: Sequence[Mapping[str, str]]) -> str:
    """The session id, or `first:<hash of the first turn>` for a conversation without one."""
    if session_id:
        return session_id
    if not turns:
        return "first:"
    return "first:" + base_key(turns[0]["role"], turns[0]["text"])


def number_turns(session: str, turns: Iterable[Mapping[str, str]],
                 seen: Mapping[str, int] | None = None) -> list[Turn]:
    """Ids for `turns` (coerced `{role, name, text}` dicts) continuing after `seen` counts."""
    counts = dict(seen or {})
    out = []
    for t in turns:
        base = base_key(t["role"], t["text"])
        occurrence = counts.get(base, 0)
        counts[base] = occurrence + 1
        out.append(Turn(_digest(session, base, str(occurrence)), base, t["role"],
                        t.get("name") or t["role"], t["text"]))
    return out


class TurnLedger:
    """The synced turns of one session (see the module docstring)."""

    def __init__(self, vault: Vault, session: str, lease: float = LEASE_SECONDS) -> None:
        self.vault = vault
        self.session = session
        self.lease = lease
        self.name = f"{LEDGER_DIR}/{hashlib.sha256(session.encode('utf-8')).hexdigest()[:32]}.json"

    # -- the three steps -----------------------------------------------------------------
    def claim(self, turns: Sequence[Turn]) -> list[Turn]:
        """The turns no other sync holds, now claimed by this one (in their order)."""
        got: list[Turn] = []

        def edit(data: dict[str, Any]) -> bool:
            got.clear()
            now = _now()
            for t in turns:
                entry = data["turns"].get(t.id)
                if entry is not None and not self._expired(entry, now):
                    continue
                data["turns"][t.id] = {"state": "claimed", "at": _iso(now)}
                got.append(t)
            return bool(got)

        self._edit(edit)
        return got

    def commit(self, turns: Sequence[Turn], notes: Sequence[str]) -> None:
        """Mark claimed turns as synced into `notes`."""
        def edit(data: dict[str, Any]) -> bool:
            stamp = _iso(_now())
            for t in turns:
                data["turns"][t.id] = {"state": "synced", "at": stamp, "notes": sorted(set(notes))}
            return bool(turns)

        self._edit(edit)

    def release(self, turns: Sequence[Turn]) -> None:
        """Give back claims whose write failed, so the next sync records those turns."""
        def edit(data: dict[str, Any]) -> bool:
            mine = [t.id for t in turns if data["turns"].get(t.id, {}).get("state") == "claimed"]
            for tid in mine:
                del data["turns"][tid]
            return bool(mine)

        try:
            self._edit(edit)
        except Exception as exc:  # the claim then expires after the lease
            log.warning("could not release %d claimed turn(s): %s", len(turns), exc)

    def synced(self) -> set[str]:
        """Ids recorded as synced (for tests and reports)."""
        data: dict[str, Any] = {}

        def edit(loaded: dict[str, Any]) -> bool:
            data.update(loaded)
            return False

        self._edit(edit)
        return {k for k, v in data.get("turns", {}).items() if v.get("state") == "synced"}

    # -- the file ------------------------------------------------------------------------
    def _edit(self, change: Any) -> None:
        def edit(text: str | None) -> str | None:
            data = self._load(text)
            if not change(data):
                return None
            return json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True) + "\n"

        self.vault.store.edit_internal(self.name, edit)

    def _load(self, text: str | None) -> dict[str, Any]:
        fresh: dict[str, Any] = {"version": 1, "session": self.session, "turns": {}}
        if text is None:
            return fresh
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or not isinstance(data.get("turns"), dict):
                raise ValueError("no 'turns' object")
        except ValueError as exc:  # atomic writes never tear it; a hand edit might
            log.warning("%s is unusable (%s); starting it afresh", self.name, exc)
            return fresh
        return data

    def _expired(self, entry: Any, now: _dt.datetime) -> bool:
        if not isinstance(entry, dict) or entry.get("state") != "claimed":
            return False
        try:
            at = _dt.datetime.fromisoformat(str(entry.get("at")))
        except ValueError:
            return True
        return (now - at).total_seconds() > self.lease


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


def _iso(moment: _dt.datetime) -> str:
    return moment.replace(microsecond=0).isoformat()
