"""`python -m evals.autolink_pr [--embedder use|hash] [--json]`: precision and recall of
auto-link L1 on the labelled mentions in `evals/autolink/` (issue G5, docs/autolink.md).

Why: L1 must link what people write (plurals, full-width letters, hyphen variants, reworded
names) without linking the traps (a common word equal to a short name, a name inside a longer
word or name, text in code or links). The vault in `evals/autolink/vault/` is copied to a
temporary folder and opened with the real engine; L1 plans every note with the real matchers
(nothing is written). Three runs:

- ``exact``: exact names only, no model (auto-link L1 before fuzzy matching);
- ``fuzzy``: exact + fuzzy, no model: exact matches linked, fuzzy proposals only reported;
- ``judge``: exact + fuzzy with an oracle judge that says yes only to labelled-true mentions
  (a perfect model: the upper bound of what the model can add; its precision on fuzzy links is
  1 by construction, the exact links it cannot touch).

A prediction is scored against the label it overlaps most (the shorter on a tie, so "API"
inside "API gateway" meets its trap label): the right target is a true positive of the label's
kind, anything else a false link of that kind; a link no label covers is a false link of kind
"unlabelled".
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

DATA = Path(__file__).parent / "autolink"
POSITIVE = ("exact", "inflection", "width", "hyphen-space", "case", "near", "typo")
TRAPS = ("common-word", "inside-word", "code-link", "longer-name", "fuzzy-trap")
MODES = ("exact", "fuzzy", "judge")


@dataclass(frozen=True)
class Label:
    note: str
    start: int
    end: int
    target: str | None
    kind: str
    text: str


@dataclass(frozen=True)
class Hit:
    """A planned link (or, for `proposals`, a reported fuzzy proposal)."""

    note: str
    start: int
    end: int
    targets: tuple[str, ...]


@dataclass
class Run:
    mode: str
    links: list[Hit] = field(default_factory=list)
    proposals: list[Hit] = field(default_factory=list)
    questions: int = 0
    seconds: float = 0.0


def load_labels(bodies: Mapping[str, str], path: Path = DATA / "labels.yaml") -> list[Label]:
    """Labels with offsets: the `nth` occurrence of `text` in the note's body."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    out: list[Label] = []
    for note, rows in data["notes"].items():
        body = bodies[note]
        for row in rows:
            at = -1
            for _ in range(int(row.get("nth", 1))):
                at = body.find(row["text"], at + 1)
                if at < 0:
                    raise ValueError(f"{note}: {row['text']!r} (nth {row.get('nth', 1)}) not found")
            out.append(Label(note, at, at + len(row["text"]), row["target"], row["kind"],
                             row["text"]))
    return out


class OracleJudge:
    """A perfect model for L1: yes to a question whose mention overlaps a labelled-true
    mention of one of its candidates, no to everything else."""

    def __init__(self, labels: Sequence[Label]) -> None:
        self.by_note: dict[str, list[Label]] = defaultdict(list)
        for label in labels:
            if label.target is not None:
                self.by_note[label.note].append(label)
        self.asked = 0

    def choose(self, questions: Sequence[Any]) -> dict[int, str | None]:
        self.asked += len(questions)
        out: dict[int, str | None] = {}
        for q in questions:
            end = q.start + len(q.text)
            cands = {c.path for c in q.candidates}
            out[q.id] = next((lb.target for lb in self.by_note[q.note]
                              if lb.start < end and q.start < lb.end and lb.target in cands), None)
        return out

    def related(self, questions: Sequence[Any]) -> dict[int, bool]:
        return {q.id: False for q in questions}

    def predicate(self, questions: Sequence[Any]) -> dict[int, str | None]:
        return {q.id: None for q in questions}


