"""`kvault`: a hand-written bilingual (zh + en) Obsidian-style vault and labelled queries.

Why: LoCoMo and CMRC are transcripts and paragraphs without names, aliases or links, and the
synthetic set is generated. A vault a person keeps by hand is different: the note *is* its
name (`王芳.md`, `熔断.md` with `aliases: [circuit breaker]`), links carry predicates
(`owner:: [[王芳]]`), most notes mention other notes, and many questions have no answer in
the vault at all. This dataset measures search on exactly that (issue G2).

The vault is data, not code: `kvault_data/notes/` (open it in Obsidian) and
`kvault_data/queries.yaml`. The loader only reads them, sets file mtimes from each note's
`updated`/`created` (daily notes: their date; undated notes: `UNDATED`), fixes the search
clock at `NOW`, and adds `meta/communities.json`: Louvain (seed 42, resolution 1, the
maintainer's settings) over the resolved link graph of *every* note, since a hand-kept vault
keeps most notes outside `knowledge/` (the maintainer's default `community_layers`).

A no_match query has no relevant note; the harness scores it by whether search answered
with nothing (no result, or every result flagged `weak`) instead of by rank.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, date, datetime
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from evals.datasets import Dataset, Query, VaultSpec, round_robin

DATA = Path(__file__).resolve().parent / "kvault_data"
NOTES = DATA / "notes"
QUERIES = DATA / "queries.yaml"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
UNDATED = datetime(2026, 9, 15, 9, 0, tzinfo=UTC)   # mtime of notes with no date at all
_DAILY = re.compile(r"^daily/(\d{4}-\d{2}-\d{2})\.md$")

KINDS: dict[str, str] = {
    "title": "the note's exact title (frontmatter `title`, else the file stem); other notes "
             "mention it",
    "alias": "an `aliases:` entry in the note's own language or script (PGW, ADR-007, DDIA)",
    "cross_lang_alias": "an alias in the other language: English for a Chinese-named note "
                        "(circuit breaker -> 熔断.md) and the reverse",
    "typo": "a name (5+ characters) misspelt within edit distance 1-2",
    "question": "a question the note answers (what is my cat allergic to, X 是什么)",
    "relation": "who owns / decided / wrote X: the answer is the note linked from X's note "
                "by a predicate (owner::, decided_by::, author::)",
    "multi_hop": "the answer is one link away from the note the query names (X depends on "
                 "what, which ADR replaced X)",
    "phrase": "a verbatim phrase from one block, Chinese or English",
    "no_match": "nothing in the vault covers it; the right answer is no result (scored by "
                "the share answered empty: no result, or every result flagged weak)",
}
MIN_PER_KIND = 15
MIN_NO_MATCH = 25
NOTES_TEXT = [
    "Hand-written vault: people, projects, incidents, concepts, ADRs, personal notes, daily "
    "notes; Obsidian flat names and knowledge/<slug>/<slug>.md mixed; aliases across "
    "languages; predicate links.",
    "Overall metrics are over answerable queries only; no_match queries are scored by "
    "`empty` (answered with nothing), and `empty` on answerable kinds is the share a "
    "relevance floor wrongly silenced.",
    "meta/communities.json: Louvain over all notes (not only knowledge/); no access log "
    "(a new user's vault).",
]


def note_files(root: Path = NOTES) -> dict[str, str]:
    """Vault-relative path -> text of every `.md` under `root` (sorted, posix paths)."""
    return {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted(root.rglob("*.md"))}


def read_queries(path: Path = QUERIES) -> list[dict[str, Any]]:
    """The raw query records (text, kind, relevant, optional `link` / `alias` evidence)."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return list(data["queries"])


def to_query(record: dict[str, Any], number: int) -> Query:
    relevant = record.get("relevant") or []
    if isinstance(relevant, str):
        relevant = [relevant]
    return Query(f"{record['kind']}-{number:02d}", str(record["text"]), frozenset(relevant),
                 str(record["kind"]))


def _moment(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, 9, 0, tzinfo=UTC)
    return None


def note_mtime(path: str, frontmatter: dict[str, Any]) -> float:
    """The note's last edit as an epoch: `updated`, else `created`, else its daily date."""
    for key in ("updated", "created"):
        moment = _moment(frontmatter.get(key))
        if moment is not None:
            return moment.timestamp()
    daily = _DAILY.match(path)
    if daily:
        return datetime.fromisoformat(daily.group(1)).replace(hour=8, tzinfo=UTC).timestamp()
    return UNDATED.timestamp()


