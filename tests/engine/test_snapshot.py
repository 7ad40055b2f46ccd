"""Cold-open snapshot: loading it must give the same BM25 and graph as rebuilding from state."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from reme_agent.config import Settings
from reme_agent.engine.snapshot import SNAPSHOT_NAME
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
    ranks = [[(d, round(s, 9)) for d, s in v.keyword.query(q, 50)] for q in QUERIES]
    return ranks, dict(v.indexer.block_paths), edges, flags


def cold(root: Path) -> Vault:
    return open_vault(root, HASH)


def rebuilt(root: Path) -> tuple:
    """The reference: projections rebuilt from index.sqlite with no snapshot at all."""
    snap = root / ".reme" / SNAPSHOT_NAME
    saved = snap.read_bytes() if snap.exists() else None
    snap.unlink(missing_ok=True)
    v = cold(root)
    try:
        return fingerprint(v)
    finally:
        v.indexer._changed_since_snapshot = 0  # do not let close() write one
        v.close()
        if saved is not None:
            snap.write_bytes(saved)


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


def test_close_writes_the_snapshot_that_path_limited_runs_postponed(root: Path) -> None:
    with cold(root) as v:
        v.index()
        write(root, "new.md", "# New\n\nfusion [[rrf]]\n")
        v.refresh(["new.md"])
        assert v.indexer._snapshot_generation < v.state.generation()
    with cold(root) as v2:
        v2.ready()
        assert v2.indexer._snapshot_generation == v2.state.generation()
        assert "new.md" in v2.indexer.block_paths.values()


@pytest.mark.parametrize("damage", [b"not a zip at all", b"PK\x03\x04garbage"])
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