@contextmanager
def eval_vault(embedder: str) -> Iterator[Any]:
    """The labelled vault, copied to a temporary folder and opened (not indexed: L1 plans
    against the files; near proposals embed with the chosen embedder)."""
    from reme_agent.config import Settings
    from reme_agent.vault import open_vault

    with tempfile.TemporaryDirectory(prefix="reme-autolink-eval-") as tmp:
        root = Path(tmp) / "vault"
        shutil.copytree(DATA / "vault", root)
        settings = Settings(embedder={"name": embedder}, index={"progress": False})
        vault = open_vault(root, settings, create=True)
        try:
            yield vault
        finally:
            vault.close()


def bodies_of(vault: Any) -> dict[str, str]:
    from reme_agent.engine.parser import split_note

    return {p: split_note(vault.store.read_text(p), p).body
            for p in vault.store.list("knowledge") if p.endswith(".md")}


def run(vault: Any, bodies: Mapping[str, str], labels: Sequence[Label], mode: str) -> Run:
    """Plan L1 on every note in one mode; nothing is written."""
    from reme_agent.maintenance.autolink.l1 import plan_links
    from reme_agent.maintenance.autolink.runner import AutoLinker

    judge = OracleJudge(labels) if mode == "judge" else None
    settings = vault.settings.autolink.model_copy(update={"fuzzy": mode != "exact"})
    ctx = AutoLinker(vault, settings, judge).context()
    out = Run(mode)
    started = time.perf_counter()
    for note, body in sorted(bodies.items()):
        plan = plan_links(ctx, note, body)
        out.links += [Hit(note, x.start, x.end, (x.target,)) for x in plan.links]
        out.proposals += [Hit(note, a.start, a.end, a.candidates) for a in plan.skipped
                          if a.kind != "ambiguous"]
    out.seconds = round(time.perf_counter() - started, 3)
    out.questions = judge.asked if judge else 0
    return out


def _label_of(hit: Hit, labels: Sequence[Label]) -> Label | None:
    over = [(min(hit.end, lb.end) - max(hit.start, lb.start), -(lb.end - lb.start), lb)
            for lb in labels if lb.start < hit.end and hit.start < lb.end]
    return max(over, key=lambda t: (t[0], t[1]))[2] if over else None


def score(hits: Sequence[Hit], labels: Sequence[Label]) -> dict[str, Any]:
    """Per kind: n, tp, fp, precision, recall; plus the totals and the unlabelled hits."""
    by_note: dict[str, list[Label]] = defaultdict(list)
    for label in labels:
        by_note[label.note].append(label)
    tp: Counter[str] = Counter()
    fp: Counter[str] = Counter()
    used: set[Label] = set()
    unlabelled: list[dict[str, Any]] = []
    false: list[dict[str, Any]] = []
    for hit in hits:
        label = _label_of(hit, by_note[hit.note])
        if label is None:
            fp["unlabelled"] += 1
            unlabelled.append({"note": hit.note, "start": hit.start, "targets": hit.targets})
        elif label.target in hit.targets and label not in used and label.target is not None:
            tp[label.kind] += 1
            used.add(label)
        else:
            fp[label.kind] += 1
            false.append({"note": hit.note, "text": label.text, "kind": label.kind,
                          "targets": hit.targets})
    missed = [{"note": lb.note, "text": lb.text, "kind": lb.kind} for lb in labels
              if lb.target is not None and lb not in used]
    n = Counter(lb.kind for lb in labels)
    kinds: dict[str, dict[str, Any]] = {}
    for kind in (*POSITIVE, *TRAPS, "unlabelled"):
        row: dict[str, Any] = {"n": n.get(kind, 0), "tp": tp[kind], "fp": fp[kind]}
        if kind in POSITIVE:
            row["recall"] = _ratio(tp[kind], n[kind])
            row["precision"] = _ratio(tp[kind], tp[kind] + fp[kind])
        kinds[kind] = row
    positives = sum(n[k] for k in POSITIVE)
    total_tp = sum(tp.values())
    return {"kinds": kinds, "tp": total_tp, "hits": len(hits),
            "precision": _ratio(total_tp, len(hits)), "recall": _ratio(total_tp, positives),
            "positives": positives, "traps": sum(n[k] for k in TRAPS), "unlabelled": unlabelled,
            "missed": missed, "false": false}