def resolver_for(files: dict[str, str]) -> Any:
    """A LinkResolver over the vault, fed the way the indexer feeds it (aliases + title)."""
    from reme_agent.engine.links import LinkResolver
    from reme_agent.engine.names import note_aliases
    from reme_agent.engine.parser import split_frontmatter

    aliases = {p: note_aliases(split_frontmatter(t, p)[0]) for p, t in files.items()}
    return LinkResolver(files, aliases)


def link_edges(files: dict[str, str]) -> list[tuple[str, str, str | None]]:
    """Every resolved `(source, target, predicate)` edge of the vault (DESIGN §4)."""
    from reme_agent.engine.parser import parse_note

    resolver = resolver_for(files)
    out = []
    for path, text in files.items():
        for link in parse_note(path, text).links:
            target = resolver.resolve(link.target, path)
            if target is not None and target != path:
                out.append((path, target, link.predicate))
    return out


def communities_file(files: dict[str, str], now: datetime = NOW) -> str:
    """meta/communities.json as `maintain` computes it, over every note's links."""
    import networkx as nx

    from reme_agent.maintenance.communities import assign_ids
    from reme_agent.recall.signals import CommunitiesSignal, dump_signal

    graph = nx.Graph()
    graph.add_nodes_from(files)
    for source, target, _ in link_edges(files):
        weight = graph.get_edge_data(source, target, {}).get("weight", 0) + 1
        graph.add_edge(source, target, weight=weight)
    parts = nx.community.louvain_communities(graph, weight="weight", resolution=1.0, seed=42)
    groups = sorted((sorted(c) for c in parts), key=lambda c: (-len(c), c[0]))
    mapping = assign_ids(groups, None)
    signal = CommunitiesSignal(computed_at=now, algorithm="louvain", resolution=1.0,
                               communities=dict(sorted(mapping.items())),
                               stats={"nodes": len(files), "edges": graph.number_of_edges(),
                                      "communities": len(groups), "seed": 42,
                                      "layers": ["all"]})
    return dump_signal(signal)


def build(notes: Path = NOTES, queries: Path = QUERIES) -> VaultSpec:
    """The one vault of the dataset, with its queries, mtimes and search clock."""
    from reme_agent.engine.parser import split_frontmatter

    files = note_files(notes)
    mtimes = {p: note_mtime(p, split_frontmatter(t, p)[0]) for p, t in files.items()}
    counts: dict[str, int] = {}
    out: list[Query] = []
    for record in read_queries(queries):
        counts[record["kind"]] = counts.get(record["kind"], 0) + 1
        out.append(to_query(record, counts[record["kind"]]))
    files["meta/communities.json"] = communities_file(files)
    return VaultSpec("kvault", files, out, mtimes=mtimes, now=NOW)


def load(data: object = None, *, limit: int | None = None) -> Dataset:
    """The kvault dataset (`data` is ignored: the vault ships in the repo).

    `limit` keeps at most that many queries, round-robin over kinds, so a quick run still
    sees every kind.
    """
    del data
    spec = build()
    spec.queries = round_robin(spec.queries, limit)
    return Dataset("kvault", [spec], kinds=dict(KINDS), notes=list(NOTES_TEXT))


def stats(spec: VaultSpec | None = None) -> dict[str, Any]:
    """Size of the dataset (notes, resolved links, queries per kind), for the README."""
    spec = spec or build()
    notes = {p: t for p, t in spec.files.items() if p.endswith(".md")}
    kinds: dict[str, int] = {}
    for q in spec.queries:
        kinds[q.kind] = kinds.get(q.kind, 0) + 1
    edges = link_edges(notes)
    return {"notes": len(notes), "links": len(edges),
            "predicate_links": sum(1 for e in edges if e[2]),
            "folders": sorted({str(PurePosixPath(p).parent) for p in notes}),
            "queries": len(spec.queries), "kinds": kinds}


if __name__ == "__main__":   # python -m evals.datasets.kvault: print the dataset's size
    print(json.dumps(stats(), ensure_ascii=False, indent=1))
