"""Faults: kill -9 mid-write and mid-index, a lost or corrupt index, hand edits under
`watch`, concurrent writer processes, and a full disk / refused write.

Each test states the promise it checks in its name; the ones marked xfail(strict) document
a bug with its proposed fix (docs/reliability.md, "Known gaps") and turn green once the fix
is applied (remove the marker then).
"""

from __future__ import annotations

import errno
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reme_agent.cli import main as cli_main
from reme_agent.engine.store import FileStore
from reme_agent.engine.watcher import VaultWatcher
from reme_agent.errors import StorageError
from reme_agent.recall.search import search_blocks
from reme_agent.toolkit.agentscope import build_toolkit
from reme_agent.vault import Vault, open_vault
from tests.reliability.conftest import (
    HASH,
    NOTES,
    ROOT,
    call_toolkit,
    run_py,
    tmp_files,
    write,
)

QUOKKA = "knowledge/quokka/quokka.md"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}

# A writer process: prints "go", then writes `size` bytes to `rel` with FileStore.<method>.
WRITER = r"""
import sys
from reme_agent.engine.store import FileStore
root, rel, size, method = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
store = FileStore(root)
text = "new line of the new version\n" * (size // 28)
print("go", flush=True)
getattr(store, method)(rel, text)
print("done", flush=True)
"""

BIG = 128_000_000  # large enough that the kill lands in the middle of write()


def _kill_mid_write(root: Path, rel: str, method: str, watch: list[Path] | None = None) -> None:
    """Start a writer, SIGKILL it as soon as bytes reach `watch` (temp or target file)."""
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(root), rel, str(BIG), method],
                            stdout=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "go"
    folder = (root / rel).parent
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        files = watch if watch is not None else list(folder.glob(".tmp-*"))
        if any(f.exists() and f.stat().st_size > 0 for f in files):
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def test_kill_9_mid_write_leaves_the_old_file_and_the_index_catches_up(vault: Vault) -> None:
    old = (vault.root / QUOKKA).read_bytes()
    _kill_mid_write(vault.root, QUOKKA, "write")
    assert (vault.root / QUOKKA).read_bytes() == old  # old, not torn
    # The orphaned temp file is invisible to listing and indexing.
    assert QUOKKA in vault.store.list() and not any(".tmp-" in p for p in vault.store.list())
    report = vault.index()
    assert report.embedded == 0 and not report.skipped and not report.changed_files

    # A completed write after the crash is picked up by the next run.
    vault.store.write(QUOKKA, "# Quokka\n\nQuokkas were renamed numbats after the crash.\n")
    report = vault.index()
    assert report.changed_files == [QUOKKA]
    assert search_blocks(vault, "numbats renamed crash", 1)[0].path == QUOKKA


def test_kill_9_at_random_points_never_tears_a_file(tmp_path: Path) -> None:
    """Many small rewrites, killed at random moments: the file is always one whole version."""
    root = tmp_path / "v"
    root.mkdir()
    versions = {f"version {i}\n" + f"payload {i} " * 20_000 + "\nend\n" for i in range(2)}
    write(root, "n.md", sorted(versions)[0])
    loop = ("import sys, itertools\nfrom reme_agent.engine.store import FileStore\n"
            "s = FileStore(sys.argv[1])\nvs = [f'version {i}\\n' + f'payload {i} ' * 20000 + "
            "'\\nend\\n' for i in range(2)]\nprint('go', flush=True)\n"
            "for i in itertools.count():\n    s.write('n.md', vs[i % 2])\n")
    rng = random.Random(5)
    for _ in range(6):
        proc = subprocess.Popen([sys.executable, "-c", loop, str(root)], stdout=subprocess.PIPE,
                                text=True, env=ENV, cwd=ROOT)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "go"
        time.sleep(rng.uniform(0.05, 0.3))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert (root / "n.md").read_text(encoding="utf-8") in versions