def _ratio(a: int, b: int) -> float | None:
    return round(a / b, 3) if b else None


def evaluate(embedder: str = "use") -> dict[str, Any]:
    """All three modes on the labelled set: scores of links (and of the fuzzy proposals)."""
    with eval_vault(embedder) as vault:
        bodies = bodies_of(vault)
        labels = load_labels(bodies)
        out: dict[str, Any] = {"embedder": embedder, "notes": len(bodies),
                               "labels": len(labels), "modes": {}}
        for mode in MODES:
            r = run(vault, bodies, labels, mode)
            out["modes"][mode] = {"links": score(r.links, labels), "seconds": r.seconds,
                                  "questions": r.questions}
            if mode == "fuzzy":
                out["modes"][mode]["proposals"] = score(r.proposals, labels)
    return out


def _pr(row: Mapping[str, Any]) -> str:
    p, r = row.get("precision"), row.get("recall")
    return f"{_pct(p)} / {_pct(r)}"


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def render(res: Mapping[str, Any]) -> str:
    """Markdown: one row per kind; P / R for positives, false links for traps."""
    m = res["modes"]
    ex, fz, jd, pr = m["exact"]["links"], m["fuzzy"]["links"], m["judge"]["links"], \
        m["fuzzy"]["proposals"]
    lines = [f"{res['labels']} labelled mentions in {res['notes']} notes "
             f"({ex['positives']} true, {ex['traps']} traps), embedder {res['embedder']}", "",
             "| kind | n | before: exact L1, P / R | after, no model: P / R (+ proposals true/all) "
             "| after, with judge: P / R |", "|---|---|---|---|---|"]
    for kind in POSITIVE:
        e, f, j, p = (x["kinds"][kind] for x in (ex, fz, jd, pr))
        lines.append(f"| {kind} | {e['n']} | {_pr(e)} | {_pr(f)} (+{p['tp']}/{p['tp'] + p['fp']}) "
                     f"| {_pr(j)} |")
    for kind in (*TRAPS, "unlabelled"):
        e, f, j, p = (x["kinds"][kind] for x in (ex, fz, jd, pr))
        lines.append(f"| trap: {kind} | {e['n']} | {e['fp']} linked | {f['fp']} linked "
                     f"(+{p['fp']} proposed) | {j['fp']} linked |")
    lines.append(f"| **all** | {ex['positives']} | **{_pr(ex)}** | **{_pr(fz)}** "
                 f"(+{pr['tp']}/{pr['hits']}) | **{_pr(jd)}** |")
    lines += ["", f"judge questions: {m['judge']['questions']}; planning time: "
              + ", ".join(f"{k} {v['seconds']:.2f} s" for k, v in m.items())]
    return "\n".join(lines)


def misses(res: Mapping[str, Any]) -> str:
    """Each mode's missed true mentions and false links, for whoever tunes the matchers."""
    lines: list[str] = []
    for mode, x in res["modes"].items():
        for kind, rows in (("missed", x["links"]["missed"]), ("false", x["links"]["false"])):
            lines += [f"{mode} {kind}: {r}" for r in rows]
        lines += [f"{mode} unlabelled: {u}" for u in x["links"]["unlabelled"]]
        if "proposals" in x:
            lines += [f"{mode} proposal unlabelled: {u}" for u in x["proposals"]["unlabelled"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embedder", default="use", choices=("use", "hash"))
    parser.add_argument("--json", action="store_true", help="Print the full result as JSON.")
    parser.add_argument("--misses", action="store_true",
                        help="Also list missed mentions, false links and unlabelled hits.")
    args = parser.parse_args(argv)
    logging.getLogger("reme_agent").setLevel(logging.ERROR)
    res = evaluate(args.embedder)
    print(json.dumps(res, ensure_ascii=False, indent=1) if args.json else render(res))
    if args.misses:
        print(misses(res))


if __name__ == "__main__":
    main()
