"""One primitive for the lock files under `.reme/`: an exclusive `flock` with a deadline.

The indexer (`index.lock`) and the vector store (`chroma.lock`) both need it; each wraps it
with its own error, because the advice to the user differs.
"""

from __future__ import annotations

import fcntl
import time
from collections.abc import Callable


def flock_until(fd: int, timeout: float, sleep: Callable[[float], None] = time.sleep) -> bool:
    """Take an exclusive flock on `fd`, polling until `timeout` seconds; False if it never came."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            sleep(0.05)
