"""Verbatim phrases: a query that appears word for word in a block finds that block's note
(DESIGN §7; issue G2: "Chinese phrase queries found their source note in the top 5 almost
never" on a generated 10k vault, where every block shares the same few words).

BM25 scores words, not their order, and the vector leg blurs both; a person pasting a line
they remember expects the note that holds it. So for a phrase-like query (quoted, or long
enough: at least `MIN_TOKENS` keyword tokens and `MIN_CHARS` characters) the keyword
projection lists the blocks holding *all* its terms (best BM25 first, at most `CHECKED`),
and a block whose text contains the phrase (after `normalize.spaced`: case, width,
punctuation and spacing do not matter; traditional = simplified) is a phrase match.
A phrase found in more than `MAX_NOTES` notes is a common saying, not a pointer: no tier.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from reme_agent.engine.tokenize import tokenize
from reme_agent.recall.normalize import compact, spaced, within_words
from reme_agent.recall.rows import rows_for

if TYPE_CHECKING:
    from reme_agent.vault import Vault

__all__ = ["find_phrase", "phrase_of"]

MIN_TOKENS = 3
MIN_CHARS = 6
CHECKED = 40
MAX_NOTES = 3
_QUOTED = re.compile(r'"([^"]+)"|“([^”]+)”|「([^」]+)」|『([^』]+)』')


def phrase_of(query: str) -> str | None:
    """The phrase to look for verbatim: a quoted part, else the whole query if long enough."""
    quoted = next((next(g for g in m.groups() if g) for m in _QUOTED.finditer(query)), None)
    if quoted and compact(quoted):
        return quoted
    if len(compact(query)) >= MIN_CHARS and len(tokenize(query)) >= MIN_TOKENS:
        return query
    return None


def find_phrase(vault: Vault, phrase: str) -> dict[str, str]:
    """Block id -> path of the blocks holding `phrase` verbatim (normalised)."""
    want = spaced(phrase)
    terms = tokenize(phrase)
    if not want or not terms:
        return {}
    ids = vault.keyword.containing_all(terms, CHECKED)
    if not ids:
        return {}
    out: dict[str, str] = {}
    for bid, row in rows_for(vault).rows(ids).items():
        text = spaced(row.text)
        start = text.find(want)
        while start >= 0:
            if within_words(text, start, start + len(want)):
                out[bid] = row.path
                break
            start = text.find(want, start + 1)
    if len(set(out.values())) > MAX_NOTES:
        return {}
    return out
