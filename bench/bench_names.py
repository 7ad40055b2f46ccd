"""Name index bench (issue G6): the stored name index (`recall/names.py`, `names.sqlite`) on an
indexed vault, each measurement in its own process.

    .venv/bin/python bench/bench_names.py --vault /scratch/v10k [--rebuild] [--reference]
    .venv/bin/python bench/bench_names.py --vault /work/scratch-g6scale/v100k

Prints, with wall and CPU seconds and the RSS a phase adds (Linux VmHWM / VmRSS):
- first build: the store written from the index state (jieba loaded before, timed apart), when
  the vault has none or with `--rebuild`; the file's size;
- open + first match, median of three new processes: opening the store and checking it is in
  step with the index state, then one query (English, so jieba is not loaded for it);
- match p50 / p95 over the bench queries (names, typos, names inside questions, shuffled
  words) and the RSS after them;
- sync after one edit: a new process whose store is one note behind (that note's stamp and
  the generation moved back, as an index run after an edit leaves it): the stamp diff plus
  re-reading that note;
- `--reference`: the in-memory index it replaced (`tests/recall/names_reference.py`), built
  in its own process, its build time, RSS and match p50 / p95 on the same queries, and
  whether every answer is equal.
Numbers are printed, never asserted. The vault's index is read, never changed (only
`names.sqlite` is written).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT))

from bench_scale import Phases, _status, pcts, run_child  # noqa: E402


def _state(root: str) -> Any:
    from reme_agent.engine.state import IndexState
    from reme_agent.engine.workdir import internal_dir

    return IndexState(internal_dir(Path(root)) / "index.sqlite")


def _match_all(index: Any, queries: list[str]) -> tuple[list[float], list[Any]]:
    from reme_agent.engine.tokenize import tokenize

    times, answers = [], []
    for q in queries:
        toks = tokenize(q)
        t = time.perf_counter()
        got = index.match(q, toks)
        times.append((time.perf_counter() - t) * 1000)
        answers.append([[p, m.name, m.field, m.kind, m.strength, m.span]
                        for p, m in got.items()])
    return times, answers


# --- children ------------------------------------------------------------------------------------

def child_build(root: str, rebuild: bool) -> dict[str, Any]:
    ph = Phases()
    from reme_agent.engine.tokenize import warm_up
    from reme_agent.recall import namestore
    from reme_agent.recall.names import NameIndex
    ph.end("imports")
    warm_up()
    ph.end("jieba")
    state = _state(root)
    file = state.path.with_name(namestore.FILE_NAME)
    if rebuild:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{file}{suffix}").unlink(missing_ok=True)
    existed = file.exists()
    index = NameIndex(state)
    index.sync()
    ph.end("build")
    with index.store.reading():
        entries = index.store.count_entries()
    index.close()
    return {"phases": ph.rows, "existed": existed, "entries": entries,
            "file_mb": round(file.stat().st_size / 2**20, 1)}


def child_queries(root: str) -> dict[str, Any]:
    """The bench queries, drawn from the store's names (seeded)."""
    from reme_agent.recall.names import NameIndex
    index = NameIndex(_state(root))
    index.sync()
    with index.store.reading():
        names = [e.name for e in index.store.iter_entries()]
    index.close()
    rng = random.Random(7)
    return {"queries": [q for name in rng.sample(names, min(60, len(names)))
                        for q in name_variants(name, rng)]}


def name_variants(name: str, rng: random.Random) -> list[str]:
    """How a query uses a name: as written, with a typo, inside an English and a Chinese
    question, and with its words reversed (or upper-cased)."""
    chars = list(name)
    i = rng.randrange(len(chars))
    chars[i] = rng.choice("abxz题")
    words = name.split()
    return [name, "".join(chars), f"what is the {name} threshold", f"{name}是什么",
            " ".join(reversed(words)) if len(words) > 1 else name.upper()]


def child_open(root: str, queries_file: str, timed: bool) -> dict[str, Any]:
    ph = Phases()
    from reme_agent.engine.tokenize import tokenize
    from reme_agent.recall.names import NameIndex
    queries = json.loads(Path(queries_file).read_text())
    first = next(q for q in queries if q.isascii() and len(q) > 8)
    toks = tokenize(first)           # English: no jieba
    state = _state(root)
    ph.end("imports")
    index = NameIndex(state)
    index.sync()
    ph.end("open + sync")
    index.match(first, toks)
    ph.end("first match")
    out: dict[str, Any] = {"phases": ph.rows}
    if timed:
        from reme_agent.engine.tokenize import warm_up
        warm_up()
        ph.end("jieba (for the queries)")
        times, answers = _match_all(index, queries)
        ph.end("queries")
        out.update(match_ms=pcts(times, 3), answers=answers)
    index.close()
    return out


