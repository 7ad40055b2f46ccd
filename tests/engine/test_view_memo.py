"""The per-process view memo (`engine.viewmemo`): a later view reads only what changed, and
never plans from a stale entry (hand edits, another process's index run, racy mtimes)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reme_agent.config import Settings
from reme_agent.engine.links import extract_links
from reme_agent.engine.store import FileStore
from reme_agent.engine.view import VaultView
from reme_agent.engine.viewmemo import ViewMemo
from reme_agent.toolkit.files import move
from reme_agent.vault import open_vault

from .test_retarget_keys import _state

EXT = (".md",)
_clock = [time.time_ns() - 3600 * 10**9]


def _age(path: Path) -> None:
    """Give the file a settled mtime (an hour ago), a new one each call."""
    _clock[0] += 1000
    os.utime(path, ns=(_clock[0], _clock[0]))


SETTINGS = Settings(embedder={"name": "hash"}, index={"progress": False})


def _write(root: Path, rel: str, text: str, *, settled: bool = True) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    if settled:
        _age(path)


class _Counting(FileStore):
    reads: list[str]

    def read_listed(self, rel):
        self.reads.append(rel)
        return super().read_listed(rel)


def _plain(store: FileStore) -> VaultView:
    return VaultView(store, {}, EXT)


def test_a_second_view_reads_only_the_notes_changed_since(tmp_path):
    root = tmp_path / "v"
    for i in range(20):
        _write(root, f"n{i}.md", f"[[n{(i + 1) % 20}]] ![[n{(i + 3) % 20}]] [m](n{i % 7}.md)\n")
    store = _Counting(root)
    store.reads = []
    memo = ViewMemo()
    asked: list[list[str]] = []

    def rows(paths):
        asked.append(list(paths))
        return {}

    first = VaultView(store, rows, EXT, memo=memo)
    assert all(first.names_any(p, {"n1"}) in (True, False) for p in first.notes)
    assert len(store.reads) == 20 and asked == [sorted(first.notes)]

    _write(root, "n4.md", "now [[n9]] only\n")
    store.reads, asked[:] = [], []
    second = VaultView(store, rows, EXT, memo=memo)
    picked = {p for p in second.notes if second.names_any(p, {"n9"})}
    assert store.reads == ["n4.md"] and asked == [["n4.md"]]
    plain = _plain(FileStore(root))
    assert picked == {p for p in plain.notes if plain.names_any(p, {"n9"})}
    assert _state(second.resolver) == _state(plain.resolver)
    assert {p: (m.frontmatter, m.links, m.stamp) for p, m in second.notes.items()} == {
        p: (m.frontmatter, m.links, m.stamp) for p, m in plain.notes.items()}
    assert second.refs("n4.md") == [] and second.refs("n5.md") == plain.refs("n5.md")


def test_the_resolver_follows_every_change_between_views(tmp_path):
    """Added, removed, renamed files, aliases and merge records changed by hand: the kept
    resolver, derived view after view, is the one a fresh view builds."""
    root = tmp_path / "v"
    rng = random.Random(7)
    memo = ViewMemo()
    names = ["a", "b", "k/a", "k/k", "新 笔记", "img.png", "x.md"]
    for step in range(40):
        rel = rng.choice(names)
        rel = rel if rel.endswith(".png") else rel + ".md"
        path = root / rel
        action = rng.choice(["write", "alias", "merged", "delete"])
        if action == "delete":
            if path.exists():
                path.unlink()
        elif action == "alias":
            _write(root, rel, f"---\naliases: [{rng.choice(['nick', 'a', 'B'])}]\n---\n[[a]]\n")
        elif action == "merged":
            _write(root, rel, "---\nmerged_from:\n  - path: old/gone.md\n    title: Gone\n"
                              "    merged: 2026-01-01\n---\nbody\n")
        else:
            _write(root, rel, f"plain {step}\n", settled=rng.random() < 0.7)
        memoed = VaultView(FileStore(root), {}, EXT, memo=memo)
        assert _state(memoed.resolver) == _state(_plain(FileStore(root)).resolver), step


def test_a_fresh_mtime_is_never_kept(tmp_path):
    """Two writes of the same size in one clock tick leave the mtime as it was: an entry
    is kept only once its mtime is RACY_SECONDS old, so the second write is still read."""
    root = tmp_path / "v"
    _write(root, "n.md", "[[aaaa]]\n", settled=False)
    memo = ViewMemo()
    view = VaultView(FileStore(root), {}, EXT, memo=memo)
    assert "n.md" not in memo.notes
    st = (root / "n.md").stat()
    (root / "n.md").write_text("[[bbbb]]\n")
    os.utime(root / "n.md", ns=(st.st_atime_ns, st.st_mtime_ns))
    view = VaultView(FileStore(root), {}, EXT, memo=memo)
    assert [x.target for x in view.notes["n.md"].links] == ["bbbb"]


@pytest.fixture
def vault(tmp_path):
    root = tmp_path / "vault"
    for i in range(12):
        _write(root, f"knowledge/n{i}/n{i}.md", f"# n{i}\n\nSee [[n{(i + 1) % 12}]].\n")
    v = open_vault(root, SETTINGS, create=True)
    v.index()
    yield v
    v.close()


def test_a_hand_edit_since_the_last_view_and_index_is_planned_from_its_file(vault):
    """A link added by hand (no index run since, the memo holding the old note) is found
    and rewritten by the next move."""
    root = vault.root
    view = vault.view()
    assert not view.names_any("knowledge/n3/n3.md", {"n7"})   # memo now holds n3
    _write(root, "knowledge/n3/n3.md", "# n3\n\nSee [[n4]] and ![[n7]] and [[n7]].\n")
    move(vault, "knowledge/n7/n7.md", "knowledge/n7/seven.md")
    text = (root / "knowledge/n3/n3.md").read_text()
    assert "![[seven]]" in text and "[[seven]]" in text and "[[n7]]" not in text


def test_an_index_run_and_a_move_in_another_process_are_seen(vault):
    """Another process moves a note (rewriting links, re-indexing); this process's memo is
    keyed by file stats, not by its own index state, so its next plan sees the new vault."""
    root = vault.root
    view = vault.view()   # memo filled with every note as it was, keys and refs too
    assert not any(view.names_any(p, {"five", "cinq"}) for p in view.notes)
    code = (
        "import sys\n"
        "from reme_agent.config import Settings\n"
        "from reme_agent.toolkit.files import move\n"
        "from reme_agent.vault import open_vault\n"
        "v = open_vault(sys.argv[1], Settings(embedder={'name': 'hash'},"
        " index={'progress': False}))\n"
        "move(v, 'knowledge/n5/n5.md', 'knowledge/n5/five.md')\n"
        "v.index()\n"
        "v.close()\n")
    subprocess.run([sys.executable, "-c", code, str(root)], check=True, timeout=120)
    # Settle the files it wrote, so this process would keep them: still read, as changed.
    for p in ("knowledge/n4/n4.md", "knowledge/n5/five.md"):
        _age(root / p)
    result = move(vault, "knowledge/n5/five.md", "knowledge/n5/cinq.md")
    assert result.data["rewritten"] == [{"path": "knowledge/n4/n4.md", "links": 1}]
    assert [x.target for x in extract_links((root / "knowledge/n4/n4.md").read_text())] == [
        "cinq"]


def test_lazy_notes_give_what_an_eager_view_gives(vault):
    vault.view()
    _write(vault.root, "knowledge/n2/n2.md", "---\naliases: [two]\n---\n[[n3]] [[two]]\n")
    lazy = vault.view()
    eager = VaultView(vault.store, vault.index_rows(), EXT, vault.settings.index.max_file_bytes)
    assert list(lazy.notes) == list(eager.notes)
    assert "knowledge/n2/n2.md" in lazy.notes and "nope.md" not in lazy.notes
    assert lazy.notes["knowledge/n2/n2.md"].frontmatter == {"aliases": ["two"]}
    assert [(p, m.links, m.frontmatter) for p, m in lazy.notes.items()] == [
        (p, m.links, m.frontmatter) for p, m in eager.notes.items()]
    with pytest.raises(KeyError):
        lazy.notes["nope.md"]


def test_the_next_process_starts_from_the_saved_memo(tmp_path):
    """A one-shot call (a CLI `move`) reads only the notes changed since the last process
    closed its vault; a hand edit in between is read; a damaged file is ignored."""
    root = tmp_path / "v"
    for i in range(15):
        _write(root, f"n{i}.md", f"[[n{(i + 1) % 15}]] ![[n{(i + 4) % 15}]]\n")
    with open_vault(root, SETTINGS, create=True) as first:
        view = first.view()
        assert not any(view.names_any(p, {"zz"}) for p in view.notes)   # keys of every note
    assert (first.internal / "viewmemo.json").is_file()
    _write(root, "n3.md", "[[n9]] and [[n12]]\n")   # by hand, between the two processes

    with open_vault(root, SETTINGS) as second:
        reads: list[str] = []
        real = second.store.read_listed
        second.store.read_listed = lambda rel: reads.append(rel) or real(rel)
        result = move(second, "n12.md", "twelve.md")
        assert {r["path"] for r in result.data["rewritten"]} == {"n11.md", "n3.md", "n8.md"}
        assert set(reads) <= {"n12.md", "n3.md", "n11.md", "n8.md"}   # the moved and candidates
    assert "[[twelve]]" in (root / "n3.md").read_text()

    (second.internal / "viewmemo.json").write_text('{"version": 1, "notes": [["n1.md", "x"')
    with open_vault(root, SETTINGS) as third:
        result = move(third, "twelve.md", "n12.md")
        assert {r["path"] for r in result.data["rewritten"]} == {"n11.md", "n3.md", "n8.md"}


def test_a_call_that_learned_nothing_does_not_rewrite_the_memo(tmp_path):
    root = tmp_path / "v"
    for i in range(5):
        _write(root, f"n{i}.md", f"[[n{(i + 1) % 5}]]\n")
    with open_vault(root, SETTINGS, create=True) as first:
        view = first.view()
        view.names_any("n1.md", {"n2"})
    saved = first.internal / "viewmemo.json"
    before = saved.stat().st_mtime_ns
    with open_vault(root, SETTINGS) as second:
        second.view().names_any("n1.md", {"n2"})   # known already
    assert saved.stat().st_mtime_ns == before
    with open_vault(root, SETTINGS) as third:
        view = third.view()
        assert all(view.names_any(p, {"n2"}) in (True, False) for p in view.notes)
    assert saved.stat().st_mtime_ns != before   # keys of four more notes were learned