def test_kill_9_mid_create_leaves_no_file_or_the_whole_file(tmp_path: Path) -> None:
    root = tmp_path / "v"
    root.mkdir()
    rel = "knowledge/new/new.md"
    (root / "knowledge/new").mkdir(parents=True)
    _kill_mid_write(root, rel, "create")  # killed once bytes reach the temp file
    target = root / rel
    assert not target.exists() or target.stat().st_size == BIG // 28 * 28
    # The retry the torn file used to block now succeeds.
    if not target.exists():
        FileStore(root).create(rel, "# New\n\nwritten on the retry\n")
        assert target.read_text(encoding="utf-8").endswith("written on the retry\n")


def test_orphaned_temp_files_are_swept_by_the_next_index_run(vault: Vault) -> None:
    stale = vault.root / "knowledge/quokka/.tmp-orphan"
    stale.write_bytes(b"x" * 1000)
    hour_ago = time.time() - 3600
    os.utime(stale, (hour_ago, hour_ago))
    vault.index()
    assert not stale.exists()


def test_kill_9_mid_index_then_the_next_run_is_consistent(tmp_path: Path) -> None:
    root = tmp_path / "v"
    sys.path.insert(0, str(ROOT / "bench"))
    from generate import generate_vault

    generate_vault(root, 150)
    code = ("import sys\nfrom reme_agent.config import Settings\n"
            "from reme_agent.vault import open_vault\n"
            "v = open_vault(sys.argv[1], Settings(embedder={'name': 'hash', 'batch_size': 8},"
            " index={'progress': False}))\n"
            "print('go', flush=True)\nv.index()\nprint('done', flush=True)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(root)], stdout=subprocess.PIPE,
                            text=True, env=ENV, cwd=ROOT)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "go"
    deadline = time.monotonic() + 60
    chroma = root / ".reme" / "chroma" / "chroma.sqlite3"
    while time.monotonic() < deadline and not (chroma.exists() and chroma.stat().st_size > 200_000):
        time.sleep(0.02)  # wait until embeddings are being written
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)

    vault = open_vault(root, HASH)  # the flock died with the process: no stale lock
    # The state is written per file before embedding, so a kill mid-run leaves blocks
    # unembedded; on a loaded machine the run may finish first, which must be consistent too.
    report = vault.index()
    assert report.files == 150
    assert vault.vector.count() == vault.state.counts()[1] == report.blocks
    assert vault.index().embedded == 0
    assert search_blocks(vault, "Topic 42", 5)
    vault.close()


def test_deleted_index_folder_is_rebuilt_with_the_same_results(vault: Vault) -> None:
    queries = ["term frequency", "marsupial island", "向量检索"]
    before = [[h.path for h in search_blocks(vault, q, 3)] for q in queries]
    vault.close()
    shutil.rmtree(vault.root / ".reme")
    fresh = open_vault(vault.root, HASH)
    report = fresh.index()
    assert report.files == len(NOTES) and report.embedded == report.blocks
    assert [[h.path for h in search_blocks(fresh, q, 3)] for q in queries] == before
    fresh.close()


def test_removed_vector_folder_is_detected_and_re_embedded(
        vault: Vault, caplog: pytest.LogCaptureFixture) -> None:
    blocks = vault.state.counts()[1]
    vault.close()
    shutil.rmtree(vault.root / ".reme" / "chroma")
    fresh = open_vault(vault.root, HASH)
    with caplog.at_level(logging.WARNING, logger="reme_agent.index"):
        report = fresh.index()
    assert report.embedded == blocks
    assert "vector store is missing" in caplog.text
    assert search_blocks(fresh, "marsupial island", 1)[0].path == QUOKKA
    fresh.close()


def test_garbage_in_index_sqlite_is_detected_and_rebuilt(
        vault: Vault, caplog: pytest.LogCaptureFixture) -> None:
    vault.close()
    db = vault.root / ".reme" / "index.sqlite"
    for extra in ("-wal", "-shm"):
        Path(f"{db}{extra}").unlink(missing_ok=True)
    db.write_bytes(b"this is not a database " * 500)
    fresh = open_vault(vault.root, HASH)
    with caplog.at_level(logging.WARNING):
        report = fresh.index()
    assert report.files == len(NOTES)
    assert "index.sqlite" in caplog.text and "rebuil" in caplog.text
    assert search_blocks(fresh, "marsupial island", 1)[0].path == QUOKKA
    fresh.close()


