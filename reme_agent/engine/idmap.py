"""Compact maps between string ids (block ids) and slots, over a base that can be mapped.

At 100k notes there are ~550k blocks. A dict of block id -> slot costs ~140 bytes an entry
(the str, the int, the dict slot): ~80 MB per map, and the index kept two of them (BM25's
id -> slot, the indexer's block -> path). Here the ids loaded from the snapshot stay a
fixed-width byte array sorted once (13 MB at 100k, in the mapped file, so mostly not
resident), found by binary search; only what changed since the snapshot is in a dict.
Lookups cost a few microseconds instead of a fraction of one, which is nothing next to a
search's other work (they run for a search's ~100 candidates, never per block).

Ids are stored as UTF-8 bytes, so an id must not end in NUL characters (numpy strips them);
block ids are hex digests.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, MutableMapping, Sequence

import numpy as np

__all__ = ["BlockPaths", "SlotIds", "SlotIndex", "SortedIds", "encode_ids"]

MEMO_SIZE = 1 << 16   # remembered lookups per base (~10 MB of ids at most)


def encode_ids(ids: Sequence[str] | np.ndarray) -> np.ndarray:
    """Ids as a fixed-width byte array (``S<n>``), in the given order."""
    if isinstance(ids, np.ndarray) and ids.dtype.kind == "S":
        return ids
    raw = [i.encode("utf-8") for i in ids]
    if any(r.endswith(b"\0") for r in raw):
        raise ValueError("ids must not end in NUL characters")
    width = max((len(r) for r in raw), default=1) or 1
    return np.array(raw, dtype=f"S{width}")


class SortedIds:
    """Read-only lookup of ids -> their slot in a base array (``slot`` = position in the
    array the ids were given in)."""

    def __init__(self, sorted_ids: np.ndarray, slots: np.ndarray) -> None:
        if len(sorted_ids) != len(slots):
            raise ValueError("sorted ids and their slots differ in length")
        self.sorted = sorted_ids
        self.slots = slots
        # Answers found so far (the base never changes): a search asks for the same few
        # hundred ids from several places, ~5 µs each by binary search (G6).
        self._memo: dict[str, int] = {}

    @classmethod
    def build(cls, ids: np.ndarray) -> SortedIds:
        """From ids in slot order (sorted once, stable)."""
        order = np.argsort(ids, kind="stable").astype(np.int64)
        return cls(ids[order], order)

    def __len__(self) -> int:
        return len(self.sorted)

    def find(self, key: str) -> int:
        """The slot of `key`, or -1."""
        slot = self._memo.get(key)
        if slot is not None:
            return slot
        n = len(self.sorted)
        if not n:
            return -1
        raw = key.encode("utf-8")
        i = int(self.sorted.searchsorted(raw))
        slot = int(self.slots[i]) if i < n and self.sorted[i] == raw else -1
        memo = self._memo
        if len(memo) >= MEMO_SIZE:
            memo.clear()   # bounded: at 100k notes the base holds ~550k ids
        memo[key] = slot
        return slot


class SlotIndex:
    """id -> slot: a `SortedIds` base (slots the snapshot assigned) plus a dict of what was
    added since; a removed base id is marked gone. Dict-like where the projection needs it."""

    def __init__(self, base: SortedIds | None = None) -> None:
        self._base = base
        n = len(base) if base is not None else 0
        self._gone = np.zeros(n, dtype=bool)       # by base slot
        self._n_gone = 0
        self._extra: dict[str, int] = {}

    def _base_slot(self, key: str) -> int:
        if self._base is None:
            return -1
        slot = self._base.find(key)
        return -1 if slot < 0 or self._gone[slot] else slot

    def get(self, key: str, default: int | None = None) -> int | None:
        slot = self._extra.get(key)
        if slot is not None:
            return slot
        slot = self._base_slot(key)
        return default if slot < 0 else slot

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    def __setitem__(self, key: str, slot: int) -> None:
        base = self._base_slot(key)
        if base >= 0:   # keep the base and the dict disjoint, so len() is a sum
            self._gone[base] = True
            self._n_gone += 1
        self._extra[key] = slot

    def pop(self, key: str, default: int | None = None) -> int | None:
        slot = self._extra.pop(key, None)
        if slot is not None:
            return slot
        base = self._base_slot(key)
        if base < 0:
            return default
        self._gone[base] = True
        self._n_gone += 1
        return base

    def __len__(self) -> int:
        return len(self._gone) - self._n_gone + len(self._extra)

    def __bool__(self) -> bool:
        return len(self) > 0

    def slots(self) -> np.ndarray:
        """Every live slot (unsorted)."""
        base = (np.flatnonzero(~self._gone) if self._base is not None
                else np.zeros(0, dtype=np.int64))
        extra = np.fromiter(self._extra.values(), dtype=np.int64, count=len(self._extra))
        return np.concatenate((base, extra))

    def values(self) -> list[int]:
        return self.slots().tolist()

    def __iter__(self) -> Iterator[str]:
        if self._base is not None:
            live = ~self._gone[self._base.slots]
            for raw in self._base.sorted[live].tolist():
                yield raw.decode("utf-8")
        yield from self._extra


class SlotIds:
    """slot -> id (None for a free slot): the base ids in slot order, a dict of the base
    slots assigned or freed since, and a list of the slots added after the base."""

    def __init__(self, base: np.ndarray | None = None) -> None:
        self._base = base if base is not None else np.zeros(0, dtype="S1")
        self._over: dict[int, str | None] = {}
        self._tail: list[str | None] = []

    def __len__(self) -> int:
        return len(self._base) + len(self._tail)

    def __getitem__(self, slot: int) -> str | None:
        n = len(self._base)
        if slot >= n:
            return self._tail[slot - n]
        if slot in self._over:
            return self._over[slot]
        if slot < 0:
            raise IndexError(slot)
        return self._base[slot].decode("utf-8")

    def __setitem__(self, slot: int, value: str | None) -> None:
        n = len(self._base)
        if slot >= n:
            self._tail[slot - n] = value
        elif slot >= 0:
            self._over[slot] = value
        else:
            raise IndexError(slot)

    def append(self, value: str | None) -> None:
        self._tail.append(value)


class BlockPaths(MutableMapping[str, str]):
    """block id -> vault path for every indexed block (the indexer's map).

    Base: the snapshot's ids (`SortedIds`), each slot's index into a list of paths; what
    changed since lives in a dict. A block set again (even to the same path) moves to the
    dict, so the two never hold the same id.
    """

    def __init__(self, base: SortedIds | None = None, base_path: np.ndarray | None = None,
                 paths: Sequence[str] = ()) -> None:
        self._index = SlotIndex(base)
        self._base_path = base_path if base_path is not None else np.zeros(0, dtype=np.int32)
        self._paths = list(paths)
        self._over: dict[str, str] = {}
        if base is not None and len(self._base_path) != len(base):
            raise ValueError("block paths do not match their ids")

    def __getitem__(self, key: str) -> str:
        hit = self._over.get(key)
        if hit is not None:
            return hit
        slot = self._index.get(key)
        if slot is None:
            raise KeyError(key)
        return self._paths[int(self._base_path[slot])]

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and (key in self._over or key in self._index)

    def __setitem__(self, key: str, value: str) -> None:
        self._index.pop(key)
        self._over[key] = value

    def __delitem__(self, key: str) -> None:
        if self._over.pop(key, None) is None and self._index.pop(key) is None:
            raise KeyError(key)

    def __len__(self) -> int:
        return len(self._index) + len(self._over)

    def __iter__(self) -> Iterator[str]:
        yield from self._index
        yield from self._over

    def clear(self) -> None:
        self.__init__()  # type: ignore[misc]

    def ids_of_paths(self, paths: Iterable[str]) -> list[str]:
        """Ids of the blocks whose path is one of `paths`: one vectorised pass over the base
        (for patching a cold open), not a lookup per block."""
        wanted = set(paths)
        out = [b for b, p in self._over.items() if p in wanted]
        index = self._index
        if index._base is None or not wanted:
            return out
        codes = [i for i, p in enumerate(self._paths) if p in wanted]
        hit = np.isin(self._base_path, codes) & ~index._gone     # by slot
        out += [raw.decode("utf-8") for raw in index._base.sorted[hit[index._base.slots]].tolist()]
        return out

    def paths_of(self, ids: np.ndarray) -> list[str | None]:
        """The path of each id in a byte-array of ids (None when unknown), vectorised over
        the base: what writing a snapshot needs for every block."""
        out: list[str | None] = [None] * len(ids)
        index = self._index
        if index._base is not None and len(index._base) and len(ids):
            base = index._base
            pos = np.minimum(np.searchsorted(base.sorted, ids), len(base) - 1)
            slot = base.slots[pos]
            hit = (base.sorted[pos] == ids) & ~index._gone[slot]
            paths = self._paths
            for i, code in zip(np.flatnonzero(hit).tolist(),
                               self._base_path[slot[hit]].tolist(), strict=True):
                out[i] = paths[code]
        if self._over:
            over = self._over
            for i, raw in enumerate(ids.tolist()):
                if out[i] is None:
                    out[i] = over.get(raw.decode("utf-8"))
        return out

    def values(self) -> list[str]:  # type: ignore[override]
        index = self._index
        out: list[str] = []
        if index._base is not None:
            paths = self._paths
            out = [paths[i] for i in self._base_path[~index._gone].tolist()]
        return out + list(self._over.values())
