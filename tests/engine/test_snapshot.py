"""Cold-open snapshot: loading it must give the same BM25 and graph as rebuilding from state."""

from __future__ import annotations

import logging
import mmap
import random
from pathlib import Path

import numpy as np
import pytest

from reme_agent.config import Settings
from reme_agent.engine.indexer import Indexer
from reme_agent.engine.snapshot import DELTA_NAME, SNAPSHOT_NAME
from reme_agent.vault import Vault, open_vault

HASH = Settings(embedder={"name": "hash"}, index={"progress": False})
QUERIES = ["fusion rank", "okapi saturation", "中文 分词", "links graph", "bm25"]


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "v"
    write(root, "knowledge/rrf.md", "# RRF\n\nReciprocal rank fusion merges ranked lists.\n\n"
                                    "See [[bm25]] and [[missing note]].\n")
    write(root, "knowledge/bm25.md", "---\naliases: [okapi]\n---\n# BM25\n\n"
                                     "Okapi term frequency ranking with saturation.\n")
    write(root, "knowledge/分词.md", "# 中文分词\n\n中文检索之前需要用结巴进行分词处理。[[rrf]]\n")
    for i in range(6):
        write(root, f"daily/d{i}.md", f"# Day {i}\n\nNotes about links graph {i}. [[okapi]]\n")
    return root


def fingerprint(v: Vault) -> tuple:
    """Everything a cold open must restore: BM25 rankings with scores, block paths, graph."""
    v.ready()
    graph = v.graph.export_state()
    nodes = graph["nodes"]
    edges = sorted((nodes[s], nodes[t], tuple(map(str, p))) for s, t, p in graph["edges"])
    flags = sorted(zip(nodes, graph["dangling"], strict=True))
    # equal scores keep the order their blocks were indexed in, which a patched cold open and
    # a rebuild reach by different routes: compare ties as sets
    ranks = [sorted(((d, round(s, 9)) for d, s in v.keyword.query(q, 50)),
                    key=lambda hit: (-hit[1], hit[0])) for q in QUERIES]
    return ranks, dict(v.indexer.block_paths), edges, flags


def cold(root: Path) -> Vault:
    return open_vault(root, HASH)


def rebuilt(root: Path) -> tuple:
    """The reference: projections rebuilt from index.sqlite with no snapshot at all."""
    files = [root / ".reme" / SNAPSHOT_NAME, root / ".reme" / DELTA_NAME]
    saved = {f: f.read_bytes() for f in files if f.exists()}
    for f in files:
        f.unlink(missing_ok=True)
    v = cold(root)
    try:
        return fingerprint(v)
    finally:
        v.indexer._loaded = False  # do not let close() write one
        v.close()
        for f, data in saved.items():
            f.write_bytes(data)


def test_index_writes_a_snapshot_and_a_cold_open_loads_it(root: Path) -> None:
    with cold(root) as v:
        v.index()
    assert (root / ".reme" / SNAPSHOT_NAME).is_file()
    with cold(root) as v2:
        got = fingerprint(v2)
        assert v2.indexer._snapshot_generation == v2.state.generation()
    assert got == rebuilt(root)
    assert got[0][0], "the query must match something, or the comparison proves nothing"


def test_changes_after_the_snapshot_are_patched_in_on_open(root: Path) -> None:
    with cold(root) as v:
        v.index()
        snap_gen = v.indexer._snapshot_generation
        (root / "knowledge/bm25.md").write_text(
            "# BM25\n\nOkapi saturation, now linking [[missing note]].\n", encoding="utf-8")
        (root / "daily/d0.md").unlink()
        write(root, "missing note.md", "# Missing\n\nIt exists now: links graph fusion.\n")
        v.refresh(["knowledge/bm25.md", "daily/d0.md", "missing note.md"])
        # a path-limited run of a few files does not rewrite the snapshot ...
        assert v.indexer._snapshot_generation == snap_gen < v.state.generation()
        v.indexer._changed_since_snapshot = 0   # ... and neither may close(), for this test
    with cold(root) as v2:
        got = fingerprint(v2)
        assert v2.indexer._snapshot_generation == snap_gen  # loaded the old one, then patched
    assert got == rebuilt(root)
    ranks, block_paths, edges, flags = got
    assert "daily/d0.md" not in block_paths.values()
    assert ("knowledge/rrf.md", "missing note.md", ("None",)) in edges
    assert ("missing note.md", False) in flags


