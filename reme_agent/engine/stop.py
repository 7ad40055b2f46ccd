"""A request to stop a long run at its next safe point, with the reason.

A service manager stops a process with SIGTERM. Killing a maintenance run where it stands
is safe (every multi-file write goes through the journal) but throws away the run's work and
leaves no word in the log. So the composition root turns the signal into a `StopRequest`, and
the long loops ask `stop_reason` between two actions (two transactions, two queue items,
two steps) and wind down from there, saying so in their report.
"""

from __future__ import annotations

import threading

__all__ = ["StopRequest", "stop_reason"]


class StopRequest(threading.Event):
    """An Event (what `jobs.followups.drain` already takes) that remembers why it was set."""

    def __init__(self) -> None:
        super().__init__()
        self.reason = ""

    def request(self, reason: str) -> None:
        self.reason = self.reason or reason
        self.set()


def stop_reason(stop: threading.Event | None) -> str | None:
    """Why to stop now, or None to go on."""
    if stop is None or not stop.is_set():
        return None
    return getattr(stop, "reason", "") or "a stop was requested"
