"""A view with no memo (a new vault, `.reme/viewmemo.json` gone) takes the keys of a note's
embeds, Markdown links and property links from the index (`refkeys`) while the note's row
matches its file, instead of reading every note; a hand edit, or an index from before the
keys were kept (DOCUMENTS_VERSION "3"), is read from the file as before."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

from reme_agent.config import Settings
from reme_agent.engine.indexer import DOCUMENTS_KEY, DOCUMENTS_VERSION
from reme_agent.engine.store import FileStore
from reme_agent.engine.view import VaultView
from reme_agent.toolkit.files import move
from reme_agent.vault import Vault, open_vault

from .test_retarget_keys import _random_vault

SETTINGS = Settings(embedder={"name": "hash"}, index={"progress": False})
MOVED, TO = "knowledge/n7/n7.md", "knowledge/n7/seven.md"
# the notes naming n7: by wikilink (the ring), embed, Markdown link, property link
NAMING = {"knowledge/n6/n6.md", "knowledge/e/e.md", "knowledge/m/m.md", "knowledge/p/p.md"}
_clock = [time.time_ns() - 3600 * 10**9]


def _write(root: Path, rel: str, text: str) -> None:
    """Write with a settled mtime (an hour ago), a new one each call."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    _clock[0] += 1000
    os.utime(path, ns=(_clock[0], _clock[0]))


def _indexed_vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    for i in range(20):   # every note also embeds or links some other note
        _write(root, f"knowledge/n{i}/n{i}.md", f"# n{i}\n\nSee [[n{(i + 1) % 20}]].\n"
               f"![[n{(i + 5) % 20 if i % 20 != 2 else 3}]] [m](../n2/n2.md)\n")
    _write(root, "knowledge/e/e.md", "# e\n\n![[n7]] embedded\n")
    _write(root, "knowledge/m/m.md", "# m\n\n[see](../n7/n7.md)\n")
    _write(root, "knowledge/p/p.md", '---\nrelated: "[[n7]]"\n---\n# p\n')
    with open_vault(root, SETTINGS, create=True) as vault:
        vault.index()
    (vault.internal / "viewmemo.json").unlink(missing_ok=True)   # no process saw a view
    return root


def _count_reads(vault: Vault) -> list[str]:
    """Every file the vault's store reads from now on (all reads go through `_read_at`)."""
    reads: list[str] = []
    real = vault.store._read_at
    vault.store._read_at = lambda path, rel: reads.append(rel) or real(path, rel)
    return reads


def test_a_cold_move_reads_only_the_notes_naming_the_moved_one(tmp_path):
    """The embed, Markdown link and property link are found from the index's keys: the
    other 17 notes (each holding embeds and Markdown links of its own) are never read."""
    root = _indexed_vault(tmp_path)
    with open_vault(root, SETTINGS) as vault:
        reads = _count_reads(vault)
        result = move(vault, MOVED, TO)
        assert {r["path"] for r in result.data["rewritten"]} == NAMING
        assert set(reads) <= NAMING | {MOVED, TO}, sorted(set(reads) - NAMING)
    assert "![[seven]]" in (root / "knowledge/e/e.md").read_text()
    assert "[see](../n7/seven.md)" in (root / "knowledge/m/m.md").read_text()
    assert 'related: "[[seven]]"' in (root / "knowledge/p/p.md").read_text()


def test_a_note_edited_by_hand_after_indexing_is_read(tmp_path):
    """Same size, new mtime: the row (and its keys) no longer describe the file."""
    root = _indexed_vault(tmp_path)
    old = (root / "knowledge/n3/n3.md").read_text()
    assert "![[n8]]" in old
    _write(root, "knowledge/n3/n3.md", old.replace("![[n8]]", "![[n7]]"))
    with open_vault(root, SETTINGS) as vault:
        reads = _count_reads(vault)
        result = move(vault, MOVED, TO)
        assert {r["path"] for r in result.data["rewritten"]} == NAMING | {"knowledge/n3/n3.md"}
        assert set(reads) <= NAMING | {MOVED, TO, "knowledge/n3/n3.md"}
    assert "![[seven]]" in (root / "knowledge/n3/n3.md").read_text()