def test_small_changes_go_into_the_delta_and_a_cold_open_replays_it(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with cold(root) as v:
        v.index()
        snap_gen = v.indexer._snapshot_generation
        write(root, "new.md", "# New\n\nfusion [[rrf]] and [[okapi]]\n")
        v.refresh(["new.md"])
        write(root, "knowledge/bm25.md", "---\naliases: [saturation]\n---\n# BM25\n\nterms\n")
        v.index()    # a whole-vault run of one edit: no whole snapshot either
        assert v.indexer._snapshot_generation == snap_gen < v.state.generation()
    assert (root / ".reme" / DELTA_NAME).read_text().count("\n") == 2
    rebuilds: list[int] = []
    real = Indexer._rebuild_graph
    monkeypatch.setattr(Indexer, "_rebuild_graph",
                        lambda self, files: (rebuilds.append(1), real(self, files)))
    with cold(root) as v2:
        got = fingerprint(v2)
        assert "new.md" in v2.indexer.block_paths.values()
        assert v2.indexer._snapshot_generation == snap_gen
    assert rebuilds == [], "the delta covers every change: no link had to be resolved"
    monkeypatch.undo()
    assert got == rebuilt(root)


@pytest.mark.parametrize("damage", ["lost", "torn"])
def test_a_change_the_delta_misses_rebuilds_the_graph(root: Path, damage: str) -> None:
    with cold(root) as v:
        v.index()
        write(root, "knowledge/bm25.md", "# BM25\n\nNow it links [[分词]] and [[nowhere]].\n")
        v.refresh(["knowledge/bm25.md"])
    delta = root / ".reme" / DELTA_NAME
    if damage == "lost":   # the process died between committing the run and the delta line
        delta.unlink()
    else:
        delta.write_bytes(delta.read_bytes()[:-9])
    with cold(root) as v2:
        got = fingerprint(v2)
    assert got == rebuilt(root)
    assert ("knowledge/bm25.md", "nowhere", ("None",)) in got[2]


def test_a_whole_snapshot_is_written_once_enough_files_changed(root: Path) -> None:
    with cold(root) as v:
        v.index()
        first = v.indexer._snapshot_generation
        for i in range(60):
            write(root, f"bulk/n{i}.md", f"# Bulk {i}\n\nlinks graph [[rrf]]\n")
        v.index()
        assert v.indexer._snapshot_generation == v.state.generation() > first
    assert not (root / ".reme" / DELTA_NAME).exists()


def test_a_cold_open_maps_the_snapshot_instead_of_reading_it(root: Path) -> None:
    with cold(root) as v:
        v.index()
    with cold(root) as v2:
        v2.ready()
        kw = v2.keyword
        for arr in (kw._base_post, kw._base_tid, kw._base_tf):
            assert not arr.flags.owndata and not arr.flags.writeable
            owner = arr
            while isinstance(owner, np.ndarray | memoryview):
                owner = owner.base if isinstance(owner, np.ndarray) else owner.obj
            assert isinstance(owner, mmap.mmap)


@pytest.mark.parametrize("seed", [1, 2])
def test_cold_opens_after_random_runs_equal_a_rebuild(tmp_path: Path, seed: int) -> None:
    """Edits, new and deleted notes, alias changes, dangling links that start resolving:
    every cold open (snapshot + delta + patch) equals projections rebuilt from the state."""
    rng = random.Random(seed)
    root = tmp_path / "v"
    names = ["alpha", "beta", "gamma", "delta", "eps"]
    for name in names[:3]:
        write(root, f"{name}.md", f"# {name}\n\nseed text [[{names[3]}]]\n")
    for step in range(8):
        with cold(root) as v:
            for _ in range(rng.randint(1, 3)):
                name = rng.choice(names)
                path = root / f"{rng.choice(['', 'sub/'])}{name}.md"
                if path.exists() and rng.random() < 0.3:
                    path.unlink()
                    continue
                aliases = rng.sample(["Alias One", "okapi", "beta"], rng.randint(0, 2))
                links = " ".join(f"[[{rng.choice(names + ['Alias One', 'okapi'])}]]"
                                 for _ in range(rng.randint(0, 3)))
                front = f"---\naliases: [{', '.join(aliases)}]\n---\n" if aliases else ""
                write(root, path.relative_to(root).as_posix(),
                      f"{front}# {name} {step}\n\nfusion text {rng.randint(0, 9)} {links}\n")
            if rng.random() < 0.5:
                v.index()
            else:
                v.refresh([p.relative_to(root).as_posix() for p in root.rglob("*.md")
                           if ".reme" not in p.parts])
        with cold(root) as v2:
            got = fingerprint(v2)
        assert got == rebuilt(root), f"step {step}"


@pytest.mark.parametrize("damage", [b"not a snapshot at all", b"REMESNAP\xff\xff\xff\xff",
                                    b"REMESNAP" + b"\x40" + b"\0" * 7 + b"\xff" * 8])
def test_an_unreadable_snapshot_is_ignored_with_a_warning(root: Path, damage: bytes,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    with cold(root) as v:
        v.index()
    reference = rebuilt(root)
    (root / ".reme" / SNAPSHOT_NAME).write_bytes(damage)
    with caplog.at_level(logging.WARNING, logger="reme_agent.index"), cold(root) as v2:
        assert fingerprint(v2) == reference
    assert any(SNAPSHOT_NAME in r.getMessage() for r in caplog.records)


def test_a_snapshot_of_another_format_is_not_used(root: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    with cold(root) as v:
        v.index()
    reference = rebuilt(root)
    monkeypatch.setattr("reme_agent.engine.snapshot.SNAPSHOT_FORMAT", 999)
    with cold(root) as v2:
        assert fingerprint(v2) == reference
        assert v2.indexer._snapshot_generation == -1
