"""The name index: every note's names as their own field (DESIGN §7 "Names are first-class").

A note's names are its title (frontmatter `title`/`name`, else its H1, else the file stem),
its `aliases` (any language), its file stem (a kebab-case slug also read with spaces) and its
section headings. A person searching a vault they keep types names: `熔断`, `circuit
breaker` (an alias), `Priya Natarjan` (a typo), "who owns the payment gateway" (a name inside
a question). Body text only *mentions* names, so BM25 and vectors let a note that mentions a
name often beat the note that *is* it; this index says which notes the query names.

Kinds of match, strongest first (`NameMatch.kind`, `strength` in [0, 1]):
- `exact`: the whole query equals a name after `normalize.compact` (case, width, punctuation,
  spacing, traditional/simplified). Search puts such a note first.
- `fuzzy`: the whole query is within a small edit distance of a name of 5+ characters
  (optimal string alignment, so a swap of two letters is one edit: 1 edit up to 7
  characters, 2 from 8).
- `contained`: the query contains the name, on word boundaries (`what is the circuit
  breaker threshold` names `熔断.md` through its alias).
- `tokens`: most of the name's (idf-weighted) tokens occur in the query, in any order
  (`duplicate refund` for `INC-2304 duplicate refunds`): the BM25F-style name field, in the
  same jieba + English tokenisation as the keyword projection. Weaker when the shared tokens
  are a small part of a long query (`QUERY_SHARE`).

Headings are weaker names (a section is not the note) and count only while at most
`MAX_HEADING_NOTES` notes share them; any name shared by more than `MAX_SHARED` notes (a
`README`, `Overview`) is not a name at all.

The index is derived from the index state (frontmatter, first block, headings), never from
the files, and kept in `names.sqlite` beside it (`recall/namestore.py`): a new process opens
it in milliseconds instead of building it, and catches it up per changed path when the index
generation moves (a run in any process). A query reads only the rows it touches.
"""

from __future__ import annotations

import bisect
import functools
import logging
import math
import os
import sqlite3
import threading
from array import array
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np

from reme_agent.engine.names import note_aliases, note_title
from reme_agent.engine.state import is_corruption
from reme_agent.engine.tokenize import tokenize
from reme_agent.recall.namestore import (
    FILE_NAME,
    MAX_HEADING_NOTES,
    Entry,
    NameStore,
    Writer,
    bigrams,
)
from reme_agent.recall.normalize import CJK_CHAR as _CJK
from reme_agent.recall.normalize import compact, is_cjk, spaced
from reme_agent.recall.pervault import PerVault

if TYPE_CHECKING:
    from reme_agent.engine.state import IndexState
    from reme_agent.vault import Vault

__all__ = ["NameIndex", "NameMatch", "index_for", "note_name_tokens", "osa_distance"]

MAX_SHARED = 5          # a name more notes share is a common word, not a name
T = TypeVar("T")
log = logging.getLogger("reme_agent.index")
FIELD_WEIGHT = {"title": 1.0, "alias": 1.0, "stem": 1.0, "heading": 0.7}
QUERY_SHARE = 0.5
"""A `tokens` match whose shared tokens carry less than this share of the query's idf is
weakened in proportion: one title word inside a long pasted phrase is weak evidence that the
query names the note (BM25F weighs a field's match by the query terms it holds, too).
Measured (`docs/decisions.md`, "Names inside long queries"): phrase-bench Hit@5 at 1k notes
0.713 -> 0.733, kvault unchanged at 0.5 (0.75 lost two kvault queries)."""


def query_share(shared_idf: float, query_idf: float) -> float:
    """The factor a `tokens` match keeps: 1 from `QUERY_SHARE` of the query's idf up."""
    if query_idf <= 0.0:
        return 0.0
    return min(1.0, shared_idf / (QUERY_SHARE * query_idf))


@dataclass(frozen=True)
class NameMatch:
    path: str
    name: str          # as written in the note
    field: str         # title | alias | stem | heading
    kind: str          # exact | fuzzy | contained | tokens
    strength: float    # 0..1
    span: tuple[int, int] | None = None   # where a contained name sits in `spaced(query)`


