"""`reme-agent search`: the full recall pipeline on the command line (DESIGN §7).

Text output is the §4.1 rendering; `--json` prints the response dict: per result the path,
title, description, chunks with lines, the final score and each factor.
"""

from __future__ import annotations

from typing import Any

import click

from reme_agent.cli.context import Ctx, common


@click.command("search")
@common
@click.argument("query")
@click.option("--limit", default=10, show_default=True, help="Number of nodes (notes).")
@click.option("--include-archived", is_flag=True, help="Also return archived nodes.")
@click.option("--expand-depth", type=click.IntRange(0, 3), default=None,
              help="Link hops listed after the results (default from config, max 3).")
@click.option("--top-chunks-per-path", type=click.IntRange(1, None), default=None,
              help="Chunks shown per node (default from config).")
@click.option("--query-rewrite", default=None, help="Alternative wording for the vector side.")
@click.option("--prefix", default=None, help="Only paths under this prefix, e.g. knowledge/.")
@click.option("--layer", "layers", multiple=True,
              type=click.Choice(["knowledge", "daily", "resource", "meta", "audit"]),
              help="Only these layers (repeatable).")
@click.option("--fusion", type=click.Choice(["rrf", "blend"]), default=None,
              help="Fusion method (default from config).")
@click.option("--vector-weight", type=click.FloatRange(0.0, 1.0), default=None,
              help="Weight of the vector side (default from config).")
@click.option("--no-log", "no_log", is_flag=True, help="Do not record hits in the access log.")
def search(c: Ctx, query: str, limit: int, include_archived: bool, expand_depth: int | None,
           top_chunks_per_path: int | None, query_rewrite: str | None, prefix: str | None,
           layers: tuple[str, ...], fusion: str | None, vector_weight: float | None,
           no_log: bool) -> None:
    """Search the vault: hybrid text relevance x graph, community, recency and layer factors.

    \b
    Example:
      reme-agent search "how do we rotate JWT keys" --limit 5
      reme-agent search "向量检索" --prefix knowledge/ --expand-depth 2 --json
    """
    from reme_agent.recall.search import search as run_search

    update: dict[str, Any] = {}
    if fusion is not None:
        update["fusion"] = fusion
    if vector_weight is not None:
        update["vector_weight"] = vector_weight
    v = c.open()
    try:
        options = v.settings.search.model_copy(update=update) if update else None
        response = run_search(v, query, limit=limit, include_archived=include_archived,
                              expand_depth=expand_depth, top_chunks_per_path=top_chunks_per_path,
                              query_rewrite=query_rewrite, prefix=prefix,
                              layers=list(layers) or None, options=options, log_access=not no_log)
        c.emit(response.as_dict(), response.render())
    finally:
        v.close()   # flushes the access log
