"""`python -m evals.autolink.check_labels [--occurrences]`: is `labels.yaml` consistent with the
vault in `vault/`? Fast (no model, no index); run it after editing either.

Why: `evals/autolink_pr.py` stops at the first label it cannot find, and a label found at the
wrong place (its text also occurs earlier, so `nth` counts that one) scores silently wrong.
This lists every source note or target that does not exist and every label whose text is not
in the body `nth` times; `--occurrences` also shows the other occurrences of each labelled text
(substrings count: "go" in "ago"), to check that each `nth` points at the intended one.
Unlabelled links and proposals need the real matchers: `python -m evals.autolink_pr --misses`.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import yaml

HERE = Path(__file__).parent


def bodies(root: Path = HERE / "vault") -> dict[str, str]:
    from reme_agent.engine.parser import split_note

    return {f.relative_to(root).as_posix(): split_note(f.read_text(encoding="utf-8"),
                                                       f.relative_to(root).as_posix()).body
            for f in sorted(root.rglob("*.md"))}


def _starts(body: str, text: str) -> list[int]:
    out, at = [], body.find(text)
    while at >= 0:
        out.append(at)
        at = body.find(text, at + 1)
    return out


def check(notes: dict[str, str], labels: dict[str, list[dict]]) -> tuple[list[str], list[str]]:
    """(problems, other occurrences of labelled texts)."""
    problems: list[str] = []
    others: list[str] = []
    for note, rows in labels.items():
        if note not in notes:
            problems.append(f"{note}: no such note")
            continue
        body = notes[note]
        wanted: dict[str, set[int]] = defaultdict(set)
        for row in rows:
            wanted[row["text"]].add(int(row.get("nth", 1)))
            if row["target"] is not None and row["target"] not in notes:
                problems.append(f"{note}: target {row['target']} does not exist")
        for text, nths in wanted.items():
            starts = _starts(body, text)
            if max(nths) > len(starts):
                problems.append(f"{note}: {text!r} nth {sorted(nths)}, found {len(starts)} times")
                continue
            for i, at in enumerate(starts, 1):
                if i not in nths:
                    around = body[max(0, at - 20):at + len(text) + 20].replace("\n", " ")
                    others.append(f"{note}: {text!r} occurrence {i} (unlabelled): ...{around}...")
    return problems, others


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--occurrences", action="store_true",
                        help="Also list unlabelled occurrences of labelled texts.")
    args = parser.parse_args(argv)
    labels = yaml.safe_load((HERE / "labels.yaml").read_text(encoding="utf-8"))["notes"]
    problems, others = check(bodies(), labels)
    for line in problems + (others if args.occurrences else []):
        print(line)
    n = sum(len(rows) for rows in labels.values())
    print(f"{n} labels in {len(labels)} notes: "
          + (f"{len(problems)} problems" if problems else "all found"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
