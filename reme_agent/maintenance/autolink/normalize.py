"""Normalised word keys for fuzzy L1 matching: width, case, inflection, hyphen/space folding.

Seed auto_link_design.md §1.3 (L1: "fuzzy match + semantic recall") and §2.5 ("known names +
simple variants"). Exact L1 finds a name only as written (modulo case); people write "JWTs",
"rate-limited", "circuit breakers", "ＪＷＴ" and "Exponential back-off". This module turns a
text into *units* that compare equal across those forms, keeping every unit's offsets in the
original text, so a match maps back to the characters the link will wrap.

- Width: NFKC per character (full-width ``ＪＷＴ`` -> ``JWT``); offsets stay those of the
  original character.
- Case: lower-case (the caller re-checks acronym case: "it" must not become "IT").
- Inflection: English words go through the engine's light stemmer (`engine.tokenize.stem`,
  -s/-es/-ies/-ed/-ing, the BM25 terms) plus two rules it lacks: an upper-case acronym's plural
  (``APIs`` -> ``api``) and the possessive (``bucket's``: the ``'s`` is not part of the mention).
  The agent-noun ``-er`` form is generated only for the last word of a *name* (`name_keys`), so
  "rate limiter" meets "Rate limit" without conflating every -er word in running text.
- Hyphen / space / joined: a key is the concatenation of the unit keys with no separator, and a
  match must start and end on unit boundaries, so "circuit-breaker", "circuit breaker" and
  "back-off" vs "backoff" meet.
- Chinese/Japanese: one unit per character (CJK has no spaces; a name may start or end anywhere),
  width-folded. Simplified/traditional conversion is not done: it needs a table we do not ship.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from reme_agent.engine.tokenize import stem

__all__ = ["NormText", "Unit", "is_cjk", "lemma", "name_keys", "normalize", "spelling_similarity",
           "unit_key"]

_CJK_CLASS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_UNIT_RE = re.compile(rf"[{_CJK_CLASS}]|[^\W_{_CJK_CLASS}]+")
_APOSTROPHES = frozenset("'’")
_VOWELS = frozenset("aeiou")


def is_cjk(ch: str) -> bool:
    return bool(ch) and bool(re.match(rf"[{_CJK_CLASS}]", ch[0]))


@lru_cache(maxsize=1 << 16)
def lemma(word: str) -> str:
    """The comparison key of one lower-case word: the engine's inflection stem for English,
    the word itself for anything else (digits, other scripts)."""
    return stem(word) if word.isascii() and word.isalpha() else word


@lru_cache(maxsize=1 << 17)
def unit_key(written: str) -> str:
    """Key of one unit as written (already NFKC): acronym plurals lose their ``s`` first."""
    if len(written) >= 3 and written[-1] == "s" and written[:-1].isupper():
        return written[:-1].lower()  # APIs, JWTs, SLOs
    return lemma(written.lower())


def _agent_noun(key: str) -> str | None:
    """The -er partner of a name's last word (limit <-> limiter, breaker <-> break)."""
    if key.endswith("er") and len(key) >= 6:
        base = key[:-2]
        if len(base) >= 4 and base[-1] == base[-2] and base[-1] not in _VOWELS:
            base = base[:-1]  # runner -> run
        return base
    if key.isascii() and key.isalpha() and len(key) >= 4 and not key.endswith("er"):
        return lemma(key + "er")
    return None


class Unit(NamedTuple):
    """A word (or one CJK character) at [start, end) of the original text, with its key."""

    start: int
    end: int
    key: str


@dataclass
class NormText:
    """A text as units plus the concatenated key string the variant automaton scans."""

    units: list[Unit]
    joined: str  # "".join(u.key for u in units)
    unit_at_start: dict[int, int]  # offset in `joined` -> index of the unit starting there
    unit_at_end: dict[int, int]  # offset in `joined` (exclusive end) -> index of that unit


def _nfkc_units(text: str) -> list[tuple[int, int, str]]:
    """(start, end, NFKC text) of each unit; offsets are in the original text."""
    if text.isascii() or unicodedata.is_normalized("NFKC", text):  # the common case
        return [(m.start(), m.end(), m.group()) for m in _UNIT_RE.finditer(text)]
    # NFKC may change a character's length (ﬁ -> fi); fold per character and keep a map.
    folded: list[str] = []
    origin: list[int] = []
    for i, ch in enumerate(text):
        n = unicodedata.normalize("NFKC", ch) if ord(ch) > 0x7F else ch
        folded.append(n)
        origin.extend([i] * len(n))
    flat = "".join(folded)
    out = []
    for m in _UNIT_RE.finditer(flat):
        out.append((origin[m.start()], origin[m.end() - 1] + 1, m.group()))
    return out


def normalize(text: str) -> NormText:
    """Units of `text` (possessive ``'s`` dropped) and their joined keys."""
    units: list[Unit] = []
    for start, end, written in _nfkc_units(text):
        if written in ("s", "S") and start > 0 and text[start - 1] in _APOSTROPHES:
            continue  # possessive: "bucket's" -> "bucket"
        units.append(Unit(start, end, unit_key(written)))
    at_start: dict[int, int] = {}
    at_end: dict[int, int] = {}
    pos = 0
    for i, unit in enumerate(units):
        at_start[pos] = i
        pos += len(unit.key)
        at_end[pos] = i
    return NormText(units, "".join(u.key for u in units), at_start, at_end)


def name_keys(name: str) -> list[str]:
    """Joined keys a name may appear under: its own, and its last word's -er partner."""
    units = normalize(name).units
    if not units:
        return []
    keys = ["".join(u.key for u in units)]
    partner = _agent_noun(units[-1].key)
    if partner and partner != units[-1].key:
        keys.append("".join(u.key for u in units[:-1]) + partner)
    return keys


@lru_cache(maxsize=1 << 15)
def _trigrams(text: str) -> frozenset[str]:
    joined = f"#{normalize(text).joined}#"
    return frozenset(joined[i:i + 3] for i in range(len(joined) - 2))


def spelling_similarity(a: str, b: str) -> float:
    """Dice overlap of character trigrams of the normalised keys: close for a typo
    ("idempotancy keys" ~ 0.79 to "Idempotency key"), where embeddings of a misspelt word
    drift; low for reordered words, which the embedding scores instead."""
    ta, tb = _trigrams(a), _trigrams(b)
    return 2 * len(ta & tb) / (len(ta) + len(tb)) if ta and tb else 0.0
