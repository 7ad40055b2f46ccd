"""jieba's dictionary on the cold-start path: old code against new, interleaved (G6).

    .venv/bin/python bench/bench_jieba.py --old-ref 87416cd [--rounds 6] [--vault V] [--burn]

The old code is `git archive <old-ref>` unpacked in a temp folder and put first on
PYTHONPATH of the child processes; the new code is this checkout. Every case runs in new
processes, old and new alternating (the order flips each round). It prints, per case, the
median and spread of:

- `first`: spawn -> the first `tokenize()` of a Chinese query has returned (wall), and the
  child's CPU seconds at that moment; `first+warm-up`: the same with `warm_up()` started in a
  background thread first, as `Vault.ready` does;
- `search` (with `--vault`): spawn -> first byte of `python -m reme_agent search QUERY
  --vault V --json --no-log` (REME_WARM=0), and the child's whole CPU time (rusage);
- `bulk`: tokenising the blocks of real notes (LoCoMo/CMRC, `bench/real_text.py`) in a new
  process: blocks/s of the first pass (dictionary load included) and of a second pass (full
  dictionary in both), and how many characters the new code cut with the mapped dictionary;
- `index`: `reme-agent index --full` of a real-text vault (`--index-notes`, hash embedder):
  blocks/s (whole process, ~ blocks counted as blank-line paragraphs) and CPU seconds.

Before timing, one process of the new code writes the compact dictionary if the user cache
has none (what the first process of a user does). Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import burner, load_text  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
QUERIES = ["向量索引的延迟", "团队会议的决策", "密钥轮换", "小明的硕士论文在哪里"]

FIRST = """
import time, threading
from reme_agent.engine import tokenize as tk
if {warm}:
    threading.Thread(target=tk.warm_up, daemon=True).start()
toks = tk.tokenize({query!r})
cpu = time.process_time()
print(cpu, len(toks), flush=True)
"""

BULK = """
import json, time
from reme_agent.engine import tokenize as tk
blocks = json.load(open({path!r}, encoding="utf-8"))
t = time.perf_counter()
for b in blocks:
    tk.tokenize(b)
first = time.perf_counter() - t
t = time.perf_counter()
for b in blocks:
    tk.tokenize(b)
second = time.perf_counter() - t
budget = getattr(tk, "LAZY_BUDGET", 0)
print(json.dumps([first, second, budget - getattr(tk, "_lazy_left", budget)]))
"""


def old_checkout(ref: str, into: Path) -> Path:
    """The code at `ref`, unpacked (no worktree, nothing changed in the repository)."""
    archive = into / "old.tar"
    with open(archive, "wb") as f:
        subprocess.run(["git", "archive", ref], cwd=ROOT, stdout=f, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "old", filter="data")
    return into / "old"


NEUTRAL = Path(tempfile.gettempdir())
"""Children run here: with `-c`/`-m` the current folder comes first on sys.path, before
PYTHONPATH, so running them in this checkout would import the new code as the old."""


def env_for(code: Path | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if code is not None:
        env["PYTHONPATH"] = str(code)
    env.update(extra)
    return env


def first_tokenize(code: Path | None, query: str, warm: bool) -> tuple[float, float]:
    """Wall seconds from spawn to the tokens, and the child's CPU seconds then."""
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", FIRST.format(warm=warm, query=query)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env_for(code), cwd=NEUTRAL)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    wall = time.perf_counter() - t
    _, err = proc.communicate()
    if proc.returncode != 0 or not line:
        raise RuntimeError(err.decode(errors="replace"))
    return wall, float(line.split()[0])


def search(code: Path | None, vault: Path, query: str) -> tuple[float, float]:
    """Wall seconds from spawn to the first byte of the answer; the child's total CPU."""
    env = env_for(code, REME_EMBEDDER__NAME="use", REME_INDEX__PROGRESS="false",
                  REME_SEARCH__USE_RECENCY="false", REME_WARM="0")
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "reme_agent", "search", query, "--vault",
                             str(vault), "--json", "--no-log"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, cwd=NEUTRAL)
    assert proc.stdout is not None
    head = os.read(proc.stdout.fileno(), 1)
    wall = time.perf_counter() - t
    proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0 or not head:
        raise RuntimeError(f"search failed ({proc.returncode})")
    return wall, usage.ru_utime + usage.ru_stime


def bulk(code: Path | None, blocks_file: Path) -> tuple[float, float, int]:
    proc = subprocess.run([sys.executable, "-c", BULK.format(path=str(blocks_file))],
                          capture_output=True, text=True, env=env_for(code), check=True,
                          cwd=NEUTRAL)
    first, second, lazy_chars = json.loads(proc.stdout)
    return first, second, lazy_chars


def index_run(code: Path | None, vault: Path, blocks: int) -> tuple[float, float]:
    """A whole-vault `reme-agent index --full` with the hash embedder (so tokenising is a
    visible share): blocks/s, and the child's CPU seconds."""
    env = env_for(code, REME_EMBEDDER__NAME="hash", REME_INDEX__PROGRESS="false")
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "reme_agent", "index", "--vault", str(vault),
                             "--full", "--no-progress"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env, cwd=NEUTRAL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError("index failed")
    return blocks / wall, usage.ru_utime + usage.ru_stime


