"""Auto-link L4: possible duplicate nodes, reported for a person or agent to merge; no body writes.

DESIGN §9 (L4 duplicate report only), §2 (`audit/<date>/*.md` reports); seed
auto_link_design.md §1.3 (L4: merging changes structure, so auto-link only reports) and §3
(`audit/<date>/auto_link_l4.md`).

Two signals: node vectors at or above `l4_similarity` (the same vectors as L2), and names
(title / alias / stem) carried by more than one node, which also make L1 mentions ambiguous.
Each run appends one entry to the day's report, and only when it found something.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reme_agent.config import AutoLinkSettings
from reme_agent.maintenance.autolink.common import append_report
from reme_agent.maintenance.autolink.l2 import node_vectors
from reme_agent.maintenance.autolink.names import NameIndex
from reme_agent.maintenance.similarity import similar_paths

if TYPE_CHECKING:
    from reme_agent.vault import Vault

__all__ = ["REPORT_NAME", "render_report", "run_l4"]

REPORT_NAME = "auto_link_l4"


def run_l4(vault: Vault, index: NameIndex, settings: AutoLinkSettings, *,
           dry_run: bool = False) -> dict[str, Any]:
    """Find duplicate candidates and append them to `audit/<date>/auto_link_l4.md`."""
    pairs = [{"a": a, "b": b, "similarity": sim}
             for a, b, sim in similar_paths(node_vectors(vault, index), settings.l4_similarity)]
    pairs = pairs[:settings.l4_max_pairs]
    shared = [{"name": name, "paths": paths} for name, paths in sorted(index.ambiguous().items())]
    report = None
    if (pairs or shared) and not dry_run:
        report = append_report(vault, REPORT_NAME, "auto-link L4: possible duplicates",
                               render_report(index, pairs, shared, settings.l4_similarity))
    return {"pairs": pairs, "shared_names": shared, "report": report}


def render_report(index: NameIndex, pairs: list[dict[str, Any]], shared: list[dict[str, Any]],
                  threshold: float) -> str:
    """The Markdown body of one report entry.

    Paths are shown as code, not [[links]]: an audit note must not add inbound links (and so
    centrality) to the very nodes it questions.
    """
    def title(path: str) -> str:
        node = index.nodes.get(path)
        return node.title if node else path

    lines = ["Nothing here was changed. To merge two nodes, update one with the other's "
             "content (dream update) and retarget inbound links; auto-link never merges.", ""]
    if pairs:
        lines += [f"### Similar nodes (similarity >= {threshold})", "",
                  "| similarity | node | node |", "|---|---|---|"]
        lines += [f"| {p['similarity']:.3f} | {_cell(title(p['a']))} `{p['a']}` | "
                  f"{_cell(title(p['b']))} `{p['b']}` |" for p in pairs]
        lines.append("")
    if shared:
        lines += ["### Names carried by several nodes", ""]
        lines += [f"- {s['name']!r}: " + ", ".join(f"`{p}`" for p in s["paths"]) for s in shared]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return " ".join(text.replace("|", "/").replace("`", "'").split())
