"""Fuzzy L1 candidates: mentions that are not a known name as written, but close to one.

Seed auto_link_design.md §1.3 (L1 "fuzzy match + semantic recall") and §2.2/§2.5 (string match,
the LLM decides what is not certain). Everything found here is a *proposal*: the judge decides
it, and with no model it is only reported (`l1.py`). Two kinds:

- ``variant``: the name in another surface form — inflected ("JWTs", "rate-limited",
  "circuit breakers", "rate limiter"), full-width ("ＪＷＴ"), hyphen/space/joined ("back-off"),
  possessive, or a capitalised one-word name written in lower case ("go" for `Go`). One
  Aho–Corasick automaton over the names' normalised keys (`normalize.py`) scans the body's
  joined unit keys once; a match must start and end on unit boundaries. Acronyms keep their
  case ("it" never proposes `IT`).
- ``near``: most of a multi-word name's words (or a CJK name's characters) close together, in
  any order, allowing a typo, a shared 5-letter prefix ("rotating" ~ "rotation") and at most one
  extra word: "rotation of JWT keys", "轮换密钥", "idempotancy key". These are cheap to find
  (an inverted index from unit key to names) and loose, so `semantic.py` keeps only those whose
  embedding is close to the name's before they reach the judge.

Decisions where the seeds are silent:
- A name needs >= 2 units for ``near`` (>= 3 CJK characters): a single word close to a name
  is a variant or nothing; two-character Chinese names are too short to be "close" to.
- ``near`` needs max(2, ⌈0.75·n⌉) of the name's n units inside a window of n + 1 units
  (Latin words, stopwords free) or n + 1 characters (CJK), with no line break or sentence end.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import ahocorasick

from reme_agent.engine.tokenize import STOPWORDS
from reme_agent.maintenance.autolink.matcher import Unprotected, bounded
from reme_agent.maintenance.autolink.names import NameEntry, NameIndex
from reme_agent.maintenance.autolink.normalize import NormText, is_cjk, name_keys, normalize

__all__ = ["FuzzyMatcher", "Kind", "Proposal", "inside_cjk_word"]

Kind = Literal["variant", "near"]
_SENTENCE_END = frozenset(".;!?。；！？\n")
_PREFIX = 5  # shared prefix that makes two long words "the same word" for `near`
_CUT_CONTEXT = 12  # characters of context each side of a match that jieba segments
# A unit in more names than this cannot make a name a `near` candidate on its own (it still
# counts once the name is a candidate): a common word or character would otherwise drag
# thousands of names into every note. Names made only of such units are matched exactly or
# as variants.
_COMMON_UNIT = 64


@dataclass(frozen=True)
class Proposal:
    """A fuzzy mention at [start, end) of the body, close to `name` of each candidate node."""

    start: int
    end: int
    text: str
    key: str
    candidates: tuple[str, ...]
    kind: Kind
    name: str
    score: float | None = None  # embedding similarity of the text to the name (near only)


@dataclass(frozen=True)
class _NearName:
    name: str
    path: str
    units: tuple[str, ...]
    cjk: bool
    need: int  # max(2, ceil(0.75 n)) distinct units must be present

    @classmethod
    def of(cls, name: str, path: str, units: tuple[str, ...], cjk: bool) -> _NearName:
        return cls(name, path, units, cjk, max(2, math.ceil(0.75 * len(units))))


def _cut(line: str) -> list[str]:
    from reme_agent.engine.tokenize import warm_up

    warm_up()  # loads jieba's dictionary once, quietly (the keyword index's segmenter)
    import jieba  # type: ignore[import-untyped]

    return list(jieba.lcut(line, cut_all=False, HMM=True))


def inside_cjk_word(body: str, start: int, end: int) -> bool:
    """Does a match start or end inside a Chinese word (支付 in 支付宝, 熔断 in 熔断器)? Then
    it is a variant for the judge, not an exact mention. Only CJK edges are checked; the
    line around the match is segmented with jieba, as the keyword index segments it."""
    lo = max(body.rfind("\n", 0, start) + 1, start - _CUT_CONTEXT)
    hi = body.find("\n", end, end + _CUT_CONTEXT)
    hi = min(len(body), end + _CUT_CONTEXT) if hi < 0 else hi
    cuts = {lo}
    at = lo
    for word in _cut(body[lo:hi]):
        at += len(word)
        cuts.add(at)
    return (is_cjk(body[start]) and start not in cuts) or \
        (is_cjk(body[end - 1]) and end not in cuts)


def _titled(name: str) -> bool:
    """Written as a title or alias (capitals or spaces), not as a kebab-case file stem."""
    return name != name.lower() or " " in name


def _long_word(key: str) -> bool:
    return len(key) > _PREFIX and key.isascii() and key.isalpha()


def _deletions(word: str) -> set[str]:
    return {word[:i] + word[i + 1:] for i in range(len(word))}


class FuzzyMatcher:
    """Variant automaton + near index over one NameIndex; rebuild it when the names change."""

    def __init__(self, index: NameIndex) -> None:
        self.index = index
        self._variants: dict[str, list[NameEntry]] = defaultdict(list)
        self._near: list[_NearName] = []
        self._by_unit: dict[str, set[int]] = defaultdict(set)  # unit key -> near names
        self._near_of: dict[tuple[str, frozenset[str]], int] = {}
        self._memo: dict[str, set[str]] = {}
        self._typo: dict[str, set[str]] = defaultdict(set)  # one deletion -> unit keys
        self._prefix: dict[str, set[str]] = defaultdict(set)  # proper prefix -> unit keys
        for bucket in map(index.entries, index.keys()):
            for entry in bucket:
                self._add(entry)
        self._automaton = None
        if self._variants:
            automaton = ahocorasick.Automaton()
            for vkey in self._variants:
                automaton.add_word(vkey, vkey)
            automaton.make_automaton()
            self._automaton = automaton

    def _add(self, entry: NameEntry) -> None:
        for vkey in name_keys(entry.name):
            if len(vkey) >= 2 and entry not in self._variants[vkey]:
                self._variants[vkey].append(entry)
        units = tuple(u.key for u in normalize(entry.name).units
                      if u.key not in STOPWORDS or is_cjk(u.key))  # 向 is a stopword, not in 向量
        cjk = any(is_cjk(u) for u in units)
        if len(set(units)) < (3 if cjk else 2):
            return
        near = _NearName.of(entry.name, entry.path, units, cjk)
        same = self._near_of.get((entry.path, frozenset(units)))
        if same is not None:  # "jwt-key-rotation" (the stem) and "JWT key rotation" (title)
            if _titled(entry.name) and not _titled(self._near[same].name):
                self._near[same] = near  # score against the written title, not the stem
            return
        self._near.append(near)
        self._near_of[(entry.path, frozenset(units))] = len(self._near) - 1
        for unit in set(units):
            self._by_unit[unit].add(len(self._near) - 1)
            if _long_word(unit):
                for d in _deletions(unit):
                    self._typo[d].add(unit)
                for n in range(_PREFIX, len(unit)):
                    self._prefix[unit[:n]].add(unit)

    # -- variants -------------------------------------------------------------------------
    def variants(self, body: str, norm: NormText, free: Unprotected) -> list[Proposal]:
        """Every variant match outside protected text (overlaps included)."""
        if self._automaton is None or not norm.joined:
            return []
        out: list[Proposal] = []
        for last, vkey in self._automaton.iter(norm.joined):
            first = norm.unit_at_start.get(last + 1 - len(vkey))
            final = norm.unit_at_end.get(last + 1)
            if first is None or final is None:
                continue  # not on unit boundaries: inside a longer word
            start, end = norm.units[first].start, norm.units[final].end
            if not bounded(body, start, end) or not free.contains(start, end):
                continue
            text = body[start:end]
            entries = [e for e in self._variants[vkey] if e.case != "exact" or _acronym_fits(
                e.name, text)]
            if entries:
                cands = tuple(sorted({e.path for e in entries}))
                out.append(Proposal(start, end, text, vkey, cands, "variant", entries[0].name))
        return out

    # -- near -----------------------------------------------------------------------------
    def _unit_matches(self, key: str) -> set[str]:
        """Name unit keys `key` may stand for: itself, a typo (edit distance 1), a long prefix."""
        hits = {key} if key in self._by_unit else set()
        hits |= self._prefix.get(key, set())  # "rotat" (rotating) -> "rotation"
        hits |= self._typo.get(key, set())  # a letter missing ("leter")
        if _long_word(key):
            for d in _deletions(key):
                if d in self._by_unit:
                    hits.add(d)  # a letter too many
                hits |= self._typo.get(d, set())  # a letter changed
            for n in range(_PREFIX, len(key)):
                if key[:n] in self._by_unit:
                    hits.add(key[:n])  # "deployment" -> "deploy"
        return hits

    def near(self, body: str, norm: NormText, free: Unprotected,
             taken: bytearray | None = None) -> list[Proposal]:
        """Windows holding most of a multi-unit name's units (see the module docstring).

        `taken` marks text already matched exactly or as a variant: a window must hold at
        least one name unit outside it (else it only restates those matches).
        """
        if not self._near:
            return []
        positions: dict[str, list[int]] = defaultdict(list)  # name unit -> text unit indexes
        outside: set[str] = set()  # name units found outside `taken`
        for i, unit in enumerate(norm.units):
            hits = self._matches(unit.key)
            if hits and (taken is None or not taken[unit.start]):
                outside |= hits
            for name_unit in hits:
                positions[name_unit].append(i)
        candidates: set[int] = set()
        for name_unit in outside:
            names = self._by_unit[name_unit]
            if len(names) <= _COMMON_UNIT:
                candidates |= names
        best: dict[str, tuple[float, int, Proposal]] = {}  # node -> its best-covered window
        stops: list[int] = []
        for n in candidates:
            near = self._near[n]
            present = [u for u in set(near.units) if u in positions]
            if len(present) < near.need:
                continue
            if not stops:  # stopwords up to each unit, once per note
                stops.append(0)
                for unit in norm.units:
                    stops.append(stops[-1] + (unit.key in STOPWORDS))
            found = sorted((i, u) for u in present for i in positions[u])
            window = _window(near, found, norm, body, stops)
            if window is None:
                continue
            start, end, covered = window
            if not bounded(body, start, end) or not free.contains(start, end):
                continue
            rank = (covered / len(set(near.units)), start - end)
            if near.path not in best or rank > best[near.path][:2]:
                best[near.path] = (*rank, Proposal(start, end, body[start:end],
                                                   f"near:{near.name}", (near.path,), "near",
                                                   near.name))
        return [p for _, _, p in best.values()]

    def _matches(self, key: str) -> set[str]:
        """`_unit_matches`, memoised: a vault's vocabulary repeats from note to note."""
        hit = self._memo.get(key)
        if hit is None:
            if len(self._memo) > 500_000:
                self._memo.clear()
            hit = self._memo[key] = self._unit_matches(key)
        return hit


