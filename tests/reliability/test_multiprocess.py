"""Several processes on one vault: one indexer at a time (lock file), readers catch up.

docs/reliability.md states what is safe; these tests hold it to that: two indexer processes
started together serialise on `.reme/index.lock` and leave consistent projections, and a
reader process picks up another process's index run (BM25 and graph from the state's
generation; embedded vectors by reopening chroma, BUG-12), and processes opening a fresh
vault together take turns on `.reme/chroma.lock` (BUG-14).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from reme_agent.recall.search import search_blocks
from reme_agent.vault import Vault, open_vault
from tests.reliability.conftest import HASH, ROOT, ChromaServer, http_settings, run_py, write

INDEX = """
import sys
from reme_agent.config import Settings
from reme_agent.vault import open_vault
s = Settings(embedder={"name": "hash"}, index={"progress": False})
if len(sys.argv) > 3:
    s = Settings(embedder={"name": "hash"}, index={"progress": False}, vector={
        "backend": "http", "port": int(sys.argv[2]), "collection_prefix": sys.argv[3]})
v = open_vault(sys.argv[1], s)
r = v.index()
print(r.embedded, r.files)
"""


def test_two_indexer_processes_serialise_and_agree(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    from generate import generate_vault

    root = tmp_path / "v"
    generate_vault(root, 40)
    first = open_vault(root, HASH)  # stores first, so both runs start on equal terms
    first.vector.count()
    first.close()
    env = {"PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", INDEX, str(root)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT,
                              env={**os.environ, **env}) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-500:] for o in outs]
    embedded = sorted(int(o[0].split()[0]) for o in outs)
    vault = open_vault(root, HASH)
    blocks = vault.state.counts()[1]
    assert embedded == [0, blocks]  # the second waited for the lock, then had nothing to do
    assert vault.vector.count() == blocks and vault.index().embedded == 0
    vault.close()


OPEN = """
import sys
from reme_agent.config import Settings
from reme_agent.vault import open_vault
open_vault(sys.argv[1], Settings(embedder={"name": "hash"})).vector.count()
"""


def test_processes_opening_a_fresh_vault_together_all_succeed(tmp_path: Path) -> None:
    for attempt in range(4):
        root = tmp_path / f"v{attempt}"
        root.mkdir()
        procs = [subprocess.Popen([sys.executable, "-c", OPEN, str(root)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, cwd=ROOT,
                                  env={**os.environ, "PYTHONPATH": str(ROOT)}) for _ in range(3)]
        outs = [p.communicate(timeout=120) for p in procs]
        failed = [o[1].strip().splitlines()[-1] for p, o in zip(procs, outs, strict=True)
                  if p.returncode]
        assert not failed, failed


def test_a_reader_process_picks_up_another_processs_bm25_and_graph(vault: Vault) -> None:
    vault.ready()
    write(vault.root, "knowledge/platypus/platypus.md",
          "# Platypus\n\nplatypus egg laying, see [[quokka]]\n")
    out = run_py(INDEX, str(vault.root))
    assert out.returncode == 0, out.stderr
    vault.ready()  # the state's generation moved: BM25 and the graph reload from it
    (block,) = vault.state.block_ids("knowledge/platypus/platypus.md")
    assert vault.keyword.query("platypus egg laying", 1)[0][0] == block
    assert vault.graph.outbound("knowledge/platypus/platypus.md") == [
        ("knowledge/quokka/quokka.md", None)]


def test_embedded_reader_searches_after_another_process_indexed(vault: Vault) -> None:
    search_blocks(vault, "warm up", 1)  # the vector segment is now loaded in this process
    write(vault.root, "knowledge/platypus/platypus.md", "# Platypus\n\nplatypus egg laying\n")
    out = run_py(INDEX, str(vault.root))
    assert out.returncode == 0, out.stderr
    assert search_blocks(vault, "platypus egg laying", 3)[0].path == \
        "knowledge/platypus/platypus.md"
    (block,) = vault.state.block_ids("knowledge/platypus/platypus.md")
    assert vault.vector.query("platypus egg laying", 1)[0][0] == block


def test_server_backend_readers_see_vectors_another_process_indexed(
        tmp_path: Path, chroma_server: ChromaServer) -> None:
    from tests.reliability.conftest import make_vault

    settings = http_settings(chroma_server)
    vault = make_vault(tmp_path / "v", settings=settings)
    vault.vector.query("warm up", 1)
    write(vault.root, "knowledge/platypus/platypus.md", "# Platypus\n\nplatypus egg laying\n")
    out = run_py(INDEX, str(vault.root), str(chroma_server.port),
                 settings.vector.collection_prefix)
    assert out.returncode == 0, out.stderr
    assert search_blocks(vault, "platypus egg laying", 3)[0].path == \
        "knowledge/platypus/platypus.md"
    (block,) = vault.state.block_ids("knowledge/platypus/platypus.md")
    assert vault.vector.query("platypus egg laying", 1)[0][0] == block
    vault.close()
