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

`Archived` answers per path, memoised: recall asks only about candidates, neighbours and
linkers, never about the whole vault (a full scan of 100k frontmatters cost ~170 ms, once
per index run). A new `Archived` is made when the index generation or archived.json
changes, so callers may cache what they derived from one by its identity.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from reme_agent.recall.pervault import PerVault
from reme_agent.recall.signals import ArchivedSignal

if TYPE_CHECKING:
    from reme_agent.engine.state import IndexState
    from reme_agent.vault import Vault

__all__ = ["ARCHIVED", "Archived", "archived_in", "archived_now"]

ARCHIVED = "archived"
"""The frontmatter `status` value of an archived note."""

StatusOf = Callable[[list[str]], Mapping[str, Any]]
"""paths -> {path: frontmatter `status`} for the paths that have a note (others left out)."""


class Archived:
    """`path in archived`: the rule of the module docstring, one path at a time."""

    def __init__(self, signal: ArchivedSignal | None, status_of: StatusOf,
                 with_status: set[str] | None = None) -> None:
        """`with_status`: every path whose frontmatter says archived, when the caller can
        list them cheaply (the state's status index); then no path needs a lookup, only
        the few the maintainer listed with a recorded state (is the note still there?)."""
        self._status_of = status_of
        self._listed = frozenset(signal.archived) if signal else frozenset()
        self._thawed = frozenset(signal.thawed) if signal else frozenset()
        raw = (signal.model_extra or {}).get("state") if signal else None
        self._recorded = frozenset(raw) if isinstance(raw, dict) else frozenset()
        self._memo: dict[str, bool] = {}
        self._lock = threading.Lock()
        self._with_status = frozenset(with_status) if with_status is not None else None
        if self._with_status is not None:
            # the one case membership cannot decide: a listed note with a recorded state
            # is live again only if it is still indexed and says something else now
            tricky = list(self._listed & self._recorded)
            status = self._status_of(tricky) if tricky else {}
            self._memo = {p: self._decide(p, p in status, status.get(p)) for p in tricky}

    def __contains__(self, path: object) -> bool:
        if not isinstance(path, str):
            return False
        hit = self._memo.get(path)
        if hit is None:
            if self._with_status is not None:
                return self._decide(path, True, ARCHIVED if path in self._with_status
                                    else None)
            self.prefetch((path,))
            hit = self._memo[path]
        return hit

    def __bool__(self) -> bool:
        return True   # an empty-looking set may still hold notes archived by frontmatter

    @property
    def nothing(self) -> bool:
        """True when no note can be archived (known from the status index, nothing listed):
        callers may skip per-link checks, e.g. a hub's linkers for its live in-degree."""
        return self._with_status is not None and not self._with_status and not self._listed

    def prefetch(self, paths: Iterable[str]) -> None:
        """Decide many paths with one status lookup (a hub's linkers, a page of candidates);
        nothing to do when the status index decided them all."""
        if self._with_status is not None:
            return
        todo = [p for p in dict.fromkeys(paths) if p not in self._memo]
        if not todo:
            return
        status = self._status_of(todo)
        decided = {p: self._decide(p, p in status, status.get(p)) for p in todo}
        with self._lock:
            self._memo.update(decided)

    def _decide(self, path: str, known: bool, status: Any) -> bool:
        if status == ARCHIVED:
            return path not in self._thawed
        # listed by the maintainer: archived, unless a person since set another status
        return path in self._listed and not (known and path in self._recorded)


class _Current:
    """The vault's current `Archived`, remade when the index or archived.json changes."""

    def __init__(self, state: IndexState) -> None:
        self.state = state
        self._lock = threading.Lock()
        self._key: tuple[Any, ...] | None = None
        self._value: Archived | None = None

    def get(self, vault: Vault) -> Archived:
        key = (self.state.generation(), vault.signals.file_key("archived"))
        with self._lock:
            if key == self._key and self._value is not None:
                return self._value
        signal = vault.signals.get("archived")
        value = Archived(signal if isinstance(signal, ArchivedSignal) else None,
                         lambda paths: self.state.frontmatter_values(paths, "status"),
                         self.state.paths_with_status(ARCHIVED))
        with self._lock:
            self._key, self._value = key, value
        return value


_current: PerVault[_Current] = PerVault(_Current)


def archived_now(vault: Vault) -> Archived:
    """The archived notes as of now (see the module docstring)."""
    return _current.get(vault).get(vault)


def archived_in(signal: Any, frontmatters: Mapping[str, Mapping[str, Any]]) -> Archived:
    """The same rule over frontmatters already in hand (the maintainer's view of the files)."""
    return Archived(signal if isinstance(signal, ArchivedSignal) else None,
                    lambda paths: {p: frontmatters[p].get("status") for p in paths
                                   if p in frontmatters})
