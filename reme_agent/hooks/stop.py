"""`stop` hook (seed "active_daily_check"): report daily notes left active (undistilled).

Read-only: it never writes and never runs a model. The host shows `systemMessage` to the
user, as a reminder to run `reme-agent distill` (or let `session_end` do it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reme_agent.hooks import HookEvent

if TYPE_CHECKING:
    from reme_agent.vault import Vault


def stop(vault: Vault, event: HookEvent) -> dict[str, Any]:
    """Active daily notes, oldest first, with a one-line reminder when there are any."""
    from reme_agent.toolkit.daily import daily_list

    found = daily_list(vault, status="active", limit=5000)
    active = [{"path": n["path"], "date": n["date"], "title": n["title"]} for n in found["notes"]]
    report: dict[str, Any] = {"session_id": event.session_id, "count": found["count"],
                              "active": active}
    if active:
        report["systemMessage"] = (f"reme-agent: {found['count']} daily note(s) not yet "
                                   "distilled (oldest " + active[0]["path"] + "); run "
                                   "`reme-agent distill PATH...`.")
    return report