def _window(near: _NearName, found: list[tuple[int, str]], norm: NormText, body: str,
            stops: list[int]) -> tuple[int, int, int] | None:
    """(start, end, units covered) of the best window holding `need` distinct units of the
    name within the slack: most units covered, then shortest, then first. A CJK window that
    misses the name's last character grows by the character that follows ("灰度发" + "版"
    for 灰度发布), so a link does not split the word it half covers."""
    limit = len(near.units) + 1
    best: tuple[int, int, int, int] | None = None  # (-covered, length, start, end)
    for a in range(len(found)):
        covered: set[str] = set()
        for b in range(a, len(found)):
            i0, i1 = found[a][0], found[b][0]
            free = stops[i1 + 1] - stops[i0]  # stopwords inside the window cost nothing
            if i1 - i0 + 1 > limit + free:
                break
            covered.add(found[b][1])
            if len(covered) < near.need:
                continue
            start, end = norm.units[i0].start, norm.units[i1].end
            extra = (i1 - i0 + 1) - len({i for i, _ in found[a:b + 1]}) - free
            if extra <= 1 and not _SENTENCE_END.intersection(body[start:end]):
                cand = (-len(covered), i1 - i0, start, end)
                best = cand if best is None or cand < best else best
    if best is None:
        return None
    covered, start, end = -best[0], best[2], best[3]
    last = near.units[-1]
    if near.cjk and is_cjk(last) and last not in {k for i, k in found
                                                  if start <= norm.units[i].start < end} \
            and end < len(body) and is_cjk(body[end]):
        end += 1
    return start, end, covered


def _acronym_fits(name: str, written: str) -> bool:
    """An acronym's variant keeps its capitals: ``JWTs``, ``ＪＷＴ`` fit `JWT`; ``jwt`` does not."""
    import unicodedata

    def letters(s: str) -> str:
        return "".join(c for c in s if c.isalnum())

    got = letters(unicodedata.normalize("NFKC", written).replace("'s", "").replace("’s", ""))
    want = letters(name)
    return got == want or got == want + "s"


def first_per_key(items: Iterable[Proposal]) -> list[Proposal]:
    """One proposal per (kind, key): the first in document order."""
    seen: set[tuple[str, str]] = set()
    out: list[Proposal] = []
    for p in sorted(items, key=lambda p: p.start):
        if (p.kind, p.key) not in seen:
            seen.add((p.kind, p.key))
            out.append(p)
    return out
