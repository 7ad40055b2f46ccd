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


def _many(n: int) -> dict[str, str]:
    return {f"knowledge/n{i}/n{i}.md": note(f"Platypus venom spurs, field note {i}: "
                                            f"{'venom ' * (n - i)}sample {i}.")
            for i in range(n)}


def _spy_stale(vault, monkeypatch) -> list[str]:  # noqa: ANN001
    from reme_agent.recall.freshness import check_for

    check, seen = check_for(vault), []
    real = check.stale

    def stale(root: str, paths):  # noqa: ANN001, ANN202
        paths = list(paths)
        seen.extend(paths)
        return real(root, paths)
    monkeypatch.setattr(check, "stale", stale)
    return seen


def test_when_nothing_changed_only_the_shown_notes_are_stat_ed(
        make_vault: VaultFactory, monkeypatch: object) -> None:
    vault = make_vault(_many(12))
    seen = _spy_stale(vault, monkeypatch)
    response = search(vault, QUERY, limit=2, expand_depth=0, log_access=False)
    shown = {n.path for n in response.results}
    assert len(shown) == 2
    assert set(seen) == shown      # not the other ten candidates


def test_hand_edits_among_the_candidates_are_reindexed_in_one_go(
        make_vault: VaultFactory, monkeypatch: object) -> None:
    vault = make_vault(_many(8))
    first = search(vault, QUERY, limit=1, expand_depth=0, log_access=False).results[0].path
    edited = sorted({first, "knowledge/n5/n5.md", "knowledge/n6/n6.md"})
    for rel in edited:
        file = vault.root / rel
        file.write_text(note(f"Platypus venom spurs, rewritten by hand in {rel}."),
                        encoding="utf-8")
        _bump(file)
    refreshed: list[list[str]] = []
    real = vault.refresh
    monkeypatch.setattr(vault, "refresh",  # type: ignore[attr-defined]
                        lambda paths: (refreshed.append(sorted(paths)), real(paths))[1])
    response = search(vault, QUERY, limit=1, expand_depth=0, log_access=False)
    assert refreshed == [edited]   # the shown note was stale: every changed candidate, once
    assert sorted(response.index_freshness["reindexed"]) == edited
    assert all("rewritten by hand" in c.text for n in response.results for c in n.chunks
               if n.path in edited)
