"""What the query says beyond its words' text relevance (DESIGN §7): names, relations, phrases.

Text relevance (`candidates.py`) ranks blocks by how much they look like the query. A person
searching their own vault also *names* notes, asks for *relations* of named notes and pastes
*phrases* they remember; this module gathers that evidence once per query and turns it into:

- candidates: the blocks of named notes, relation answers and phrase matches join the
  candidate union even when neither text leg found them (`extra_ids`);
- a boost of the text score: `base + name_weight·name + relation_weight·relation`, plus
  `neighbour_weight·strength·base` for notes linked to a named note (the answer of "the
  retry strategy used by the refund fix" is linked from the refund incident, by any
  predicate, and still has to match "retry strategy");
- a tier that sorts before any score: 3 for a note whose name *is* the query (exact or
  within a small edit distance: "an exact or normalised name match ranks its note first")
  and for a relation answer; 2 for a note holding the query verbatim (`phrases.py`); 1 for
  a note named inside the query (a contained title or alias, not a heading: a phrase that
  contains a name is about the phrase); else 0. Within a tier the boosted score decides.

Each part is a setting (`SearchSettings.use_names`, `use_relations`, `use_phrases`), so the
evals can switch it off.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reme_agent.recall.names import NameMatch, index_for
from reme_agent.recall.phrases import find_phrase, phrase_of
from reme_agent.recall.relations import Links, RelationHit, follow, links_of
from reme_agent.recall.rows import rows_for
from reme_agent.recall.timings import stage

if TYPE_CHECKING:
    from reme_agent.config import SearchSettings
    from reme_agent.recall.candidates import BlockHit
    from reme_agent.vault import Vault

__all__ = ["QueryEvidence", "gather"]

MAX_NAMED = 8          # named notes whose blocks join the candidates
MAX_BLOCKS_PER_NOTE = 24
SUBJECT_STRENGTH = 0.4  # a contained / token name match this strong names a subject
CONTAINED_TIER = 0.5    # a contained title/alias this strong is tier 1


@dataclass
class QueryEvidence:
    """Per-note evidence of one query, and the blocks it adds to the candidates."""

    names: dict[str, NameMatch] = field(default_factory=dict)
    relations: dict[str, RelationHit] = field(default_factory=dict)
    neighbours: dict[str, float] = field(default_factory=dict)   # path -> subject strength
    phrases: dict[str, str] = field(default_factory=dict)        # block id -> path
    phrase_notes: set[str] = field(default_factory=set)
    asked: set[str] = field(default_factory=set)   # predicates the query asks about

    def forget(self, paths: set[str]) -> None:
        """Drop every piece of evidence about these notes (they could not be checked)."""
        for table in (self.names, self.relations, self.neighbours):
            for path in paths & table.keys():
                del table[path]
        self.phrases = {b: p for b, p in self.phrases.items() if p not in paths}
        self.phrase_notes -= paths

    def paths(self) -> list[str]:
        """Notes whose blocks must be candidates: named notes, answers, neighbours."""
        named = sorted(self.names.values(), key=lambda m: (-m.strength, m.path))[:MAX_NAMED]
        out = [m.path for m in named]
        out += sorted(self.relations)
        out += sorted(self.neighbours, key=lambda p: (-self.neighbours[p], p))[:MAX_NAMED]
        return list(dict.fromkeys(out))

    def tier(self, path: str) -> int:
        match = self.names.get(path)
        if path in self.relations or (match is not None and match.kind in ("exact", "fuzzy")):
            return 3
        if path in self.phrase_notes:
            return 2
        named = match is not None and match.kind == "contained" and match.field != "heading"
        return 1 if named and match.strength >= CONTAINED_TIER else 0

    def boosted(self, hit: BlockHit, opts: SearchSettings) -> float:
        """The text score with this query's name / relation / neighbour evidence added."""
        base = hit.base
        score = base
        name = self.names.get(hit.path)
        if name is not None:
            score += opts.name_weight * name.strength
        rel = self.relations.get(hit.path)
        if rel is not None:
            score += opts.relation_weight * rel.strength
        near = self.neighbours.get(hit.path)
        if near is not None and rel is None:
            score += opts.neighbour_weight * near * base
        return score

    def match_of(self, path: str) -> dict[str, Any] | None:
        """Why a note is a result beyond its text, for the JSON (None: text only)."""
        rel = self.relations.get(path)
        if rel is not None:
            return {"kind": "relation", "predicate": rel.predicate, "subject": rel.subject,
                    "direction": rel.direction}
        name = self.names.get(path)
        if name is not None:
            return {"kind": f"name:{name.kind}", "name": name.name, "field": name.field}
        if path in self.phrase_notes:
            return {"kind": "phrase"}
        return None

    def strong(self, path: str) -> bool:
        """Evidence no relevance floor may silence: the query names this note, asks a
        relation it answers, or quotes it."""
        name = self.names.get(path)
        if name is not None and (name.kind in ("exact", "fuzzy") or name.strength >= 0.75):
            return True
        return path in self.relations or path in self.phrase_notes


def gather(vault: Vault, query: str, tokens: list[str], opts: SearchSettings) -> QueryEvidence:
    """Names the query uses, relations it asks and the notes they point to."""
    ev = QueryEvidence()
    if opts.use_phrases:
        with stage("phrases"):
            phrase = phrase_of(query)
            if phrase is not None:
                ev.phrases = find_phrase(vault, phrase)
                ev.phrase_notes = set(ev.phrases.values())
    if not opts.use_names:
        return ev
    with stage("names"):
        ev.names = index_for(vault).match(query, tokens)
    whole = any(m.kind in ("exact", "fuzzy") for m in ev.names.values())
    subjects = {p: m for p, m in ev.names.items() if m.strength >= SUBJECT_STRENGTH}
    if opts.use_relations and subjects and not whole:
        with stage("relations"):
            _relations(vault, ev, subjects, query)
    return ev


def _relations(vault: Vault, ev: QueryEvidence, subjects: dict[str, NameMatch],
               query: str) -> None:
    """Relation answers of the named subjects, and the notes linked to the top two."""
    graph = vault.graph
    seen: dict[str, Links] = {}   # the top subjects' links, read once for both uses
    ev.relations = follow(graph, subjects, query, seen=seen)
    ev.asked = {r.predicate for r in ev.relations.values()}
    top = sorted(subjects.values(), key=lambda m: (-m.strength, m.path))[:2]
    for m in top:
        outbound, inbound = links_of(graph, m.path, seen)
        for other, _ in [*outbound, *inbound]:
            if other in subjects or graph.is_dangling(other):
                continue
            ev.neighbours[other] = max(ev.neighbours.get(other, 0.0), m.strength)


def extra_block_ids(vault: Vault, paths: list[str]) -> dict[str, str]:
    """Block id -> path of these notes' blocks (each note capped), for the candidate union
    (the path spares the candidate filter a lookup per id)."""
    out: dict[str, str] = {}
    for path, ids in rows_for(vault).block_ids_many(paths).items():
        out.update(dict.fromkeys(ids[:MAX_BLOCKS_PER_NOTE], path))
    return out
