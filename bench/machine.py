"""What the G6 benches share: the machine's load, a one-core burner, percentiles.

Every G6 figure is a comparison made in one run, interleaved, because the absolute numbers
on a shared 2-core machine move with whatever else runs; the load average is printed at the
start and end so a reader can tell a quiet run from a loaded one. ``--burn`` starts one
process that keeps one core busy (the issue's "loaded" condition), stopped when the bench ends.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

BURN = "import time\nwhile True:\n    pass\n"


def load_text() -> str:
    """'load 1.23 0.98 0.87 on 2 CPUs' (1, 5 and 15-minute averages)."""
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


@contextlib.contextmanager
def burner(enabled: bool) -> Iterator[subprocess.Popen[bytes] | None]:
    """A process spinning on one core while the block runs (nothing when not enabled)."""
    if not enabled:
        yield None
        return
    proc = subprocess.Popen([sys.executable, "-c", BURN])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]
