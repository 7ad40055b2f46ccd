"""Keyword projection: BM25 over an incrementally maintained inverted index (DESIGN §6).

Scores are exactly ``rank_bm25.BM25Okapi``'s (k1 1.5, b 0.75, epsilon 0.25), including its
rule for terms in more than half the documents: ``idf = log((N-n+0.5)/(n+0.5))``, and a
negative idf is replaced by ``epsilon * average_idf`` (mean idf over the whole vocabulary).
rank_bm25 itself cannot be used directly because it must be rebuilt on every change and its
``get_scores`` loops over every document for every query term (~11 ms per 10k docs).

Design, and why:

- **Postings are packed int64 values** (generation | doc slot | tf), 8 bytes per posting.
  Python dicts per posting would cost ~100 bytes each, i.e. several hundred MB at 100k
  blocks. A term's postings are a slice of the *base* (one array for all terms, as loaded
  from the cold-open snapshot, usually memory-mapped) plus an ``array('q')`` of those added
  since. A base slot whose document is removed is never given to another document (until
  the next snapshot), so the base needs no validity check and is never copied: its stale
  postings only score an empty slot, which ranking skips.
- **No Python object per document** (G6): each document's term ids and frequencies are a
  slice of the base arrays or of one growable pool; ids map to slots through
  `engine.idmap` (a sorted byte array plus a dict of what changed). Per-document numpy
  arrays and a dict of 550k ids cost ~600 MB at 100k notes.
- **add is O(len(doc)); remove is O(unique terms of the doc)**: removal bumps the slot's
  generation, which invalidates its postings in place; a term's added array is compacted
  once more than half of it is stale. Term df and document lengths are kept exactly.
- **Query cost follows the postings of the query terms**, not the corpus size: each term's
  postings are unpacked with numpy and summed per document with ``bincount``.
- **idf is cached** and recomputed (vectorised, O(vocabulary)) only after a change, because
  the average idf, and so every negative-idf term, depends on all terms.
- One ``RLock`` makes it safe to query while the indexer thread writes.
"""

from __future__ import annotations

import threading
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TypeVar

import numpy as np

from reme_agent.engine.chunked import Chunked
from reme_agent.engine.idmap import SlotIds, SlotIndex, SortedIds, encode_ids
from reme_agent.engine.tokenize import tokenize

__all__ = ["KeywordProjection", "QueryScores"]

_TF_BITS = 16
_SLOT_BITS = 24
_TF_MASK = (1 << _TF_BITS) - 1
_SLOT_MASK = (1 << _SLOT_BITS) - 1
_GEN_SHIFT = _TF_BITS + _SLOT_BITS
_GEN_MASK = (1 << 23) - 1  # keeps packed values positive int64
_MAX_SLOTS = 1 << _SLOT_BITS
_EMPTY = np.zeros(0, dtype=np.int64)
_T = TypeVar("_T")
_NONE, _IN_BASE, _IN_POOL = 0, 1, 2   # where a slot's terms live (`_doc_src`)
_POOL_MIN_GARBAGE = 1 << 16            # pool entries of removed documents before compacting
_MEMO = 2                              # queries whose scores are kept (terms as asked, and
                                       # distinct: a query with a repeated word needs both)
_HEAD_KEPT = 512                       # slots of a ranking's head kept for the next one
_PHRASE_SCAN = 1024                    # best-scored documents checked for a phrase's terms
_CHECK_COST = 350                      # postings counted in the time one document is checked


def _last(items: list[_T], n: int) -> list[_T]:
    """The last ``n`` items (none for ``n`` <= 0)."""
    return items[len(items) - n:] if n > 0 else []


def _grow(a: np.ndarray, n: int) -> np.ndarray:
    """Return ``a`` with room for index ``n`` (capacity doubling, new cells zero)."""
    if n < len(a):
        return a
    out = np.zeros(max(n + 1, 2 * len(a), 64), dtype=a.dtype)
    out[: len(a)] = a
    return out


