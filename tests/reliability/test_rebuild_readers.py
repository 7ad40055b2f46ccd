"""G1: a long-lived reader keeps answering while another process runs `index --full`.

Before the fix the full rebuild dropped the collection and cleared the index state first:
on the chroma server every later search of a long-lived reader failed ("Collection ... does
not exist"), and on the embedded store 212 of 495 searches raised `BackendError` while fresh
searches found nothing. Now the rebuild fills a new collection, rewrites the state file by
file and publishes the new collection at the end; readers move over when they see it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reme_agent.config import Settings
from reme_agent.vault import open_vault

from .conftest import ROOT, ChromaServer, http_settings, run_py, write

NOTES = 300
LAST_LOG: list[str] = []
WORDS = ["otter", "heron", "lynx", "marten", "ibis", "tapir", "okapi", "quoll", "dingo",
         "serval", "gecko", "newt"]


def note_text(i: int) -> str:
    a, b = WORDS[i % len(WORDS)], WORDS[(i // len(WORDS)) % len(WORDS)]
    return (f"---\ntitle: Note {i}\n---\n# Note {i}\n\nThe code word of this note is "
            f"zx{i:04d}q, filed beside the {a} and the {b}.\n\nA second paragraph about "
            f"{b} habitats, so each note has more than one block.\n")


READER = r"""
import json, sys, time
from reme_agent.config import Settings
from reme_agent.recall.search import search
from reme_agent.vault import open_vault

import os
root, settings_json, stop_file, notes = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
vault = open_vault(root, Settings.model_validate(json.loads(settings_json)))
searches = errors = misses = 0
first_error = None
stamps = []
search(vault, "zx0000q", limit=1, log_access=False)  # warm: model, BM25 and graph loaded
stamps.append(time.time())
deadline = None
i = 0
print("ready", flush=True)
while deadline is None or time.monotonic() < deadline:
    if deadline is None and os.path.exists(stop_file):
        deadline = time.monotonic() + 1.0  # a few more searches after the rebuild ended
    n = (i * 37) % notes
    i += 1
    try:
        hits = search(vault, f"zx{n:04d}q", limit=3, log_access=False).results
    except Exception as exc:
        errors += 1
        first_error = first_error or f"{type(exc).__name__}: {exc}"
        continue
    searches += 1
    stamps.append(time.time())
    want = f"knowledge/n{n:04d}.md"
    if not hits or hits[0].path != want:
        misses += 1
print(json.dumps({"searches": searches, "errors": errors, "misses": misses,
                  "first_error": first_error, "first": stamps[0] if stamps else 0,
                  "last": stamps[-1] if stamps else 0}), flush=True)
vault.close()
"""


def build(root: Path, settings: Settings) -> None:
    for i in range(NOTES):
        write(root, f"knowledge/n{i:04d}.md", note_text(i))
    vault = open_vault(root, settings, create=True)
    vault.index()
    vault.close()


def reader(root: Path, settings: Settings, stop: Path) -> subprocess.Popen[str]:
    env = {"PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", READER, str(root), settings.model_dump_json(), str(stop),
         str(NOTES)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**__import__("os").environ, **env})
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready", proc.stderr.read() if proc.stderr else ""
    return proc


FULL = r"""
import json, sys, time
from reme_agent.config import Settings
from reme_agent.vault import open_vault
v = open_vault(sys.argv[1], Settings.model_validate(json.loads(sys.argv[2])))
t0 = time.time()
for _ in range(int(sys.argv[3])):
    v.index(full=True)
print(json.dumps({"start": t0, "end": time.time()}))
v.close()
"""

FRESH_SEARCH = r"""
import json, sys
from reme_agent.config import Settings
from reme_agent.recall.search import search
from reme_agent.vault import open_vault
v = open_vault(sys.argv[1], Settings.model_validate(json.loads(sys.argv[2])))
print(json.dumps([h.path for h in search(v, "zx0042q", limit=3, log_access=False).results]))
"""


def rebuild_while_reading(root: Path, settings: Settings) -> tuple[dict, dict, list[list[str]]]:
    stop = root.parent / "stop"
    proc = reader(root, settings, stop)
    time.sleep(0.5)
    full = subprocess.Popen([sys.executable, "-c", FULL, str(root), settings.model_dump_json(),
                             "3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT)
    fresh = []
    while full.poll() is None and len(fresh) < 2:
        done = run_py(FRESH_SEARCH, str(root), settings.model_dump_json())
        assert done.returncode == 0, done.stderr[-2000:]
        fresh.append(json.loads(done.stdout.strip().splitlines()[-1]))
    out, err = full.communicate(timeout=300)
    LAST_LOG[:] = [err[-3000:]]
    assert full.returncode == 0, err[-2000:]
    timing = json.loads(out.strip().splitlines()[-1])
    stop.touch()
    rout, rerr = proc.communicate(timeout=300)
    assert proc.returncode == 0, rerr[-3000:]
    return json.loads(rout.strip().splitlines()[-1]), timing, fresh


def check(stats: dict, timing: dict, fresh: list[list[str]]) -> None:
    assert stats["errors"] == 0, stats["first_error"]
    assert stats["misses"] == 0
    assert stats["searches"] > 50
    assert stats["first"] < timing["start"] and stats["last"] > timing["end"], \
        "the reader did not search across the whole rebuild"
    assert all(paths and paths[0] == "knowledge/n0042.md" for paths in fresh), fresh


@pytest.mark.slow
def test_embedded_reader_answers_through_full_rebuilds(tmp_path: Path) -> None:
    settings = Settings(embedder={"name": "hash"}, index={"progress": False})
    root = tmp_path / "vault"
    build(root, settings)
    check(*rebuild_while_reading(root, settings))
    vault = open_vault(root, settings)
    assert vault.vector.generations() == [vault.indexer.published_collection()], LAST_LOG
    vault.close()


@pytest.mark.slow
def test_server_reader_answers_through_full_rebuilds(tmp_path: Path,
                                                     chroma_server: ChromaServer) -> None:
    settings = http_settings(chroma_server)
    root = tmp_path / "vault"
    build(root, settings)
    check(*rebuild_while_reading(root, settings))
    vault = open_vault(root, settings)
    assert vault.vector.generations() == [vault.indexer.published_collection()], LAST_LOG
    vault.close()


def test_a_crashed_full_rebuild_leaves_the_old_generation_serving(tmp_path: Path) -> None:
    settings = Settings(embedder={"name": "hash"}, index={"progress": False})
    root = tmp_path / "vault"
    build(root, settings)
    vault = open_vault(root, settings)
    before = vault.indexer.published_collection()

    def boom(*_a: object, **_k: object) -> int:
        raise RuntimeError("killed mid-embedding")

    write(root, "knowledge/n0001.md", note_text(1) + "\nA new line with zebra stripes.\n")
    vault.indexer._embed = boom  # type: ignore[method-assign]  # the crash point
    with pytest.raises(RuntimeError):
        vault.index(full=True)
    vault.close()
    reopened = open_vault(root, settings)
    assert reopened.indexer.published_collection() == before
    assert reopened.state.get_meta("vectors_dirty") == "1"
    reopened.index()  # re-embeds what the crashed run put only in its unpublished collection
    from reme_agent.recall.search import search

    assert search(reopened, "zebra stripes", limit=1, log_access=False).results[0].path == \
        "knowledge/n0001.md"
    assert reopened.vector.count() == reopened.state.counts()[1]
    reopened.index(full=True)
    assert reopened.vector.generations() == [reopened.indexer.published_collection()]
    reopened.close()
