"""Time to the first search answer: a new process, and the same command answered warm (G6).

    .venv/bin/python bench/bench_coldstart.py --notes 1000,10000 [--embedder use] [--burn]

For each vault size (generated and indexed once, kept under `--out` for the next run) it
times `python -m reme_agent search QUERY --vault V --json --no-log` from spawn to the first
byte of its answer, alternating two cases query by query:

- cold: `REME_WARM=0`, so the process loads everything itself (imports, snapshot, model);
- warm: the same command while `reme-agent serve --vault V` runs (cli/warm.py).

It prints the median and p95 of each, the ratio, whether both gave the same JSON, and the
machine's load at start and end; `--burn` keeps one core busy with a second process. The
model cache (engine/use_cache.py) is built before timing, as any earlier run would have.
Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from generate import generate_vault  # noqa: E402
from machine import burner, load_text, percentile  # noqa: E402

QUERIES = ["vector index latency", "向量索引的延迟", "who decides the release plan",
           "团队会议的决策", "backup restore monitor", "密钥轮换"]


def prepared(root: Path, notes: int, embedder: str) -> None:
    """Generate and index the vault unless a finished one is already there."""
    done = root / ".reme" / "bench-indexed"
    if done.exists():
        return
    if root.exists():
        shutil.rmtree(root)
    generate_vault(root, notes)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "reme_agent", "index", "--vault", str(root),
                    "--no-progress"], check=True, env=env(embedder, warm=False),
                   stdout=subprocess.DEVNULL)
    print(f"  indexed {notes} notes in {time.perf_counter() - t:.0f} s", flush=True)
    done.write_text("ok\n", encoding="utf-8")


def env(embedder: str, *, warm: bool) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("REME_")}
    out.update(REME_EMBEDDER__NAME=embedder, REME_INDEX__PROGRESS="false",
               REME_SEARCH__USE_RECENCY="false", REME_WARM="1" if warm else "0")
    if os.environ.get("REME_CACHE_DIR"):
        out["REME_CACHE_DIR"] = os.environ["REME_CACHE_DIR"]
    return out


def first_answer(root: Path, query: str, embedder: str, warm: bool) -> tuple[float, str]:
    """Seconds from spawn to the first byte of stdout, and the whole answer."""
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "reme_agent", "search", query, "--vault",
                             str(root), "--json", "--no-log"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env(embedder, warm=warm))
    assert proc.stdout is not None
    head = os.read(proc.stdout.fileno(), 1)   # unbuffered: communicate() reads the fd too
    seconds = time.perf_counter() - t
    rest, err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"search failed: {err.decode(errors='replace')}")
    return seconds, (head + rest).decode()


def serve(root: Path, embedder: str) -> subprocess.Popen[bytes]:
    """Start `reme-agent serve` and wait until its socket answers."""
    proc = subprocess.Popen([sys.executable, "-m", "reme_agent", "serve", "--vault", str(root)],
                            env=env(embedder, warm=True), stderr=subprocess.PIPE)
    sock = root / ".reme" / "warm" / "serve.sock"
    deadline = time.monotonic() + 600
    while not sock.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("reme-agent serve did not start")
        time.sleep(0.2)
    return proc


def measure(root: Path, embedder: str, rounds: int) -> dict[str, object]:
    cold: list[float] = []
    warm: list[float] = []
    same = 0
    first_answer(root, QUERIES[0], embedder, warm=False)   # page cache, model cache, snapshot
    server = serve(root, embedder)
    try:
        first_answer(root, QUERIES[0], embedder, warm=True)
        for i in range(rounds):
            query = QUERIES[i % len(QUERIES)]
            order = (False, True) if i % 2 == 0 else (True, False)
            got = {}
            for is_warm in order:
                seconds, answer = first_answer(root, query, embedder, warm=is_warm)
                (warm if is_warm else cold).append(seconds)
                got[is_warm] = json.loads(answer)
            if got[True] == got[False]:
                same += 1
            else:
                keys = sorted(k for k in set(got[True]) | set(got[False])
                              if got[True].get(k) != got[False].get(k))
                print(f"  {query!r}: warm and cold differ in {keys}", flush=True)
    finally:
        server.terminate()
        server.wait()
    return {"cold_p50": statistics.median(cold), "cold_p95": percentile(cold, 0.95),
            "warm_p50": statistics.median(warm), "warm_p95": percentile(warm, 0.95),
            "same": f"{same}/{rounds}", "cold": cold, "warm": warm}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", default="1000,10000", help="vault sizes, comma-separated")
    ap.add_argument("--embedder", default="use", choices=["use", "hash", "e5"])
    ap.add_argument("--rounds", type=int, default=6, help="queries per case and size")
    ap.add_argument("--burn", action="store_true", help="keep one core busy meanwhile")
    ap.add_argument("--out", default="bench/out")
    args = ap.parse_args()

    sizes = [int(n) for n in args.notes.split(",")]
    roots = {n: Path(args.out) / f"coldstart-{n}-{args.embedder}" for n in sizes}
    for n, root in roots.items():
        prepared(root, n, args.embedder)
    start = load_text()
    results = {}
    with burner(args.burn):
        for n, root in roots.items():
            results[n] = measure(root, args.embedder, args.rounds)
        end = load_text()
    print(f"\nbench_coldstart: embedder={args.embedder}, burn={'on' if args.burn else 'off'}, "
          f"{args.rounds} queries per case; start {start}; end {end}")
    print(f"  {'notes':>6}  {'cold p50/p95 (s)':>17}  {'warm p50/p95 (s)':>17}  "
          f"{'cold/warm':>9}  same JSON  target")
    for n, r in results.items():
        print(f"  {n:>6}  {r['cold_p50']:>8.2f} / {r['cold_p95']:<6.2f}  "
              f"{r['warm_p50']:>8.2f} / {r['warm_p95']:<6.2f}  "
              f"{r['cold_p50'] / r['warm_p50']:>9.1f}  {r['same']:>9}  "
              f"cold <= 1.5 s at 10k, quiet")
    print(json.dumps({"embedder": args.embedder, "burn": args.burn, "load_start": start,
                      "load_end": end, "results": {str(n): r for n, r in results.items()}}))


if __name__ == "__main__":
    main()
