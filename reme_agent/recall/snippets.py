"""Which of a result note's blocks are shown, and in what order (DESIGN §7, seed §4.1).

Every block is indexed with its note's title in front (docs/decisions.md), so for a query
that names the note, every block matches the title and the *shortest* one wins BM25's length
normalisation: often a bare metadata line (`owner:: [[张三]]` for "jwt key rotation"). The
reader wants the block that matches the query with its own words. So the shown chunks are
ordered by their final score times:
- their own keyword coverage of the query (`KeywordProjection.coverage`: all blocks of a
  note share the title prefix, so coverage differences between them are their own text);
- a penalty for a block made only of metadata lines (`key:: value`, tags, bare links),
  unless the query asks the relation such a line states ("who owns X" shows `owner::`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reme_agent.recall.candidates import BlockHit
    from reme_agent.vault import Vault

__all__ = ["is_metadata", "order_chunks"]

METADATA_PENALTY = 0.4
CONSIDERED = 6   # a note's best candidate blocks that compete for display
_FIELD = re.compile(r"^\s*(?:[-*+]\s+)?\[?[A-Za-z_][A-Za-z0-9_]*::")
_LINKS_ONLY = re.compile(r"^\s*(?:[-*+]\s+)?(?:(?:\[\[[^\]]*\]\]|#[\w/-]+)[\s,;|]*)+$")


def is_metadata(text: str) -> bool:
    """True if every non-blank line is a `key:: value` field, a tag list or bare links."""
    lines = [line for line in text.splitlines() if line.strip()]
    return bool(lines) and all(_FIELD.match(line) or _LINKS_ONLY.match(line)
                               for line in lines)


def _states(text: str, predicates: set[str]) -> bool:
    low = text.lower()
    return any(f"{p.lower()}::" in low for p in predicates)


def order_chunks(vault: Vault, tokens: list[str], blocks: list[BlockHit],
                 asked: set[str] | None = None) -> list[BlockHit]:
    """A note's candidate blocks (best score first) reordered for display."""
    if len(blocks) < 2:
        return blocks
    head = blocks[:CONSIDERED]
    cov = vault.keyword.coverage(tokens, [b.block_id for b in head]) if tokens else {}

    def key(b: BlockHit) -> float:
        weight = 0.5 + cov.get(b.block_id, 0.0)
        if is_metadata(b.text) and not (asked and _states(b.text, asked)):
            weight *= METADATA_PENALTY
        return b.score * weight

    ranked = sorted(head, key=lambda b: (-key(b), b.start_line))
    return ranked + blocks[CONSIDERED:]