def _min_chars(key: str) -> int:
    return 3 if key.isascii() or not _CJK.search(key) else 2


def max_edits(length: int) -> int:
    """Edits a name of `length` characters tolerates (names under 5 characters: none)."""
    return 0 if length < 5 else 1 if length < 8 else 2


def osa_distance(a: str, b: str, limit: int) -> int:
    """Optimal string alignment distance (a swap of neighbours is one edit), or limit + 1
    as soon as it must exceed `limit`."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if min(cur) > limit:
            return limit + 1
        prev2, prev = prev, cur
    return prev[-1]


@functools.lru_cache(maxsize=1 << 15)
def note_name_tokens(name: str) -> tuple[str, ...]:
    """A name's distinct keyword tokens (the keyword projection's tokenizer), cached."""
    return tuple(dict.fromkeys(tokenize(name)))


def note_names(path: str, frontmatter: dict[str, Any], first_block: str,
               headings: Iterable[str]) -> list[tuple[str, str]]:
    """(name, field) of one note, title first; duplicates (after `compact`) dropped."""
    fm = frontmatter if isinstance(frontmatter, dict) else {}
    out: list[tuple[str, str]] = [(note_title(path, fm, first_block), "title")]
    out += [(a, "alias") for a in note_aliases(fm)]
    stem = path.rsplit("/", 1)[-1]
    stem = stem.rsplit(".", 1)[0] if "." in stem[1:] else stem
    out.append((stem, "stem"))
    out += [(h, "heading") for h in headings]
    seen: set[str] = set()
    names = []
    for name, field in out:
        key = compact(name)
        if key and key not in seen and len(key) >= _min_chars(key):
            seen.add(key)
            names.append((name, field))
    return names


class NameIndex:
    """Names of every indexed note, with exact, fuzzy, contained and token lookups, read from
    the vault's name store (opened on first use)."""

    def __init__(self, state: IndexState) -> None:
        self.state = state
        self._lock = threading.RLock()
        self._generation = -1          # the index generation this process last synced to
        self._store: NameStore | None = None
        self._version = -1             # the store version the caches below belong to
        self._counts: dict[str, int] = {}   # token -> entries holding it (tokens queried)
        self._n_names = 0
        self._max_words = 0
        self._top: list[tuple[str, int]] = []   # the commonest tokens, most first
        self._top_all = False                   # `_top` holds every token
        # what token matches read, kept until the store changes (bounded): the postings of
        # a token and the idf sum of a name; a common word ("主题" in 33k titles at 100k
        # notes) is read once, not on every query naming it
        self._postings: dict[str, tuple[array[int], array[int]]] = {}
        self._posted = 0
        self._totals: dict[int, float] = {}
        # what the other lookups read, kept the same way: a query's spans are mostly words
        # other queries had ("the", "我们"), its bigrams too; one read per query for the rest
        self._by_key: Kept[str, tuple[Entry, ...]] = Kept(MAX_KEPT)     # key -> entries
        self._by_eid: Kept[int, Entry] = Kept(MAX_KEPT)
        self._gram_n: Kept[tuple[int, str], int] = Kept(MAX_KEPT)       # (length, gram) -> keys
        self._grams_at: dict[int, dict[str, int] | None] = {}   # length -> gram -> keys
        self._grams_held = 0
        self._gram_keys: Kept[tuple[int, str], tuple[str, ...]] = Kept(MAX_KEPT)
        self.closes_with_vault = False

    @property
    def store(self) -> NameStore:
        with self._lock:
            if self._store is None:
                self._store = NameStore(self.state.path.with_name(FILE_NAME))
            return self._store

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None
            self._generation = -1
            self._version = -1   # a store rebuilt in its place counts versions from 0 again

    # -- upkeep -------------------------------------------------------------------------
    def _guarded(self, fn: Callable[[], T]) -> T:
        """Run a read or a sync; a store found corrupt meanwhile is deleted, rebuilt from the
        index state (logged) and asked again: derived data is never a reason to fail."""
        try:
            return fn()
        except sqlite3.DatabaseError as exc:
            if not is_corruption(exc):
                raise
            with self._lock:
                path = self.store.path
                log.warning("the name index %s is corrupt (%s); rebuilding it from the index "
                            "state", path, exc)
                self.close()
                if path is not None:
                    NameStore.remove_files(path)
                self._sync()
                return fn()

    def sync(self) -> None:
        """Catch up with the index state: re-read only the notes whose stamp changed (one
        transaction; a process that finds the store already synced reads nothing)."""
        self._guarded(self._sync)

    def _sync(self) -> None:
        gen = self.state.generation()
        with self._lock:
            if gen == self._generation:
                return
            source = _source_of(self.state)
            if self.store.synced() != (gen, source):
                with self.store.writing() as w:
                    if (w.generation, w.source) != (gen, source):   # nobody did it meanwhile
                        self._catch_up(w, gen, source)
            self._generation = gen

    def _catch_up(self, w: Writer, gen: int, source: str) -> None:
        stamps = self.state.file_stamps()
        old = w.stamps()
        for path in [p for p in old if p not in stamps]:
            w.remove(path)
            w.forget(path)
        changed = [p for p, s in stamps.items() if old.get(p) != s]
        for start in range(0, len(changed), SYNC_CHUNK):
            chunk = changed[start:start + SYNC_CHUNK]
            sources = self.state.name_sources(chunk)
            for path in chunk:
                if path not in sources:   # gone since the stamps were read: next sync
                    continue
                w.remove(path)
                frontmatter, first, heads = sources[path]
                for name, field in note_names(path, frontmatter, first, heads):
                    w.add(path, name, field, compact(name), spaced(name),
                          note_name_tokens(name))
                w.set_stamp(path, stamps[path])
        w.finish(gen, source)

    def _fresh(self, version: int) -> None:
        """Drop what was cached from an older store version (checked once per query: every
        read of a query is inside one `reading()`, so one version holds for all of them)."""
        if version != self._version:
            self._version = version
            self._counts = {}
            self._n_names = self.store.count_entries()
            self._max_words = self.store.max_words()
            self._top, self._top_all = [], False
            self._postings, self._posted, self._totals = {}, 0, {}
            for kept in (self._by_key, self._by_eid, self._gram_n, self._gram_keys):
                kept.clear()
            self._grams_at, self._grams_held = {}, 0

    # -- lookups ------------------------------------------------------------------------
    def names_of(self, path: str) -> list[str]:
        def read() -> list[str]:
            with self._lock, self.store.reading():
                return [e.name for e in self.store.entries_of_path(path)]
        return self._guarded(read)

    def match(self, query: str, tokens: list[str] | None = None) -> dict[str, NameMatch]:
        """The best match per note the query names (empty when it names none)."""
        words = tokenize(query) if tokens is None else tokens
        return self._guarded(lambda: self._match(query, words))

    def _match(self, query: str, tokens: list[str]) -> dict[str, NameMatch]:
        with self._lock, self.store.reading() as version:
            self._fresh(version)
            key = compact(query)
            words = spaced(query)
            # the whole query and every span a contained name could fill: one read
            spans = _spans(words, self._max_words) if words else []
            wanted = {words[s:e].replace(" ", "") for s, e in spans}
            if key:
                wanted.add(key)
            looked = self._entries_with_keys(wanted)
            exact = [e for e in looked if e.key == key and _usable(e)]
            found = [_make(entry, "exact", 1.0) for entry in exact]
            if not exact:
                found += self._fuzzy(key)
            found += _contained_of(words, key, spans, looked)
            # a name already found whole is not matched again token by token
            skip = {_key_of(m) for m in found}
            found += [m for m in self._token_matches(tokens) if _key_of(m) not in skip]
            best: dict[str, NameMatch] = {}
            for m in found:
                old = best.get(m.path)
                if old is None or m.strength > old.strength:
                    best[m.path] = m
            return best

    def _fuzzy(self, key: str) -> list[NameMatch]:
        n = len(key)
        if n < 5 or n > 60:
            return []
        grams = set(bigrams(key))
        chars = dict(Counter(key))
        # (length, limit, bigrams shared at least) of every key length within reach
        plans = []
        for length in range(max(5, n - 2), n + 3):
            limit = max_edits(min(length, n))
            if limit == 0 or abs(length - n) > limit:
                continue
            # q-gram lemma: each edit destroys at most 2 bigrams (of the longer string)
            plans.append((length, limit, max(1, max(n, length) - 1 - 2 * limit)))
        counts = self._gram_counts([length for length, _, _ in plans], grams)
        # Prefix filter: a name sharing `need` of the query's bigrams holds one of its rarest
        # len - need + 1 (so common bigrams like "th" are never read whole); all lengths'
        # rare bigrams are read at once.
        rare = []
        for length, _, need in plans:
            at = counts[length]
            rarest = sorted(grams, key=lambda g: at.get(g, 0))
            rare += [(length, g) for g in rarest[:len(grams) - need + 1] if at.get(g)]
        limits = {length: (limit, need) for length, limit, need in plans}
        dist_of: dict[str, int] = {}
        with_gram = self._gram_keys.get_many(rare, self._read_gram_keys)
        for other in {other for keys in with_gram.values() for other in keys}:
            limit, need = limits[len(other)]
            if len(grams.intersection(bigrams(other))) < need or \
                    _char_difference(chars, n, other) > 2 * limit:
                continue
            dist = osa_distance(key, other, limit)
            if 0 < dist <= limit:
                dist_of[other] = dist
        if not dist_of:
            return []
        entries = self._entries_with_keys(dist_of)
        entries.sort(key=lambda e: (len(e.key), e.eid))   # by length, then entry order
        return [_make(e, "fuzzy", 0.9 - 0.05 * dist_of[e.key]) for e in entries if _usable(e)]

    def _gram_counts(self, lengths: list[int], grams: set[str]) -> dict[int, dict[str, int]]:
        """length -> bigram -> keys of that length holding it (absent: none). A length's
        counts are read whole once per store version (10k notes: 100-2,900 bigrams a
        length); a length with more than `GRAMS_PER_LENGTH`, or past `MAX_KEPT` in all, is
        read and kept per bigram."""
        out: dict[int, dict[str, int]] = {}
        rest = []
        for length in lengths:
            if length not in self._grams_at:
                room = min(GRAMS_PER_LENGTH, MAX_KEPT - self._grams_held)
                got = self.store.grams_of_length(length, room + 1) if room > 0 else None
                self._grams_at[length] = got if got is not None and len(got) <= room else None
                self._grams_held += len(self._grams_at[length] or ())
            at = self._grams_at[length]
            if at is None:
                rest.append(length)
            else:
                out[length] = at
        if rest:
            pairs = self._gram_n.get_many([(n, g) for n in rest for g in grams],
                                          self._read_gram_counts)
            for (length, gram), n in pairs.items():
                out.setdefault(length, {})[gram] = n
        return out

    def _read_gram_counts(self, pairs: list[tuple[int, str]]) -> dict[tuple[int, str], int]:
        got = self.store.gram_counts({n for n, _ in pairs}, {g for _, g in pairs})
        return {pair: got.get(pair, 0) for pair in pairs}

    def _read_gram_keys(self, pairs: list[tuple[int, str]]
                        ) -> dict[tuple[int, str], tuple[str, ...]]:
        found: dict[tuple[int, str], list[str]] = {pair: [] for pair in pairs}
        for length, gram, key in self.store.keys_with_grams(pairs, MAX_SHARED):
            found[length, gram].append(key)
        return {pair: tuple(keys) for pair, keys in found.items()}

    def _contained(self, words: str, key: str) -> list[NameMatch]:
        """Names the query holds on word boundaries: each span of the query that could be
        one is looked up (a query's spans, not an automaton over every name). A name's key
        is its spaced form without the spaces, so the spans' keys find them."""
        if not words:
            return []
        spans = _spans(words, self._max_words)
        looked = self._entries_with_keys({words[s:e].replace(" ", "") for s, e in spans})
        return _contained_of(words, key, spans, looked)

    def _entries_with_keys(self, keys: Iterable[str]) -> list[Entry]:
        """`NameStore.entries_with_keys(keys, MAX_SHARED)`, kept per key (none: kept too)."""
        def read(missing: list[str]) -> dict[str, tuple[Entry, ...]]:
            found: dict[str, list[Entry]] = {k: [] for k in missing}
            for entry in self.store.entries_with_keys(missing, MAX_SHARED):
                found[entry.key].append(entry)
            return {k: tuple(v) for k, v in found.items()}
        out = [e for entries in self._by_key.get_many(keys, read).values() for e in entries]
        out.sort(key=lambda e: e.eid)
        return out

    def _token_counts(self, tokens: Iterable[str]) -> dict[str, int]:
        missing = [t for t in tokens if t not in self._counts]
        if missing:
            self._counts.update(self.store.token_counts(missing))
        return self._counts

    def _token_matches(self, tokens: list[str]) -> list[NameMatch]:
        """Names most of whose tokens (idf-weighted) occur in the query, in any order."""
        query = list(dict.fromkeys(tokens))
        if not query:
            return []
        n_names = max(1, self._n_names)
        unknown = [t for t in query if t not in self._counts]
        if unknown:   # a token's count is the length of its postings: one read for both
            self._counts.update((t, len(p[0])) for t, p in self._postings_of(unknown).items())
        counts = self._counts
        idf = {t: math.log(1 + n_names / (1 + counts[t])) for t in query}
        postings = self._postings_of([t for t in query if counts[t]])
        parts = [(postings[t], idf[t]) for t in query if counts[t]]
        # Each token a name holds beyond the query weighs at least `floor` (the idf of the
        # commonest token the query lacks): a name whose other tokens must outweigh the
        # query's cannot cover half its weight and is never read.
        floor = self._idf_floor(query, n_names)
        many = sum(len(eids) for (eids, _), _ in parts) >= NUMPY_POSTINGS
        hits = (_hits_numpy if many else _hits)(parts, floor)
        wanted = list(hits)
        if not wanted:
            return []
        totals = self._totals
        missing = [eid for eid in wanted if eid not in totals]
        if len(totals) + len(missing) > MAX_CACHED:
            totals.clear()
            missing = wanted
        if missing:
            tokens_of = self.store.tokens_of(missing)
            counts = self._token_counts({t for toks in tokens_of.values() for t in toks})
            idf_of: dict[str, float] = {}
            for eid in missing:
                total = 0.0
                for t in tokens_of[eid]:   # summed in the name's token order, as before
                    w = idf_of.get(t)
                    if w is None:
                        w = idf_of[t] = math.log(1 + n_names / (1 + counts[t]))
                    total += w
                totals[eid] = total
        covered: dict[int, float] = {}
        query_total = sum(idf.values())
        for eid in sorted(wanted):
            total = totals[eid]
            name_cov = hits[eid] / total if total else 0.0
            if name_cov >= 0.5:
                covered[eid] = name_cov * query_share(hits[eid], query_total)
        entries = self._by_eid.get_many(covered, self.store.entries_by_eid)
        return [_make(entries[eid], "tokens", 0.8 * cov) for eid, cov in covered.items()
                if _usable(entries[eid])]

    def _postings_of(self, tokens: list[str]) -> dict[str, tuple[array[int], array[int]]]:
        """token -> (eids, tokens per eid) of the names holding it; the uncached ones in one
        read, kept until the store changes (bounded)."""
        out = {t: got for t in tokens if (got := self._postings.get(t)) is not None}
        missing = [t for t in tokens if t not in out]
        if not missing:
            return out
        for token, rows in self.store.postings(missing).items():
            got = (array("q", (r[0] for r in rows)), array("q", (r[1] for r in rows)))
            if self._posted + len(rows) > MAX_CACHED:
                self._postings, self._posted = {}, 0
            self._postings[token] = got
            self._posted += len(rows)
            out[token] = got
        return out

    def _idf_floor(self, query: list[str], n_names: int) -> float:
        """The smallest idf a token not in the query can have: from the commonest tokens,
        read once per store version (more only for a query holding all of them)."""
        held = set(query)
        while True:
            commonest = next((n for tok, n in self._top if tok not in held), None)
            if commonest is not None or self._top_all:
                break
            want = max(64, 2 * len(self._top), len(query) + 1)
            self._top = self.store.top_counts(want)
            self._top_all = len(self._top) < want
        return math.log(1 + n_names / (1 + commonest)) if commonest else 0.0


