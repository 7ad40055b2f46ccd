"""`python -m evals.kvault_misses [--embedder use|hash] [--kind K]`: kvault queries that the
default search() does not answer at rank 1, with what came first and its chunk.

Why: the per-kind tables say how much is wrong, this says what; whoever changes ranking
re-runs it to see which queries moved. It indexes (or reuses) the eval vault under
evals/work/ exactly as `reme-agent eval --dataset kvault` does.
"""

from __future__ import annotations

import argparse
import logging

from evals.datasets import kvault
from evals.harness import WORK_DIR, prepare_vault


def main(argv: list[str] | None = None) -> None:
    from reme_agent.config import Settings
    from reme_agent.recall.search import search

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embedder", default="use", choices=("use", "hash", "e5"))
    parser.add_argument("--kind", default=None, help="Only this query kind.")
    args = parser.parse_args(argv)
    logging.getLogger("reme_agent").setLevel(logging.ERROR)
    settings = Settings()
    settings = settings.model_copy(update={
        "embedder": settings.embedder.model_copy(update={"name": args.embedder}),
        "index": settings.index.model_copy(update={"progress": False})})
    spec = kvault.build()
    vault, _ = prepare_vault(spec, WORK_DIR / args.embedder / "kvault" / spec.name, settings)
    try:
        for q in spec.queries:
            if args.kind and q.kind != args.kind:
                continue
            found = search(vault, q.text, limit=10, log_access=False, now=spec.now).results
            paths = [n.path for n in found]
            rank = next((i for i, p in enumerate(paths, 1) if p in q.relevant), None)
            if rank == 1 or (not q.relevant and not found):
                continue
            top = found[0]
            chunk = " ".join(top.chunks[0].text.split())[:80] if top.chunks else ""
            print(f"{q.qid}\t{q.text}\trank {rank or '>10'}\t"
                  f"want {', '.join(sorted(q.relevant)) or '(nothing)'}\t"
                  f"first {top.path} ({top.score:.3f}, base {top.factors.get('base', 0):.3f})"
                  f"\t{chunk}")
    finally:
        vault.close()


if __name__ == "__main__":
    main()
