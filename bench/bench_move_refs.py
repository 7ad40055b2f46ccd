"""What a `move` costs at 1k-10k notes, before and after the move-speed work (session 7).

On one generated vault per size (word-list text, hash embedder), with `--share` of the
notes holding an embed, a Markdown link and image, `--web` an external link and `--props`
links in frontmatter properties, it prints:

- the pieces a move used to pay whole: building the view (every folder, stat, index rows),
  the refs scan (every note read for embeds and Markdown links);
- whole `move` calls (there and back), medians over interleaved rounds, in three modes:
  `before`: the planning as it was (a view built whole, no memo; every note checked link by
  link and read for refs; the after-resolver rebuilt over every file), switched back on in
  this process; `cold`: the new code with the process's view memo emptied first (the
  first move on a vault no process has saved a memo for: the notes' reference keys come
  from the index, session 8); `next process`: a new memo
  reading the one saved before (a one-shot CLI call after an earlier one); `warm`: the
  new code as a long-lived process (MCP server, agent) runs it;
- the plan alone (view + link rewrites, no commit, no re-index) in the same three modes.

    .venv/bin/python bench/bench_move_refs.py --notes 1000 10000 --rounds 5
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from generate import generate_vault  # noqa: E402

from reme_agent.config import Settings  # noqa: E402
from reme_agent.engine import view as view_mod  # noqa: E402
from reme_agent.engine.retarget import plan_move  # noqa: E402
from reme_agent.engine.transaction import Transaction  # noqa: E402
from reme_agent.engine.viewmemo import MEMO_FILE, ViewMemo  # noqa: E402
from reme_agent.toolkit.files import move  # noqa: E402
from reme_agent.vault import Vault, open_vault  # noqa: E402


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


def add_props(root: Path, paths: list[str], share: float, seed: int) -> int:
    """Give `share` of the notes a property holding links (`related: "[[x]]"` and a list
    item), which a move rewrites too (session 8); found from the frontmatter, no read."""
    rng = random.Random(seed)
    n = 0
    for p in paths:
        if rng.random() < share:
            a, b = rng.sample(paths, 2)
            text = (root / p).read_text(encoding="utf-8")
            prop = f'see: "[[{Path(a).stem}]]"\nup:\n  - "[[{b[:-3]}|up]]"\n'
            (root / p).write_text(text.replace("---\n", "---\n" + prop, 1), encoding="utf-8")
            n += 1
    return n


def _load() -> str:
    """The 1-minute load average: the numbers move with what else runs on the machine."""
    return f"{os.getloadavg()[0]:.2f}"


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


@contextlib.contextmanager
def before() -> Iterator[None]:
    """The planning as it was before session 7, in this process."""
    saved = Vault.view, view_mod.VaultView.names_any, view_mod.VaultView.after

    def whole_view(self: Vault) -> view_mod.VaultView:
        return view_mod.VaultView(self.store, self.index_rows(), self.settings.index.extensions,
                                  self.settings.index.max_file_bytes)

    Vault.view = whole_view
    view_mod.VaultView.names_any = lambda self, path, keys: True   # every note checked
    view_mod.VaultView.after = view_mod.VaultView.rebuilt_after
    try:
        yield
    finally:
        Vault.view, view_mod.VaultView.names_any, view_mod.VaultView.after = saved


MODES = ("before", "cold", "next process", "warm")


def fresh_memo(vault: Vault, mode: str) -> None:
    """`cold`: the memo emptied; `next process`: a new memo reading what this one saved
    (a one-shot CLI call after an earlier one), with no folder listings or resolver."""
    if mode == "cold":
        vault._view_memo.clear()
    elif mode == "next process":
        vault._view_memo._dirty = True
        vault._view_memo.save()
        vault._view_memo = ViewMemo(vault._read_view_memo,
                                    lambda data: vault.store.write_internal(MEMO_FILE, data))


def bench(n: int, args: argparse.Namespace) -> None:
    root = args.work / f"v{n}"
    if root.exists() and not args.keep:
        shutil.rmtree(root)
    if not root.exists():
        paths = generate_vault(root, n)
        with_refs = add_refs(root, paths, args.share, args.web, seed=11)
        add_props(root, paths, args.props, seed=13)
    else:
        paths, with_refs = sorted(str(p.relative_to(root)) for p in root.rglob("*.md")
                                  if ".reme" not in p.parts), -1
    settings = Settings(embedder={"name": "hash"}, index={"progress": False})
    vault = open_vault(root, settings, create=True)
    t_index = timed(vault.index)
    print(f"\n## {n} notes ({with_refs} with embeds/Markdown links; -1: vault kept), "
          f"indexed in {t_index:.1f} s; load {_load()}\n")

    with before():
        view_s, scan_s = [], []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            view = vault.view()
            t1 = time.perf_counter()
            sum(len(view.refs(p)) for p in view.notes)
            view_s.append(t1 - t0)
            scan_s.append(time.perf_counter() - t1)

    src = paths[len(paths) // 2]
    dst = src.replace(".md", "-moved.md")
    times: dict[str, list[float]] = {m: [] for m in MODES}
    links = set()
    for _ in range(args.rounds):
        for mode, xs in times.items():
            with before() if mode == "before" else contextlib.nullcontext():
                for a, b in ((src, dst), (dst, src)):
                    fresh_memo(vault, mode)
                    t = time.perf_counter()
                    result = move(vault, a, b)
                    xs.append(time.perf_counter() - t)
                    links.add(sum(r["links"] for r in result.data["rewritten"]))
    plans: dict[str, list[float]] = {m: [] for m in MODES}
    for _ in range(args.rounds):
        for mode, xs in plans.items():
            with before() if mode == "before" else contextlib.nullcontext():
                fresh_memo(vault, mode)
                t = time.perf_counter()
                plan_move(Transaction(vault.store), vault.view(), src, dst, alias_bare=False)
                xs.append(time.perf_counter() - t)
    vault.close()

    def row(name: str, xs: list[float]) -> str:
        return f"| {name} | {statistics.median(xs) * 1000:.0f} | {max(xs) * 1000:.0f} |"

    print(f"moving {src} there and back ({sorted(links)} links rewritten per move); "
          f"load after {_load()}\n")
    print("| step | median ms | max ms |\n|---|---|---|")
    print(row("before: build the view (every move)", view_s))
    print(row("before: refs scan, every note", scan_s))
    for mode, xs in times.items():
        print(row(f"move, {mode}", xs))
    for mode, xs in plans.items():
        print(row(f"plan only (view + links, no commit or re-index), {mode}", xs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--notes", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--share", type=float, default=0.1, help="notes holding embeds/Markdown links")
    ap.add_argument("--web", type=float, default=0.3, help="notes holding an external link")
    ap.add_argument("--props", type=float, default=0.1, help="notes with links in properties")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--keep", action="store_true", help="reuse a vault generated before")
    ap.add_argument("--work", type=Path, default=Path("bench/out/move_refs"))
    args = ap.parse_args()
    for n in args.notes:
        bench(n, args)


if __name__ == "__main__":
    main()
