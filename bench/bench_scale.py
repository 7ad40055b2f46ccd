"""Scale bench (issue G6): memory and cold open at 10k-100k notes, each phase in its own process.

    .venv/bin/python bench/bench_scale.py --notes 10000 20000
    .venv/bin/python bench/bench_scale.py --notes 100000 --out /scratch --keep   # ~25-60 min
    .venv/bin/python bench/bench_scale.py --notes 100000 --out /scratch --reuse  # measure again

Per size it prints, next to the G6 targets:
- indexing process: peak RSS of each phase (imports, full index, closing), full-index time;
- edit re-index: a whole-vault `index` run after one edited note, in a process that already
  ran one (warm) and as the first run of a new process; no-op run; wall and CPU seconds;
- property edit: a new process edits one note's frontmatter and re-indexes it (no vector
  written, so no HNSW load): time and peak RSS;
- cold open: a new process until its first answer (imports, snapshot load, first search),
  median of three, with the peak RSS of each phase; the first vector query is where chroma
  loads HNSW, so its RSS step is the vector share (`--dim` x 4 bytes per block, plus links);
- search p50/p95 (`search_blocks`, the F9/G6 row, and the full `search`, also as the main
  thread's CPU time, which other processes' load disturbs least) in that process;
- the peak RSS of every process, with the machine's load average at start and end.

Vectors come from the hash embedder at `--dim` dimensions (default 512: what the default USE
model stores, so the memory is the default install's; 1024 is the hash embedder's own). The
numbers are printed, never asserted. A vault is generated and indexed once under `--out`;
`--reuse` measures an existing one again (the indexing rows are then left out).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT))

from machine import percentile  # noqa: E402

TARGETS = {"peak_rss_mb": 1536.0, "cold_open_s": 5.0, "search_p95_ms": 50.0, "edit_s": 1.0}


# --- helpers shared by the child processes ----------------------------------------------------

def _status() -> dict[str, float]:
    out = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(("VmHWM", "VmRSS")):
                key, value = line.split(":", 1)
                out[key] = int(value.split()[0]) / 1024
    return out


def _peak_since_reset() -> float:
    """Peak RSS (MB) since the last `_reset_peak` (Linux: VmHWM after clear_refs 5)."""
    return round(_status().get("VmHWM", 0.0), 1)


def _reset_peak() -> None:
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


class Phases:
    """Wall time, CPU time and peak RSS of consecutive phases of one process."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, float]] = {}
        self._t = time.perf_counter()
        self._c = time.process_time()
        _reset_peak()

    def end(self, name: str) -> None:
        now, cpu = time.perf_counter(), time.process_time()
        self.rows[name] = {"s": round(now - self._t, 3), "cpu_s": round(cpu - self._c, 3),
                           "peak_mb": _peak_since_reset(),
                           "rss_mb": round(_status().get("VmRSS", 0.0), 1)}
        self._t, self._c = time.perf_counter(), time.process_time()
        _reset_peak()


def _open(root: str, dim: int, embedder: str) -> Any:
    from reme_agent.config import Settings
    from reme_agent.vault import open_vault

    vault = open_vault(root, Settings(embedder={"name": embedder}, index={"progress": False}))
    if embedder == "hash" and dim != 1024:
        from reme_agent.engine.embedders import HashEmbedder

        vault.__dict__["embedder"] = HashEmbedder(dim)   # before anything opens the vectors
    return vault