Parts = list[tuple[tuple["array[int]", "array[int]"], float]]   # (eids, ntoks), idf per token


def _hits(parts: Parts, floor: float) -> dict[int, float]:
    """eid -> the idf its name shares with the query, for the names of 2+ tokens whose
    tokens beyond the query (each at least `floor`) can still leave it half covered."""
    hits: dict[int, float] = {}
    held: dict[int, int] = {}    # eid -> its tokens the query does not hold
    for (eids, ntoks), weight in parts:
        for eid, ntok in zip(eids, ntoks, strict=True):
            if ntok >= 2:   # a one-token name is an exact or contained match, or none
                hits[eid] = hits.get(eid, 0.0) + weight
                held[eid] = held.get(eid, ntok) - 1
    return {eid: got for eid, got in hits.items()
            if held[eid] * floor <= got + 1e-9 * max(1.0, got)}


def _hits_numpy(parts: Parts, floor: float) -> dict[int, float]:
    """`_hits` over arrays, for long postings ("topic" in 66k names at 100k notes): the same
    sums, added in the same order (bincount adds its input in order, like the loop)."""
    eids = np.concatenate([np.frombuffer(e, dtype=np.int64) for (e, _), _ in parts])
    ntoks = np.concatenate([np.frombuffer(n, dtype=np.int64) for (_, n), _ in parts])
    weights = np.concatenate([np.full(len(e), w) for (e, _), w in parts])
    keep = ntoks >= 2
    eids, ntoks, weights = eids[keep], ntoks[keep], weights[keep]
    if not len(eids):
        return {}
    unique, first, inverse = np.unique(eids, return_index=True, return_inverse=True)
    got = np.bincount(inverse, weights=weights)
    held = ntoks[first] - np.bincount(inverse)
    ok = held * floor <= got + 1e-9 * np.maximum(1.0, got)
    return dict(zip(unique[ok].tolist(), got[ok].tolist(), strict=True))


