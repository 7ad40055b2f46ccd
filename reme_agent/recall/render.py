"""Text rendering of a search response for a model (seed §4.1, DESIGN §7).

The node is the visual unit: a header with its path, its title and description, one line of
scores (final score, then each factor), its chunks with their line spans (so the model can
`read` exactly those lines), and the links the expansion found from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reme_agent.recall.search import NodeResult, SearchResponse

_ARROW = {"out": "→", "in": "←"}


def _num(value: float) -> str:
    return f"{value:.4g}"


def _why(match: dict[str, Any] | None) -> str | None:
    """Why a note ranks where its score alone would not put it (`QueryEvidence.match_of`):
    results are ordered by this evidence first, then by score."""
    if not match:
        return None
    kind = str(match.get("kind", ""))
    if kind == "relation":
        side = "links to it as" if match.get("direction") == "out" else "is linked from it as"
        return f"[matched: {match.get('subject')} {side} {match.get('predicate')}]"
    if kind.startswith("name:"):
        return (f"[matched: the query names it ({kind[5:]} {match.get('field')} "
                f"\"{match.get('name')}\")]")
    if kind == "phrase":
        return "[matched: it holds the query's quoted phrase]"
    return f"[matched: {kind}]"


def render_node(node: NodeResult, expansion: list[dict[str, Any]]) -> str:
    lines = [f"========== {node.path} ==========", f"[node] {node.title}"]
    if node.description:
        lines.append(f"       {node.description}")
    scores = " ".join(f"{k}={_num(v)}" for k, v in node.factors.items())
    lines.append(f"[score={_num(node.score)} {scores}]")
    why = _why(node.match)
    if why:
        lines.append(why)
    for chunk in node.chunks:
        lines += ["", f"---------- chunk @{chunk.start_line}-{chunk.end_line} ----------",
                  chunk.text.rstrip()]
    mine = [e for e in expansion if e.get("seed") == node.path]
    if mine:
        n_in = sum(1 for e in mine if e["direction"] == "in")
        lines += ["", f"[expansion] {n_in} inbound, {len(mine) - n_in} outbound"]
        for e in mine:
            pred = f"  [{e['predicate']}]" if e.get("predicate") else ""
            deep = f"  (depth {e['depth']}, via {e['via']})" if e["depth"] > 1 else ""
            title = f"  {e['title']}" if e.get("title") and e["title"] != e["path"] else ""
            lines.append(f"  {_ARROW[e['direction']]} {e['path']}{title}{pred}{deep}")
    return "\n".join(lines)


def _weak_line(node: NodeResult) -> str:
    title = f"  {node.title}" if node.title and node.title != node.path else ""
    return f"  {node.path}{title}"


def render_response(response: SearchResponse) -> str:
    """Strong results in full; results below the relevance floor only as one line each,
    or "no good match" when every result is below it (never padding with unrelated notes)."""
    strong = [n for n in response.results if not n.weak]
    weak = [n for n in response.results if n.weak]
    if not response.results:
        text = (f"No results for {response.query!r}. Try other words, a broader prefix, "
                "or include_archived=True.")
    elif not strong:
        text = "\n".join([f"No good match for {response.query!r}: nothing in the vault is "
                          "about this. Closest notes, all weak:",
                          *(_weak_line(n) for n in weak[:5])])
    else:
        text = "\n\n".join(render_node(n, response.expansion) for n in strong)
        if weak:
            text += "\n\n" + "\n".join(["[weak matches, probably unrelated]",
                                          *(_weak_line(n) for n in weak[:5])])
    if response.warnings:
        text += "\n\n" + "\n".join(f"[warning] {w}" for w in response.warnings)
    return text