def test_garbage_in_index_sqlite_gives_one_clear_cli_line_not_a_traceback(
        vault: Vault, capsys: pytest.CaptureFixture[str]) -> None:
    vault.close()
    db = vault.root / ".reme" / "index.sqlite"
    for extra in ("-wal", "-shm"):
        Path(f"{db}{extra}").unlink(missing_ok=True)
    db.write_bytes(b"this is not a database " * 500)
    code = cli_main(["index", "--vault", str(vault.root), "--config", "/dev/null"])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if code != 0:  # before BUG-3 is fixed: at least one line naming the problem
        assert err.count("\n") == 1 and "not a database" in err


def test_garbage_in_the_chroma_store_is_detected_and_rebuilt(
        vault: Vault, caplog: pytest.LogCaptureFixture) -> None:
    vault.close()
    (vault.root / ".reme" / "chroma" / "chroma.sqlite3").write_bytes(b"garbage " * 1000)
    fresh = open_vault(vault.root, HASH)
    with caplog.at_level(logging.WARNING):
        report = fresh.index()
    assert report.embedded == report.blocks
    assert "chroma" in caplog.text and "rebuil" in caplog.text
    fresh.close()


def test_hand_edits_while_watching_show_up_in_search(vault: Vault) -> None:
    def on_change(paths: list[str] | None) -> None:
        vault.index() if paths is None else vault.refresh(paths)

    def wait_for(check, timeout: float = 30.0) -> None:  # noqa: ANN001
        deadline = time.monotonic() + timeout
        while not check():
            assert time.monotonic() < deadline, "search did not catch up with the edit"
            time.sleep(0.1)

    def top(query: str) -> str | None:
        hits = search_blocks(vault, query, 1)
        return hits[0].path if hits else None

    with VaultWatcher(vault.root, on_change, debounce=0.2):
        time.sleep(0.3)  # let inotify attach
        # An editor-style save of an existing note (plain write, not through the store).
        (vault.root / QUOKKA).write_text("# Quokka\n\nQuokkas eat eucalyptus leaves at dusk.\n",
                                         encoding="utf-8")
        wait_for(lambda: top("eucalyptus dusk") == QUOKKA)
        # A new note in a new folder, written via temp file + rename like vim/VS Code do.
        new = vault.root / "knowledge/numbat/numbat.md"
        new.parent.mkdir(parents=True)
        tmp = new.with_name("numbat.md~")
        tmp.write_text("# Numbat\n\nThe numbat eats termites.\n", encoding="utf-8")
        os.replace(tmp, new)
        wait_for(lambda: top("numbat termites") == "knowledge/numbat/numbat.md")
        # A hand delete disappears from search.
        (vault.root / QUOKKA).unlink()
        wait_for(lambda: all(h.path != QUOKKA for h in search_blocks(vault, "eucalyptus", 5)))


CAS_WORKER = r"""
import sys
from reme_agent.engine.store import FileStore
from reme_agent.errors import StampChanged
store = FileStore(sys.argv[1])
me, rounds = sys.argv[2], int(sys.argv[3])
conflicts = 0
for i in range(rounds):
    while True:
        text, stamp = store.read_stamped("counter.md")
        lines = text.splitlines()
        n = int(lines[0]) + 1
        try:
            store.write_if_unchanged("counter.md", "\n".join([str(n), *lines[1:], f"{me}-{i}"])
                                     + "\n", stamp)
            break
        except StampChanged:
            conflicts += 1
print(conflicts)
"""


