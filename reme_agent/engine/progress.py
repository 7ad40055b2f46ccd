"""Progress of long runs (index, maintain, autolink): a bar on a terminal, silence elsewhere.

The composition root decides whether bars are shown (the CLI: stderr is a TTY, no
`--no-progress`, no `--json`, `index.progress` on) and passes a `Progress`; the engine and
the maintenance code only call it with a stage name and a total, then `update` and `close`
what it returns. Bars go to stderr, so stdout stays the result; tqdm clears them when done.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import IO, Any, Protocol

__all__ = ["SILENT", "Bar", "Progress", "auto", "terminal"]


class Bar(Protocol):
    def update(self, n: int = 1) -> Any: ...

    def close(self) -> Any: ...


Progress = Callable[[str, int, str], Bar]
"""`progress(stage, total, unit)` starts a bar, e.g. ("embedding", 1200, "block")."""


class _Silent:
    def update(self, n: int = 1) -> None:
        return None

    def close(self) -> None:
        return None


def _silent(stage: str, total: int, unit: str) -> Bar:
    return _Silent()


SILENT: Progress = _silent


def terminal(stream: IO[str] | None = None) -> Progress:
    """tqdm bars on `stream` (stderr); each is cleared when its stage ends (leave=False)."""
    def start(stage: str, total: int, unit: str) -> Bar:
        from tqdm import tqdm

        return tqdm(total=total, desc=stage, unit=unit, file=stream or sys.stderr,
                    leave=False, dynamic_ncols=True)
    return start


def auto(enabled: bool, stream: IO[str] | None = None) -> Progress:
    """Terminal bars when `enabled` and `stream` (stderr) is a TTY, else silence."""
    out = stream or sys.stderr
    return terminal(out) if enabled and _isatty(out) else SILENT


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False
