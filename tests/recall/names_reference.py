"""The in-memory name index as it was before G6 names (built per process): the reference the
persisted `recall/names.py` must equal, query for query (`test_names_store.py`).

Copied from `recall/names.py` at 87416cd with two changes that fix an order the old code left
to Python's set iteration (ties between names of one note): exact matches and token matches
are visited in entry order; notes per key are cached per sync (speed only); and whether a
heading's tokens count is decided on the notes sharing it after the sync, not when its note
was read (that made the answers depend on the order notes had been read in, which a store
kept across processes would have carried forever).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import ahocorasick

from reme_agent.engine.tokenize import tokenize
from reme_agent.recall.names import (
    FIELD_WEIGHT,
    MAX_HEADING_NOTES,
    MAX_SHARED,
    QUERY_SHARE,
    NameMatch,
    max_edits,
    note_name_tokens,
    note_names,
    osa_distance,
)
from reme_agent.recall.normalize import compact, spaced, within_words

if TYPE_CHECKING:
    from reme_agent.engine.state import IndexState


@dataclass(frozen=True)
class _Entry:
    path: str
    name: str
    field: str
    key: str               # compact form
    words: str             # spaced form
    tokens: tuple[str, ...]


class ReferenceNameIndex:
    """Names of every indexed note, with exact, fuzzy, contained and token lookups."""

    def __init__(self, state: IndexState) -> None:
        self.state = state
        self._lock = threading.RLock()
        self._generation = -1
        self._stamps: dict[str, str] = {}
        self._entries: dict[int, _Entry] = {}
        self._by_path: dict[str, list[int]] = {}
        self._by_key: dict[str, set[int]] = {}
        self._by_token: dict[str, set[int]] = {}
        self._by_len: dict[int, set[int]] = {}       # key length -> entries (5+ chars)
        self._grams: dict[int, dict[str, set[int]]] = {}   # length -> bigram -> entries, lazy
        self._next = 0
        self._automaton: Any = None
        self._idf_totals: dict[int, float] = {}   # entry -> idf sum of its tokens, per sync
        self._named: dict[str, int] = {}

    # -- upkeep -------------------------------------------------------------------------
    def sync(self) -> None:
        """Catch up with the index state: re-read only the notes whose stamp changed."""
        gen = self.state.generation()
        with self._lock:
            if gen == self._generation:
                return
            stamps = self.state.file_stamps()
            changed = [p for p, s in stamps.items() if self._stamps.get(p) != s]
            gone = [p for p in self._stamps if p not in stamps]
            for path in gone:
                self._remove(path)
            if changed:
                sources = self.state.name_sources(changed if len(changed) < 200 else None)
                for path in changed:
                    if path not in sources:
                        continue
                    self._remove(path)
                    frontmatter, first, heads = sources[path]
                    for name, field in note_names(path, frontmatter, first, heads):
                        key = compact(name)
                        self._add(_Entry(path, name, field, key, spaced(name),
                                         note_name_tokens(name)))
            if changed or gone:
                self._automaton = None
                self._idf_totals = {}
                self._named = {}
                self._post_tokens()
            self._stamps = stamps
            self._generation = gen

    def _post_tokens(self) -> None:
        """Token postings of every name but headings more than MAX_HEADING_NOTES notes share
        (decided on the counts after the sync, as the store does)."""
        self._by_token = {}
        for eid, entry in self._entries.items():
            if entry.field != "heading" or self._notes_named(entry.key) <= MAX_HEADING_NOTES:
                for tok in entry.tokens:
                    self._by_token.setdefault(tok, set()).add(eid)

    def _add(self, entry: _Entry) -> None:
        eid = self._next
        self._next += 1
        self._entries[eid] = entry
        self._by_path.setdefault(entry.path, []).append(eid)
        self._by_key.setdefault(entry.key, set()).add(eid)
        if len(entry.key) >= 5:
            self._by_len.setdefault(len(entry.key), set()).add(eid)
            self._grams.pop(len(entry.key), None)

    def _remove(self, path: str) -> None:
        for eid in self._by_path.pop(path, ()):
            entry = self._entries.pop(eid)
            _discard(self._by_key, entry.key, eid)
            if len(entry.key) >= 5:
                _discard(self._by_len, len(entry.key), eid)
                self._grams.pop(len(entry.key), None)

    def _bigram_index(self, length: int) -> dict[str, set[int]]:
        """Bigram -> entries of one key length, built on first use (fuzzy lookups touch
        at most five lengths; building all of them cost 0.4 s at 10k notes)."""
        grams = self._grams.get(length)
        if grams is None:
            grams = self._grams[length] = {}
            for eid in self._by_len.get(length, ()):
                for gram in _bigrams(self._entries[eid].key):
                    grams.setdefault(gram, set()).add(eid)
        return grams

    def _notes_named(self, key: str) -> int:
        # cached per sync (the one change to its speed: a typo of a heading 5,000 notes
        # share checked each of them against all of them, minutes per query at 10k)
        count = self._named.get(key)
        if count is None:
            count = self._named[key] = len({self._entries[e].path
                                            for e in self._by_key.get(key, ())})
        return count

    def _usable(self, eid: int) -> bool:
        entry = self._entries[eid]
        shared = self._notes_named(entry.key)
        return shared <= (MAX_HEADING_NOTES if entry.field == "heading" else MAX_SHARED)

    def _matcher(self) -> Any:
        if self._automaton is None:
            auto = ahocorasick.Automaton()
            words: dict[str, list[int]] = {}
            for eid, entry in self._entries.items():
                if entry.words:
                    words.setdefault(entry.words, []).append(eid)
            for word, eids in words.items():
                auto.add_word(word, (len(word), tuple(eids)))
            if words:
                auto.make_automaton()
            self._automaton = auto if words else False
        return self._automaton

    # -- lookups ------------------------------------------------------------------------
    def names_of(self, path: str) -> list[str]:
        with self._lock:
            return [self._entries[e].name for e in self._by_path.get(path, ())]

    def match(self, query: str, tokens: list[str] | None = None) -> dict[str, NameMatch]:
        """The best match per note the query names (empty when it names none)."""
        with self._lock:
            key = compact(query)
            words = spaced(query)
            found: list[NameMatch] = []
            exact = [e for e in sorted(self._by_key.get(key, ())) if self._usable(e)]
            for eid in exact:
                found.append(self._make(eid, "exact", 1.0))
            if not exact:
                found += self._fuzzy(key)
            contained = self._contained(words, key)
            found += contained
            # a name already found whole is not matched again token by token
            skip = {self._key_of(m) for m in [*found]}
            found += [m for m in self._token_matches(tokens if tokens is not None
                                                     else tokenize(query))
                      if self._key_of(m) not in skip]
            best: dict[str, NameMatch] = {}
            for m in found:
                old = best.get(m.path)
                if old is None or m.strength > old.strength:
                    best[m.path] = m
            return best

    @staticmethod
    def _key_of(match: NameMatch) -> tuple[str, str]:
        return match.path, compact(match.name)

    def _make(self, eid: int, kind: str, strength: float,
              span: tuple[int, int] | None = None) -> NameMatch:
        entry = self._entries[eid]
        return NameMatch(entry.path, entry.name, entry.field, kind,
                         round(strength * FIELD_WEIGHT[entry.field], 4), span)

    def _fuzzy(self, key: str) -> list[NameMatch]:
        n = len(key)
        if n < 5 or n > 60:
            return []
        grams = set(_bigrams(key))
        out = []
        for length in range(max(5, n - 2), n + 3):
            limit = max_edits(min(length, n))
            if limit == 0 or abs(length - n) > limit:
                continue
            index = self._bigram_index(length)
            # q-gram lemma: each edit destroys at most 2 bigrams (of the longer string)
            need = max(1, max(n, length) - 1 - 2 * limit)
            postings = sorted((index.get(g, _NONE) for g in grams), key=len)
            # Prefix filter: a name sharing `need` of the query's bigrams holds one of its
            # rarest len - need + 1 (so common bigrams like "th" are never walked whole).
            candidates: set[int] = set().union(*postings[:len(postings) - need + 1])
            for eid in sorted(candidates):   # title, aliases, stem, headings: entry order
                shared = sum(1 for posting in postings if eid in posting)
                if shared < need or not self._usable(eid):
                    continue
                dist = osa_distance(key, self._entries[eid].key, limit)
                if 0 < dist <= limit:
                    out.append(self._make(eid, "fuzzy", 0.9 - 0.05 * dist))
        return out

    def _contained(self, words: str, key: str) -> list[NameMatch]:
        auto = self._matcher()
        if not auto or not words:
            return []
        total = max(1, len(key))
        out = []
        for end, (length, eids) in auto.iter(words):
            start = end - length + 1
            if not within_words(words, start, end + 1):
                continue
            for eid in eids:
                entry = self._entries[eid]
                if entry.key == key or not self._usable(eid) or not entry.tokens:
                    continue   # the whole query: an exact match, counted above
                share = len(entry.key) / total
                out.append(self._make(eid, "contained", 0.5 + 0.4 * share, (start, end + 1)))
        return out

    def _token_matches(self, tokens: list[str]) -> list[NameMatch]:
        """Names most of whose tokens (idf-weighted) occur in the query, in any order."""
        query = list(dict.fromkeys(tokens))
        if not query:
            return []
        n_names = max(1, len(self._entries))
        idf = {t: math.log(1 + n_names / (1 + len(self._by_token.get(t, ())))) for t in query}
        hits: dict[int, float] = {}
        for tok in query:
            for eid in self._by_token.get(tok, ()):
                hits[eid] = hits.get(eid, 0.0) + idf[tok]
        out = []
        query_idf = sum(idf.values())
        totals = self._idf_totals
        for eid, got in sorted(hits.items()):
            entry = self._entries[eid]
            if len(entry.tokens) < 2:
                continue   # a one-token name is an exact or contained match, or none
            total = totals.get(eid)
            if total is None:   # the same sum every query until the index changes
                total = totals[eid] = sum(
                    math.log(1 + n_names / (1 + len(self._by_token.get(t, ()))))
                    for t in entry.tokens)
            name_cov = got / total if total else 0.0
            if name_cov < 0.5 or not self._usable(eid):
                continue
            share = min(1.0, got / (QUERY_SHARE * query_idf))
            out.append(self._make(eid, "tokens", 0.8 * name_cov * share))
        return out


_NONE: frozenset[int] = frozenset()


def _bigrams(key: str) -> list[str]:
    return [key[i:i + 2] for i in range(len(key) - 1)]


def _discard(index: dict[Any, set[int]], key: Any, eid: int) -> None:
    group = index.get(key)
    if group is not None:
        group.discard(eid)
        if not group:
            del index[key]
