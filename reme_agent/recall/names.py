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
  same jieba + English tokenisation as the keyword projection.

Headings are weaker names (a section is not the note) and count only while at most
`MAX_HEADING_NOTES` notes share them; any name shared by more than `MAX_SHARED` notes (a
`README`, `Overview`) is not a name at all.

The index is built from the index state (frontmatter, first block, headings), never from the
files, on the first search, and then kept in step per changed path when the index
generation moves (another run, in any process).
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import ahocorasick

from reme_agent.engine.names import note_aliases, note_title
from reme_agent.engine.tokenize import tokenize
from reme_agent.recall.normalize import CJK_CHAR as _CJK
from reme_agent.recall.normalize import compact, spaced, within_words
from reme_agent.recall.pervault import PerVault

if TYPE_CHECKING:
    from reme_agent.engine.state import IndexState
    from reme_agent.vault import Vault

__all__ = ["NameIndex", "NameMatch", "index_for", "note_name_tokens", "osa_distance"]

MAX_SHARED = 5          # a name more notes share is a common word, not a name
MAX_HEADING_NOTES = 2   # a heading more notes share ("Overview") names no note
FIELD_WEIGHT = {"title": 1.0, "alias": 1.0, "stem": 1.0, "heading": 0.7}


@dataclass(frozen=True)
class NameMatch:
    path: str
    name: str          # as written in the note
    field: str         # title | alias | stem | heading
    kind: str          # exact | fuzzy | contained | tokens
    strength: float    # 0..1
    span: tuple[int, int] | None = None   # where a contained name sits in `spaced(query)`


@dataclass(frozen=True)
class _Entry:
    path: str
    name: str
    field: str
    key: str               # compact form
    words: str             # spaced form
    tokens: tuple[str, ...]


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
                        # a heading many notes share ("Overview") names none: not tokenised
                        shared = field == "heading" and \
                            len(self._by_key.get(key, ())) > MAX_HEADING_NOTES
                        self._add(_Entry(path, name, field, key, spaced(name),
                                         () if shared else note_name_tokens(name)))
            if changed or gone:
                self._automaton = None
                self._idf_totals = {}
            self._stamps = stamps
            self._generation = gen

    def _add(self, entry: _Entry) -> None:
        eid = self._next
        self._next += 1
        self._entries[eid] = entry
        self._by_path.setdefault(entry.path, []).append(eid)
        self._by_key.setdefault(entry.key, set()).add(eid)
        for tok in entry.tokens:
            self._by_token.setdefault(tok, set()).add(eid)
        if len(entry.key) >= 5:
            self._by_len.setdefault(len(entry.key), set()).add(eid)
            self._grams.pop(len(entry.key), None)

    def _remove(self, path: str) -> None:
        for eid in self._by_path.pop(path, ()):
            entry = self._entries.pop(eid)
            _discard(self._by_key, entry.key, eid)
            for tok in entry.tokens:
                _discard(self._by_token, tok, eid)
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
        return len({self._entries[e].path for e in self._by_key.get(key, ())})

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
            exact = [e for e in self._by_key.get(key, ()) if self._usable(e)]
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
                if entry.key == key or not self._usable(eid):
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
        totals = self._idf_totals
        for eid, got in hits.items():
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
            out.append(self._make(eid, "tokens", 0.8 * name_cov))
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


_indexes: PerVault[NameIndex] = PerVault(NameIndex)


def index_for(vault: Vault) -> NameIndex:
    """The vault's name index, in step with its index state (one per Vault object)."""
    idx = _indexes.get(vault)
    idx.sync()
    return idx
