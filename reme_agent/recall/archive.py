"""Which notes are archived, as recall sees them (DESIGN §7, §8; seed "拓扑与时间联合遗忘算法").

An archived note is hidden from search and from default traversal, and its links are
suspended in centrality. Two sources say a note is archived, and the newer word wins:

    archived = listed in meta/archived.json           (the maintainer's decay; an eval may list any note)
             ∪ frontmatter `status: archived`          (maintain writes it; a person may write it by hand)
             − `thawed` in archived.json               (archived in frontmatter, warm again)
             − listed notes a person un-archived       (listed with a recorded `state`, and the
                                                        frontmatter no longer says archived)

The frontmatter is read from the index state, so a hand edit counts as soon as the file is
re-indexed (search re-indexes stale candidates before it filters). `thawed` exists because
the status machine never moves back (DESIGN §3): a note the maintainer thaws keeps
`status: archived` in its file, and only the list can say it is live again.

The set is cached per index generation and archived.json state: a search pays one SQL scan
after an index run, nothing otherwise.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from reme_agent.recall.pervault import PerVault
from reme_agent.recall.signals import ArchivedSignal

if TYPE_CHECKING:
    from reme_agent.engine.state import IndexState
    from reme_agent.vault import Vault

__all__ = ["ARCHIVED", "archived_paths", "live_in_degree"]

ARCHIVED = "archived"
"""The frontmatter `status` value of an archived note."""


class _ArchiveCache:
    def __init__(self, state: IndexState) -> None:
        self.state = state
        self._lock = threading.Lock()
        self._key: tuple[Any, ...] | None = None
        self._value: frozenset[str] = frozenset()

    def get(self, vault: Vault) -> frozenset[str]:
        key = (self.state.generation(), vault.signals.file_key("archived"))
        with self._lock:
            if key == self._key:
                return self._value
        signal = vault.signals.get("archived")
        value = _compute(self.state, signal if isinstance(signal, ArchivedSignal) else None)
        with self._lock:
            self._key, self._value = key, value
        return value


_caches: PerVault[_ArchiveCache] = PerVault(_ArchiveCache)


def archived_paths(vault: Vault) -> frozenset[str]:
    """The archived notes now (see the module docstring); the same object while unchanged."""
    return _caches.get(vault).get(vault)


def _compute(state: IndexState, signal: ArchivedSignal | None) -> frozenset[str]:
    by_status = state.paths_where("status", ARCHIVED)
    if signal is None:
        return frozenset(by_status)
    raw = (signal.model_extra or {}).get("state")
    recorded = raw if isinstance(raw, dict) else {}
    thawed = set(signal.thawed)
    listed = set(signal.archived)
    # A listed note the maintainer archived (its state is recorded) whose frontmatter, once
    # indexed, says something else was un-archived by hand.
    check = [p for p in listed if p in recorded and p not in by_status]
    indexed = set(state.file_stats(check)) if check else set()
    return frozenset((listed - indexed) | (by_status - thawed))


def live_in_degree(graph: Any, path: str, archived: frozenset[str]) -> int:
    """Distinct live notes linking to `path`: links from archived notes are suspended."""
    return int(graph.in_degree(path, skip=archived) if archived else graph.in_degree(path))
