"""A bounded cache of stored block vectors, by block id (the query side of the vector store).

Why: recall scores the keyword-only candidates of a query by their stored vectors (the
blend fusion needs every candidate on both sides). chromadb hands stored vectors back slowly:
`get(ids, include=["embeddings"])` for 50 blocks took 2-9 ms on the 2-core bench machine,
more than embedding the query, while the rest of the vector side is one ANN call. Since
session 7 most come from the SQLite copy beside the store (`vector_copy.py`), which is
faster but still ~10-13 µs of CPU a row inside a search, and 38% of the bench's reads at 10k
ask for a row an earlier search read: this cache holds those too.

A block id is derived from the block's path and embedded text (`engine.indexer.block_id`),
so the vector of an id does not change while the collection (one per embedder) stays the
same: entries never go stale, only out of memory. The cache holds what was read (the
copy's value, or chroma's for an id the copy lacks; not what an upsert sent), and
is cleared whenever the projection switches collection (a rebuild's new generation, a
reopen after another process wrote). LRU, bounded in bytes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable

import numpy as np

__all__ = ["DEFAULT_CACHE_BYTES", "VectorCache"]

DEFAULT_CACHE_BYTES = 64 * 1024 * 1024
"""64 MB: ~30k USE vectors (a 5k-note vault whole; a 10k-note vault's hot half)."""
_ENTRY_OVERHEAD = 160   # dict slot + ndarray header, measured roughly


class VectorCache:
    """id -> float32 vector, least recently used dropped first beyond `max_bytes`."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.max_bytes = max(0, int(max_bytes))
        self._items: OrderedDict[str, np.ndarray] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._items)

    def get_many(self, ids: Iterable[str]) -> tuple[dict[str, np.ndarray], list[str]]:
        """(cached vectors, ids not cached), in the order asked."""
        found: dict[str, np.ndarray] = {}
        missing: list[str] = []
        with self._lock:
            items = self._items
            for i in ids:
                vec = items.get(i)
                if vec is None:
                    missing.append(i)
                else:
                    items.move_to_end(i)
                    found[i] = vec
            self.hits += len(found)
            self.misses += len(missing)
        return found, missing

    def put_many(self, ids: Iterable[str], vecs: Iterable[np.ndarray]) -> None:
        """Remember these vectors (copies, float32), evicting the least recently used."""
        if self.max_bytes <= 0:
            return
        with self._lock:
            items = self._items
            for i, v in zip(ids, vecs, strict=True):
                vec = np.array(v, dtype=np.float32)   # a copy: never a view of a batch
                old = items.pop(i, None)
                if old is not None:
                    self._bytes -= old.nbytes + _ENTRY_OVERHEAD
                items[i] = vec
                self._bytes += vec.nbytes + _ENTRY_OVERHEAD
            while self._bytes > self.max_bytes and items:
                _, old = items.popitem(last=False)
                self._bytes -= old.nbytes + _ENTRY_OVERHEAD

    def discard(self, ids: Iterable[str]) -> None:
        with self._lock:
            for i in ids:
                old = self._items.pop(i, None)
                if old is not None:
                    self._bytes -= old.nbytes + _ENTRY_OVERHEAD

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0
