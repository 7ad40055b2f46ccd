"""Never stale: what search returns exists, and its text is the file's (DESIGN §7).

The projections follow the files only when something indexes them (the watcher, a tool
write, `reme-agent index`). A note deleted or edited by hand in between would otherwise come
back from search: gone, or with its old chunk text. So before answering, search stats the
files of the notes it shows (one `os.stat` each; all its candidates only once one of those
changed) and compares size + mtime with the index state:
- changed or deleted files are re-indexed, path-limited (`Vault.refresh`), and the search
  runs again on the fresh projections;
- if that re-index fails (another process holds the index lock, a read-only vault, a vector
  store down), their candidates are dropped and a warning says so.

Files the index never saw cannot be candidates; a periodic listing of the vault (at most
once per `SCAN_SECONDS` per Vault object: the files a whole-vault index run would take,
named from the last run's folder listings where a folder did not change) counts them, so a vault that was
never indexed says "run `reme-agent index`" instead of "no results", and `index_freshness`
in the JSON reports the counts.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reme_agent.recall.pervault import PerVault

if TYPE_CHECKING:
    from reme_agent.engine.state import IndexState
    from reme_agent.vault import Vault

__all__ = ["FreshnessCheck", "IndexFreshness", "check_for"]

log = logging.getLogger("reme_agent.recall")
SCAN_SECONDS = 300.0


@dataclass
class IndexFreshness:
    """What one search found about the index (the JSON's `index_freshness`)."""

    indexed_files: int = 0
    unindexed_files: int | None = None    # None: not counted yet in this process
    reindexed: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)

    def hint(self) -> str | None:
        """The one line a person needs, or None when the index is in step."""
        if self.indexed_files == 0:
            return ("the search index is empty: run `reme-agent index` (or vault.index()) "
                    "to index this vault")
        if self.unindexed_files:
            return (f"{self.unindexed_files} note file(s) in the vault are not indexed yet: "
                    "run `reme-agent index`")
        return None

    def as_dict(self) -> dict[str, Any]:
        return {"indexed_files": self.indexed_files, "unindexed_files": self.unindexed_files,
                "reindexed": list(self.reindexed), "dropped": list(self.dropped)}


class FreshnessCheck:
    """Per-vault stat check of candidate files against the index state."""

    def __init__(self, state: IndexState) -> None:
        self.state = state
        self._lock = threading.Lock()
        self._generation = -1
        self._stats: dict[str, tuple[int, int]] = {}
        self._scanned_at = -SCAN_SECONDS
        self._unindexed: int | None = None

    def _known(self) -> dict[str, tuple[int, int]]:
        gen = self.state.generation()
        with self._lock:
            if gen != self._generation:
                self._stats = {p: (s[0], s[1]) for p, s in self.state.file_stats().items()}
                self._generation = gen
            return self._stats

    def stale(self, root: str, paths: Iterable[str]) -> list[str]:
        """Indexed paths whose file is gone or whose size/mtime differ from the index."""
        known = self._known()
        out = []
        stat = os.stat
        base = root if root.endswith("/") else root + "/"   # a join per path cost as much
        for path in dict.fromkeys(paths):
            seen = known.get(path)
            if seen is None:
                continue   # not an indexed file (cannot be a candidate)
            try:
                st = stat(base + path)
            except OSError:
                out.append(path)
                continue
            if (st.st_size, st.st_mtime_ns) != seen:
                out.append(path)
        return out

    def report(self, vault: Vault, hidden: tuple[str, ...] = ()) -> IndexFreshness:
        """Counts of indexed and (at most every SCAN_SECONDS) never-indexed note files;
        files under `hidden` prefixes (meta/, audit/: never search hits) are not counted."""
        known = self._known()
        now = time.monotonic()
        if now - self._scanned_at >= SCAN_SECONDS:
            self._scanned_at = now
            try:
                files = [p for p in vault.indexer.indexable_paths() if not p.startswith(hidden)]
                self._unindexed = sum(1 for p in files if p not in known)
            except OSError as exc:
                log.warning("could not list the vault to count unindexed notes: %s", exc)
        return IndexFreshness(indexed_files=len(known), unindexed_files=self._unindexed)


_checks: PerVault[FreshnessCheck] = PerVault(FreshnessCheck)


def check_for(vault: Vault) -> FreshnessCheck:
    """The vault's freshness check (one per Vault object)."""
    return _checks.get(vault)


def refresh_stale(vault: Vault, stale: list[str]) -> tuple[list[str], str | None]:
    """Re-index `stale` path-limited: (paths re-indexed, warning if it could not)."""
    try:
        vault.refresh(stale)
    except Exception as exc:   # any failure: answer without them rather than not at all
        with contextlib.suppress(Exception):
            log.warning("could not re-index changed notes %s: %s", stale, exc)
        return [], (f"{len(stale)} changed or deleted note(s) could not be re-indexed "
                    f"({type(exc).__name__}: {exc}); left out of the results: "
                    + ", ".join(stale[:5]))
    return stale, None
