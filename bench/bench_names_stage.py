"""Search's "names" stage, old code against new, interleaved in one process (issue G6).

    .venv/bin/python bench/bench_names_stage.py --old-ref main --notes 1000,10000
    .venv/bin/python bench/bench_names_stage.py --old-ref main --vault /path/to/indexed/vault

The stage is what `recall/search.py` times as "names" plus "relations": the name match
(`names.py`), the relation answers and neighbours of the named notes (`relations.py`,
`evidence._relations`) and the block ids of the notes the evidence adds (`extra_block_ids`,
through `rows.py`). The old code is the same modules read from `--old-ref` with `git show`,
loaded beside the new ones; both open the same vault and the same `names.sqlite` (one
connection each). Each query runs through both, the order alternating; the cost is the main
thread's CPU time (`time.thread_time`: other processes' load on this 2-core machine does not
inflate it the way it inflates wall time). Every answer (name matches, relations,
neighbours, asked predicates, extra block ids) must be equal; a difference is printed.

Queries: the search bench's (`bench_search.make_queries`: two phrases of one note, half
Chinese) and name-shaped ones drawn from the store (a name, a typo of it, the name in a
question, `<name>是什么`, its words reversed), each a new query (nothing asked twice).
The vaults are `bench_search.py`'s (`--out`), read only: nothing is indexed or written
except by the name index's own sync if the store is behind. `--names-only --vault V` times
the name match alone (old and new `NameIndex` on V's index state, no `Vault` opened: for
`bench_scale.py`'s 100k vault) and prints what the new index keeps between queries.
Numbers are printed, never asserted.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT))

from bench_names import name_variants  # noqa: E402
from bench_search import make_queries, percentile  # noqa: E402

from reme_agent.config import Settings  # noqa: E402
from reme_agent.engine.tokenize import tokenize  # noqa: E402
from reme_agent.vault import Vault, open_vault  # noqa: E402

# loaded in this order from the old ref: each binds the old versions of those before it
STAGE_MODULES = ("namestore", "names", "rows", "relations", "evidence")


def load_old(ref: str) -> dict[str, types.ModuleType]:
    """The stage's modules as they were at `ref`, beside the current ones."""
    out: dict[str, types.ModuleType] = {}
    saved = {name: sys.modules.get(f"reme_agent.recall.{name}") for name in STAGE_MODULES}
    try:
        for name in STAGE_MODULES:
            full = f"reme_agent.recall.{name}"
            source = subprocess.run(["git", "show", f"{ref}:reme_agent/recall/{name}.py"],
                                    cwd=ROOT, check=True, capture_output=True,
                                    text=True).stdout
            module = types.ModuleType(full)
            module.__file__ = f"{ref}:reme_agent/recall/{name}.py"
            sys.modules[full] = module
            exec(compile(source, module.__file__, "exec"), module.__dict__)
            out[name] = module
    finally:
        for name, module in saved.items():
            if module is not None:
                sys.modules[f"reme_agent.recall.{name}"] = module
    return out


def current() -> dict[str, types.ModuleType]:
    import importlib
    return {name: importlib.import_module(f"reme_agent.recall.{name}")
            for name in STAGE_MODULES}


