"""Follow-up jobs across processes: nothing is lost to a kill -9, nothing runs twice.

Real vaults, real SQLite, real processes (SIGKILL); the distiller is the real AgentScope job
with the scripted model. Lease expiry is reached by moving the queue's clock, not by waiting.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reme_agent.engine.queue import LEASE_SECONDS
from reme_agent.jobs.followups import Wiring, drain
from reme_agent.vault import Vault, open_vault
from tests.jobs.conftest import SETTINGS, build, text_of

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "REME_EMBEDDER__NAME": "hash",
       "REME_INDEX__PROGRESS": "false"}
NEW = "knowledge/dual-key-verifier/dual-key-verifier.md"

# Distils one daily note (scripted model), reports the queued items, then blocks until killed.
DISTILL_THEN_HANG = r"""
import json, sys, time
from reme_agent.jobs.distiller import run_distiller
from reme_agent.testing import ScriptedChatModel, TextBlock, tool_call
from reme_agent.vault import open_vault
from tests.jobs.conftest import DAILY_JWT, SETTINGS, TODAY
NEW = "knowledge/dual-key-verifier/dual-key-verifier.md"
FM = {"title": "Dual-key verifier", "description": "Accepts tokens signed by either key.",
      "lifecycle": "evolving", "scope": "class", "source": "curated", "role": "method"}
vault = open_vault(sys.argv[1], SETTINGS)
model = ScriptedChatModel([
    [tool_call("c1", "daily_read", path=DAILY_JWT)],
    [tool_call("c2", "write", path=NEW, frontmatter=FM,
               body="# Dual-key verifier\n\nDuring the switch the auth service accepts both keys.\n")],
    [TextBlock(text="Created.")]])
result = run_distiller(vault, [DAILY_JWT], model=model, today=TODAY, flip_status=False)
print(json.dumps([[i.id, i.kind, i.path, i.status] for i in result.enqueued]), flush=True)
time.sleep(600)
"""

# Drains with a consumer that says "started" and then blocks: killed mid-item.
HANG_IN_CONSUMER = r"""
import sys, time
from reme_agent.jobs.followups import Wiring, drain
from reme_agent.vault import open_vault
from tests.jobs.conftest import SETTINGS
vault = open_vault(sys.argv[1], SETTINGS)
def hang(item):
    print("started", item.id, flush=True)
    time.sleep(600)
drain(vault, Wiring(vault, consumers={"autolink": hang}))
"""

# One of two drainer processes: waits for the other, then drains `probe` items, logging each.
RACER = r"""
import os, sys, time
from reme_agent.jobs.followups import Wiring, drain
from reme_agent.vault import open_vault
from tests.jobs.conftest import SETTINGS
root, me, log = sys.argv[1], sys.argv[2], sys.argv[3]
vault = open_vault(root, SETTINGS)
open(os.path.join(root, f"ready-{me}"), "w").close()
deadline = time.monotonic() + 60
while not all(os.path.exists(os.path.join(root, f"ready-{n}")) for n in ("a", "b")):
    assert time.monotonic() < deadline
    time.sleep(0.01)
fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
def probe(item):
    os.write(fd, f"{me} {item.id}\n".encode())
    time.sleep(0.02)  # work, so the two drainers overlap
