"""Retrieve tools: search and graph_traverse (L4 over recall/ and the graph projection).

Both read the projections, so they see what the index saw; every tool write re-indexes the
file it wrote. `_search_hits` is the one seam to recall/: switching to the enriched search
(DESIGN §7) changes only that function.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from reme_agent.errors import AmbiguousName, InvalidArgument, NoteNotFound
from reme_agent.recall.archive import archived_now
from reme_agent.toolkit.results import ToolResult, tool

if TYPE_CHECKING:
    from reme_agent.vault import Vault

MAX_DEPTH = 5


Layer = Literal["knowledge", "daily", "resource", "meta", "audit"]


@tool
def search(vault: Vault, query: str, limit: int = 10, path_prefix: str | None = None,
           layers: list[Layer] | None = None, include_archived: bool = False,
           expand_depth: int | None = None, top_chunks_per_path: int | None = None,
           query_rewrite: str | None = None) -> ToolResult:
    """Search the memory vault by names, meaning and keywords (hybrid vector + BM25).

    Results are notes, best first: each with its title, description, its best matching line
    ranges, the score and the factors behind it (text relevance, links, community, recency),
    and `match` when the query names the note, asks a relation it answers ("who owns X")
    or quotes it; then linked notes worth a look. Results marked `weak` are below the
    relevance floor: when all are weak, the vault has no good match. `read` a path to see
    the whole note. Works in English and Chinese.

    Args:
        query: What to look for: a question, a name or a few keywords.
        limit: Maximum number of notes (1-50).
        path_prefix: Only search under this folder, e.g. "knowledge/" or "daily/2026-11-".
        layers: Only these top folders, e.g. ["knowledge"]; meta and audit are searched only
            when named here.
        include_archived: Also return archived notes (`status: archived`: old, unused ones).
        expand_depth: Link hops listed beside the results (0-3; default from config, 1).
        top_chunks_per_path: Matching passages shown per note (default from config, 2).
        query_rewrite: Another wording of the query for the meaning (vector) side only,
            e.g. a hypothetical answer; the keyword side keeps `query`.
    """
    return run_search(vault, query, limit=limit, path_prefix=path_prefix, layers=layers,
                      include_archived=include_archived, expand_depth=expand_depth,
                      top_chunks_per_path=top_chunks_per_path, query_rewrite=query_rewrite)


def run_search(vault: Vault, query: str, *, limit: int = 10, path_prefix: str | None = None,
               layers: list[str] | None = None, include_archived: bool = False,
               expand_depth: int | None = None, top_chunks_per_path: int | None = None,
               query_rewrite: str | None = None, log_access: bool = True) -> ToolResult:
    """The search tool's body, shared with `reme-agent search` (which may skip the access
    log): one place shapes the answer, so every face returns the same JSON."""
    from reme_agent.recall.search import search as recall_search

    if not 1 <= limit <= 50:
        raise InvalidArgument(f"limit must be between 1 and 50, got {limit}.")
    prefix = path_prefix.strip().lstrip("/") if path_prefix and path_prefix.strip() else None
    if prefix:
        vault.store.normalize(prefix)  # refuses '..', absolute paths
    response = recall_search(vault, query, limit=limit, prefix=prefix,
                             layers=list(layers) if layers else None,
                             include_archived=include_archived, expand_depth=expand_depth,
                             top_chunks_per_path=top_chunks_per_path,
                             query_rewrite=query_rewrite or None, log_access=log_access)
    data = response.as_dict()
    data["count"] = len(response.results)
    return ToolResult(data, response.render())


@tool
def graph_traverse(vault: Vault, seeds: list[str] | str,
                   direction: Literal["out", "in", "both"] = "out", depth: int = 1,
                   predicates: list[str] | None = None, include_archived: bool = False,
                   max_nodes: int = 50) -> ToolResult:
    """Walk the link graph breadth-first from one or more notes; one row per edge walked.

    Archived notes (old, unused ones) are not stepped onto unless asked for; a seed is
    always walked from.

    Args:
        seeds: Start note path(s), e.g. ["knowledge/bm25/bm25.md"]; short names resolve too.
        direction: "out" follows links a note makes, "in" follows backlinks, "both" does both.
        depth: How many hops to walk (1-5).
        predicates: Only walk links with these predicates, e.g. ["uses"]; "" means bare
            [[links]] without a predicate. Omit to walk every link.
        include_archived: Also step onto archived notes (frontmatter `status: archived`, or
            archived by the maintainer).
        max_nodes: Stop after reaching this many notes beyond the seeds (1-500).
    """
    if not 1 <= depth <= MAX_DEPTH:
        raise InvalidArgument(f"depth must be between 1 and {MAX_DEPTH}, got {depth}.")
    if not 1 <= max_nodes <= 500:
        raise InvalidArgument(f"max_nodes must be between 1 and 500, got {max_nodes}.")
    vault.ready()
    starts = _resolve_seeds(vault, [seeds] if isinstance(seeds, str) else seeds)
    preds = None if predicates is None else [p or None for p in predicates]
    exclude = None if include_archived else archived_now(vault).__contains__
    edges = vault.graph.traverse(starts, direction, depth, preds, exclude, max_nodes)
    nodes = list(dict.fromkeys(e["target"] if e["direction"] == "out" else e["source"]
                               for e in edges))
    data = {"seeds": starts, "direction": direction, "depth": depth, "edges": edges,
            "nodes": nodes}
    return ToolResult(data, _traverse_text(starts, edges))


def _resolve_seeds(vault: Vault, seeds: list[str]) -> list[str]:
    if not seeds:
        raise InvalidArgument("`seeds` is empty.", 'Pass e.g. ["knowledge/bm25/bm25.md"].')
    out = []
    for seed in seeds:
        norm = vault.store.normalize(seed)
        hit = norm if norm in vault.graph and not vault.graph.is_dangling(norm) else None
        hit = hit or vault.indexer.resolver.resolve(seed)
        if hit is None:
            if vault.store.exists(norm):
                hit = norm  # a file the index has not seen yet: it simply has no edges
            elif len(cands := vault.indexer.resolver.ambiguous(seed)) > 1:
                raise AmbiguousName(seed, cands)
            else:
                raise NoteNotFound(norm, vault.store.suggest(norm))
        out.append(hit)
    return out


def _traverse_text(seeds: list[str], edges: list[dict[str, Any]]) -> str:
    if not edges:
        return f"No links from {', '.join(seeds)} in that direction."
    lines = [f"seeds: {', '.join(seeds)}"]
    for e in edges:
        pred = f"-[{e['predicate']}]->" if e["predicate"] else "->"
        tail = " (dangling)" if e["dangling"] else ""
        lines.append(f"hop {e['depth']} ({e['direction']}): {e['source']} {pred} {e['target']}{tail}")
    return "\n".join(lines)
