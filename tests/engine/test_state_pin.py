"""`IndexState.pinned`: one generation read per search, never a stale in-memory index."""

from __future__ import annotations

from pathlib import Path

import pytest

from reme_agent.config import Settings
from reme_agent.engine.state import IndexState
from reme_agent.recall.search import search, search_blocks
from reme_agent.vault import open_vault

HASH = Settings(embedder={"name": "hash"}, index={"progress": False})


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _count_reads(state: IndexState, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []
    real = state.get_meta

    def get_meta(key: str) -> str | None:
        reads.append(key)
        return real(key)
    monkeypatch.setattr(state, "get_meta", get_meta)
    return reads


def test_inside_a_pin_the_generation_is_read_once_and_own_bumps_show(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = IndexState(tmp_path / "index.sqlite")
    other = IndexState(tmp_path / "index.sqlite")     # another process's connection
    reads = _count_reads(state, monkeypatch)
    with state.pinned():
        first = state.generation()
        assert [state.generation() for _ in range(5)] == [first] * 5
        assert reads.count("generation") == 1
        other.bump_generation()                        # committed elsewhere meanwhile
        assert state.generation() == first             # this span keeps its view ...
        assert state.generation(fresh=True) == first + 1   # ... an index run does not
        with state.pinned():                           # nested: the same span
            assert state.bump_generation() == first + 2    # its own bump shows at once
        assert state.generation() == first + 2
    assert state.generation() == first + 2
    assert other.generation() == first + 2
    state.close()
    other.close()


def test_a_search_reads_the_generation_once(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "v"
    for i in range(6):
        _write(root, f"knowledge/n{i}/n{i}.md", f"# Note {i}\n\nPlatypus venom spurs {i}.\n\n"
                                                f"See [[n{(i + 1) % 6}]].\n")
    with open_vault(root, HASH) as vault:
        vault.index()
        search(vault, "platypus venom", log_access=False)
        reads = _count_reads(vault.state, monkeypatch)
        response = search(vault, "platypus venom", log_access=False)
        assert response.results and reads.count("generation") == 1


def test_an_index_run_inside_a_pin_loads_what_another_process_committed(
        tmp_path: Path) -> None:
    root = tmp_path / "v"
    _write(root, "knowledge/a/a.md", "# Alpha\n\nAlpha notes about harbors.\n")
    with open_vault(root, HASH) as mine, open_vault(root, HASH) as theirs:
        mine.index()
        with mine.state.pinned():
            mine.ready()
            _write(root, "knowledge/b/b.md", "# Beta\n\nZeppelin mooring masts.\n")
            theirs.index()                         # another process commits meanwhile
            _write(root, "knowledge/a/a.md", "# Alpha\n\nAlpha notes about lighthouses.\n")
            mine.refresh(["knowledge/a/a.md"])     # our own run, inside the span
        # the run loaded theirs first: their note is searchable here, ours is current
        assert [h.path for h in search_blocks(mine, "zeppelin mooring", 3)][:1] == [
            "knowledge/b/b.md"]
        assert "lighthouses" in search_blocks(mine, "alpha lighthouses", 1)[0].text
