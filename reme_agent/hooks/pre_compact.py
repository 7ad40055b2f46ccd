"""`pre_compact` hook (seed "Hooks: PreCompact"): flush the session to its daily note.

Before the host compacts (summarises away) its context, the turns are recorded so nothing
said so far is lost. Same sync as `session_end`, without the distiller: with `mode="auto"`,
a model that fails gets the raw turns recorded instead (transcript mode).
"""

from __future__ import annotations

import datetime as _dt
from typing import TYPE_CHECKING, Any

from reme_agent.hooks import HookEvent, SyncMode, brief, event_messages, sync_mode

if TYPE_CHECKING:
    from reme_agent.vault import Vault


def pre_compact(vault: Vault, event: HookEvent, *, model: Any | None = None,
                mode: SyncMode = "auto", today: _dt.date | None = None) -> dict[str, Any]:
    """Synchronizer flush of the session's messages."""
    from reme_agent.jobs.synchronizer import run_synchronizer

    chosen = sync_mode(vault, mode, model)
    synced = run_synchronizer(vault, event_messages(event), mode=chosen, model=model,
                              session_id=event.session_id, today=today,
                              fallback_to_transcript=mode == "auto")
    return {"session_id": event.session_id, "mode": synced.mode, "sync": brief(synced)}
