"""What finding embeds and Markdown links costs a `move` (link forms on move, 2026-12-02).

Embeds (``![[x]]``) and Markdown links (``[t](x.md)``) are not edges, so the index does not
hold them; a `move` reads them from the files (`VaultView.refs`). This bench prints, on one
generated vault (word-list text, hash embedder):

- the view a move builds anyway (a stat per file, index rows);
- the refs scan over every note (read, byte prefilter, parse of the notes that may hold one);
- whole `move` calls (there and back), with the scan and with it switched off, interleaved.

    .venv/bin/python bench/bench_move_refs.py --notes 10000
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from generate import generate_vault  # noqa: E402

from reme_agent.config import Settings  # noqa: E402
from reme_agent.engine import view as view_mod  # noqa: E402
from reme_agent.toolkit.files import move  # noqa: E402
from reme_agent.vault import open_vault  # noqa: E402


def add_refs(root: Path, paths: list[str], share: float, web: float, seed: int) -> int:
    """Give `share` of the notes an embed, a Markdown link and image to other notes, and
    `web` of them an external Markdown link (which the byte prefilter cannot skip)."""
    rng = random.Random(seed)
    n = 0
    for p in paths:
        extra = ""
        if rng.random() < share:
            a, b = rng.sample(paths, 2)
            name = Path(a).stem
            extra += f"\n\n![[{name}]] and [see]({b.replace(' ', '%20')}) ![fig](../{name}.png)\n"
            n += 1
        if rng.random() < web:
            extra += "\n\nSource: [site](https://example.com/page_(1)).\n"
        if extra:
            with open(root / p, "a", encoding="utf-8") as fh:
                fh.write(extra)
    return n


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--notes", type=int, default=10000)
    ap.add_argument("--share", type=float, default=0.1, help="notes holding embeds/Markdown links")
    ap.add_argument("--web", type=float, default=0.3, help="notes holding an external link")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--work", type=Path, default=Path("bench/out/move_refs"))
    args = ap.parse_args()

    root = args.work / f"v{args.notes}"
    if root.exists():
        shutil.rmtree(root)
    paths = generate_vault(root, args.notes)
    with_refs = add_refs(root, paths, args.share, args.web, seed=11)
    settings = Settings(embedder={"name": "hash"}, index={"progress": False})
    vault = open_vault(root, settings, create=True)
    t_index = timed(vault.index)
    print(f"{args.notes} notes ({with_refs} with embeds/Markdown links), indexed in {t_index:.1f} s")

    real_refs = view_mod.VaultView.refs
    view_s, scan_s, found = [], [], 0
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        view = vault.view()
        t1 = time.perf_counter()
        found = sum(len(view.refs(p)) for p in view.notes)
        t2 = time.perf_counter()
        view_s.append(t1 - t0)
        scan_s.append(t2 - t1)

    src = paths[0]
    dst = src.replace(".md", "-moved.md")
    on, off = [], []
    for _ in range(args.rounds):
        for mode in ("on", "off"):
            if mode == "off":
                view_mod.VaultView.refs = lambda self, path: []   # the scan switched off
            try:
                there = timed(lambda: move(vault, src, dst))
                back = timed(lambda: move(vault, dst, src))
            finally:
                view_mod.VaultView.refs = real_refs
            (on if mode == "on" else off).extend([there, back])
    vault.close()

    def row(name: str, xs: list[float]) -> str:
        return f"| {name} | {statistics.median(xs) * 1000:.0f} | {max(xs) * 1000:.0f} |"

    print(f"\n{found} references found in {len(paths)} notes\n")
    print("| step | median ms | max ms |\n|---|---|---|")
    print(row("build the view (every move)", view_s))
    print(row("refs scan, every note", scan_s))
    print(row("move with the refs scan", on))
    print(row("move without it", off))


if __name__ == "__main__":
    main()