def real_blocks(limit: int) -> list[str]:
    """Blank-line separated blocks of real-text notes (LoCoMo English, CMRC Chinese)."""
    import real_text

    notes = real_text.generate_real_notes(max(50, limit // 4), seed=7)
    blocks = [b for n in notes for b in n.text.split("\n\n") if b.strip()]
    return blocks[:limit]


def summary(values: list[float], unit: str = "s") -> str:
    med = statistics.median(values)
    return f"{med:.3f} {unit} (min {min(values):.3f}, max {max(values):.3f}, n={len(values)})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--old-ref", default="main", help="git ref of the code to compare with")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--vault", help="an indexed vault (USE) for the `search` case; a copy")
    ap.add_argument("--blocks", type=int, default=3000, help="blocks for the bulk case")
    ap.add_argument("--index-notes", type=int, default=500,
                    help="real-text notes for the `index` case (0: skip it)")
    ap.add_argument("--cases", default="first,first+warm-up,search,bulk,index")
    ap.add_argument("--burn", action="store_true", help="keep one core busy meanwhile")
    args = ap.parse_args()
    cases = args.cases.split(",")
    if args.vault is None and "search" in cases:
        cases.remove("search")
    if not args.index_notes and "index" in cases:
        cases.remove("index")

    with tempfile.TemporaryDirectory(prefix="bench-jieba-") as tmp:
        old = old_checkout(args.old_ref, Path(tmp))
        codes: dict[str, Path | None] = {"old": old, "new": None}
        subprocess.run([sys.executable, "-c", "from reme_agent.engine import tokenize as tk; "
                        f"tk.tokenize({QUERIES[0]!r})"], env=env_for(None), check=True, cwd=NEUTRAL)
        blocks_file = Path(tmp) / "blocks.json"
        if "bulk" in cases:
            blocks = real_blocks(args.blocks)
            blocks_file.write_text(json.dumps(blocks, ensure_ascii=False), encoding="utf-8")
            chars = sum(map(len, blocks))
            print(f"bulk: {len(blocks)} blocks, {chars} characters", flush=True)
        index_vault, index_blocks = Path(tmp) / "index-vault", 0
        if "index" in cases:
            import real_text

            notes = real_text.generate_real_vault(index_vault, args.index_notes)
            index_blocks = sum(len([b for b in n.text.split("\n\n") if b.strip()])
                               for n in notes)
            index_run(None, index_vault, index_blocks)      # creates .reme, page cache
            print(f"index: {args.index_notes} notes, ~{index_blocks} blocks", flush=True)
        if "search" in cases:
            for name in codes:                              # page cache, model cache
                search(codes[name], Path(args.vault), QUERIES[0])

        start = load_text()
        res: dict[str, dict[str, list[float]]] = {c: {} for c in cases}
        with burner(args.burn):
            for i in range(args.rounds):
                order = ("old", "new") if i % 2 == 0 else ("new", "old")
                query = QUERIES[i % len(QUERIES)]
                for name in order:
                    code = codes[name]
                    for case in cases:
                        got = res[case]
                        if case in ("first", "first+warm-up"):
                            wall, cpu = first_tokenize(code, query, warm=case != "first")
                            got.setdefault(f"{name} wall", []).append(wall)
                            got.setdefault(f"{name} cpu", []).append(cpu)
                        elif case == "search":
                            wall, cpu = search(code, Path(args.vault), query)
                            got.setdefault(f"{name} wall", []).append(wall)
                            got.setdefault(f"{name} cpu", []).append(cpu)
                        elif case == "bulk":
                            first, second, lazy = bulk(code, blocks_file)
                            n = len(json.loads(blocks_file.read_text(encoding="utf-8")))
                            got.setdefault(f"{name} first pass blocks/s", []).append(n / first)
                            got.setdefault(f"{name} second pass blocks/s", []).append(n / second)
                            got.setdefault(f"{name} chars cut lazily", []).append(lazy)
                        elif case == "index":
                            rate, cpu = index_run(code, index_vault, index_blocks)
                            got.setdefault(f"{name} blocks/s", []).append(rate)
                            got.setdefault(f"{name} cpu", []).append(cpu)
                print(f"  round {i + 1}/{args.rounds} done ({load_text()})", flush=True)
            end = load_text()

    print(f"\nbench_jieba: old={args.old_ref}, new=this checkout, {args.rounds} rounds, "
          f"burn={'on' if args.burn else 'off'}; start {start}; end {end}")
    for case, got in res.items():
        print(f"  {case}:")
        for key, values in got.items():
            unit = "" if "/s" in key or "chars" in key else "s"
            print(f"    {key:<28} {summary(values, unit)}")
        for metric in ("wall", "cpu", "blocks/s", "first pass blocks/s",
                       "second pass blocks/s"):
            if f"old {metric}" in got:
                ratio = statistics.median(got[f"new {metric}"]) / \
                    statistics.median(got[f"old {metric}"])
                print(f"    new/old {metric:<20} x{ratio:.2f}")
    print(json.dumps({"old_ref": args.old_ref, "burn": args.burn, "load_start": start,
                      "load_end": end, "results": res}))


if __name__ == "__main__":
    main()