def _edit(root: Path, notes: int, k: int) -> str:
    from generate import note_path

    rel = note_path((notes // 2 + 997 * k) % notes)
    path = root / rel
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("\n\n", f"\n\nEdited paragraph {k} {time.time_ns()} about key "
                                 "rotation.\n\n", 1), encoding="utf-8")
    return rel


def _edit_frontmatter(root: Path, notes: int, k: int) -> str:
    """A property edit (what a CLI property tool writes): no block text changes."""
    from generate import note_path

    rel = note_path((notes // 3 + 991 * k) % notes)
    path = root / rel
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("---\n", f"---\nreviewed: {time.time_ns()}\n", 1)
                    if "\nreviewed: " not in text else
                    text.replace("\nreviewed: ", f"\nreviewed: {time.time_ns()} #", 1),
                    encoding="utf-8")
    return rel


def _queries(n: int, seed: int = 3) -> list[str]:
    from generate import EN_WORDS, ZH_WORDS

    rng = random.Random(seed)
    return [" ".join(rng.choice(EN_WORDS) for _ in range(4)) if i % 2 else
            "".join(rng.choice(ZH_WORDS) for _ in range(3)) for i in range(n)]


# --- child processes --------------------------------------------------------------------------

def child_index(root: str, dim: int, embedder: str) -> dict[str, Any]:
    ph = Phases()
    from reme_agent.recall.search import search_blocks  # noqa: F401  (what a CLI imports)
    ph.end("imports")
    vault = _open(root, dim, embedder)
    report = vault.index()
    ph.end("full index")
    vault.close()
    ph.end("close")
    return {"phases": ph.rows, "files": report.files, "blocks": report.blocks,
            "index_s": report.seconds}


def child_property(root: str, dim: int, embedder: str, notes: int) -> dict[str, Any]:
    """A new process that edits one note's frontmatter and re-indexes that note: it writes
    no vector, so chroma's HNSW (1.4 GB at 100k) must not load (session 6)."""
    ph = Phases()
    vault = _open(root, dim, embedder)
    ph.end("open")
    rel = _edit_frontmatter(Path(root), notes, 0)
    report = vault.refresh([rel])
    ph.end("property refresh")
    vault.close()
    ph.end("close")
    return {"phases": ph.rows, "embedded": report.embedded}


def child_edit(root: str, dim: int, embedder: str, notes: int) -> dict[str, Any]:
    ph = Phases()
    vault = _open(root, dim, embedder)   # as `reme-agent index` does: no search warm-up
    ph.end("open")
    rows: dict[str, Any] = {}
    _edit(Path(root), notes, 0)
    c = time.process_time()
    first = vault.index()
    rows["first"] = {"s": first.seconds, "cpu_s": round(time.process_time() - c, 3),
                     "changed": len(first.changed_files)}
    ph.end("first edit run")
    warm = []
    for k in range(1, 4):
        _edit(Path(root), notes, k)
        c = time.process_time()
        r = vault.index()
        warm.append({"s": r.seconds, "cpu_s": round(time.process_time() - c, 3),
                     "changed": len(r.changed_files)})
    rows["warm"] = sorted(warm, key=lambda x: x["s"])[1]
    limited = []   # what `watch` and a tool write do: re-index the edited file only
    for k in range(4, 7):
        rel = _edit(Path(root), notes, k)
        c, t = time.process_time(), time.perf_counter()
        vault.refresh([rel])
        limited.append({"s": round(time.perf_counter() - t, 3),
                        "cpu_s": round(time.process_time() - c, 3)})
    rows["limited"] = sorted(limited, key=lambda x: x["s"])[1]
    c = time.process_time()
    noop = vault.index()
    rows["noop"] = {"s": noop.seconds, "cpu_s": round(time.process_time() - c, 3)}
    ph.end("warm edit runs")
    vault.close()
    ph.end("close")
    return {"phases": ph.rows, **rows}


def child_cold(root: str, dim: int, embedder: str, queries: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    ph = Phases()
    from reme_agent.recall.search import search, search_blocks
    ph.end("imports")
    vault = _open(root, dim, embedder)
    vault.ready()   # maps the snapshot while chroma loads HNSW and the warm-up thread runs
    ph.end("open + snapshot load")
    hits = search_blocks(vault, "vector index latency", 10)
    ph.end("first search_blocks")
    first_answer = time.perf_counter() - t0
    search(vault, "vector index latency", limit=10, log_access=False)
    ph.end("first search (names index)")
    first_full = time.perf_counter() - t0
    qs = _queries(queries)
    plain: list[float] = [0.0]
    rich: list[float] = [0.0]
    rich_cpu: list[float] = [0.0]
    if qs:
        plain, rich, rich_cpu = [], [], []
    for q in qs:
        t = time.perf_counter()
        search_blocks(vault, q, 10)
        plain.append((time.perf_counter() - t) * 1000)
        t, c = time.perf_counter(), time.thread_time()
        search(vault, q, limit=10, log_access=False)
        rich.append((time.perf_counter() - t) * 1000)
        rich_cpu.append((time.thread_time() - c) * 1000)
    ph.end(f"{len(qs)} searches")
    vault.close()
    return {"phases": ph.rows, "first_answer_s": round(first_answer, 3),
            "first_full_search_s": round(first_full, 3), "hits": len(hits),
            "search_ms": pcts(plain), "search_full_ms": pcts(rich),
            "search_full_cpu_ms": pcts(rich_cpu),
            "peak_mb": max(p["peak_mb"] for p in ph.rows.values())}


def child_vectors(root: str, dim: int, embedder: str) -> dict[str, Any]:
    """chroma alone: what loading the vector index costs a process (its share of a cold
    open's memory), measured apart because a cold open overlaps it with the snapshot."""
    ph = Phases()
    import chromadb  # noqa: F401
    ph.end("import chromadb")
    vault = _open(root, dim, embedder)
    vault.vector.count()
    ph.end("HNSW load")
    vault.vector.close()
    return {"phases": ph.rows}


def child_names(root: str, dim: int, embedder: str) -> dict[str, Any]:
    """Search's name index alone (`recall/names.py`): opening its store (`names.sqlite`,
    built here the first time) and a first match: its share of a cold-open process."""
    ph = Phases()
    from reme_agent.engine.tokenize import warm_up
    from reme_agent.recall.names import index_for
    warm_up()   # jieba's dictionary (~60 MB) is the tokenizer's, not the index's
    ph.end("imports")
    vault = _open(root, dim, embedder)
    index_for(vault).match("what is the storm bucket", ["storm", "bucket"])
    ph.end("name index")
    vault.close()
    return {"phases": ph.rows}


def pcts(values: list[float], digits: int = 2) -> dict[str, float]:
    """p50 / p95 / p99, rounded (the scale and names benches print these)."""
    return {"p50": round(statistics.median(values), digits),
            "p95": round(percentile(values, 0.95), digits),
            "p99": round(percentile(values, 0.99), digits)}


# --- the parent -------------------------------------------------------------------------------

def run_child(script: Path, *args: str) -> dict[str, Any]:
    """Run `script --child ARGS` in a new process; its last stdout line is the JSON result
    (every phase measured in a process of its own, so peaks are that phase's)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), str(BENCH), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, str(script.resolve()), "--child", *args],
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"child {args[0]} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _run_child(*args: str) -> dict[str, Any]:
    return run_child(Path(__file__), *args)


def _load() -> list[float]:
    with contextlib.suppress(OSError):
        return [round(x, 2) for x in os.getloadavg()]
    return []


def measure(notes: int, out: Path, dim: int, embedder: str, queries: int, reuse: bool,
            colds: int, text: str = "vocab", echo: Any = print) -> dict[str, Any]:
    from generate import generate_vault

    kind = "" if text == "vocab" else f"-{text}"
    root = out / f"scale-{notes}{kind}-{embedder}{dim if embedder == 'hash' else ''}"
    res: dict[str, Any] = {"notes": notes, "embedder": embedder, "dim": dim, "vault": str(root),
                           "text": text, "load_start": _load()}
    built = (root / ".reme" / "index.sqlite").is_file()
    if not (reuse and built):
        if root.exists():
            shutil.rmtree(root)
        echo(f"[scale {notes}] generating ({text} text)")
        if text == "vocab":
            generate_vault(root, notes)
        else:   # the real-text vault of bench/real_text.py (issue G6)
            generate_vault(root, notes, text=text)  # type: ignore[call-arg]
        echo(f"[scale {notes}] full index (own process)")
        res["index"] = _run_child("index", str(root), str(dim), embedder)
    echo(f"[scale {notes}] vector index alone (own process)")
    res["vectors"] = _run_child("vectors", str(root), str(dim), embedder)
    echo(f"[scale {notes}] name index alone (own process)")
    res["names"] = _run_child("names", str(root), str(dim), embedder)
    echo(f"[scale {notes}] edit re-index (own process)")
    res["edit"] = _run_child("edit", str(root), str(dim), embedder, str(notes))
    echo(f"[scale {notes}] property edit in a new process")
    res["property"] = _run_child("property", str(root), str(dim), embedder, str(notes))
    runs = []
    for i in range(colds):
        echo(f"[scale {notes}] cold open {i + 1}/{colds}")
        runs.append(_run_child("cold", str(root), str(dim), embedder,
                               str(queries if i == colds // 2 else 0)))
    by_time = sorted(runs, key=lambda r: r["first_answer_s"])
    res["cold"] = by_time[len(by_time) // 2]
    res["cold"]["all_first_answer_s"] = [r["first_answer_s"] for r in runs]
    searched = runs[colds // 2]
    res["search"] = searched["search_ms"] if queries else {}
    res["search_full"] = searched["search_full_ms"] if queries else {}
    res["search_full_cpu"] = searched["search_full_cpu_ms"] if queries else {}
    res["cold_peak_mb"] = max(r["peak_mb"] for r in runs)
    res["blocks"] = (res.get("index") or {}).get("blocks")
    res["load_end"] = _load()
    return res


def _flag(value: float, target: float) -> str:
    return "ok" if value <= target else "over"


def render(res: dict[str, Any]) -> str:
    t = TARGETS
    lines = [f"scale bench: {res['notes']} notes ({res.get('text', 'vocab')} text), "
             f"{res['embedder']} {res['dim']}-d "
             f"({res.get('blocks') or '?'} blocks); load {res['load_start']} -> "
             f"{res['load_end']}; {os.cpu_count()} CPU"]
    index = res.get("index")
    if index:
        peak = max(p["peak_mb"] for p in index["phases"].values())
        lines.append(f"  indexing process   peak {peak:.0f} MB [target <= {t['peak_rss_mb']:.0f}: "
                     f"{_flag(peak, t['peak_rss_mb'])}]; full index {index['index_s']:.0f} s")
        for name, p in index["phases"].items():
            lines.append(f"    {name:<26} {p['s']:>8.2f} s  cpu {p['cpu_s']:>8.2f} s  "
                         f"peak {p['peak_mb']:>7.0f} MB  rss {p['rss_mb']:>7.0f} MB")
    edit = res["edit"]
    w = edit["warm"]
    lines.append(f"  edit re-index      {w['s']:.2f} s (cpu {w['cpu_s']:.2f} s) warm, median of 3 "
                 f"[target <= {t['edit_s']:.0f} s: {_flag(w['s'], t['edit_s'])}]; first run in "
                 f"a new process {edit['first']['s']:.2f} s (cpu {edit['first']['cpu_s']:.2f}); "
                 f"no-op {edit['noop']['s']:.2f} s")
    if "limited" in edit:
        lines.append(f"  edit, path-limited {edit['limited']['s']:.2f} s (cpu "
                     f"{edit['limited']['cpu_s']:.2f} s), median of 3: what `watch` and a "
                     "tool write run")
    if "property" in res:
        prop = res["property"]["phases"]
        lines.append(f"  property edit      {prop['property refresh']['s']:.2f} s in a new process "
                     f"(open {prop['open']['s']:.2f} s), peak "
                     f"{max(p['peak_mb'] for p in prop.values()):.0f} MB, "
                     f"{res['property']['embedded']} blocks embedded: no vector written, so "
                     "no HNSW load")
    vec = res["vectors"]["phases"]["HNSW load"]
    lines.append(f"  vector index alone HNSW load {vec['s']:.2f} s (cpu {vec['cpu_s']:.2f} s), "
                 f"+{vec['peak_mb'] - res['vectors']['phases']['import chromadb']['rss_mb']:.0f} "
                 f"MB: the vectors' share of a cold-open process")
    names = res["names"]["phases"]
    lines.append(f"  name index alone   {names['name index']['s']:.2f} s (cpu "
                 f"{names['name index']['cpu_s']:.2f} s), +{names['name index']['peak_mb'] - names['imports']['rss_mb']:.0f} MB "
                 f"(recall/names.py: names.sqlite opened and a first match; built once when missing)")
    cold = res["cold"]
    lines.append(f"  cold open          {cold['first_answer_s']:.2f} s to the first search_blocks "
                 f"answer, median of {cold['all_first_answer_s']} [target <= "
                 f"{t['cold_open_s']:.0f} s: {_flag(cold['first_answer_s'], t['cold_open_s'])}]; "
                 f"first full search {cold['first_full_search_s']:.2f} s")
    lines.append(f"  cold-open process  peak {res['cold_peak_mb']:.0f} MB [target <= "
                 f"{t['peak_rss_mb']:.0f}: {_flag(res['cold_peak_mb'], t['peak_rss_mb'])}]")
    for name, p in cold["phases"].items():
        lines.append(f"    {name:<26} {p['s']:>8.2f} s  cpu {p['cpu_s']:>8.2f} s  "
                     f"peak {p['peak_mb']:>7.0f} MB  rss {p['rss_mb']:>7.0f} MB")
    if res.get("search"):
        s, f = res["search"], res["search_full"]
        lines.append(f"  search_blocks      p50 {s['p50']:.1f} / p95 {s['p95']:.1f} ms [target "
                     f"p95 <= {t['search_p95_ms']:.0f}: {_flag(s['p95'], t['search_p95_ms'])}]; "
                     f"full search p50 {f['p50']:.1f} / p95 {f['p95']:.1f} ms")
        cpu = res.get("search_full_cpu")
        if cpu:   # what other processes' load inflates least (the wall time above is read)
            lines.append(f"  full search CPU    p50 {cpu['p50']:.1f} / p95 {cpu['p95']:.1f} ms "
                         "(main thread's CPU time; the ANN call runs on a worker meanwhile)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        kind, rest = argv[1], argv[2:]
        fn = {"index": child_index, "edit": child_edit, "property": child_property,
              "cold": child_cold,
              "vectors": child_vectors, "names": child_names}[kind]
        args: list[Any] = [rest[0], int(rest[1]), rest[2], *map(int, rest[3:])]
        print(json.dumps(fn(*args)))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--notes", type=int, nargs="+", default=[10000])
    ap.add_argument("--dim", type=int, default=512, help="Hash embedder dimensions.")
    ap.add_argument("--embedder", default="hash", choices=["hash", "use"])
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--text", default="vocab", choices=["vocab", "real"],
                    help="Generated text: the word-list vault or the real-text one.")
    ap.add_argument("--colds", type=int, default=3, help="Cold-open processes per size.")
    ap.add_argument("--out", default=None, help="Folder for the vaults (bench/out).")
    ap.add_argument("--reuse", action="store_true", help="Measure an indexed vault again.")
    ap.add_argument("--keep", action="store_true", help="Keep the vaults.")
    ap.add_argument("--json", default=None, help="Also write the results as JSON here.")
    args = ap.parse_args(argv)
    out = Path(args.out) if args.out else BENCH / "out"
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for notes in args.notes:
        res = measure(notes, out, args.dim, args.embedder, args.queries, args.reuse,
                      args.colds, args.text,
                      echo=lambda s: print(s, file=sys.stderr, flush=True))
        print(render(res), flush=True)
        results.append(res)
        if not (args.keep or args.reuse):
            shutil.rmtree(res["vault"], ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
