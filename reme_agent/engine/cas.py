"""The one CAS redo policy (DESIGN §5 step 3: a changed stamp discards the plan; at most 3 redos).

`redo_on_stamp_change` runs an attempt (read + stamp, plan, write only if the stamp holds)
and runs it again from the start when it raises `StampChanged`, at most `max_redos` times;
then it gives up with a `StampChanged` that carries the number of redos. `FileStore.cas_edit`
(one file) and `Transaction.run` (several files) are built on it, and so is a job that
redoes a tool call, so every writer in reme-agent gives up after the same number of tries.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from reme_agent.errors import StampChanged

__all__ = ["MAX_REDOS", "redo_on_stamp_change"]

MAX_REDOS = 3
"""DESIGN §5: at most 3 redos after the first attempt, then skip (and audit)."""

T = TypeVar("T")


def redo_on_stamp_change(attempt: Callable[[int], T], max_redos: int = MAX_REDOS) -> T:
    """`attempt(redo)` with redo = 0, 1, ... until it returns without `StampChanged`.

    After `max_redos` redos the last conflict is raised again, with `redos` set, so the
    caller can skip and audit. Anything else the attempt raises propagates at once.
    """
    if not 0 <= max_redos <= MAX_REDOS:
        raise ValueError(f"max_redos must be 0..{MAX_REDOS} (DESIGN §5), not {max_redos}")
    redo = 0
    while True:
        try:
            return attempt(redo)
        except StampChanged as exc:
            if redo >= max_redos:
                raise StampChanged(exc.path, exc.expected, exc.actual, redos=redo) from exc
            redo += 1  # another writer got in between: discard the plan, redo on its text
