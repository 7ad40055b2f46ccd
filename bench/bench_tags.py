"""Inline-tag reading speed, this checkout against an old commit, in ONE process (sweep 8).

    .venv/bin/python bench/bench_tags.py [--old-ref d024f6f] [--copies 200] [--rounds 2]

The text is real prose: docs/*.md of this checkout repeated `--copies` times (headings,
code, tables, `#` in code and URLs), plus a tag-dense synthetic set (tags, wikilinks, math,
prices, CJK punctuation, quotes and table pipes on every line). The old `engine/tags.py` is
taken with `git show <ref>:reme_agent/engine/tags.py` and loaded beside the current one (it
imports only `engine.links`, shared). Prints seconds per side and round; asserts nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _dense(n: int) -> list[str]:
    rnd = random.Random(1)
    words = ["alpha", "beta", "#tag", "#项目", "[[Some note|shown]]", "$x$", "C#", "#1984",
             ">", "quote", "|", "cell", "`code #x`", "costs", "$5", "项目，下一步", "#a/b"]
    return ["\n\n".join(" ".join(rnd.choice(words) for _ in range(60)) for _ in range(8))
            for _ in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--old-ref", default="d024f6f")
    ap.add_argument("--copies", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    old_src = subprocess.run(["git", "show", f"{args.old_ref}:reme_agent/engine/tags.py"],
                             cwd=ROOT, check=True, capture_output=True, text=True).stdout
    with tempfile.TemporaryDirectory() as tmp:
        old_path = Path(tmp) / "tags_old.py"
        old_path.write_text(old_src, encoding="utf-8")
        sides = {"old": _load(old_path, "tags_old"),
                 "new": _load(ROOT / "reme_agent/engine/tags.py", "tags_new")}
        prose = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.md"))]
        sets = {"prose": prose * args.copies, "dense": _dense(5000)}
        for label, bodies in sets.items():
            mb = sum(map(len, bodies)) / 1e6
            for rnd in range(args.rounds):
                for name, mod in sides.items():
                    start = time.perf_counter()
                    count = sum(len(mod.body_tags(b)) for b in bodies)
                    print(f"{label:5} round {rnd} {name}: {time.perf_counter() - start:.2f} s "
                          f"for {len(bodies)} notes ({mb:.1f} MB), {count} tags")


if __name__ == "__main__":
    main()
