"""The index pipeline (G6, engine/pipeline.py): embedding overlapped with reading, in a
thread or a child process, gives the same index as the old sequential path.

Real files, real chromadb, real embedders (hash for speed, USE once), a real child process.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from reme_agent.config import Settings
from reme_agent.errors import BackendError
from reme_agent.vault import Vault, open_vault

HASH = Settings(embedder={"name": "hash"}, index={"progress": False})
WORDS = ["search", "index", "vector", "graph", "memory", "note", "agent", "token", "query",
         "ranking", "fusion", "cache", "latency", "budget", "schema", "link", "检索", "索引",
         "向量", "图谱", "记忆", "笔记"]


def make_notes(root: Path, n: int) -> None:
    for i in range(n):
        path = root / "knowledge" / f"n{i:03d}" / f"n{i:03d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        paras = [" ".join(WORDS[(i * 7 + j * 3 + k) % len(WORDS)] for k in range(9 + j))
                 for j in range(4)]
        links = f"[[n{(i + 1) % n:03d}]] [[n{(i * 3) % n:03d}]]"
        path.write_text(f"---\ntitle: Note {i}\n---\n# Note {i}\n\n" + "\n\n".join(paras)
                        + f"\n\nSee {links}.\n", encoding="utf-8")


def index_with(root: Path, settings: Settings, mode: str, **kw: Any) -> tuple[Vault, Any]:
    vault = open_vault(root, settings)
    vault.indexer.embed_mode = mode  # type: ignore[assignment]
    vault.indexer.pipeline_start_after = kw.pop("start_after", 8)
    return vault, vault.index(**kw)


def snapshot(vault: Vault) -> dict[str, Any]:
    """Everything an index run produces: state rows, BM25 tokens, graph edges, vectors."""
    ids = sorted(vault.state.all_block_ids())
    vecs = vault.vector.embeddings(ids)
    files = {p: (r.stamp, r.frontmatter, r.links) for p, r in vault.state.files().items()}
    blocks = {b: (r.path, r.idx, r.start_line, r.end_line, r.hash, r.heading, r.text)
              for b, r in vault.state.blocks_by_id(ids).items()}
    return {"files": files, "blocks": blocks, "ids": ids,
            "tokens": {b: vault.keyword.tokens_of(b) for b in ids},
            "graph": vault.graph.export_state(),
            "vectors": np.stack([vecs[b] for b in ids]), "count": vault.vector.count()}


def copies(tmp_path: Path, n: int, names: list[str]) -> list[Path]:
    roots = []
    for name in names:
        root = tmp_path / name
        make_notes(root, n)
        roots.append(root)
    return roots


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_pipeline_gives_the_same_index_as_the_sequential_path(tmp_path: Path, mode: str) -> None:
    inline_root, piped_root = copies(tmp_path, 60, ["inline", mode])
    inline, r1 = index_with(inline_root, HASH, "inline")
    piped, r2 = index_with(piped_root, HASH, mode)
    try:
        assert piped.indexer.last_embed_mode == mode
        assert inline.indexer.last_embed_mode == "inline"
        assert (r1.files, r1.blocks, r1.embedded) == (r2.files, r2.blocks, r2.embedded)
        assert r2.embedded == r2.blocks > 8 * 8
        a, b = snapshot(inline), snapshot(piped)
        assert np.array_equal(a.pop("vectors"), b.pop("vectors"))
        assert a == b
        # Incremental runs after the pipeline: an edit re-embeds its blocks, a no-op none.
        note = piped_root / "knowledge/n005/n005.md"
        note.write_text(note.read_text().replace("# Note 5\n", "# Note 5\n\nA new line.\n"))
        edit = piped.index()
        assert 1 <= edit.embedded <= 2 and piped.vector.count() == edit.blocks
        assert piped.index().embedded == 0
    finally:
        inline.close()
        piped.close()


def test_small_runs_embed_inline_without_starting_anything(tmp_path: Path) -> None:
    [root] = copies(tmp_path, 3, ["v"])
    vault, report = index_with(root, HASH, "auto", start_after=512)
    try:
        assert vault.indexer.last_embed_mode == "inline"
        assert report.embedded == report.blocks == vault.vector.count()
        path = root / "knowledge/n001/n001.md"
        path.write_text(path.read_text() + "\nOne more paragraph.\n")
        vault.indexer.pipeline_start_after = 0   # a path-limited run never pipelines
        vault.refresh(["knowledge/n001/n001.md"])
        assert vault.indexer.last_embed_mode == "inline"
    finally:
        vault.close()


@pytest.mark.slow
def test_use_vectors_are_identical_through_the_embedding_process(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    monkeypatch.setenv("REME_CACHE_DIR", str(tmp_path / "cache"))
    use = Settings(embedder={"name": "use"}, index={"progress": False})
    inline_root, piped_root = copies(tmp_path, 25, ["inline", "process"])
    inline, _ = index_with(inline_root, use, "inline")
    piped, _ = index_with(piped_root, use, "process")
    try:
        assert piped.indexer.last_embed_mode == "process"
        a, b = snapshot(inline), snapshot(piped)
        assert a["ids"] == b["ids"]
        assert np.array_equal(a["vectors"], b["vectors"])
    finally:
        inline.close()
        piped.close()


def test_an_embedding_process_that_dies_before_it_is_ready_is_replaced_by_a_thread(
        tmp_path: Path) -> None:
    [root] = copies(tmp_path, 60, ["v"])
    vault = open_vault(root, HASH)
    try:
        vault.indexer.embed_mode = "process"
        vault.indexer.pipeline_start_after = 8
        killer = KillChildAfter(3)          # right after it was started
        report = vault.index(progress=killer)
        assert killer.killed
        assert vault.indexer.last_embed_mode == "thread"
        assert report.embedded == report.blocks == vault.vector.count()
    finally:
        vault.close()


def test_without_a_python_to_start_the_run_embeds_in_a_thread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    [root] = copies(tmp_path, 30, ["v"])
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    vault, report = index_with(root, HASH, "process")
    try:
        assert vault.indexer.last_embed_mode == "thread"
        assert report.embedded == report.blocks == vault.vector.count()
    finally:
        vault.close()


def _children() -> list[int]:
    """This process's embedding processes (only those: other tests may leave others)."""
    pids = []
    for task in os.listdir(f"/proc/{os.getpid()}/task"):
        with open(f"/proc/{os.getpid()}/task/{task}/children") as f:
            for pid in f.read().split():
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as cmd:
                        if b"reme_agent.engine.embed_child" in cmd.read():
                            pids.append(int(pid))
                except FileNotFoundError:
                    continue
    return pids