def _char_difference(chars: dict[str, int], length: int, other: str) -> int:
    """Characters in one string and not the other, with multiplicity: an edit changes at
    most two (a swap none), so more than 2 x limit rules the edit distance out cheaply."""
    left = dict(chars)
    extra = 0
    for char in other:
        count = left.get(char, 0)
        if count:
            left[char] = count - 1
        else:
            extra += 1
    return extra + length - (len(other) - extra)


SYNC_CHUNK = 2000   # notes whose name sources are read (and held) at once while syncing
MAX_CACHED = 400_000   # postings (16 bytes each) and name totals kept between queries
MAX_KEPT = 50_000      # answers of each other lookup kept between queries (entries, keys)
GRAMS_PER_LENGTH = 20_000   # a key length's bigram counts are kept whole up to this many
NUMPY_POSTINGS = 4096  # a query's postings from which token matching adds them up in numpy
K = TypeVar("K")
V = TypeVar("V")


class Kept(Generic[K, V]):
    """Answers of one store version by what was asked, read only when missing and emptied
    as a whole past `limit` (the owner clears it when the store's version moves). An
    answer weighs 1, or its length when it is a longer tuple (a key's entries, a bigram's
    keys)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self._got: dict[K, V] = {}

    def __len__(self) -> int:
        return len(self._got)

    def clear(self) -> None:
        self._got, self.size = {}, 0

    def get_many(self, wanted: Iterable[K], read: Callable[[list[K]], dict[K, V]]
                 ) -> dict[K, V]:
        """Each wanted key's answer; `read(missing)` must answer every key it is given."""
        got = self._got
        out: dict[K, V] = {}
        missing: list[K] = []
        for k in wanted:
            if k in got:
                out[k] = got[k]
            elif k not in out:
                missing.append(k)
                out[k] = None  # type: ignore[assignment]   # set below, from `read`
        if missing:
            fresh = read(missing)
            size = sum(max(1, len(v)) if isinstance(v, tuple) else 1 for v in fresh.values())
            if self.size + size > self.limit:
                self.clear()
            if size <= self.limit:
                self._got.update(fresh)
                self.size += size
            for k in missing:
                out[k] = fresh[k]
        return out


