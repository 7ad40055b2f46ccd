"""Near mentions for fuzzy L1: most of a name's words close together, in any order.

Seed auto_link_design.md §1.3 (L1 "fuzzy match + semantic recall"). "rotation of JWT keys",
"轮换密钥", "idempotancy key" are not any name as written nor a variant of one; they hold most of
a multi-word name's words (or a Chinese name's characters) within a short window, allowing a
typo (edit distance 1 on words of 6+ letters), a shared 5-letter prefix ("rotating" ~
"rotation") and at most one extra word. Candidates come from an inverted index unit -> names,
so a note costs its own length, not the number of names. The windows are loose: `semantic.py`
scores each against its name before anyone is asked about it.

Decisions where the seeds are silent:
- A name needs >= 2 units (>= 3 CJK characters): a single word close to a name is a variant or
  nothing; two-character Chinese names are too short to be "close" to.
- A window holds max(2, ⌈0.75·n⌉) of the name's n units, is at most n + 1 units long
  (stopwords free) and crosses no sentence end; the best-covered window per node is kept.
- A name becomes a candidate in a note only through one of its two rarest units (its
  *anchors*, fewest names first): a common word ("service", "key") or character (数) would
  otherwise drag thousands of names into every note. A window missing both anchors is not
  found.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, replace

from reme_agent.engine.tokenize import STOPWORDS
from reme_agent.maintenance.autolink.matcher import Proposal, Unprotected, bounded
from reme_agent.maintenance.autolink.names import NameEntry
from reme_agent.maintenance.autolink.normalize import NormText, is_cjk, normalize

__all__ = ["NearFinder"]

_SENTENCE_END = frozenset(".;!?。；！？\n")
_PREFIX = 5  # shared prefix that makes two long words "the same word"
_ANCHORS = 2  # a name is a candidate only through its rarest units
_MAX_WINDOWS = 64  # windows tried per note, best-covered names first (a bound on the cost)


@dataclass(frozen=True)
class _NearName:
    name: str
    path: str
    units: tuple[str, ...]
    cjk: bool
    need: int  # max(2, ceil(0.75 n)) distinct units must be present
    unit_set: frozenset[str]
    anchors: tuple[str, ...] = ()  # its rarest units, set by `NearFinder._anchors`
    anchor_need: int = 1  # how many anchors any window reaching `need` must hold

    @classmethod
    def of(cls, name: str, path: str, units: tuple[str, ...], cjk: bool) -> _NearName:
        return cls(name, path, units, cjk, max(2, math.ceil(0.75 * len(units))),
                   frozenset(units))


def _titled(name: str) -> bool:
    """Written as a title or alias (capitals or spaces), not as a kebab-case file stem."""
    return name != name.lower() or " " in name


def _long_word(key: str) -> bool:
    return len(key) > _PREFIX and key.isascii() and key.isalpha()


def _deletions(word: str) -> set[str]:
    return {word[:i] + word[i + 1:] for i in range(len(word))}


class NearFinder:
    """Inverted index from unit keys to multi-unit names; rebuild it when the names change."""

    def __init__(self) -> None:
        self._near: list[_NearName] = []
        self._by_unit: dict[str, set[int]] = defaultdict(set)  # unit key -> near names
        self._near_of: dict[tuple[str, frozenset[str]], int] = {}
        self._memo: dict[str, set[str]] = {}
        self._typo: dict[str, set[str]] = defaultdict(set)  # one deletion -> unit keys
        self._prefix: dict[str, set[str]] = defaultdict(set)  # proper prefix -> unit keys
        self._anchored: dict[str, set[int]] | None = None  # anchor unit -> near names

    def prepare(self) -> None:
        """Build the anchor index now (after the last `add`, before threads share the finder)."""
        self._anchors()

    def _anchors(self) -> dict[str, set[int]]:
        """Each name under its `_ANCHORS` rarest units (built on first use after `add`)."""
        anchored = self._anchored
        if anchored is None:
            anchored = defaultdict(set)
            for n, near in enumerate(self._near):
                ranked = sorted(near.unit_set, key=lambda u: (len(self._by_unit[u]), -len(u), u))
                top = tuple(ranked[:_ANCHORS])
                self._near[n] = replace(near, anchors=top, anchor_need=max(
                    1, near.need - (len(near.unit_set) - len(top))))
                for unit in ranked[:_ANCHORS]:
                    anchored[unit].add(n)
            self._anchored = anchored
        return anchored

    def add(self, entry: NameEntry) -> None:
        """Index one name (names of fewer than 2 units, 3 for CJK, are left out)."""
        units = tuple(u.key for u in normalize(entry.name).units
                      if u.key not in STOPWORDS or is_cjk(u.key))  # 向 is a stopword, not in 向量
        cjk = any(is_cjk(u) for u in units)
        if len(set(units)) < (3 if cjk else 2):
            return
        near = _NearName.of(entry.name, entry.path, units, cjk)
        self._anchored = None
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
        anchored = self._anchors()
        anchors_seen: Counter[int] = Counter()
        for name_unit in positions:
            anchors_seen.update(anchored.get(name_unit, ()))
        viable: list[tuple[float, int, list[str]]] = []
        for n, seen in anchors_seen.items():
            near = self._near[n]
            if seen < near.anchor_need:
                continue  # too few of its rarest units: it cannot reach `need`
            present = [u for u in near.unit_set if u in positions]
            if len(present) >= near.need and not near.unit_set.isdisjoint(outside):
                viable.append((len(present) / len(near.unit_set), n, present))
        if not viable:
            return []
        stops = [0]  # stopwords up to each unit
        for unit in norm.units:
            stops.append(stops[-1] + (unit.key in STOPWORDS))
        # Best-covered names first: "凤凰红色" is 红色凤凰 reordered, not 3/4 of 白色凤凰.
        viable.sort(key=lambda v: (-v[0], v[1]))
        windows: list[tuple[float, int, int, int, int]] = []  # (-covered share, length, ...)
        for _, n, present in viable[:_MAX_WINDOWS]:
            near = self._near[n]
            # only units close to one of the name's anchors can share its window
            reach = 2 * len(near.units) + 2
            spots = [i for u in near.anchors if u in positions for i in positions[u]]
            found = sorted((i, u) for u in present for i in positions[u]
                           if any(abs(i - j) <= reach for j in spots))
            window = _window(near, found, norm, body, stops)
            if window is not None:
                start, end, covered = window
                windows.append((-covered / len(near.unit_set), end - start, start, end, n))
        claimed = bytearray(len(body) + 1)  # spans of better-covered windows
        out: dict[str, Proposal] = {}
        for _, _, start, end, n in sorted(windows):
            near = self._near[n]
            if near.path in out or any(claimed[start:end]) or not bounded(body, start, end) \
                    or not free.contains(start, end):
                continue
            claimed[start:end] = b"\x01" * (end - start)
            out[near.path] = Proposal(start, end, body[start:end], f"near:{near.name}",
                                      (near.path,), "near", near.name)
        return list(out.values())

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
