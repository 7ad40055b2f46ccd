"""`session_end` hook (seed "Hooks: SessionEnd"): sync the session, then distill today's notes.

The synchronizer records the session's messages in today's daily note; the distiller then
turns today's active daily notes into knowledge. Without a model only the transcript sync
runs, and the report says the distiller was skipped. With `mode="auto"` a model that fails
(a server that is down) does not lose the session: its raw turns are recorded instead
(transcript mode, as without a model) and the distiller is skipped, the report says why.

The hook never waits for the distiller's follow-ups (auto-link L1, split): they stay in the
vault's durable queue when this process ends, listed in `distill.enqueued`, for
`reme-agent worker`, `watch --worker` or `maintain` to run.
"""

from __future__ import annotations

import datetime as _dt
from typing import TYPE_CHECKING, Any

from reme_agent.hooks import HookEvent, SyncMode, brief, event_messages, sync_mode

if TYPE_CHECKING:
    from reme_agent.vault import Vault


def session_end(vault: Vault, event: HookEvent, *, model: Any | None = None,
                mode: SyncMode = "auto", distill: bool = True,
                today: _dt.date | None = None) -> dict[str, Any]:
    """Synchronizer on the session's messages, then the distiller on today's active notes."""
    from reme_agent.jobs.distiller import run_distiller
    from reme_agent.jobs.synchronizer import run_synchronizer
    from reme_agent.toolkit.daily import daily_list

    day = today or _dt.date.today()
    chosen = sync_mode(vault, mode, model)
    synced = run_synchronizer(vault, event_messages(event), mode=chosen, model=model,
                              session_id=event.session_id, today=day,
                              fallback_to_transcript=mode == "auto")
    report: dict[str, Any] = {"session_id": event.session_id, "mode": synced.mode,
                              "sync": brief(synced), "distill": None}
    if not distill:
        return report
    if model is None and not vault.settings.model.configured:
        report["distill_skipped"] = "no model configured"
        return report
    if chosen == "llm" and synced.mode == "transcript":
        report["distill_skipped"] = "the model failed while recording the session"
        return report
    active = daily_list(vault, start=day.isoformat(), end=day.isoformat(), status="active")
    paths = [n["path"] for n in active["notes"]]
    if not paths:
        report["distill_skipped"] = "no active daily notes today"
        return report
    report["distill"] = brief(run_distiller(vault, paths, model=model, today=day))
    return report
