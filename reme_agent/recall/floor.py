"""The relevance floor: "no good match" is an answer (DESIGN §7).

The fused text score is min-max normalised per query, so the best candidate of *any* query
scores near 1: it cannot say whether anything matched. Two raw signals can, and both are
comparable across queries:
- keyword coverage: the idf-weighted share of the query's terms that the note's best block
  holds (`KeywordProjection.coverage`; a name the query matched counts as held);
- the raw cosine of the note's best block to the query (embedder-specific scale).

A result is `weak` when the query's evidence for it is neither a name, a relation nor a
phrase (`QueryEvidence.strong`) and its coverage is below `floor_coverage` *and* its cosine
below the embedder's `floor_cosine`. Calibration (evals/README.md, "relevance floor"): on the
kvault tuning half, coverage 0.5 and USE cosine 0.30 mark 88% of the no-match queries'
results all weak while silencing 1% of its answerable queries and 1% of LoCoMo's (natural
chat questions, whose best turn often holds only half the words); checked on the held-out
half and CMRC. Weak results stay in the JSON, flagged; the text rendering lists them after
the real answers, or says "no good match" when every result is weak.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from reme_agent.recall.names import note_name_tokens

if TYPE_CHECKING:
    from reme_agent.config import SearchSettings
    from reme_agent.recall.candidates import BlockHit
    from reme_agent.recall.evidence import QueryEvidence
    from reme_agent.recall.group import NodeResult
    from reme_agent.vault import Vault

__all__ = ["mark_weak", "relevance"]

BLOCKS_CHECKED = 3   # a note's best blocks whose coverage is measured


def relevance(vault: Vault, tokens: list[str], evidence: QueryEvidence,
              blocks: list[BlockHit]) -> tuple[float, float]:
    """(keyword coverage, best cosine) of one note's candidate blocks, best first."""
    name = evidence.names.get(blocks[0].path) if blocks else None
    held = note_name_tokens(name.name) if name is not None else ()
    covs = vault.keyword.coverage(tokens, [b.block_id for b in blocks[:BLOCKS_CHECKED]], held)
    cos = max((b.vector for b in blocks if b.vector is not None), default=0.0)
    return max(covs.values(), default=0.0), float(cos)


def mark_weak(vault: Vault, results: Iterable[NodeResult], hits: list[BlockHit],
              tokens: list[str], evidence: QueryEvidence, opts: SearchSettings,
              embedder: str) -> None:
    """Set `weak` on each result below the floor (switched off by `use_floor=False`)."""
    if not opts.use_floor:
        return
    cosine_floor = opts.floor_cosine.get(embedder)
    by_path: dict[str, list[BlockHit]] = {}
    for hit in hits:
        by_path.setdefault(hit.path, []).append(hit)
    for node in results:
        if evidence.strong(node.path):
            continue
        cov, cos = relevance(vault, tokens, evidence, by_path.get(node.path, []))
        node.weak = cov < opts.floor_coverage and (cosine_floor is None or cos < cosine_floor)
