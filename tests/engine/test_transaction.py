"""Multi-file transactions: stamps checked first, all or nothing, byte-exact rollback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from reme_agent.engine.retarget import retarget
from reme_agent.engine.transaction import Transaction
from reme_agent.errors import StampChanged
from reme_agent.vault import open_vault
from tests.maintenance.conftest import SETTINGS, VaultFactory, knowledge

A, B, C = "knowledge/a/a.md", "knowledge/b/b.md", "knowledge/c/c.md"


@pytest.fixture
def make_vault(tmp_path: Path) -> Iterator[VaultFactory]:
    """build(notes) -> a vault on disk (not indexed: a plan reads the files themselves)."""
    made = []

    def build(notes: dict[str, str]):
        root = tmp_path / "vault"
        for rel, text in notes.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text, encoding="utf-8")
        made.append(open_vault(root, SETTINGS, create=True))
        return made[-1]

    yield build
    for vault in made:
        vault.close()


def test_commit_creates_writes_and_deletes(make_vault: VaultFactory) -> None:
    vault = make_vault({A: knowledge("A", "one"), B: knowledge("B", "two")})
    tx = Transaction(vault.store)
    tx.write(A, tx.read(A).replace("one", "uno"))
    with pytest.raises(ValueError):
        tx.write(C, "not read first\n")
    tx.delete(B)
    tx.create(C, "new\n")
    assert tx.planned == {A: "write", B: "delete", C: "create"}
    assert sorted(tx.commit()) == [A, B, C]
    assert "uno" in vault.store.read_text(A)
    assert not vault.store.exists(B)
    assert vault.store.read_text(C) == "new\n"


def test_a_changed_stamp_refuses_the_whole_plan_before_writing(make_vault: VaultFactory) -> None:
    vault = make_vault({A: knowledge("A", "one"), B: knowledge("B", "two")})
    tx = Transaction(vault.store)
    tx.read(A)
    tx.write(A, "changed\n")
    tx.read(B)                                       # a read-only dependency counts too
    vault.store.write(B, "someone else\n")
    before = vault.store.read_text(A)
    with pytest.raises(StampChanged):
        tx.commit()
    assert vault.store.read_text(A) == before


def test_a_failure_mid_commit_rolls_back_byte_for_byte(make_vault: VaultFactory,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    vault = make_vault({A: knowledge("A", "one"), B: knowledge("B", "two")})
    raw_a = (vault.root / A).read_bytes()
    raw_b = (vault.root / B).read_bytes()
    tx = Transaction(vault.store)
    tx.write(A, tx.read(A) + "rewritten\n")
    tx.write(B, tx.read(B) + "rewritten\n")
    tx.create(C, "new\n")
    real = vault.store.write_if_unchanged

    def fail_on_b(path: str, text: str, stamp: str | None) -> str:
        if path == B:
            raise OSError("disk on fire")
        return real(path, text, stamp)

    monkeypatch.setattr(vault.store, "write_if_unchanged", fail_on_b)
    with pytest.raises(OSError):
        tx.commit()
    assert (vault.root / A).read_bytes() == raw_a    # written, then restored
    assert (vault.root / B).read_bytes() == raw_b
    assert not vault.store.exists(C)                  # created, then removed
    assert not list((vault.root / ".reme").glob("journal/*.json"))   # the journal went too


def test_retarget_rewrites_only_links_whose_meaning_changes(make_vault: VaultFactory) -> None:
    vault = make_vault({
        A: knowledge("Alpha", "x"),
        B: knowledge("B", f"full:: [[{A}|the A]] and short [[a]] and [[c]]"),
    })
    view = vault.view()
    renamed = "knowledge/z/z.md"
    tx = Transaction(vault.store)
    assert retarget(tx, view, {A: renamed}, view.after({A: renamed})) == {B: 2}
    new = tx.new_text(B)
    assert f"full:: [[{renamed}|the A]]" in new     # alias and predicate kept
    assert "short [[z|a]]" in new  # a bare short link stays short, its text kept as shown text
    assert "[[c]]" in new                           # dangling: left as written
    # Under archive/ the old full path still resolves (path-suffix match): nothing to rewrite.
    moved = "archive/knowledge/a/a.md"
    assert retarget(Transaction(vault.store), view, {A: moved}, view.after({A: moved})) == {}


def test_a_move_is_journalled_before_any_file_changes(make_vault: VaultFactory,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The journal (old and new bytes of every file) is on disk before the first write."""
    import base64
    import json

    vault = make_vault({A: knowledge("A", "one"), B: knowledge("B", "see [[a]]")})
    seen: list[dict] = []
    real = vault.store.write_if_unchanged

    def first_write(path: str, text: str | bytes, stamp: str | None) -> str:
        if not seen:
            seen.extend(json.loads(p.read_bytes())
                        for p in (vault.root / ".reme").glob("journal/*.json"))
        return real(path, text, stamp)

    monkeypatch.setattr(vault.store, "write_if_unchanged", first_write)
    tx = Transaction(vault.store)
    tx.write(B, tx.read(B).replace("[[a]]", "[[knowledge/z/z.md|a]]"))
    tx.move(A, "knowledge/z/z.md")
    assert sorted(tx.commit()) == [A, B, "knowledge/z/z.md"]
    (journal,) = seen
    assert journal["state"] == "prepared" and [s["op"] for s in journal["steps"]] == ["write", "move"]
    write = journal["steps"][0]
    assert base64.b64decode(write["old"]).decode() == knowledge("B", "see [[a]]")
    assert not list((vault.root / ".reme").glob("journal/*"))    # removed after the commit
