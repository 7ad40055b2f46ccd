"""Check of ``near`` proposals: is the mention close to the name in meaning or in spelling?

Seed auto_link_design.md §1.3 (L1: "fuzzy match + semantic recall"). The near finder
(`near.py`) is cheap and loose ("rotation of JWT keys" and "key to the rotation schedule" both
hold most of "JWT key rotation"); before a model is asked, the mention and the name are embedded
with the vault's embedder (the vector index's space: multilingual USE by default, so "向量搜索"
is close to "向量检索", "rotation of JWT keys" to "JWT key rotation"). Embeddings of a misspelt
word drift ("idempotancy keys" scores 0.61), so the score is the larger of the cosine and the
spelling similarity of the normalised keys (`normalize.spelling_similarity`, 0.79 there); only
pairs at or above `autolink.near_similarity` go on.

Why not query chromadb: the index holds blocks (note text), not names; what a span means is
answered by the span and the name themselves. Only spans the near finder proposes are embedded
(a few per note), names are embedded once per process and cached, so a 10k-note vault is not
re-embedded (bench/bench_autolink.py measures it).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from reme_agent.maintenance.autolink.normalize import spelling_similarity

if TYPE_CHECKING:
    from reme_agent.engine.embedders import Embedder

__all__ = ["NameSimilarity"]


class NameSimilarity:
    """max(embedding cosine, spelling similarity) of (mention, name) pairs; vectors cached by
    text (thread-safe)."""

    def __init__(self, embedder: Embedder, max_cached: int = 200_000) -> None:
        self.embedder = embedder
        self.max_cached = max_cached
        self._cache: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()
        self.embedded = 0  # texts embedded so far (the cost the bench reports)

    def __call__(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        if not pairs:
            return []
        with self._lock:  # one embedder call at a time; L1 plans notes on several threads
            texts = list(dict.fromkeys(t for pair in pairs for t in pair))
            missing = [t for t in texts if t not in self._cache]
            if len(self._cache) + len(missing) > self.max_cached:
                self._cache.clear()
                missing = texts
            if missing:
                vecs = self.embedder.embed_documents(missing)
                self.embedded += len(missing)
                self._cache.update(zip(missing, np.asarray(vecs, dtype=np.float32), strict=True))
            cosines = [float(np.dot(self._cache[a], self._cache[b])) for a, b in pairs]
        return [max(c, spelling_similarity(a, b)) for c, (a, b) in zip(cosines, pairs, strict=True)]
