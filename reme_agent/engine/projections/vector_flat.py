"""An exact scan over a small collection's stored vectors, instead of chroma's ANN call.

Why: for a few thousand blocks, chroma's query costs more than the search it does. At 5.6k
blocks (a 1k-note vault) one `query` took 2.8 ms wall / 1.9 ms CPU on the bench machine
(the HNSW walk is a fraction of that; the rest is chroma's per-call work), while one
single-threaded matrix-vector product over the same float32 vectors and a partial sort take
0.5 ms (1-1.5 ms with the caches cold, inside a search); at 20k vectors 2 ms; at 57k ~5.5 ms,
slower than chroma's 3.5 ms. The answer is what chroma's HNSW approximates: the same nearest
blocks, exact instead of approximate.

chroma stays the vector store (DESIGN §6): this is a read-side copy of one collection of at
most `MAX_VECTORS`, made by a process's first query (so every process answers alike),
brought up to date by this process's own upserts and deletes (`apply`), dropped when it
deletes by path or switches collection (`invalidate`; another process's index run reaches
us as a reopen), and made again by the next query. Only for a store this process opened: a
chroma server can be written by anyone, with no generation to follow.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["MAX_VECTORS", "FlatIndex"]

log = logging.getLogger("reme_agent.engine")

MAX_VECTORS = 6_000
"""Up to this many vectors a store is copied (by its first query: ~50 µs a vector, chroma
hands them over as Python floats, so at most ~0.3 s once per process) and scanned exactly
(0.5-1.5 ms against chroma's ~2-3 ms query). The scan alone would beat chroma up to ~20k
vectors, but the copy must be made before a process's first answer: every process answers
alike (chroma's HNSW is approximate, and ranked lower results differently in 3 of 6 queries
at 5.6k vectors when a warm process had a copy and a cold one did not)."""
PAGE = 2_000

Page = tuple[list[str], np.ndarray]
Reader = Callable[[int, int], Page]   # (offset, limit) -> (ids, vectors)


class FlatIndex:
    """One collection's vectors as a matrix: `query` answers once `build` has run."""

    def __init__(self, max_vectors: int | None = None) -> None:
        self.max_vectors = MAX_VECTORS if max_vectors is None else max_vectors
        self._lock = threading.Lock()
        self._epoch = 0                 # bumped by invalidate(): a build from before is void
        self._ready: tuple[list[str], dict[str, int], np.ndarray] | None = None
        self._building = False
        self._too_big_at: int | None = None   # the epoch whose collection was too big

    @property
    def ready(self) -> bool:
        return self._ready is not None

    def invalidate(self) -> None:
        """The collection changed or was switched: forget the copy (a build in flight too)."""
        with self._lock:
            self._epoch += 1
            self._ready = None
            self._too_big_at = None

    def apply(self, upserted: Sequence[str] = (), vecs: np.ndarray | None = None,
              deleted: Sequence[str] = ()) -> None:
        """Follow this process's own write (it landed in chroma): replace or add the
        `upserted` rows (`vecs`: as chroma stores them, read back), drop the `deleted`
        ones. Copy-on-write, so a query in another thread sees the copy before or after,
        never half of it; a build in flight is void. A store known to be over the limit
        stays so (no count before every query of a process that writes) until a switch or
        reopen (`invalidate`)."""
        with self._lock:
            too_big = self._too_big_at == self._epoch
            self._epoch += 1
            ready = self._ready
            if ready is None:
                self._too_big_at = self._epoch if too_big else None
                return
            ids, rows, matrix = ready
            gone = {*deleted, *upserted}
            keep = [r for r, bid in enumerate(ids) if bid not in gone] \
                if any(g in rows for g in gone) else None
            new_ids = ids if keep is None else [ids[r] for r in keep]
            new_matrix = matrix if keep is None else matrix[keep]
            if len(upserted):
                added = np.asarray(vecs, dtype=np.float32).reshape(len(upserted), -1)
                last = {bid: i for i, bid in enumerate(upserted)}   # a repeated id: its last
                order = sorted(last.values())
                new_ids = [*new_ids, *(upserted[i] for i in order)]
                new_matrix = (np.concatenate([new_matrix, added[order]])
                              if len(new_matrix) else added[order])
            if len(new_ids) > self.max_vectors:
                self._ready, self._too_big_at = None, self._epoch
                return
            self._ready = (list(new_ids), {bid: r for r, bid in enumerate(new_ids)},
                           new_matrix)

    def query(self, qvec: np.ndarray, k: int) -> list[tuple[str, float]] | None:
        """Top-`k` (id, cosine) best first, ties by id; None when no copy is ready."""
        ready = self._ready
        if ready is None:
            return None
        ids, _, matrix = ready
        if not ids or k <= 0:
            return []
        q = np.asarray(qvec, dtype=np.float32).reshape(-1)
        norm = float(np.linalg.norm(q))
        # einsum, not `@`: numpy's BLAS splits a matrix-vector product over every core,
        # and on a 2-core machine with anything else running that took 6.5 ms instead of
        # 0.55 (einsum's single-threaded loop) at 5.6k vectors
        scores = np.einsum("ij,j->i", matrix, q / norm if norm > 0 else q)
        k = min(k, len(ids))
        head = np.argpartition(-scores, k - 1)[:k] if k < len(ids) else np.arange(len(ids))
        head = head[np.argsort(-scores[head], kind="stable")]
        top = np.clip(scores[head], -1.0, 1.0).tolist()
        rows = head.tolist()
        if any(a == b for a, b in zip(top, top[1:], strict=False)):   # ties: by id
            pairs = sorted(zip(top, rows, strict=True), key=lambda p: (-p[0], ids[p[1]]))
            return [(ids[r], v) for v, r in pairs]
        return [(ids[r], v) for r, v in zip(rows, top, strict=True)]

    def vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray] | None:
        """Stored vectors of the known `ids` (chroma's values), or None when no copy is
        ready."""
        ready = self._ready
        if ready is None:
            return None
        _, rows, matrix = ready
        return {i: matrix[r] for i in ids if (r := rows.get(i)) is not None}

    def wanted(self) -> bool:
        """True when a build should start: no copy, none building, not known to be too big."""
        with self._lock:
            return (self._ready is None and not self._building
                    and self._too_big_at != self._epoch)

    def build(self, count: Callable[[], int], read: Reader) -> bool:
        """Read the collection page by page (`read(offset, limit)`) into one matrix; True
        when it was installed (not too big, not invalidated meanwhile)."""
        with self._lock:
            if self._building:
                return False
            self._building = True
            epoch = self._epoch
        try:
            total = count()
            if total > self.max_vectors:
                with self._lock:
                    if epoch == self._epoch:
                        self._too_big_at = epoch
                return False
            ids: list[str] = []
            parts: list[np.ndarray] = []
            while True:
                if epoch != self._epoch:
                    return False   # invalidated (a write, a switch, a close): stop reading
                got_ids, vecs = read(len(ids), PAGE)
                if not got_ids:
                    break
                ids += got_ids
                parts.append(np.asarray(vecs, dtype=np.float32).reshape(len(got_ids), -1))
                if len(ids) > self.max_vectors or len(got_ids) < PAGE:
                    break
            if len(ids) > self.max_vectors:
                return False
            # as chroma stores them: its cosine index keeps them at unit length already
            matrix = np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)
            rows = {bid: r for r, bid in enumerate(ids)}
            if len(rows) != len(ids):   # chroma paged a moving collection: do not trust it
                return False
            with self._lock:
                if epoch != self._epoch:
                    return False
                self._ready = (ids, rows, matrix)
            return True
        finally:
            with self._lock:
                self._building = False
