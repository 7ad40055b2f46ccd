"""`python -m evals.kvault_halves [--embedder use|hash|e5] [--json]`: default search() on
kvault per kind, on two halves of the queries.

Why halves: G2's ranking rules (names, relations, the relevance floor) were tuned while
looking at kvault. Half A (the 1st, 3rd, 5th... query of each kind) is the tuning half;
half B (the 2nd, 4th...) was only read for the final report, so a rule that fits the
tuning half by accident shows up as a gap between the two.
"""

from __future__ import annotations

import argparse
import json
import logging
from typing import Any

from evals.datasets import Query, kvault
from evals.harness import WORK_DIR, prepare_vault
from evals.metrics import answered_empty, score_ranking

HALVES = ("A", "B")


def half_of(index_in_kind: int) -> str:
    """A for the 1st, 3rd, 5th... query of a kind, B for the others."""
    return HALVES[index_in_kind % 2]


def split(queries: list[Query]) -> dict[str, list[Query]]:
    seen: dict[str, int] = {}
    out: dict[str, list[Query]] = {h: [] for h in HALVES}
    for q in queries:
        k = seen.get(q.kind, 0)
        seen[q.kind] = k + 1
        out[half_of(k)].append(q)
    return out


def table(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per kind (and 'answerable'): n, hit@1, hit@5, mrr, empty."""
    out: dict[str, dict[str, float]] = {}
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(r["kind"], []).append(r)
        if r["kind"] != "no_match":
            groups.setdefault("answerable", []).append(r)
    for kind, items in groups.items():
        n = len(items)
        entry: dict[str, float] = {"n": n, "empty": sum(r["empty"] for r in items) / n}
        if kind != "no_match":
            for m in ("hit@1", "hit@5", "mrr"):
                entry[m] = sum(r[m] for r in items) / n
        out[kind] = entry
    return out


def run(embedder: str = "use") -> dict[str, Any]:
    from reme_agent.config import Settings
    from reme_agent.recall.search import search

    settings = Settings()
    settings = settings.model_copy(update={
        "embedder": settings.embedder.model_copy(update={"name": embedder}),
        "index": settings.index.model_copy(update={"progress": False})})
    spec = kvault.build()
    vault, _ = prepare_vault(spec, WORK_DIR / embedder / "kvault" / spec.name, settings)
    result: dict[str, Any] = {}
    try:
        for half, queries in split(spec.queries).items():
            rows = []
            for q in queries:
                found = search(vault, q.text, limit=10, log_access=False, now=spec.now).results
                row: dict[str, Any] = {"kind": q.kind, "empty": answered_empty(found)}
                if q.relevant:
                    row.update(score_ranking([n.path for n in found], q.relevant))
                rows.append(row)
            result[half] = table(rows)
    finally:
        vault.close()
    return result


def render(result: dict[str, Any]) -> str:
    kinds = [k for k in result["A"] if k not in ("answerable", "no_match")]
    lines = ["| kind | half | n | hit@1 | hit@5 | MRR | empty |", "|---|---|---|---|---|---|---|"]
    for kind in [*kinds, "answerable", "no_match"]:
        for half in HALVES:
            e = result[half].get(kind)
            if e is None:
                continue
            cells = ([f"{e[m]:.2f}" for m in ("hit@1", "hit@5", "mrr")] if kind != "no_match"
                     else ["", "", ""])
            lines.append(f"| {kind} | {half} | {e['n']:.0f} | " + " | ".join(cells)
                         + f" | {e['empty']:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embedder", default="use", choices=("use", "hash", "e5"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    logging.getLogger("reme_agent").setLevel(logging.ERROR)
    result = run(args.embedder)
    print(json.dumps(result, indent=1) if args.json else render(result))


if __name__ == "__main__":
    main()