def test_an_index_from_before_the_keys_were_kept_is_not_trusted(tmp_path):
    """DOCUMENTS_VERSION "3": rows, but no reference keys until the next whole-vault run;
    every note is read as before, and nothing is missed."""
    root = _indexed_vault(tmp_path)
    with open_vault(root, SETTINGS) as vault:
        vault.state.set_meta(DOCUMENTS_KEY, "3")
        with vault.state._db:
            vault.state._db.execute("DELETE FROM refkeys")
    with open_vault(root, SETTINGS) as vault:
        reads = _count_reads(vault)
        result = move(vault, MOVED, TO)
        assert {r["path"] for r in result.data["rewritten"]} == NAMING
        assert len(set(reads)) > len(NAMING) + 2   # the fallback: every note is read
        assert vault.state.get_meta(DOCUMENTS_KEY) == "3"   # a move is no whole-vault run
    assert "![[seven]]" in (root / "knowledge/e/e.md").read_text()


def test_the_index_is_asked_once_per_view_for_the_notes_no_memo_knows(tmp_path):
    root = _indexed_vault(tmp_path)
    with open_vault(root, SETTINGS) as vault:
        asked: list[list[str]] = []
        real = vault.state.ref_keys_at
        vault.state.ref_keys_at = lambda paths: asked.append(list(paths)) or real(paths)
        view = vault.view()
        picked = {p for p in view.notes if view.names_any(p, {"n7"})}
        assert picked == NAMING and len(asked) == 1 and set(asked[0]) == set(view.notes)

        asked.clear()
        _write(root, "knowledge/n4/n4.md", "# n4\n\nnow ![[n7]]\n")
        view = vault.view()   # every other note's keys are in the memo now
        picked = {p for p in view.notes if view.names_any(p, {"n7"})}
        assert picked == NAMING | {"knowledge/n4/n4.md"}
        assert asked == [["knowledge/n4/n4.md"]]


def test_the_keys_from_the_index_are_the_keys_from_the_files(tmp_path):
    """On 30 random vaults (every link form, names no key says) and awkward notes, the
    keys a view takes from the index equal the ones it reads from the files."""
    root = tmp_path / "vault"
    for i in range(30):
        (root / f"r{i}").mkdir(parents=True)
        _random_vault(root / f"r{i}", random.Random(i))
    odd = {
        "odd/broken.md": "---\nrelated: [[[x\n---\n![[n1]] [t](a%20b.md)\n",
        "odd/crlf.md": "---\r\nup: \"[[k/.]]\"\r\n---\r\n![[../]]\r\n[d]: <y z.md>\r\n",
        "odd/bom.md": "\ufeff---\nsee: ['![[img.png]]']\n---\n`![[code]]` <!-- ![[hidden]] -->\n",
        "odd/plain.md": "no references at all, only [[n2]]\n",
    }
    for rel, text in odd.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(text.encode("utf-8"))
    with open_vault(root, SETTINGS, create=True) as vault:
        vault.index()
        assert vault.state.get_meta(DOCUMENTS_KEY) == DOCUMENTS_VERSION
        vault._view_memo.clear()
        reads = _count_reads(vault)
        indexed = vault.view()
        plain = VaultView(FileStore(root), {}, (".md",))
        assert list(indexed.notes) == list(plain.notes) and len(plain.notes) > 300
        for p in plain.notes:
            indexed.names_any(p, {"\0probe"})
            plain.names_any(p, {"\0probe"})
            want, got = plain._keys[p], indexed._keys[p]
            assert (None if want is None else set(want)) == (
                None if got is None else set(got)), p
        assert reads == []   # every key above came from the index
