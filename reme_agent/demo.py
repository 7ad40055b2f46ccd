"""`make demo`: copy the shipped bilingual sample vault, index it and run a few searches."""

from __future__ import annotations

import contextlib
import shutil
import sys
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reme_agent.config import Settings

if TYPE_CHECKING:
    from reme_agent.engine.progress import Progress

DEMO_QUERIES = (
    "how do we combine keyword and vector search?",
    "中文分词怎么做",
    "who led the TypeScript rewrite?",
    "密钥轮换",
    "which notes get archived when nobody reads them",
)


def copy_sample_vault(target: Path) -> int:
    """Copy the packaged sample notes into `target`; returns how many files were copied."""
    source = resources.files("reme_agent") / "sample_vault"
    count = 0

    def walk(node, rel: Path) -> None:  # type: ignore[no-untyped-def]
        nonlocal count
        for child in node.iterdir():
            if child.is_dir():
                walk(child, rel / child.name)
            elif child.name.endswith(".md"):
                dest = target / rel / child.name
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(child.read_bytes())
                count += 1

    walk(source, Path())
    return count


def _command() -> str:
    """How to type `reme-agent` here: `make demo` installs it in .venv/bin, not on PATH."""
    here = Path(sys.executable).parent / "reme-agent"
    found = shutil.which("reme-agent")
    if (found and Path(found).resolve() == here.resolve()) or not here.is_file():
        return "reme-agent"
    with contextlib.suppress(ValueError):
        return str(here.relative_to(Path.cwd()))
    return str(here)


def run_demo(path: Path, settings: Settings, fresh: bool = False,
             echo: Callable[[str], object] | None = print,
             progress: Progress | None = None) -> dict[str, Any]:
    """Build (or reuse) the demo vault, index it, run the demo queries; returns what it did.

    With `echo`, each part is also printed as it happens (the text form of `reme-agent
    demo`); `echo=None` prints nothing (the `--json` form prints the returned dict).
    """
    from reme_agent.recall.search import search
    from reme_agent.schema.layout import init_layout
    from reme_agent.vault import open_vault

    say = echo or (lambda _text: None)
    if fresh and path.exists():
        shutil.rmtree(path)
    new = not path.exists()
    path.mkdir(parents=True, exist_ok=True)
    copied = 0
    if new or fresh:
        init_layout(path)
        copied = copy_sample_vault(path)
        say(f"copied {copied} sample notes into {path}")
    vault = open_vault(path, settings)
    try:
        started = time.perf_counter()
        report = vault.index(progress=progress)
        seconds = round(time.perf_counter() - started, 1)
        say(f"indexed {report.files} files / {report.blocks} blocks "
            f"(embedded {report.embedded}) in {seconds:.1f} s")
        queries = []
        for query in DEMO_QUERIES:
            say(f"\n> {query}")
            response = search(vault, query, limit=3, log_access=False)
            hits = []
            for i, node in enumerate(response.results, 1):
                chunk = node.chunks[0]
                snippet = " ".join(chunk.text.split())[:100]
                hits.append({"title": node.title, "path": node.path, "score": round(node.score, 3),
                             "lines": [chunk.start_line, chunk.end_line], "snippet": snippet})
                say(f"  {i}. {node.title}  [{node.path}:{chunk.start_line}-{chunk.end_line}]  "
                    f"score {node.score:.3f}\n     {snippet}")
            queries.append({"query": query, "results": hits})
    finally:
        vault.close()
    say(f"\nvault: {path.resolve()}  -  try: {_command()} search \"...\" --vault {path}")
    return {"vault": str(path.resolve()), "copied": copied,
            "index": {"files": report.files, "blocks": report.blocks,
                      "embedded": report.embedded, "seconds": seconds},
            "queries": queries}