class KillChildAfter:
    """A progress sink that kills the embedding process after `n` files were read."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.killed: list[int] = []

    def __call__(self, stage: str, total: int, unit: str) -> Any:
        sink = self

        class Bar:
            seen = 0

            def update(self, k: int = 1) -> None:
                Bar.seen += k
                if stage == "reading" and Bar.seen == sink.n:
                    for pid in _children():
                        os.kill(pid, signal.SIGKILL)
                        sink.killed.append(pid)

            def close(self) -> None:
                return None

        return Bar()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_dead_embedding_process_fails_the_run_and_the_next_run_catches_up(
        tmp_path: Path) -> None:
    [root] = copies(tmp_path, 200, ["v"])   # ~1000 blocks
    vault = open_vault(root, HASH)
    try:
        vault.indexer.embed_mode = "process"
        vault.indexer.pipeline_start_after = 8
        # By file 150 (~750 blocks) the child is serving: before it is ready the reader can
        # only get 8 batches (512 blocks) ahead, then waits for it.
        killer = KillChildAfter(150)
        with pytest.raises(BackendError, match="embedding process"):
            vault.index(progress=killer)
        assert killer.killed
        assert vault.state.get_meta("vectors_dirty") == "1"
        assert vault.vector.count() < len(vault.state.all_block_ids())
        report = vault.index()                    # the next run re-embeds what is missing
        assert vault.vector.count() == report.blocks == len(vault.state.all_block_ids())
        assert vault.state.get_meta("vectors_dirty") == "0"
        assert _children() == []
    finally:
        vault.close()


class Recorder:
    """A progress sink that records each stage's total and the updates it got."""

    def __init__(self) -> None:
        self.stages: dict[str, list[int]] = {}

    def __call__(self, stage: str, total: int, unit: str) -> Any:
        got = self.stages.setdefault(stage, [total])

        class Bar:
            def update(self, k: int = 1) -> None:
                got.append(k)

            def close(self) -> None:
                return None

        return Bar()


@pytest.mark.parametrize("mode", ["inline", "thread", "process"])
def test_the_embedding_bar_counts_exactly_the_blocks_left_after_reading(
        tmp_path: Path, mode: str) -> None:
    [root] = copies(tmp_path, 60, ["v"])
    vault = open_vault(root, HASH)
    try:
        vault.indexer.embed_mode = mode  # type: ignore[assignment]
        vault.indexer.pipeline_start_after = 8
        bars = Recorder()
        report = vault.index(progress=bars)
        reading = bars.stages["reading"]
        assert reading[0] == 60 and sum(reading[1:]) == 60
        total, *updates = bars.stages.get("embedding", [0])
        assert 0 < total <= report.embedded and sum(updates) == total
        if mode == "inline":
            assert total == report.embedded
    finally:
        vault.close()
