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
from reme_agent.errors import VaultError
from reme_agent.schema.layout import AUDIT, META

if TYPE_CHECKING:
    from reme_agent.engine.progress import Progress

DEMO_QUERIES = (
    "how do we combine keyword and vector search?",
    "中文分词怎么做",
    "who led the TypeScript rewrite?",
    "签名密钥多久轮换一次",   # a Chinese question, an English note (cross-language)
    "which notes get archived when nobody reads them",
)


def _sample_notes() -> dict[str, Any]:
    """The packaged sample notes by vault-relative path."""
    found: dict[str, Any] = {}

    def walk(node, rel: str) -> None:  # type: ignore[no-untyped-def]
        for child in node.iterdir():
            if child.is_dir():
                walk(child, f"{rel}{child.name}/")
            elif child.name.endswith(".md"):
                found[rel + child.name] = child

    walk(resources.files("reme_agent") / "sample_vault", "")
    return found


def copy_sample_vault(target: Path) -> int:
    """Copy the packaged sample notes into `target`; returns how many files were copied."""
    samples = _sample_notes()
    for rel, source in samples.items():
        dest = target / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(source.read_bytes())
    return len(samples)


def _not_demo_files(path: Path) -> list[str]:
    """Files in `path` the demo did not make (its own records in audit/, meta/ and the
    dot-folders aside): `--fresh` deletes the folder, so it must be the demo's."""
    samples = _sample_notes()
    own = (AUDIT + "/", META + "/")
    return sorted(rel for f in path.rglob("*") if f.is_file()
                  and not any(p.startswith(".") for p in f.relative_to(path).parts)
                  and (rel := f.relative_to(path).as_posix()) not in samples
                  and not rel.startswith(own))


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
    from reme_agent.engine.vaultroot import unusable_root
    from reme_agent.recall.search import search
    from reme_agent.schema.layout import init_layout
    from reme_agent.vault import open_vault

    say = echo or (lambda _text: None)
    if path.exists() and not path.is_dir():
        raise VaultError(f"{str(path)!r} is a file, not a folder for the demo vault.",
                         "Pass a new folder with --vault.")
    why = unusable_root(path) if path.is_dir() else None
    if why is not None:  # before --fresh lists every file under it
        raise VaultError(f"Refused demo vault folder {str(path)!r}: it is {why}.",
                         "Pass a new folder with --vault.")
    if fresh and path.exists():
        foreign = _not_demo_files(path)
        if foreign:
            raise VaultError(f"{str(path)!r} is not a demo vault ({len(foreign)} file(s) the "
                             f"demo did not make, e.g. {foreign[0]!r}); --fresh deletes the "
                             "folder, so nothing was changed.",
                             "Pass a new folder with --vault, or delete this one yourself.")
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
            if response.results and all(node.weak for node in response.results):
                say("  no good match (what `search` answers too); the closest notes, all weak:")
            hits = []
            for i, node in enumerate(response.results, 1):
                chunk = node.chunks[0]
                snippet = " ".join(chunk.text.split())[:100]
                hits.append({"title": node.title, "path": node.path, "score": round(node.score, 3),
                             "weak": node.weak,
                             "lines": [chunk.start_line, chunk.end_line], "snippet": snippet})
                say(f"  {i}. {node.title}  [{node.path}:{chunk.start_line}-{chunk.end_line}]  "
                    f"score {node.score:.3f}{'  (weak)' if node.weak else ''}\n     {snippet}")
            queries.append({"query": query, "results": hits})
    finally:
        vault.close()
    say(f"\nvault: {path.resolve()}  -  try: {_command()} search \"...\" --vault {path}")
    return {"vault": str(path.resolve()), "copied": copied,
            "index": {"files": report.files, "blocks": report.blocks,
                      "embedded": report.embedded, "seconds": seconds},
            "queries": queries}
