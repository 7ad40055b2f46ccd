"""An array produced piece by piece, for writing large snapshot arrays without holding them.

At 100k notes BM25's postings and per-block term arrays are ~130 MB each; building them
whole before writing doubled what a process holds while it writes its snapshot (the
indexing process, right after the full index: its peak). A `Chunked` is written slice by
slice (`engine.snapshot.write_snapshot`), or joined with `whole()` where a caller wants it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

__all__ = ["Chunked", "whole"]


@dataclass(frozen=True)
class Chunked:
    dtype: np.dtype
    length: int
    chunks: Callable[[], Iterator[np.ndarray]]   # yields 1-d slices, `length` items in all

    def whole(self) -> np.ndarray:
        out = np.empty(self.length, dtype=self.dtype)
        at = 0
        for part in self.chunks():
            out[at:at + len(part)] = part
            at += len(part)
        if at != self.length:
            raise ValueError(f"chunks held {at} items, not {self.length}")
        return out


def whole(value: np.ndarray | Chunked) -> np.ndarray:
    """`value` as one array."""
    return value.whole() if isinstance(value, Chunked) else value