drain(vault, Wiring(vault, consumers={"probe": probe}))
vault.close()
"""


def spawn(script: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)


def kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(30) == -signal.SIGKILL


@pytest.fixture
def root(tmp_path: Path) -> Path:
    vault = build(tmp_path / "vault")
    vault.close()
    return tmp_path / "vault"


def test_a_kill_9_between_enqueue_and_drain_loses_no_item(root: Path) -> None:
    """A process that distilled (and so enqueued auto-link L1) is killed before any drain;
    another process drains the item from the vault's durable queue."""
    proc = spawn(DISTILL_THEN_HANG, str(root))
    line = proc.stdout.readline()
    assert line, proc.stderr.read()
    ((item_id, kind, path, status),) = json.loads(line)
    assert (kind, path, status) == ("autolink", NEW, "pending")
    kill(proc)
    assert "[[auth-service|auth service]]" not in (root / NEW).read_text(encoding="utf-8")

    out = subprocess.run([sys.executable, "-m", "reme_agent", "worker", "--once", "--json",
                          "--vault", str(root)], capture_output=True, text=True, env=ENV,
                         cwd=ROOT, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    ran = json.loads(out.stdout)["ran"]
    assert [(i["id"], i["kind"], i["status"]) for i in ran] == [(item_id, "autolink", "done")]
    assert f"worker: done autolink {NEW}" in out.stderr
    assert "[[auth-service|auth service]]" in (root / NEW).read_text(encoding="utf-8")


def test_an_item_whose_drainer_is_killed_mid_run_runs_again_after_the_lease(root: Path) -> None:
    vault = open_vault(root, SETTINGS)
    try:
        vault.store.write(NEW, "# Dual-key verifier\n\nThe auth service accepts both keys.\n")
        vault.refresh([NEW])
        item, _ = vault.queue.enqueue("autolink", NEW, payload={"level": "L1"}, source="test")
        proc = spawn(HANG_IN_CONSUMER, str(root))
        assert proc.stdout.readline().split() == ["started", str(item.id)], proc.stderr.read()
        held = vault.queue.get(item.id)
        assert (held.status, held.attempts) == ("running", 1)
        assert f":{proc.pid}:" in held.lease_owner
        kill(proc)

        assert drain(vault).ran == []          # the lease still holds: nobody runs it
        vault.queue.clock = lambda: time.time() + LEASE_SECONDS + 1
        (again,) = drain(vault).ran            # expired: the default wiring runs it again
        assert (again.id, again.status, again.attempts) == (item.id, "done", 2)
        assert "[[auth-service|auth service]]" in text_of(vault, NEW)
    finally:
        vault.close()


def test_two_drainer_processes_never_run_one_item_twice(root: Path, tmp_path: Path) -> None:
    vault = open_vault(root, SETTINGS)
    try:
        ids = [vault.queue.enqueue("probe", f"note-{n}")[0].id for n in range(60)]
    finally:
        vault.close()
    log = tmp_path / "ran.log"
    procs = [spawn(RACER, str(root), me, str(log)) for me in ("a", "b")]
    for proc in procs:
        assert proc.wait(300) == 0, proc.stderr.read()
    runs = [line.split() for line in log.read_text().splitlines()]
    assert sorted(int(i) for _, i in runs) == ids               # each item exactly once
    assert {me for me, _ in runs} == {"a", "b"}                  # and both really drained
    vault = open_vault(root, SETTINGS)
    try:
        assert vault.queue.counts() == {"probe": {"done": 60}}
    finally:
        vault.close()


def test_a_consumer_error_fails_its_item_and_the_rest_still_run(vault: Vault) -> None:
    def consume(item):  # type: ignore[no-untyped-def]
        if item.path == "bad":
            raise RuntimeError("boom")
        return [item.path]

    for path in ("one", "bad", "two"):
        vault.queue.enqueue("probe", path)
    lines: list[str] = []
    report = drain(vault, Wiring(vault, consumers={"probe": consume}), echo=lines.append)
    assert [(i.path, i.status, i.error) for i in report.ran] == [
        ("one", "done", None), ("bad", "failed", "RuntimeError: boom"), ("two", "done", None)]
    assert report.changed == ["one", "two"] and len(report.failed) == 1
    assert "failed probe bad (#2, attempt 1): RuntimeError: boom" in lines


def test_ctrl_c_mid_item_hands_it_back(vault: Vault) -> None:
    def interrupted(item):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt

    item, _ = vault.queue.enqueue("probe", "a")
    with pytest.raises(KeyboardInterrupt):
        drain(vault, Wiring(vault, consumers={"probe": interrupted}))
    got = vault.queue.get(item.id)
    assert (got.status, got.lease_owner) == ("pending", None)


def test_a_background_worker_stops_when_the_vault_closes(tmp_path: Path) -> None:
    from reme_agent.jobs.followups import start_followup_worker

    vault = build(tmp_path / "vault", settings=SETTINGS)
    worker = start_followup_worker(vault, interval=0.05)
    assert worker._thread is not None and worker._thread.is_alive()
    vault.close()
    assert not worker._thread.is_alive()


def test_the_session_end_hook_returns_with_the_follow_ups_queued(vault: Vault) -> None:
    """The hook does not wait for auto-link: the item outlives the hook's vault handle."""
    from reme_agent.hooks import run_hook
    from reme_agent.testing import ScriptedChatModel, TextBlock, tool_call
    from tests.jobs.conftest import DAILY_TODAY, TODAY

    fm = {"title": "Dual-key verifier", "description": "Accepts tokens signed by either key.",
          "lifecycle": "evolving", "scope": "class", "source": "curated", "role": "method"}
    model = ScriptedChatModel([
        [TextBlock(text="nothing to record")],                       # synchronizer
        [tool_call("d1", "daily_read", path=DAILY_TODAY)],           # distiller
        [tool_call("d2", "write", path=NEW, frontmatter=fm,
                   body="# Dual-key verifier\n\nThe auth service accepts both keys.\n")],
        [TextBlock(text="created")],
    ])
    report = run_hook("session_end", vault, {"session_id": "s9", "messages": [
        {"role": "user", "content": "rotate keys"}]}, model=model, today=TODAY)
    enqueued = report["distill"]["enqueued"]
    assert [(i["kind"], i["path"], i["status"]) for i in enqueued] == [("autolink", NEW, "pending")]
    assert "[[auth-service|auth service]]" not in text_of(vault, NEW)
    vault.close()
    later = open_vault(vault.root, SETTINGS)  # e.g. the next process
    try:
        assert [i.id for i in later.queue.pending()] == [enqueued[0]["id"]]
    finally:
        later.close()