def name_queries(vault: Vault, count: int, seed: int) -> list[str]:
    """Names, typos, names in questions (as `bench_names.py` draws them)."""
    from reme_agent.recall.names import index_for
    index = index_for(vault)
    with index.store.reading():
        names = [e.name for e in index.store.iter_entries()]
    rng = random.Random(seed)
    out = [q for name in rng.sample(names, min(len(names), count // 5 + 1))
           for q in name_variants(name, rng)]
    return list(dict.fromkeys(out))[:count]


def stage_of(vault: Vault, mods: dict[str, types.ModuleType]) -> Callable[[str, list[str]], Any]:
    evidence = mods["evidence"]
    opts = vault.settings.search.model_copy(update={"use_phrases": False})

    def run(query: str, tokens: list[str]) -> Any:
        ev = evidence.gather(vault, query, tokens, opts)
        extra = evidence.extra_block_ids(vault, ev.paths())
        return (sorted((p, tuple(vars(m).values())) for p, m in ev.names.items()),
                sorted((p, tuple(vars(r).values())) for p, r in ev.relations.items()),
                sorted(ev.neighbours.items()), sorted(ev.asked), extra)
    return run


def measure(old: Callable[..., Any], new: Callable[..., Any],
            queries: list[str]) -> tuple[list[float], list[float], int]:
    """CPU ms per query of each (interleaved, alternating who goes first); differences."""
    t_old, t_new, differ = [], [], 0
    for i, q in enumerate(queries):
        toks = tokenize(q)
        got = {}
        for which in (("old", "new") if i % 2 else ("new", "old")):
            run, times = (old, t_old) if which == "old" else (new, t_new)
            c = time.thread_time()
            got[which] = run(q, toks)
            times.append((time.thread_time() - c) * 1000)
        if got["old"] != got["new"]:
            differ += 1
            if differ <= 3:
                print(f"    differs: {q!r}\n      old {got['old']}\n      new {got['new']}")
    return t_old, t_new, differ


def report(label: str, t_old: list[float], t_new: list[float], differ: int) -> None:
    o50, n50 = statistics.median(t_old), statistics.median(t_new)
    o95, n95 = percentile(t_old, 0.95), percentile(t_new, 0.95)
    om, nm = statistics.fmean(t_old), statistics.fmean(t_new)
    print(f"  {label:<28} {len(t_old):>4} q  old p50 {o50:6.3f} p95 {o95:6.3f} mean {om:6.3f}"
          f"  new p50 {n50:6.3f} p95 {n95:6.3f} mean {nm:6.3f}  new/old p50 {n50 / o50:5.2f}"
          f"  mean {nm / om:5.2f}  differ {differ}")


def names_only(root: Path, old_mods: dict[str, types.ModuleType], count: int) -> None:
    """The name match alone, old against new, on one index state (no Vault)."""
    from reme_agent.engine.state import IndexState
    from reme_agent.engine.workdir import internal_dir

    state = IndexState(internal_dir(root) / "index.sqlite")
    new_index = current()["names"].NameIndex(state)
    old_index = old_mods["names"].NameIndex(state)
    for index in (new_index, old_index):
        index.sync()
    with new_index.store.reading():
        every = [e.name for e in new_index.store.iter_entries()]
    rng = random.Random(5)
    queries: list[str] = []
    for name in rng.sample(every, min(len(every), count // 5 + 5)):
        chars = list(name)
        chars[rng.randrange(len(chars))] = rng.choice("abxz题")
        words = name.split()
        queries += [name, "".join(chars), f"what is the {name} threshold", f"{name}是什么",
                    " ".join(reversed(words)) if len(words) > 1 else name.upper()]
    queries = list(dict.fromkeys(queries))

    def runner(index: Any) -> Callable[[str, list[str]], Any]:
        return lambda q, toks: sorted((p, tuple(vars(m).values()))
                                      for p, m in index.match(q, toks).items())
    print(f"\n{root} ({len(every)} names), name match alone, CPU ms per query, "
          f"load {__import__('os').getloadavg()[0]:.1f}")
    warm = 20
    measure(runner(old_index), runner(new_index), queries[:warm])
    report("name-shaped (names, typos)",
           *measure(runner(old_index), runner(new_index), queries[warm:]))
    kept = {name: getattr(new_index, name) for name in ("_by_key", "_by_eid", "_gram_n",
                                                        "_gram_keys")}
    print("  kept by the new index: " + ", ".join(f"{n.strip('_')} {k.size} units"
                                                  for n, k in kept.items())
          + f", bigram counts of {sum(1 for v in new_index._grams_at.values() if v)} lengths "
            f"({new_index._grams_held} bigrams), postings {new_index._posted}, "
            f"totals {len(new_index._totals)}, token counts {len(new_index._counts)}")
    new_index.close()
    old_index.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old-ref", default="main")
    ap.add_argument("--notes", default="1000,10000")
    ap.add_argument("--vault", default=None, help="An indexed vault instead of --notes.")
    ap.add_argument("--out", default=str(BENCH / "out"))
    ap.add_argument("--queries", type=int, default=300, help="Per kind of query.")
    ap.add_argument("--embedder", default="use")
    ap.add_argument("--names-only", action="store_true")
    args = ap.parse_args()
    old_mods, new_mods = load_old(args.old_ref), current()
    if args.names_only:
        names_only(Path(args.vault), old_mods, args.queries + 20)
        return
    roots = [Path(args.vault)] if args.vault else [
        Path(args.out) / f"search-vault-{n}-real" for n in args.notes.split(",")]
    for root in roots:
        vault = open_vault(root, Settings(embedder={"name": args.embedder, "threads": 1}))
        files, blocks = vault.state.counts()
        old, new = stage_of(vault, old_mods), stage_of(vault, new_mods)
        warm = 20
        kinds = {"name-shaped (names, typos)": name_queries(vault, args.queries + warm, 5)}
        if not args.vault:
            n = int(root.name.split("-")[2])
            kinds["search bench (two phrases)"] = [
                q.text for q in make_queries(root, n, "real", args.queries + warm)]
        print(f"\n{root} ({files} notes, {blocks} blocks), old = {args.old_ref}, CPU ms per "
              f"query (main thread), load {__import__('os').getloadavg()[0]:.1f}")
        for label, queries in kinds.items():
            measure(old, new, queries[:warm])
            report(label, *measure(old, new, queries[warm:]))
        vault.close()


if __name__ == "__main__":
    main()