def _usable(entry: Entry) -> bool:
    return entry.notes <= (MAX_HEADING_NOTES if entry.field == "heading" else MAX_SHARED)


def _contained_of(words: str, key: str, spans: list[tuple[int, int]],
                  looked: list[Entry]) -> list[NameMatch]:
    """Contained matches, span by span, among `looked` (the entries of the spans' keys, in
    entry order): an entry counts at a span whose text is its spaced form."""
    named: dict[str, list[Entry]] = {}
    for entry in looked:
        named.setdefault(entry.words, []).append(entry)
    total = max(1, len(key))
    out = []
    for start, end in spans:
        for entry in named.get(words[start:end], ()):
            if entry.key == key or not _usable(entry) or not note_name_tokens(entry.name):
                # the whole query is an exact match, counted above; a name of stopwords
                # alone ("On a", "for the") names its note only as the whole query
                continue
            share = len(entry.key) / total
            out.append(_make(entry, "contained", 0.5 + 0.4 * share, (start, end)))
    return out


def _make(entry: Entry, kind: str, strength: float,
          span: tuple[int, int] | None = None) -> NameMatch:
    return NameMatch(entry.path, entry.name, entry.field, kind,
                     round(strength * FIELD_WEIGHT[entry.field], 4), span)


def _key_of(match: NameMatch) -> tuple[str, str]:
    return match.path, _name_key(match.name)


