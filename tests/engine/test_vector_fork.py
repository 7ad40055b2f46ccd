"""A process forked after chroma's embedded store was opened gets a clear error, not a hang.

chroma's native code does not survive a fork: in the child every call, on the inherited
store or on a store opened anew, blocks forever (measured with chroma 1.5.9). Libraries
built on reme-agent meet this through multiprocessing's default start method on Linux,
prefork servers and job queues.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from reme_agent.config import Settings
from reme_agent.engine.projections.vector_flat import FlatIndex
from reme_agent.errors import BackendError
from reme_agent.recall.search import search
from reme_agent.vault import open_vault

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def _in_child(fn) -> dict:  # noqa: ANN001
    """Run `fn()` in a forked child (killed after 20 s); its JSON-able result or error."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:   # the child: report and leave without running the parent's cleanup
        os.close(read)
        signal.alarm(20)
        try:
            out = {"ok": fn()}
        except BackendError as exc:
            out = {"error": str(exc)}
        except BaseException as exc:  # noqa: BLE001 - report anything else as such
            out = {"other": f"{type(exc).__name__}: {exc}"}
        os.write(write, json.dumps(out).encode())
        os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"child died: {status}"
    return json.loads(data)


@pytest.fixture
def vault(tmp_path: Path):
    root = tmp_path / "vault"
    (root / "knowledge").mkdir(parents=True)
    for i in range(12):
        (root / "knowledge" / f"n{i}.md").write_text(
            f"# Note {i}\n\nrivers and stones, topic {i}\n", encoding="utf-8")
    v = open_vault(root, Settings(embedder={"name": "hash"}, index={"progress": False}))
    v.vector.flat = FlatIndex(max_vectors=0)   # chroma answers the vector side
    v.index()
    assert search(v, "rivers", log_access=False).results
    yield v
    v.close()


def test_a_forked_child_gets_an_error_instead_of_hanging(vault) -> None:  # noqa: ANN001
    got = _in_child(lambda: len(search(vault, "topic 3", log_access=False).results))
    assert "fork" in got.get("error", "") and "spawn" in got["error"], got
    # a new vault opened in the child would hang the same way
    again = _in_child(lambda: len(search(
        open_vault(vault.root, Settings(embedder={"name": "hash"})), "topic 3",
        log_access=False).results))
    assert "fork" in again.get("error", ""), again
    # closing what the child inherited returns at once
    assert _in_child(lambda: vault.close() or "closed") == {"ok": "closed"}
    # and the parent is untouched
    assert search(vault, "topic 5", log_access=False).results