def test_writer_processes_on_one_note_lose_no_update(tmp_path: Path) -> None:
    root = tmp_path / "v"
    root.mkdir()
    (root / "counter.md").write_text("0\n", encoding="utf-8")
    workers, rounds = 4, 25
    procs = [subprocess.Popen([sys.executable, "-c", CAS_WORKER, str(root), f"w{w}", str(rounds)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                              cwd=ROOT) for w in range(workers)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    lines = (root / "counter.md").read_text(encoding="utf-8").splitlines()
    assert int(lines[0]) == workers * rounds  # no lost update
    assert sorted(lines[1:]) == sorted(f"w{w}-{i}" for w in range(workers) for i in range(rounds))
    assert not list(root.glob(".tmp-*"))


def test_cas_conflict_between_processes_is_reported_not_overwritten(tmp_path: Path) -> None:
    """A stale stamp from another process's read is refused; the newer text survives."""
    store = FileStore(tmp_path)
    store.write("n.md", "v1\n")
    _, stamp = store.read_stamped("n.md")
    out = run_py("import sys\nfrom reme_agent.engine.store import FileStore\n"
                 "FileStore(sys.argv[1]).write('n.md', 'v2 from the other process\\n')\n",
                 str(tmp_path))
    assert out.returncode == 0, out.stderr
    from reme_agent.errors import StampChanged

    with pytest.raises(StampChanged, match="changed since it was read"):
        store.write_if_unchanged("n.md", "v3 from a stale read\n", stamp)
    assert (tmp_path / "n.md").read_text() == "v2 from the other process\n"


def _enospc(*_a: object, **_k: object) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_disk_full_on_rename_leaves_the_old_file_and_no_temp(
        vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    old = (vault.root / QUOKKA).read_bytes()
    toolkit = build_toolkit(vault)
    _, text = call_toolkit(toolkit, "read", path=QUOKKA)
    stamp = text.split("stamp ", 1)[1].split("]", 1)[0]
    monkeypatch.setattr(os, "replace", _enospc)
    with pytest.raises(StorageError, match="No space left"):
        vault.store.write(QUOKKA, "new text")
    state, text = call_toolkit(toolkit, "write", path=QUOKKA, body="Quokkas moved.\n",
                               overwrite=True, stamp=stamp)
    assert state == "error" and "No space left on device" in text
    monkeypatch.undo()
    assert (vault.root / QUOKKA).read_bytes() == old
    assert tmp_files(vault.root) == []


def test_disk_full_while_writing_a_new_note_leaves_nothing(
        vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    toolkit = build_toolkit(vault)
    monkeypatch.setattr(os, "fsync", _enospc)
    for tool, args, target in [
            ("write", {"path": "knowledge/new/new.md", "body": "hello\n"}, "knowledge/new/new.md"),
            ("daily_write", {"slug": "crash-test", "body": "hello", "date": "2026-11-30"},
             "daily/2026-11-30/crash-test/crash-test.md"),
            ("copy", {"src": QUOKKA, "dst": "knowledge/q2/q2.md"}, "knowledge/q2/q2.md")]:
        state, text = call_toolkit(toolkit, tool, **args)
        assert state == "error" and "No space left on device" in text, (tool, text)
        assert not (vault.root / target).exists(), tool
    monkeypatch.undo()
    assert tmp_files(vault.root) == []
    assert vault.index().changed_files == []


def test_permission_denied_on_write_is_a_clear_error_and_nothing_changes(
        vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    """We run as root (chmod does not stop us), so refuse the temp file like EACCES would."""
    import tempfile

    def denied(*_a: object, **_k: object) -> None:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

    old = (vault.root / QUOKKA).read_bytes()
    monkeypatch.setattr(tempfile, "mkstemp", denied)
    state, text = call_toolkit(build_toolkit(vault), "property_update", path=QUOKKA,
                               properties={"importance": 9})
    monkeypatch.undo()
    assert state == "error" and "Permission denied" in text
    assert (vault.root / QUOKKA).read_bytes() == old and tmp_files(vault.root) == []


def test_a_file_where_a_folder_should_be_is_a_clear_error(vault: Vault) -> None:
    toolkit = build_toolkit(vault)
    before = sorted(p for p in vault.root.rglob("*") if ".reme" not in p.parts)
    for tool, args in [("write", {"path": f"{QUOKKA}/child.md", "body": "x"}),
                       ("copy", {"src": QUOKKA, "dst": f"{QUOKKA}/copy.md"}),
                       ("move", {"src": "knowledge/bm25/bm25.md", "dst": f"{QUOKKA}/m.md"})]:
        state, text = call_toolkit(toolkit, tool, **args)
        assert state == "error", (tool, text)
        assert "Not a directory" in text or "exists" in text or "not a folder" in text, text
    after = sorted(p for p in vault.root.rglob("*") if ".reme" not in p.parts)
    assert after == before
