"""`python -m evals.quick_default --dataset locomo|cmrc|kvault [--limit N] [--embedder E]`:
only the default `search()` row of a dataset, through the same harness as `reme-agent eval`.

Why: the full grid takes many minutes per dataset; checking that a ranking change does not
hurt LoCoMo or CMRC needs one row. Prints node (and block) MRR, R@5, Hit@1 and the share of
answerable queries a relevance floor silenced (`empty`).
"""

from __future__ import annotations

import argparse
import json
import logging

from evals.ablations import EvalConfig
from evals.harness import run_dataset
from evals.run import load_datasets


def main(argv: list[str] | None = None) -> None:
    from reme_agent.config import Settings

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--embedder", default="use", choices=("use", "hash", "e5"))
    parser.add_argument("--data", default=None)
    parser.add_argument("--set", action="append", default=[],
                        help="SearchSettings override key=value (JSON value), repeatable.")
    args = parser.parse_args(argv)
    logging.getLogger("reme_agent").setLevel(logging.ERROR)
    options = {k: json.loads(v) for k, v in (s.split("=", 1) for s in args.set)}
    base = Settings().search
    cfg = EvalConfig("default search()", "default", options, mode="nodes",
                     expand_depth=base.expand_depth)
    for ds in load_datasets([args.dataset], args.data, args.limit, chunk=False):
        run = run_dataset(ds, [cfg], embedder=args.embedder, progress=False)
        summary = run.results[cfg.name].summary(ds.levels)
        out = {"dataset": ds.name, "n": summary["n"], "latency_ms": summary["latency_ms"]}
        for level, metrics in summary["levels"].items():
            out[level] = {m: round(v["mean"], 4) for m, v in metrics.items()
                          if m in ("mrr", "r@5", "hit@1", "hit@5")}
        extra = summary.get("extra", {})
        out["empty"] = round(extra["empty"]["mean"], 4) if "empty" in extra else None
        print(json.dumps(out))


if __name__ == "__main__":
    main()
