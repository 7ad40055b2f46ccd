"""Never stale (DESIGN §7): search checks its candidates' files before answering."""

from __future__ import annotations

import os
from pathlib import Path

from reme_agent.recall.search import search
from reme_agent.vault import open_vault
from tests.recall.conftest import SETTINGS, VaultFactory, note

QUERY = "platypus venom spurs"
HIT = "Platypus venom spurs are found on the hind legs of males."
OTHER = "Platypus bills sense the electric fields of their prey."


def _bump(path: Path) -> None:
    """Move the mtime forward so an edit within the same clock tick still shows."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))


def test_a_deleted_note_is_never_returned(make_vault: VaultFactory) -> None:
    vault = make_vault({"knowledge/a/a.md": note(HIT), "knowledge/b/b.md": note(OTHER)})
    assert "knowledge/a/a.md" in [n.path for n in search(vault, QUERY, log_access=False).results]
    (vault.root / "knowledge/a/a.md").unlink()
    response = search(vault, QUERY, log_access=False)
    assert "knowledge/a/a.md" not in [n.path for n in response.results]
    assert response.index_freshness["reindexed"] == ["knowledge/a/a.md"]
    # the index itself followed: the note is gone from the state, not just hidden once
    assert vault.state.file("knowledge/a/a.md") is None


def test_an_edited_note_shows_its_new_text_not_the_old_chunk(make_vault: VaultFactory) -> None:
    vault = make_vault({"knowledge/a/a.md": note(HIT)})
    search(vault, QUERY, log_access=False)
    file = vault.root / "knowledge/a/a.md"
    file.write_text(note("Platypus venom spurs: only adult males carry working venom."),
                    encoding="utf-8")
    _bump(file)
    response = search(vault, QUERY, log_access=False)
    chunks = [c.text for n in response.results for c in n.chunks]
    assert any("only adult males" in c for c in chunks)
    assert not any("hind legs" in c for c in chunks)


def test_a_note_that_cannot_be_reindexed_is_dropped_with_a_warning(
        make_vault: VaultFactory, monkeypatch: object) -> None:
    vault = make_vault({"knowledge/a/a.md": note(HIT), "knowledge/b/b.md": note(OTHER)})
    (vault.root / "knowledge/a/a.md").unlink()

    def refuse(paths: list[str]) -> None:
        raise OSError("read-only vault")

    monkeypatch.setattr(vault, "refresh", refuse)  # type: ignore[attr-defined]
    response = search(vault, QUERY, log_access=False)
    assert "knowledge/a/a.md" not in [n.path for n in response.results]
    assert response.index_freshness["dropped"] == ["knowledge/a/a.md"]
    assert any("could not be re-indexed" in w for w in response.warnings)


def test_a_never_indexed_vault_says_run_index(tmp_path: Path) -> None:
    root = tmp_path / "v"
    (root / "knowledge/a").mkdir(parents=True)
    (root / "knowledge/a/a.md").write_text(note(HIT), encoding="utf-8")
    with open_vault(root, SETTINGS) as vault:
        response = search(vault, QUERY, log_access=False)
        assert response.results == []
        assert response.index_freshness["indexed_files"] == 0
        assert any("reme-agent index" in w for w in response.warnings)
        assert "reme-agent index" in response.render()


def test_new_files_the_index_has_not_seen_are_counted(make_vault: VaultFactory) -> None:
    vault = make_vault({"knowledge/a/a.md": note(HIT)})
    (vault.root / "knowledge/new").mkdir(parents=True)
    (vault.root / "knowledge/new/new.md").write_text(note(OTHER), encoding="utf-8")
    response = search(vault, QUERY, log_access=False)
    assert response.index_freshness["unindexed_files"] == 1
    assert any("1 note file(s)" in w for w in response.warnings)
