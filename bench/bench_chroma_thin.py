"""The embedded chroma store through the Rust bindings against chromadb's full client (G6).

    .venv/bin/python bench/bench_chroma_thin.py --vault DIR [--rounds 6] [--search]

DIR is an indexed vault (e.g. a copy of `bench_coldstart.py`'s `coldstart-10000-use`); it
is only read. Old (`REME_AGENT_CHROMA=client`, chromadb's Python client) and new (the
bindings, `engine/projections/chroma_rust.py`) alternate run by run, each in its own process:

- open: spawn -> the first vector query answered (open the store, one ANN call), wall and the
  child's CPU; the vector stands in for an embedded query, so no model is loaded;
- reads: in a warm process, `get(include=["embeddings"])` per stored vector (200 ids a call,
  the cache bypassed) and one ANN call (k=50), median of 30;
- `--search`: cold `reme-agent search` (USE, as `bench_coldstart.py` runs it), spawn -> the
  first byte of the answer, wall and CPU, and whether both answers are the same JSON.

Prints medians (and min/max); asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import load_text  # noqa: E402

KINDS = ("client", "thin")
QUERIES = ["vector index latency", "向量索引的延迟", "who decides the release plan",
           "团队会议的决策", "backup restore monitor", "密钥轮换"]

CHILD = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    import numpy as np
    from reme_agent.engine.projections.vector import VectorProjection

    class Stub:  # the vault's embedder id and size, without loading a model
        id, dim, kind = sys.argv[2], int(sys.argv[3]), None
        def embed_query(self, text): raise AssertionError("no model here")
        def embed_documents(self, texts): raise AssertionError("no model here")

    rng = np.random.default_rng(int(sys.argv[4]))
    q = rng.standard_normal(int(sys.argv[3])).astype(np.float32)
    q /= np.linalg.norm(q)
    vp = VectorProjection(Stub(), Path(sys.argv[1]))
    top = vp.query_embedding(q, 10)
    print(json.dumps({"first": time.perf_counter(), "n": len(top),
                      "kind": type(vp._client).__name__}), flush=True)
    if sys.argv[5] == "reads":
        ids = sorted(vp.ids())[: 200 * 31]
        per_vec, ann = [], []
        for i in range(30):
            vp.cache.clear()
            t = time.perf_counter()
            got = vp.embeddings(ids[200 * i: 200 * (i + 1)])
            per_vec.append((time.perf_counter() - t) / max(1, len(got)))
            q2 = rng.standard_normal(q.shape[0]).astype(np.float32)
            t = time.perf_counter()
            vp.query_embedding(q2 / np.linalg.norm(q2), 50)
            ann.append(time.perf_counter() - t)
        print(json.dumps({"per_vec": per_vec, "ann": ann}), flush=True)
""")


def child_env(kind: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REME_")}
    env["REME_AGENT_CHROMA"] = kind
    env.update(extra or {})
    return env


def run_timed(cmd: list[str], env: dict[str, str], *, first_byte: bool) -> tuple[float, float,
                                                                                   str]:
    """(seconds to the first byte of stdout or to exit, child CPU seconds, stdout)."""
    before = os.times()
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    head = os.read(proc.stdout.fileno(), 1) if first_byte else b""
    wall = time.perf_counter() - t
    rest, err = proc.communicate()
    if not first_byte:
        wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(err.decode(errors="replace"))
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system
                                                          - before.children_system)
    return wall, cpu, (head + rest).decode()


def collection(store: Path) -> tuple[str, int]:
    import sqlite3

    con = sqlite3.connect(f"file:{store / 'chroma.sqlite3'}?mode=ro", uri=True)
    try:
        names = [r[0] for r in con.execute("SELECT name FROM collections")]
    finally:
        con.close()
    name = sorted(names, key=len)[0]           # the base generation, e.g. reme-use-m3-512
    emb_id = name.removeprefix("reme-")
    return emb_id, int(emb_id.rsplit("-", 1)[1])


def summary(label: str, xs: list[float], unit: str = "s", scale: float = 1.0) -> str:
    v = [x * scale for x in xs]
    return (f"{label}: median {statistics.median(v):.3f} {unit} "
            f"(min {min(v):.3f}, max {max(v):.3f}, n={len(v)})")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vault", required=True, type=Path)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--search", action="store_true", help="also time cold `reme-agent search`")
    args = ap.parse_args(argv)
    store = args.vault / ".reme" / "chroma"
    emb_id, dim = collection(store)
    print(f"store {store} ({emb_id}); load at start: {load_text()}", flush=True)

    opened: dict[str, list[tuple[float, float]]] = {k: [] for k in KINDS}
    per_vec: dict[str, list[float]] = {k: [] for k in KINDS}
    ann: dict[str, list[float]] = {k: [] for k in KINDS}
    for r in range(args.rounds + 2):   # the last two rounds: reads in a warm process
        for kind in KINDS if r % 2 == 0 else KINDS[::-1]:
            mode = "reads" if r >= args.rounds else "open"
            wall, cpu, out = run_timed(
                [sys.executable, "-c", CHILD, str(store), emb_id, str(dim), str(r), mode],
                child_env(kind), first_byte=True)
            lines = [json.loads(line) for line in out.splitlines() if line.strip()]
            assert (lines[0]["kind"] == "RustStore") == (kind == "thin"), lines[0]
            if mode == "open":
                opened[kind].append((wall, cpu))
            else:
                per_vec[kind] += lines[1]["per_vec"]
                ann[kind] += lines[1]["ann"]
    print("spawn -> first vector query answered (wall to first byte; CPU of the whole child)")
    for kind in KINDS:
        print("  " + summary(f"{kind:6s} wall", [w for w, _ in opened[kind]]))
        print("  " + summary(f"{kind:6s} cpu ", [c for _, c in opened[kind]]))
    print("warm process: stored-vector reads and the ANN call")
    for kind in KINDS:
        print("  " + summary(f"{kind:6s} get embeddings per vector", per_vec[kind], "us", 1e6))
        print("  " + summary(f"{kind:6s} ANN k=50", ann[kind], "ms", 1e3))

    if args.search:
        base = {"REME_EMBEDDER__NAME": "use", "REME_INDEX__PROGRESS": "false",
                "REME_SEARCH__USE_RECENCY": "false", "REME_WARM": "0"}
        if os.environ.get("REME_CACHE_DIR"):
            base["REME_CACHE_DIR"] = os.environ["REME_CACHE_DIR"]
        cold: dict[str, list[tuple[float, float]]] = {k: [] for k in KINDS}
        answers: dict[str, dict[str, str]] = {k: {} for k in KINDS}
        for r in range(args.rounds):
            q = QUERIES[r % len(QUERIES)]
            for kind in KINDS if r % 2 == 0 else KINDS[::-1]:
                wall, cpu, out = run_timed(
                    [sys.executable, "-m", "reme_agent", "search", q, "--vault",
                     str(args.vault), "--json", "--no-log"], child_env(kind, base),
                    first_byte=True)
                cold[kind].append((wall, cpu))
                answers[kind][q] = out
        print("cold `reme-agent search` (USE): spawn -> first byte; CPU of the whole child")
        for kind in KINDS:
            print("  " + summary(f"{kind:6s} wall", [w for w, _ in cold[kind]]))
            print("  " + summary(f"{kind:6s} cpu ", [c for _, c in cold[kind]]))
        same = all(answers["client"][q] == answers["thin"][q] for q in answers["client"])
        print(f"  same JSON answers both ways: {same}")
    print(f"load at end: {load_text()}")


if __name__ == "__main__":
    main()
