"""Text normal forms for matching names and phrases (DESIGN §7 "Names are first-class").

A name matches whatever a person would call the same: case, full/half width, punctuation and
spacing, and traditional vs simplified Chinese do not matter (`Blue-green deployment` =
`blue green deployment`, `ＤＤＩＡ` = `ddia`, `熔斷` = `熔断`).

- `fold`: NFKC (full width -> half width), casefold, traditional -> simplified per character.
  The character map is OpenCC's TSCharacters (Apache-2.0), single characters only, shipped
  in `data/t2s.txt` (2,966 pairs, 18 KB). Decision: a character map, not a dependency:
  OpenCC's phrase-level conversion matters for rendering text, not for matching names, where
  both sides go through the same map.
- `compact`: the folded text with everything but letters and digits removed. Exact names
  and typos compare on it.
- `spaced`: the folded text as words separated by one space, with a boundary also between
  CJK and Latin/digits (`云南自驾2025` -> `云南自驾 2025`). "The query contains the name" is
  a search on it with word boundaries for Latin edges (`mom` is not in `moment`).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from importlib import resources

__all__ = ["CJK_CHAR", "compact", "fold", "is_cjk", "spaced", "within_words"]

_CJK_RANGES = ((0x3040, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF),
               (0xAC00, 0xD7AF), (0x20000, 0x2FA1F))
_NON_WORD = re.compile(r"[\W_]+")
CJK_CHAR = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")
_BOUNDARY = re.compile(
    r"(?<=[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff\uac00-\ud7af])(?=[a-z0-9])"
    r"|(?<=[a-z0-9])(?=[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff\uac00-\ud7af])")


def is_cjk(char: str) -> bool:
    code = ord(char)
    return any(lo <= code <= hi for lo, hi in _CJK_RANGES)


@functools.cache
def _t2s() -> dict[int, str]:
    text = resources.files("reme_agent.recall").joinpath("data/t2s.txt").read_text("utf-8")
    pairs = "".join(line for line in text.splitlines() if line and not line.startswith("#"))
    return {ord(pairs[i]): pairs[i + 1] for i in range(0, len(pairs) - 1, 2)}


def fold(text: str) -> str:
    """NFKC + casefold + traditional -> simplified (per character)."""
    out = unicodedata.normalize("NFKC", text).casefold()
    if not out.isascii():
        out = out.translate(_t2s())
    return out


def compact(text: str) -> str:
    """Letters and digits of the folded text only: the key exact names compare on."""
    return _NON_WORD.sub("", fold(text))


def spaced(text: str) -> str:
    """Folded words separated by single spaces, CJK runs split from Latin/digit runs."""
    words = _NON_WORD.sub(" ", fold(text))
    if not words.isascii():
        words = _BOUNDARY.sub(" ", words)
    return " ".join(words.split())


def within_words(text: str, start: int, end: int) -> bool:
    """True if text[start:end] does not cut a Latin/digit word in two (CJK has no spaces)."""
    if start > 0 and text[start - 1] != " " and not is_cjk(text[start]):
        return False
    return not (end < len(text) and text[end] != " " and not is_cjk(text[end - 1]))