class KeywordProjection:
    """BM25 index of documents (vault blocks) keyed by id; scores equal ``BM25Okapi``'s."""

    def __init__(
        self,
        k1: float = 1.5,
        b: float = 0.75,
        epsilon: float = 0.25,
        tokenizer: Callable[[str], list[str]] = tokenize,
    ) -> None:
        self.k1 = float(k1)
        self.b = float(b)
        self.epsilon = float(epsilon)
        self.tokenizer = tokenizer
        self._lock = threading.RLock()
        self._reset()

    def _reset(self) -> None:
        # bumped by every write: a QueryScores taken before a write recomputes its scores
        self._version = getattr(self, "_version", 0) + 1
        # terms
        self._tid: dict[str, int] = {}
        self._terms: list[str | None] = []
        self._free_tids: list[int] = []
        self._post: list[array | None] = []   # postings added since the base, per term
        self._df = np.zeros(0, dtype=np.int64)
        self._stale = np.zeros(0, dtype=np.int64)
        # the base: postings of every term as loaded (term t owns base_post[off[t]:off[t+1]]
        # while has_base[t]), and each base slot's term ids/frequencies
        self._base_post = _EMPTY
        self._base_off = np.zeros(1, dtype=np.int64)
        self._has_base = np.zeros(0, dtype=bool)
        self._base_tid = np.zeros(0, dtype=np.int32)
        self._base_tf = np.zeros(0, dtype=np.int32)
        # documents
        self._slot = SlotIndex()
        self._ids = SlotIds()
        self._free_slots: list[int] = []
        self._n_base = 0   # slots loaded from the base: never reused (see `_parts`)
        self._gen = np.zeros(0, dtype=np.int64)
        self._dl = np.zeros(0, dtype=np.float64)
        # a slot's unique term ids and their frequencies: base or pool slice (or none)
        self._doc_src = np.zeros(0, dtype=np.int8)
        self._doc_pos = np.zeros(0, dtype=np.int64)
        self._doc_len = np.zeros(0, dtype=np.int32)
        self._pool_tid = np.zeros(0, dtype=np.int32)
        self._pool_tf = np.zeros(0, dtype=np.int32)
        self._pool_used = 0
        self._pool_garbage = 0
        self._total_len = 0
        # cached idf (per term id), None when a write made it stale
        self._idf: np.ndarray | None = None
        # the last `_MEMO` queries' dense scores, keyed by (their terms, _version), newest last
        self._dense_memo: list[tuple[tuple[tuple[str, ...], int],
                                     tuple[np.ndarray, np.ndarray]]] = []
        # the last scoring's per-term contributions: (_version, spans, slots, scores)
        self._terms_memo: tuple[int, dict[int, tuple[int, int, int]], np.ndarray,
                                np.ndarray] | None = None
        # the heads of the last `_MEMO` rankings: (dense, matched, first slots; see `_head`)
        self._head_memo: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        # the last query's coverage weights, keyed by (its terms, _version)
        self._coverage_memo: tuple[tuple[tuple[str, ...], int],
                                   tuple[float, dict[int, float]]] | None = None

    # --- writes -----------------------------------------------------------------------------

    def add(
        self, doc_id: str, text: str | None = None, tokens: list[str] | None = None
    ) -> list[str]:
        """Index (or re-index) one document; returns its tokens.

        Pass ``tokens`` saved from an earlier ``add`` to skip tokenising on a cold open.
        """
        if tokens is None:
            if text is None:
                raise ValueError("KeywordProjection.add needs text or tokens")
            tokens = self.tokenizer(text)
        with self._lock:
            self._add(doc_id, tokens)
        return tokens

    def add_many(self, items: Iterable[tuple[str, list[str]]]) -> None:
        """Bulk ``add`` of pre-tokenised documents (cold open from persisted tokens)."""
        with self._lock:
            for doc_id, tokens in items:
                self._add(doc_id, tokens)

    def remove(self, doc_id: str) -> None:
        """Remove a document; unknown ids are ignored."""
        with self._lock:
            self._remove(doc_id)

    def clear(self) -> None:
        """Forget every document (before a cold reload)."""
        with self._lock:
            self._reset()

    def _new_tid(self, term: str) -> int:
        if self._free_tids:
            tid = self._free_tids.pop()
            self._terms[tid] = term
        else:
            tid = len(self._terms)
            self._terms.append(term)
            self._post.append(None)
            self._df = _grow(self._df, tid)
            self._stale = _grow(self._stale, tid)
        self._tid[term] = tid
        return tid

    # --- storage ------------------------------------------------------------------------------

    def _parts(self, tid: int) -> list[np.ndarray]:
        """A term's live postings, without a copy: its base slice (whole: a base slot whose
        document was removed is never given to another, so its postings only ever score
        an empty slot) and the postings added since (filtered when some are stale)."""
        parts = []
        if tid < len(self._has_base) and self._has_base[tid]:
            parts.append(self._base_post[self._base_off[tid]:self._base_off[tid + 1]])
        added = self._post[tid]
        if added:
            more = np.frombuffer(added, dtype=np.int64)
            parts.append(more[self._valid(more)] if self._stale[tid] else more)
        return parts

    def _all_postings(self, tid: int) -> np.ndarray:
        """Every posting of a term, stale ones included (for export), as one array."""
        parts = []
        if tid < len(self._has_base) and self._has_base[tid]:
            parts.append(self._base_post[self._base_off[tid]:self._base_off[tid + 1]])
        if self._post[tid]:
            parts.append(np.frombuffer(self._post[tid], dtype=np.int64))  # type: ignore[arg-type]
        return parts[0] if len(parts) == 1 else np.concatenate(parts) if parts else _EMPTY

    def _doc_terms(self, slot: int) -> tuple[np.ndarray, np.ndarray] | None:
        """(unique term ids, their frequencies) of the document in `slot`, or None."""
        src = self._doc_src[slot]
        if src == _NONE:
            return None
        pos, n = int(self._doc_pos[slot]), int(self._doc_len[slot])
        if src == _IN_BASE:
            return self._base_tid[pos:pos + n], self._base_tf[pos:pos + n]
        return self._pool_tid[pos:pos + n], self._pool_tf[pos:pos + n]

    def _store_doc(self, slot: int, tids: list[int], tfs: list[int]) -> None:
        """Append a document's terms to the pool (growing it by doubling, compacting it
        once more than half of it belongs to removed documents)."""
        n = len(tids)
        if self._pool_used + n > len(self._pool_tid):
            if self._pool_garbage > max(_POOL_MIN_GARBAGE, self._pool_used // 2):
                self._compact_pool()
            if self._pool_used + n > len(self._pool_tid):
                size = max(self._pool_used + n, 2 * len(self._pool_tid), 1024)
                for name in ("_pool_tid", "_pool_tf"):
                    grown = np.zeros(size, dtype=np.int32)
                    grown[:self._pool_used] = getattr(self, name)[:self._pool_used]
                    setattr(self, name, grown)
        pos = self._pool_used
        self._pool_tid[pos:pos + n] = tids
        self._pool_tf[pos:pos + n] = tfs
        self._pool_used += n
        self._doc_src[slot] = _IN_POOL
        self._doc_pos[slot] = pos
        self._doc_len[slot] = n

    def _compact_pool(self) -> None:
        """Move the live pool documents together, in place order (vectorised)."""
        slots = np.flatnonzero(self._doc_src[:len(self._ids)] == _IN_POOL)
        slots = slots[np.argsort(self._doc_pos[slots], kind="stable")]
        lens = self._doc_len[slots].astype(np.int64)
        starts = self._doc_pos[slots]
        new_pos = np.cumsum(lens) - lens
        total = int(lens.sum())
        take = np.repeat(starts - new_pos, lens) + np.arange(total, dtype=np.int64)
        self._pool_tid[:total] = self._pool_tid[take]
        self._pool_tf[:total] = self._pool_tf[take]
        self._doc_pos[slots] = new_pos
        self._pool_used = total
        self._pool_garbage = 0

    def _add(self, doc_id: str, tokens: list[str]) -> None:
        self._version += 1
        if doc_id in self._slot:
            self._remove(doc_id)
        if self._free_slots:
            slot = self._free_slots.pop()
        else:
            slot = len(self._ids)
            if slot >= _MAX_SLOTS:
                raise OverflowError("KeywordProjection holds at most 16.7M documents")
            self._ids.append(None)
            self._gen = _grow(self._gen, slot)
            self._dl = _grow(self._dl, slot)
            self._doc_src = _grow(self._doc_src, slot)
            self._doc_pos = _grow(self._doc_pos, slot)
            self._doc_len = _grow(self._doc_len, slot)
        base = (int(self._gen[slot]) << _GEN_SHIFT) | (slot << _TF_BITS)
        tids: list[int] = []
        tfs: list[int] = []
        tid_of = self._tid
        post = self._post
        for term, tf in Counter(tokens).items():
            tid = tid_of.get(term)
            if tid is None:
                tid = self._new_tid(term)
            tf = min(tf, _TF_MASK)
            added = post[tid]
            if added is None:
                added = post[tid] = array("q")
            added.append(base | tf)
            tids.append(tid)
            tfs.append(tf)
        self._df[np.asarray(tids, dtype=np.int64)] += 1
        self._store_doc(slot, tids, tfs)
        self._ids[slot] = doc_id
        self._slot[doc_id] = slot
        self._dl[slot] = len(tokens)
        self._total_len += len(tokens)
        self._idf = None

    def _remove(self, doc_id: str) -> None:
        slot = self._slot.pop(doc_id, None)
        if slot is None:
            return
        self._version += 1
        terms = self._doc_terms(slot)
        tids = None if terms is None else terms[0].astype(np.int64)
        if self._doc_src[slot] == _IN_POOL:
            self._pool_garbage += int(self._doc_len[slot])
        self._doc_src[slot] = _NONE
        self._ids[slot] = None
        self._total_len -= int(self._dl[slot])
        self._dl[slot] = 0.0
        self._gen[slot] = (int(self._gen[slot]) + 1) & _GEN_MASK  # invalidates its postings
        in_base = slot < self._n_base
        if not in_base:   # a base slot stays empty until the next snapshot (see `_parts`)
            self._free_slots.append(slot)
        self._idf = None
        if tids is None or not len(tids):
            return
        self._df[tids] -= 1
        if not in_base:
            self._stale[tids] += 1
        for tid in tids.tolist():
            if self._df[tid] == 0:  # term left the vocabulary (rank_bm25 would not know it)
                term = self._terms[tid]
                if term is not None:
                    del self._tid[term]
                self._terms[tid] = None
                self._post[tid] = None
                self._drop_base(tid)
                self._stale[tid] = 0
                self._free_tids.append(tid)
            elif self._stale[tid] > 8 and 2 * self._stale[tid] > len(self._post[tid] or ()):
                self._compact(tid)

    def _drop_base(self, tid: int) -> None:
        if tid < len(self._has_base):
            self._has_base[tid] = False

    def _compact(self, tid: int) -> None:
        """Drop the postings of removed/replaced documents from the term's added postings."""
        packed = np.frombuffer(self._post[tid] or array("q"), dtype=np.int64)
        fresh = array("q")
        fresh.frombytes(packed[self._valid(packed)].tobytes())
        self._post[tid] = fresh
        self._stale[tid] = 0

    def _valid(self, packed: np.ndarray) -> np.ndarray:
        slots = (packed >> _TF_BITS) & _SLOT_MASK
        return self._gen[slots] == (packed >> _GEN_SHIFT)

    # --- scoring ----------------------------------------------------------------------------

    def _idf_table(self) -> np.ndarray:
        """Per-term idf with rank_bm25's negative-idf rule; O(vocabulary), only when stale."""
        if self._idf is not None:
            return self._idf
        n_terms = len(self._terms)
        df = self._df[:n_terms].astype(np.float64)
        live = df > 0
        n_docs = float(len(self._slot))
        idf = np.zeros(n_terms, dtype=np.float64)
        idf[live] = np.log(n_docs - df[live] + 0.5) - np.log(df[live] + 0.5)
        if live.any():
            average_idf = float(idf[live].sum()) / int(live.sum())
            idf[live & (idf < 0)] = self.epsilon * average_idf
        self._idf = idf
        return idf

    def _dense(self, tokens: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(BM25 score of every slot, slots containing a query term), one ``bincount``.

        A dense array is cheaper than a dict of matching documents: a common term matches
        tens of thousands of blocks, and building Python objects for them was half of a
        search (PERF-5). Free slots score 0.
        """
        key = (tuple(tokens), self._version)
        for seen, out in self._dense_memo:
            if seen == key:
                return out   # a search scores the same terms for its phrase too
        out = self._dense_uncached(tokens)
        for part in out:
            part.flags.writeable = False   # shared by the memo
        self._dense_memo = [*_last(self._dense_memo, _MEMO - 1), (key, out)]
        return out

    def _dense_uncached(self, tokens: list[str]) -> tuple[np.ndarray, np.ndarray]:
        n_slots = len(self._ids)
        none = np.zeros(0, dtype=np.int64)
        if not self._slot:
            return np.zeros(n_slots, dtype=np.float64), none
        # duplicates count twice, as in rank_bm25
        tids = [tid for term in tokens if (tid := self._tid.get(term)) is not None]
        if not tids:
            return np.zeros(n_slots, dtype=np.float64), none
        spans, slots, scores = self._term_scores(list(dict.fromkeys(tids)))
        if tids != list(spans)[:len(tids)] or len(tids) != len(spans):
            slots = np.concatenate([slots[spans[t][0]:spans[t][1]] for t in tids])
            scores = np.concatenate([scores[spans[t][0]:spans[t][1]] for t in tids])
        dense = np.bincount(slots, weights=scores, minlength=n_slots)
        if len(tids) == 1 and spans[tids[0]][2] == 1:   # one part: each slot appears once
            return dense, slots
        hit = np.zeros(n_slots, dtype=bool)
        hit[slots] = True
        return dense, np.flatnonzero(hit)

    def _term_scores(self, tids: list[int]
                     ) -> tuple[dict[int, tuple[int, int, int]], np.ndarray, np.ndarray]:
        """({term id: (start, end, parts)}, slots, scores): every posting's slot and BM25
        contribution, term after term, for these distinct terms (or more).

        The last call's arrays are kept for the same index version: a search scores its
        terms as asked (BM25) and distinct (the phrase check), which differ when a word is
        repeated; the second needs only a `bincount` of the first's contributions.
        Computed one pass per operation, in place, into preallocated arrays (no temporary
        per step, no concatenation); each score is rank_bm25's expression evaluated in the
        same order: bit-identical.
        """
        memo = self._terms_memo
        if memo is not None and memo[0] == self._version and all(t in memo[1] for t in tids):
            return memo[1], memo[2], memo[3]
        idf = self._idf_table()
        avgdl = self._total_len / len(self._slot)
        k1, b = self.k1, self.b
        parts = {tid: self._parts(tid) for tid in tids}
        total = sum(len(packed) for ps in parts.values() for packed in ps)
        all_slots = np.empty(total, dtype=np.int64)
        scores = np.empty(total, dtype=np.float64)
        tf = np.empty(total, dtype=np.int64)
        spans: dict[int, tuple[int, int, int]] = {}
        at = 0
        for tid, ps in parts.items():
            first = at
            for packed in ps:
                end = at + len(packed)
                slots, score = all_slots[at:end], scores[at:end]
                np.right_shift(packed, _TF_BITS, out=slots)
                np.bitwise_and(slots, _SLOT_MASK, out=slots)
                np.bitwise_and(packed, _TF_MASK, out=tf[at:end])
                np.copyto(score, tf[at:end])   # tf as float
                norm = self._dl.take(slots)    # b * dl / avgdl + (1 - b), times k1, plus tf
                norm *= b
                norm /= avgdl
                norm += 1 - b
                norm *= k1
                norm += score
                score *= k1 + 1
                score /= norm
                score *= idf[tid]
                at = end
            spans[tid] = (first, at, len(ps))
        self._terms_memo = (self._version, spans, all_slots, scores)
        return spans, all_slots, scores

    def _ranked(self, dense: np.ndarray, matched: np.ndarray, k: int,
                allowed: Callable[[str], bool] | None) -> list[tuple[str, float]]:
        """Top-``k`` (id, score) among ``matched`` slots, best first, ties by slot.

        Slots come from `_in_order` (heads of 2k, 4× larger each time ``allowed`` rejected
        too many), so ``allowed`` runs only near the top, not on every matching document.
        """
        if k <= 0 or not len(matched):
            return []
        ids = self._ids
        out: list[tuple[str, float]] = []
        for slot in self._in_order(dense, matched, k if allowed is None else 2 * k):
            doc_id = ids[slot]
            if doc_id is None or (allowed is not None and not allowed(doc_id)):
                continue
            out.append((doc_id, float(dense[slot])))
            if len(out) >= k:
                break
        return out

    def _in_order(self, dense: np.ndarray, matched: np.ndarray, take: int) -> Iterator[int]:
        """``matched`` slots by (score descending, slot), found in heads of ``take``, 4×
        larger each time the caller wants more: a full sort of 10⁵ matches is not needed
        for the first few."""
        done = 0
        while True:
            head = self._head(dense, matched, take)
            yield from head[done:].tolist()
            if len(head) < take:
                return
            done, take = len(head), take * 4

    def _head(self, dense: np.ndarray, matched: np.ndarray, take: int) -> np.ndarray:
        """The first ``take`` slots of ``matched`` by (score descending, slot).

        A search ranks the same scores twice (its BM25 candidates, then the documents
        holding its phrase): the heads of the last `_MEMO` (scores, matches) pairs are
        kept, at least `_HEAD_KEPT` long, so the second ranking costs no partition of 10⁵
        scores.
        """
        for memo in self._head_memo:
            if memo[0] is dense and memo[1] is matched \
                    and (take <= len(memo[2]) or len(memo[2]) == len(matched)):
                return memo[2][:take]
        want = max(take, _HEAD_KEPT)
        if len(matched) > want:
            scores = dense[matched]
            # ties at the cut are broken by slot, exactly as a full sort would
            kth = np.partition(-scores, want - 1)[want - 1]
            head = matched[-scores <= kth]
        else:
            head = matched
        head = head[np.lexsort((head, -dense[head]))][:want]
        self._head_memo = [*_last(self._head_memo, _MEMO - 1), (dense, matched, head)]
        return head[:take]

    def scores(self, tokens: list[str]) -> dict[str, float]:
        """BM25 score of every document sharing a term with ``tokens`` (others score 0)."""
        with self._lock:
            dense, hit = self._dense(tokens)
            ids = self._ids
            out = {ids[s]: float(v) for s, v in zip(hit.tolist(), dense[hit].tolist(),
                                                     strict=True)}
            out.pop(None, None)   # type: ignore[call-overload]  # emptied base slots
            return out  # type: ignore[return-value]

    def top(self, tokens: list[str], k: int, allowed: Callable[[str], bool] | None = None,
            also: Iterable[str] = ()) -> tuple[list[tuple[str, float]], dict[str, float]]:
        """(top-``k`` allowed documents sharing a term with ``tokens``, best first; the
        scores of ``also``). Scores can be <= 0 in tiny corpora (rank_bm25's idf rule).

        ``also`` are the other retriever's candidates, which a blend fusion scores on both
        sides; looking them up here, under the same lock, keeps both answers consistent.
        """
        with self._lock:
            dense, matched = self._dense(tokens)
            slot_of = self._slot
            extra = {d: float(dense[s]) for d in also if (s := slot_of.get(d)) is not None}
            return self._ranked(dense, matched, k, allowed), extra

    def query_scores(self, tokens: list[str]) -> QueryScores:
        """The BM25 scores of one query, kept for a top-k now and lookups later.

        Recall asks for the top-k before the vector side has answered, then for the scores
        of the vector side's candidates: one scoring pass serves both, and a write in
        between makes the lookup score again on the new index (as `top(also=...)` would).
        """
        with self._lock:
            dense, matched = self._dense(tokens)
            return QueryScores(self, list(tokens), dense, matched, self._version)

    def coverage(self, tokens: list[str], doc_ids: Iterable[str],
                 also_held: Iterable[str] = ()) -> dict[str, float]:
        """Share of the query's distinct terms, weighted by idf, that each document holds.

        A comparable-across-queries measure of keyword evidence (BM25 itself is not): 1.0
        when a document holds every term, 0.0 when none. idf here is ``log(1 + (N - df +
        0.5) / (df + 0.5))`` (always positive), so a term the corpus never saw weighs most:
        a query about something absent scores low everywhere. ``also_held`` are terms to
        count as held by every document (e.g. the tokens of a name the query matched).
        """
        uniq = list(dict.fromkeys(tokens))
        with self._lock:
            if not uniq:
                return {d: 0.0 for d in doc_ids}
            total, weight_of = self._coverage_weights(uniq)
            extra = {self._tid.get(t) for t in also_held} & weight_of.keys()
            out: dict[str, float] = {}
            for doc in doc_ids:
                slot = self._slot.get(doc)
                terms = self._doc_terms(slot) if slot is not None else None
                held = terms[0] if terms is not None else None
                if total <= 0 or not weight_of:
                    out[doc] = 0.0
                    continue
                have = (set(held.tolist()) & weight_of.keys() if held is not None else set())
                out[doc] = sum(weight_of[t] for t in have | extra) / total
            return out

    def _coverage_weights(self, uniq: list[str]) -> tuple[float, dict[int, float]]:
        """(total weight, term id -> weight) of a query's distinct terms, as `coverage`
        weighs them. Recall asks `coverage` for several notes of one query in a row (the
        relevance floor, the snippets): the weights of the last query are kept until the
        index changes."""
        key = (tuple(uniq), self._version)
        if self._coverage_memo is not None and self._coverage_memo[0] == key:
            return self._coverage_memo[1]
        n_docs = float(len(self._slot))
        tids = [self._tid.get(t) for t in uniq]
        df = np.array([self._df[t] if t is not None else 0 for t in tids], dtype=np.float64)
        weights = np.log1p((n_docs - df + 0.5) / (df + 0.5))
        total = float(weights.sum())
        weight_of = {t: w for t, w in zip(tids, weights.tolist(), strict=True)
                     if t is not None}
        self._coverage_memo = (key, (total, weight_of))
        return total, weight_of

    def containing_all(self, tokens: list[str], k: int) -> list[str]:
        """Up to ``k`` documents holding every distinct term of ``tokens``, best BM25 first:
        where a verbatim phrase can be (recall checks the text).

        The best-scored documents are checked against their own term lists first, in score
        order (the query's BM25 ranking has them, see `_head`): documents holding every
        term score highest, so where they are many (common words), ``k`` of them are among
        the first few hundred. The scan stops where it would cost more than counting every
        term's postings (`_CHECK_COST` postings a document, at most `_PHRASE_SCAN`
        documents), or as soon as (every ``k`` documents) the rate found so far would not
        give ``k`` within that: then the postings are counted, as they always were. Where
        few documents hold every term (real text), ``k`` checks find that out.
        """
        uniq = list(dict.fromkeys(tokens))
        with self._lock:
            if not uniq or k <= 0 or any(t not in self._tid for t in uniq):
                return []
            dense, matched = self._dense(uniq)
            need = {self._tid[t] for t in uniq}
            postings = int(self._df[list(need)].sum())
            scan = min(_PHRASE_SCAN, postings // _CHECK_COST)
            if scan < k:   # not even k documents are worth checking
                return self._containing_all_counted(uniq, dense, k)
            ids = self._ids
            out: list[str] = []
            for n, slot in enumerate(self._in_order(dense, matched, 4 * k)):
                if n >= scan or (n and n % k == 0 and len(out) * scan < k * n):
                    # the budget is spent, or at the rate found so far it would be
                    return self._containing_all_counted(uniq, dense, k)
                doc_id = ids[slot]
                terms = self._doc_terms(slot) if doc_id is not None else None
                if terms is not None and need.issubset(terms[0].tolist()):
                    out.append(doc_id)
                    if len(out) >= k:
                        break
            return out

    def _containing_all_counted(self, uniq: list[str], dense: np.ndarray, k: int
                                ) -> list[str]:
        """`containing_all` by counting every term's postings (a slot holding all has one
        posting per term)."""
        count = np.zeros(len(self._ids), dtype=np.int32)
        for term in uniq:
            for packed in self._parts(self._tid[term]):
                count[(packed >> _TF_BITS) & _SLOT_MASK] += 1
        every = np.flatnonzero(count == len(uniq))
        return [d for d, _ in self._ranked(dense, every, k, None)]

    def known_share(self, tokens: list[str]) -> float:
        """Share of the query's distinct terms (idf-weighted as in `coverage`) that occur in
        any document: low when the query is about words the corpus never saw."""
        uniq = list(dict.fromkeys(tokens))
        if not uniq:
            return 0.0
        with self._lock:
            n_docs = float(len(self._slot))
            df = np.array([self._df[t] if (t := self._tid.get(u)) is not None else 0
                           for u in uniq], dtype=np.float64)
        weights = np.log1p((n_docs - df + 0.5) / (df + 0.5))
        total = float(weights.sum())
        return float(weights[df > 0].sum()) / total if total > 0 else 0.0

    def query(
        self, text: str, k: int, allowed: Callable[[str], bool] | None = None
    ) -> list[tuple[str, float]]:
        """Top-``k`` documents with score > 0, best first (ties broken by internal slot).

        ``allowed(doc_id)`` filters candidates in score order, so it is called about ``k``
        times, not once per matching document.
        """
        with self._lock:
            dense, matched = self._dense(self.tokenizer(text))
            return self._ranked(dense, matched[dense[matched] > 0], k, allowed)

    # --- introspection ----------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._slot)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._slot

    def doc_ids(self) -> set[str]:
        """Ids of all indexed documents."""
        with self._lock:
            return set(self._slot)

    def tokens_of(self, doc_id: str) -> list[str] | None:
        """The indexed tokens of a document as a multiset (first-occurrence order, each term
        repeated tf times), or None if unknown. Equivalent to the original tokens for BM25;
        lets callers persist tokens without tokenising again."""
        with self._lock:
            slot = self._slot.get(doc_id)
            if slot is None:
                return None
            held = self._doc_terms(slot)
            if held is None:
                return []
            tids, tfs = held
            terms = self._terms
            return [
                t
                for tid, tf in zip(tids.tolist(), tfs.tolist(), strict=True)
                for t in [terms[tid]] * tf
            ]  # type: ignore[misc]

    # --- snapshot -----------------------------------------------------------------------------

    def export_arrays(self, chunked: bool = False
                      ) -> tuple[list[str], np.ndarray, dict[str, np.ndarray | Chunked]]:
        """(terms, doc ids, arrays) of the live index, compacted, for a cold-open snapshot.

        Ids come as a fixed-width byte array in slot order; the arrays hold each document's
        terms (``doc_off``/``doc_tid``/``doc_tf``, ``dl``), every term's postings
        (``post_off``/``post``, so a reader needs no sort) and the ids sorted for lookups
        (``ids_sorted``/``ids_order``). Slots are renumbered densely in their old order, so
        ties still break the same way. With `chunked`, the three large arrays come as
        `Chunked` (computed slice by slice while they are written; the index must not change
        until then: the indexer holds its lock).
        """
        with self._lock:
            live = np.sort(self._slot.slots())
            n = len(live)
            live_tids = np.array([t for t, term in enumerate(self._terms) if term is not None],
                                 dtype=np.int64)
            remap = np.full(len(self._terms) + 1, -1, dtype=np.int64)
            remap[live_tids] = np.arange(len(live_tids))
            lens = self._doc_len[live].astype(np.int64)
            doc_off = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(lens, out=doc_off[1:])
            new_slot = np.full(len(self._ids) + 1, -1, dtype=np.int64)
            new_slot[live] = np.arange(n)
            df = self._df[live_tids] if len(live_tids) else np.zeros(0, dtype=np.int64)
            post_off = np.zeros(len(live_tids) + 1, dtype=np.int64)
            np.cumsum(df, out=post_off[1:])
            tids = live_tids.tolist()
            ids = self._export_ids(live)
            order = np.argsort(ids, kind="stable")
            step = 1 << 16   # slots per slice: index arrays for 16M postings would be 130 MB

            def doc_terms(which: int) -> Iterator[np.ndarray]:
                for a in range(0, n, step):
                    with self._lock:
                        part, plen = live[a:a + step], lens[a:a + step]
                        lo, hi = int(doc_off[a]), int(doc_off[min(a + step, n)])
                        take = (np.repeat(self._doc_pos[part] - (doc_off[a:a + len(part)] - lo),
                                          plen) + np.arange(hi - lo, dtype=np.int64))
                        from_base = np.repeat(self._doc_src[part] == _IN_BASE, plen)
                        base = (self._base_tid, self._base_tf)[which]
                        pool = (self._pool_tid, self._pool_tf)[which]
                        out = np.empty(hi - lo, dtype=np.int32)
                        out[from_base] = base[take[from_base]]
                        out[~from_base] = pool[take[~from_base]]
                    yield remap[out].astype(np.int32) if which == 0 else out

            def postings() -> Iterator[np.ndarray]:
                for a in range(0, len(tids), 4096):   # terms in groups: few numpy calls
                    with self._lock:
                        packed = np.concatenate([self._all_postings(t)
                                                 for t in tids[a:a + 4096]] or [_EMPTY])
                        packed = packed[self._valid(packed)]
                    if len(packed) != int(post_off[min(a + 4096, len(tids))] - post_off[a]):
                        raise AssertionError("document frequencies do not match the postings")
                    yield (new_slot[(packed >> _TF_BITS) & _SLOT_MASK] << _TF_BITS) \
                        | (packed & _TF_MASK)

            total = int(doc_off[-1])
            big: dict[str, Chunked] = {
                "doc_tid": Chunked(np.dtype(np.int32), total, lambda: doc_terms(0)),
                "doc_tf": Chunked(np.dtype(np.int32), total, lambda: doc_terms(1)),
                "post": Chunked(np.dtype(np.int64), int(post_off[-1]), postings)}
            arrays: dict[str, np.ndarray | Chunked] = {
                "doc_off": doc_off, "dl": self._dl[live].astype(np.float64),
                "post_off": post_off, "ids_sorted": ids[order],
                "ids_order": order.astype(np.int64),
                **(big if chunked else {k: v.whole() for k, v in big.items()})}
            return [self._terms[t] for t in tids], ids, arrays  # type: ignore[misc]

    def _export_ids(self, live: np.ndarray) -> np.ndarray:
        """The ids of `live` slots as one fixed-width byte array, filled slice by slice."""
        ids = self._ids
        width = max([ids._base.itemsize if len(ids._base) else 1]
                    + [len(v.encode("utf-8")) for v in (*ids._over.values(), *ids._tail)
                       if v is not None])
        out = np.empty(len(live), dtype=f"S{width}")
        slots = live.tolist()
        for a in range(0, len(slots), 1 << 16):
            out[a:a + (1 << 16)] = encode_ids([ids[s] for s in slots[a:a + (1 << 16)]])  # type: ignore[misc]
        return out

    def import_arrays(self, terms: list[str], ids: Sequence[str] | np.ndarray,
                      arrays: dict[str, np.ndarray]) -> None:
        """Replace the index with one exported by ``export_arrays`` (same scores, same ties).

        The arrays are used as they are (a memory-mapped snapshot stays mapped): nothing is
        written into them, and only per-slot and per-term bookkeeping is copied.
        """
        ids_arr = encode_ids(ids)
        doc_off = np.asarray(arrays["doc_off"], dtype=np.int64)
        doc_tid = np.asarray(arrays["doc_tid"], dtype=np.int32)
        doc_tf = np.asarray(arrays["doc_tf"], dtype=np.int32)
        dl = np.asarray(arrays["dl"], dtype=np.float64)
        n_docs, n_terms = len(ids_arr), len(terms)
        if len(doc_off) != n_docs + 1 or len(dl) != n_docs or int(doc_off[-1]) != len(doc_tid) \
                or len(doc_tf) != len(doc_tid) or (n_docs and np.any(np.diff(doc_off) < 0)):
            raise ValueError("keyword snapshot arrays do not match their ids")
        if n_docs > _MAX_SLOTS:
            raise OverflowError("KeywordProjection holds at most 16.7M documents")
        if "post" in arrays and "post_off" in arrays:
            post = np.asarray(arrays["post"], dtype=np.int64)
            post_off = np.asarray(arrays["post_off"], dtype=np.int64)
        else:  # arrays without postings: sort the documents' terms by term, once
            counts = np.diff(doc_off)
            doc_slot = np.repeat(np.arange(n_docs, dtype=np.int64), counts)
            order = np.argsort(doc_tid, kind="stable")  # per term: documents in slot order
            post = (doc_slot[order] << _TF_BITS) | doc_tf[order].astype(np.int64)
            post_off = np.zeros(n_terms + 1, dtype=np.int64)
            np.cumsum(np.bincount(doc_tid, minlength=n_terms), out=post_off[1:])
        if len(post_off) != n_terms + 1 or int(post_off[-1]) != len(post) \
                or (n_terms and np.any(np.diff(post_off) < 0)):
            raise ValueError("keyword snapshot postings do not match their terms")
        if "ids_sorted" in arrays and "ids_order" in arrays:
            by_id = SortedIds(arrays["ids_sorted"], np.asarray(arrays["ids_order"]))
            if len(by_id) != n_docs:
                raise ValueError("keyword snapshot id index does not match the ids")
        else:
            by_id = SortedIds.build(ids_arr)
        df = np.diff(post_off).astype(np.int64)
        with self._lock:
            self._reset()
            self._terms = list(terms)
            self._tid = {t: i for i, t in enumerate(terms)}
            self._post = [None] * n_terms
            self._df = df
            self._stale = np.zeros(n_terms, dtype=np.int64)
            self._base_post, self._base_off = post, post_off
            self._has_base = np.ones(n_terms, dtype=bool)
            self._base_tid, self._base_tf = doc_tid, doc_tf
            self._ids = SlotIds(ids_arr)
            self._slot = SlotIndex(by_id)
            self._n_base = n_docs
            self._gen = np.zeros(n_docs, dtype=np.int64)
            self._dl = dl.copy()
            self._doc_src = np.full(n_docs, _IN_BASE, dtype=np.int8)
            self._doc_pos = doc_off[:-1].copy()
            self._doc_len = np.diff(doc_off).astype(np.int32)
            self._total_len = int(dl.sum())


class QueryScores:
    """BM25 scores of one query over the whole index (see `KeywordProjection.query_scores`)."""

    def __init__(self, index: KeywordProjection, tokens: list[str], dense: np.ndarray,
                 matched: np.ndarray, version: int) -> None:
        self._index = index
        self._tokens = tokens
        self._dense = dense
        self._matched = matched
        self._version = version

    def _fresh(self) -> None:
        """Score again if the index changed since (call under the index lock)."""
        index = self._index
        if index._version != self._version:
            self._dense, self._matched = index._dense(self._tokens)
            self._version = index._version

    def top(self, k: int, allowed: Callable[[str], bool] | None = None
            ) -> list[tuple[str, float]]:
        """Top-``k`` allowed documents sharing a term with the query, as ``top`` returns."""
        index = self._index
        with index._lock:
            self._fresh()
            return index._ranked(self._dense, self._matched, k, allowed)

    def of(self, doc_ids: Iterable[str]) -> dict[str, float]:
        """Scores of these documents (unknown ids are left out; others score 0)."""
        index = self._index
        with index._lock:
            self._fresh()
            dense, slot_of = self._dense, index._slot
            return {d: float(dense[s]) for d in doc_ids if (s := slot_of.get(d)) is not None}
