"""Block rows of the index state, cached per index generation (DESIGN §7 recall, issue G6).

A search reads the rows (path, lines, text) of ~100-150 candidate blocks and the block ids of
the notes the query names. From SQLite that was the largest single cost of a search at 10k
notes (~1.7 ms of ~8 ms of Python), while the rows only change when an index run commits,
which moves the index generation. So, like the node catalog and the name index, rows are
kept per Vault object and dropped as a whole when the generation moves (any index run, in
any process); within one generation a cached row is exactly what SQLite would return.
LRU-bounded, so a 100k-note vault does not end up holding its text twice.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import TYPE_CHECKING

from reme_agent.recall.pervault import PerVault

if TYPE_CHECKING:
    from reme_agent.engine.state import BlockRow, IndexState
    from reme_agent.vault import Vault

__all__ = ["MAX_PATHS", "MAX_ROWS", "BlockRows", "rows_for"]

MAX_ROWS = 20_000      # ~10-20 MB of block text
MAX_PATHS = 10_000


class BlockRows:
    """Rows by block id and block ids by path, valid for one index generation."""

    def __init__(self, state: IndexState) -> None:
        self.state = state
        self._lock = threading.Lock()
        self._generation = -1
        self._rows: OrderedDict[str, BlockRow] = OrderedDict()
        self._ids: OrderedDict[str, list[str]] = OrderedDict()

    def sync(self) -> None:
        """Drop everything if an index run committed since (one SQL read)."""
        gen = self.state.generation()
        with self._lock:
            if gen != self._generation:
                self._rows.clear()
                self._ids.clear()
                self._generation = gen

    def rows(self, ids: Iterable[str]) -> dict[str, BlockRow]:
        """Rows of these ids (unknown ids left out), as `IndexState.blocks_by_id` gives them."""
        out: dict[str, BlockRow] = {}
        missing: list[str] = []
        with self._lock:
            gen = self._generation
            cached = self._rows
            for bid in dict.fromkeys(ids):
                row = cached.get(bid)
                if row is None:
                    missing.append(bid)
                else:
                    cached.move_to_end(bid)
                    out[bid] = row
        if missing:
            fetched = self.state.blocks_by_id(missing)
            with self._lock:
                if gen == self._generation:   # else a newer generation was seen meanwhile
                    for bid, row in fetched.items():
                        self._rows[bid] = row
                    while len(self._rows) > MAX_ROWS:
                        self._rows.popitem(last=False)
            out.update(fetched)
        return out

    def block_ids_many(self, paths: Iterable[str]) -> dict[str, list[str]]:
        """`block_ids` of each path, the ones not cached read in one query."""
        paths = list(dict.fromkeys(paths))
        out: dict[str, list[str]] = {}
        with self._lock:
            gen = self._generation
            for path in paths:
                ids = self._ids.get(path)
                if ids is not None:
                    self._ids.move_to_end(path)
                    out[path] = ids
        missing = [p for p in paths if p not in out]
        if missing:
            read = self.state.block_ids_of(missing)
            fetched = {p: read.get(p, []) for p in missing}
            with self._lock:
                if gen == self._generation:
                    self._ids.update(fetched)
                    while len(self._ids) > MAX_PATHS:
                        self._ids.popitem(last=False)
            out.update(fetched)
        return {p: out[p] for p in paths}

    def block_ids(self, path: str) -> list[str]:
        """The note's block ids, in `IndexState.block_ids` order (treat as read-only)."""
        with self._lock:
            gen = self._generation
            ids = self._ids.get(path)
            if ids is not None:
                self._ids.move_to_end(path)
                return ids
        ids = self.state.block_ids(path)
        with self._lock:
            if gen == self._generation:
                self._ids[path] = ids
                while len(self._ids) > MAX_PATHS:
                    self._ids.popitem(last=False)
        return ids


_rows: PerVault[BlockRows] = PerVault(BlockRows)


def rows_for(vault: Vault) -> BlockRows:
    """The vault's row cache, in step with its index generation."""
    rows = _rows.get(vault)
    rows.sync()
    return rows
