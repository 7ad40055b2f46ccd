"""Follow-up item kinds and the producers that need no model (DESIGN §9; seed auto_link §1.4).

The queue itself is `vault.queue` (`engine/queue.py`): it stores items and knows no
consumer. Who drains each kind is wired in `jobs/followups.py`. Producers:

- the distiller, after each knowledge write: `split` when the note is overloaded (D3), and
  `autolink` (L1);
- split and merge (`maintenance/split.py`, `maintenance/merge.py`), after a commit:
  `autolink` for the notes they create or keep (`enqueue_autolink`), so a new split child
  gets its inbound links without waiting for a batch run;
- `index` and `watch`, for notes grown past the split threshold by hand
  (`health.queue_overloaded`): `split`, plus a D3 line in today's health report.

A failure to enqueue is logged, never raised: the write it follows already happened, and
the batch runs (`autolink`, `maintain`) find the same work again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from reme_agent.engine.queue import QueueItem
from reme_agent.errors import ReMeError

if TYPE_CHECKING:
    from reme_agent.vault import Vault

log = logging.getLogger("reme_agent.maintenance")

__all__ = ["AUTOLINK", "FOLLOWUPS_STEP", "KINDS", "SPLIT", "enqueue", "enqueue_autolink"]

AUTOLINK = "autolink"
"""Auto-link L1 in the note, and of the node in other notes (payload `level: L1`)."""
SPLIT = "split"
"""The split step for an overloaded note (payload: tokens, blocks and the thresholds)."""
KINDS = (AUTOLINK, SPLIT)
FOLLOWUPS_STEP = "followups"
"""The drain of the queue as the last `maintain` step (it runs in the job layer)."""


def enqueue(vault: Vault, kind: str, path: str, reason: str, *, source: str,
            **payload: Any) -> tuple[QueueItem, bool] | None:
    """`vault.queue.enqueue`, logged instead of raised when the queue cannot be written."""
    try:
        return vault.queue.enqueue(kind, path, reason=reason, payload=payload, source=source)
    except ReMeError as exc:
        log.warning("could not queue %s for %s: %s", kind, path, exc)
        return None


def enqueue_autolink(vault: Vault, paths: Iterable[str], *, source: str,
                     reason: str) -> list[QueueItem]:
    """Queue auto-link L1 for each Markdown note in `paths`; returns the items."""
    out: list[QueueItem] = []
    for path in dict.fromkeys(paths):
        if path.lower().endswith(".md") and (got := enqueue(vault, AUTOLINK, path, reason,
                                                            source=source, level="L1")):
            out.append(got[0])
    return out
