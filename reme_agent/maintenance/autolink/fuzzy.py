"""Fuzzy L1 candidates: mentions that are not a known name as written, but close to one.

Seed auto_link_design.md §1.3 (L1 "fuzzy match + semantic recall") and §2.2/§2.5 (string match,
the LLM decides what is not certain). Everything found here is a *proposal*: the judge decides
it, and with no model it is only reported (`l1.py`). Two kinds:

- ``variant``: the name in another surface form — inflected ("JWTs", "rate-limited",
  "circuit breakers", "rate limiter"), full-width ("ＪＷＴ"), hyphen/space/joined ("back-off"),
  possessive, or a capitalised one-word name written in lower case ("go" for `Go`). One
  Aho–Corasick automaton over the names' normalised keys (`normalize.py`) scans the body's
  joined unit keys once; a match must start and end on unit boundaries. Acronyms keep their
  case ("it" never proposes `IT`). A Chinese exact match inside a longer word (支付 in 支付宝,
  `inside_cjk_word`) is a variant too.
- ``near``: most of a multi-word name's words close together (`near.py`), scored against the
  name by `semantic.py` before anyone is asked.
"""

from __future__ import annotations

import unicodedata
from collections import defaultdict

import ahocorasick

from reme_agent.maintenance.autolink.matcher import Kind, Proposal, Unprotected, bounded
from reme_agent.maintenance.autolink.names import NameEntry, NameIndex
from reme_agent.maintenance.autolink.near import NearFinder
from reme_agent.maintenance.autolink.normalize import NormText, is_cjk, name_keys

__all__ = ["FuzzyMatcher", "Kind", "Proposal", "inside_cjk_word"]

_CUT_CONTEXT = 12  # characters of context each side of a match that jieba segments


def _cut(line: str) -> list[str]:
    from reme_agent.engine.tokenize import warm_up

    warm_up()  # loads jieba's dictionary once, quietly (the keyword index's segmenter)
    import jieba  # type: ignore[import-untyped]

    return list(jieba.lcut(line, cut_all=False, HMM=True))


def inside_cjk_word(body: str, start: int, end: int) -> bool:
    """Does a match start or end inside a Chinese word (支付 in 支付宝, 熔断 in 熔断器)? Then
    it is a variant for the judge, not an exact mention. Only CJK edges are checked; up to
    `_CUT_CONTEXT` characters each side, on the match's line, are segmented with jieba (the
    keyword index's segmenter), enough context for the boundaries at the match."""
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


class FuzzyMatcher:
    """Variant automaton + near index over one NameIndex; rebuild it when the names change."""

    def __init__(self, index: NameIndex) -> None:
        self.index = index
        self._variants: dict[str, list[NameEntry]] = defaultdict(list)
        self._near = NearFinder()
        for bucket in map(index.entries, index.keys()):
            for entry in bucket:
                for vkey in name_keys(entry.name):
                    if len(vkey) >= 2 and entry not in self._variants[vkey]:
                        self._variants[vkey].append(entry)
                self._near.add(entry)
        self._automaton = None
        if self._variants:
            automaton = ahocorasick.Automaton()
            for vkey in self._variants:
                automaton.add_word(vkey, vkey)
            automaton.make_automaton()
            self._automaton = automaton
        self._near.prepare()

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

    def near(self, body: str, norm: NormText, free: Unprotected,
             taken: bytearray | None = None) -> list[Proposal]:
        """Near windows (`near.NearFinder.near`)."""
        return self._near.near(body, norm, free, taken)


def _acronym_fits(name: str, written: str) -> bool:
    """An acronym's variant keeps its capitals: ``JWTs``, ``ＪＷＴ`` fit `JWT`; ``jwt`` does not."""
    def letters(s: str) -> str:
        return "".join(c for c in s if c.isalnum())

    got = letters(unicodedata.normalize("NFKC", written).replace("'s", "").replace("’s", ""))
    want = letters(name)
    return got == want or got == want + "s"