def child_edit(root: str) -> dict[str, Any]:
    from reme_agent.engine.tokenize import warm_up
    from reme_agent.recall.names import NameIndex, _source_of
    warm_up()
    state = _state(root)
    index = NameIndex(state)
    index.sync()
    with index.store.reading():
        path = next(e.path for e in index.store.iter_entries())
    gen = state.generation()
    with index.store.writing() as w:   # one note behind, as after an index run that edited it
        w.set_stamp(path, "edited")
        w.finish(gen - 1, _source_of(state))
    index.close()
    ph = Phases()
    index = NameIndex(state)
    index.sync()
    ph.end("sync after one edit")
    index.close()
    return {"phases": ph.rows}


def child_reference(root: str, queries_file: str) -> dict[str, Any]:
    ph = Phases()
    from reme_agent.engine.tokenize import warm_up
    from tests.recall.names_reference import ReferenceNameIndex
    warm_up()
    ph.end("imports + jieba")
    index = ReferenceNameIndex(_state(root))
    index.sync()
    ph.end("build (in memory)")
    times, answers = _match_all(index, json.loads(Path(queries_file).read_text()))
    return {"phases": ph.rows, "match_ms": pcts(times, 3), "answers": answers}


# --- the parent ----------------------------------------------------------------------------------

def _run(*args: str) -> dict[str, Any]:
    return run_child(Path(__file__), *args)


def _row(name: str, p: dict[str, float], base: float | None = None) -> str:
    added = f"  +{p['peak_mb'] - base:.0f} MB" if base is not None else ""
    return (f"  {name:<28} {p['s']:>7.3f} s  cpu {p['cpu_s']:>7.3f} s  peak {p['peak_mb']:>6.0f} MB"
            f"  rss {p['rss_mb']:>6.0f} MB{added}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vault")
    ap.add_argument("--rebuild", action="store_true", help="delete names.sqlite first")
    ap.add_argument("--reference", action="store_true",
                    help="also build the old in-memory index and compare")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        kind, *rest = args.child
        fn = {"build": lambda: child_build(rest[0], rest[1] == "1"),
              "queries": lambda: child_queries(rest[0]),
              "open": lambda: child_open(rest[0], rest[1], rest[2] == "1"),
              "edit": lambda: child_edit(rest[0]),
              "reference": lambda: child_reference(rest[0], rest[1])}[kind]
        print(json.dumps(fn()))
        return
    root = str(Path(args.vault).resolve())
    print(f"vault {root}; load average {os.getloadavg()[0]:.1f}")
    build = _run("build", root, "1" if args.rebuild else "0")
    b = build["phases"]
    print(f"build ({'already there: open + sync' if build['existed'] else 'first build'}), "
          f"{build['entries']} names, names.sqlite {build['file_mb']} MB")
    print(_row("jieba", b["jieba"]))
    print(_row("build", b["build"], b["jieba"]["rss_mb"]))
    queries = _run("queries", root)["queries"]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(queries, fh)
    try:
        opens = [_run("open", root, fh.name, "1" if i == 1 else "0") for i in range(3)]
        both = sorted(opens, key=lambda o: o["phases"]["open + sync"]["s"]
                      + o["phases"]["first match"]["s"])
        mid = both[1]["phases"]
        print(f"open + first match, median of 3 new processes "
              f"({[round(o['phases']['open + sync']['s'] + o['phases']['first match']['s'], 3) for o in opens]} s)")
        print(_row("open + sync", mid["open + sync"], mid["imports"]["rss_mb"]))
        print(_row("first match", mid["first match"], mid["open + sync"]["rss_mb"]))
        timed = opens[1]
        q = timed["phases"]["queries"]
        print(f"  {len(queries)} queries: match p50 {timed['match_ms']['p50']} ms, p95 "
              f"{timed['match_ms']['p95']} ms; rss after {q['rss_mb']:.0f} MB "
              f"(+{q['peak_mb'] - timed['phases']['jieba (for the queries)']['rss_mb']:.0f} MB "
              f"over jieba)")
        edit = _run("edit", root)["phases"]["sync after one edit"]
        print(_row("sync after one edit", edit))
        if args.reference:
            ref = _run("reference", root, fh.name)
            r = ref["phases"]
            print("the in-memory index it replaced:")
            print(_row("build (in memory)", r["build (in memory)"], r["imports + jieba"]["rss_mb"]))
            print(f"  match p50 {ref['match_ms']['p50']} ms, p95 {ref['match_ms']['p95']} ms; "
                  f"answers equal: {ref['answers'] == timed['answers']} "
                  f"({sum(a == b for a, b in zip(ref['answers'], timed['answers'], strict=True))}"
                  f"/{len(queries)})")
    finally:
        os.unlink(fh.name)
    print(f"load average at end {os.getloadavg()[0]:.1f}; this process rss "
          f"{_status().get('VmRSS', 0):.0f} MB")


if __name__ == "__main__":
    main()