_name_key = functools.lru_cache(maxsize=1 << 15)(compact)   # names recur across queries


def _spans(words: str, longest: int) -> list[tuple[int, int]]:
    """Every (start, end) of `words` a name could occupy, in the order an automaton reports
    matches: by end, longest first. A span starts and ends on a character, is 2 to `longest`
    characters long and does not cut a Latin/digit word (`within_words`)."""
    n = len(words)
    cjk = set() if words.isascii() else {i for i, c in enumerate(words) if is_cjk(c)}
    # `within_words` at one edge: a start after a space (or CJK), an end before one
    starts = [s for s in range(n) if words[s] != " " and
              (s == 0 or words[s - 1] == " " or s in cjk)]
    ends = [e for e in range(2, n + 1) if words[e - 1] != " " and
            (e == n or words[e] == " " or e - 1 in cjk)]
    spans = []
    for end in ends:
        first = bisect.bisect_left(starts, end - longest)
        last = bisect.bisect_right(starts, end - 2)
        spans += [(start, end) for start in starts[first:last]]
    return spans


def _source_of(state: IndexState) -> str:
    """Which state file the store was synced from: a recreated one (moved aside as corrupt,
    deleted by hand) starts its generations again, so a stored generation alone could lie."""
    try:
        info = os.stat(state.path)
    except OSError:
        return ""
    return f"{info.st_dev}:{info.st_ino}"


_indexes: PerVault[NameIndex] = PerVault(NameIndex)


def index_for(vault: Vault) -> NameIndex:
    """The vault's name index, in step with its index state (one per Vault object)."""
    idx = _indexes.get(vault)
    if not idx.closes_with_vault:   # its connection ends with the vault's stores
        idx.closes_with_vault = True
        vault.on_close(idx.close)
    idx.sync()
    return idx
