"""`reme-agent worker`, `watch --worker`, and the overload check of `index` / `watch`.

Real vaults and files; `watch` runs as a real process (inotify) that the test stops with
SIGINT. Results are checked through the API (the queue, the notes, the health report).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from reme_agent.cli import cli
from reme_agent.config import Settings
from reme_agent.vault import Vault, open_vault

ROOT = Path(__file__).resolve().parents[2]
ENV = {"REME_EMBEDDER__NAME": "hash", "REME_INDEX__PROGRESS": "false",
       "REME_JOBS__SPLIT_TOKEN_THRESHOLD": "60"}
SETTINGS = Settings(embedder={"name": "hash"}, index={"progress": False},
                    jobs={"split_token_threshold": 60})
AXES = "lifecycle: evolving\nscope: class\nsource: curated\nrole: concept\n"
GW, RATE = "knowledge/api-gateway/api-gateway.md", "knowledge/rate-limit/rate-limit.md"
BIG = "knowledge/big/big.md"


def note(title: str, body: str) -> str:
    return f"---\ntitle: {title}\n{AXES}---\n# {title}\n\n{body}\n"


def grown() -> str:
    """A knowledge note well past 60 estimated tokens (the test threshold)."""
    return note("Big", "\n\n".join(f"Paragraph {n} about caching, retries and timeouts "
                                   "in the service mesh." for n in range(12)))


@pytest.fixture
def vault(tmp_path: Path) -> Vault:
    root = tmp_path / "vault"
    for rel, text in {GW: note("API gateway", "The gateway enforces the rate limit."),
                      RATE: note("Rate limit", "Caps requests per client."),
                      BIG: note("Big", "Small for now.")}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    v = open_vault(root, SETTINGS)
    v.index()
    yield v
    v.close()


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env=ENV)
    return result.exit_code, result.stdout, result.stderr


def health_today(v: Vault) -> str:
    path = f"audit/{dt.date.today().isoformat()}/health.md"
    return v.store.read_text(path) if v.store.exists(path) else ""


def test_worker_once_runs_what_is_pending_and_exits(vault: Vault) -> None:
    item, _ = vault.queue.enqueue("autolink", GW, payload={"level": "L1"}, source="test")
    vault.queue.enqueue("split", BIG, source="test")
    code, out, err = run("worker", "--once", "--json", "--vault", str(vault.root))
    assert code == 0, err
    data = json.loads(out)
    assert [(i["id"], i["status"]) for i in data["ran"]] == [(item.id, "done")]
    assert data["waiting"] == {"split": 1} and "no model configured" in data["why_waiting"]["split"]
    assert f"worker: running autolink {GW}" in err and "not running split items" in err
    assert "[[rate-limit|rate limit]]" in vault.store.read_text(GW)
    assert [(i.kind, i.status) for i in vault.queue.items()] == [("autolink", "done"),
                                                                  ("split", "pending")]


def test_worker_status_and_retry_failed(vault: Vault) -> None:
    item, _ = vault.queue.enqueue("autolink", GW, source="test")
    claimed = vault.queue.claim(["autolink"], owner="test")
    vault.queue.fail(claimed.id, "test", "RuntimeError: model down")
    code, out, _ = run("worker", "--status", "--vault", str(vault.root))
    assert code == 0 and f"failed #{item.id} autolink {GW}: RuntimeError: model down" in out
    code, out, err = run("worker", "--once", "--retry-failed", "--json", "--vault",
                         str(vault.root))
    assert code == 0, err
    assert "1 failed item(s) back to pending" in err
    assert [i["status"] for i in json.loads(out)["ran"]] == ["done"]
    assert vault.queue.counts() == {"autolink": {"done": 1}}


def test_index_queues_a_split_for_a_note_grown_past_the_threshold_by_hand(vault: Vault) -> None:
    (vault.root / BIG).write_text(grown(), encoding="utf-8")     # an editor's save
    code, out, err = run("index", "--json", "--vault", str(vault.root))
    assert code == 0, err
    (queued,) = json.loads(out)["split_queued"]
    assert queued["path"] == BIG and queued["tokens"] > 60
    (item,) = vault.queue.pending("split")
    assert (item.path, item.source, item.payload["token_threshold"]) == (BIG, "index", 60)
    report = health_today(vault)
    assert "### D3 overloaded nodes (split candidates): 1" in report
    assert f"- `{BIG}`: ~{queued['tokens']} tokens" in report

    # edited again while its split is still pending: no second item, no second line
    (vault.root / BIG).write_text(grown() + "\nOne more line.\n", encoding="utf-8")
    code, out, _ = run("index", "--json", "--vault", str(vault.root))
    assert code == 0 and json.loads(out)["split_queued"] == []
    assert len(vault.queue.pending("split")) == 1 and health_today(vault) == report
    # a small edit elsewhere queues nothing
    (vault.root / RATE).write_text(note("Rate limit", "Caps requests."), encoding="utf-8")
    code, out, _ = run("index", "--json", "--vault", str(vault.root))
    assert code == 0 and json.loads(out)["split_queued"] == []


def wait_for(check: Callable[[], bool], proc: subprocess.Popen[str], what: str,
             timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"{what}; watch said:\n{proc.communicate()[1]}")
        time.sleep(0.1)


def test_watch_with_worker_links_queued_notes_and_queues_a_split_for_a_hand_edit(
        vault: Vault) -> None:
    item, _ = vault.queue.enqueue("autolink", GW, payload={"level": "L1"}, source="test")
    proc = subprocess.Popen([sys.executable, "-m", "reme_agent", "watch", "--worker",
                             "--debounce", "0.2", "--vault", str(vault.root)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **ENV, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    try:
        wait_for(lambda: vault.queue.get(item.id).status == "done", proc,
                 "the worker did not run the queued item")
        assert "[[rate-limit|rate limit]]" in vault.store.read_text(GW)
        (vault.root / BIG).write_text(grown(), encoding="utf-8")  # a hand edit
        wait_for(lambda: [i.path for i in vault.queue.pending("split")] == [BIG], proc,
                 "the hand edit was not queued for a split")
        # the health line is written by the watcher after it queued the split
        wait_for(lambda: f"`{BIG}`" in health_today(vault), proc,
                 "the hand edit got no health line")
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err
    assert "follow-up worker on" in err and f"worker: done autolink {GW}" in err
    assert f'"split_queued": ["{BIG}"]' in err
    assert vault.queue.pending("split")[0].source == "watch"  # no model: it waits


def test_mcp_with_worker_runs_what_the_queue_holds(vault: Vault) -> None:
    """An MCP client's distiller queues follow-ups; `mcp --worker` runs them while the
    server serves (stdout stays the MCP channel: the worker reports on stderr)."""
    item, _ = vault.queue.enqueue("autolink", GW, payload={"level": "L1"}, source="test")
    proc = subprocess.Popen([sys.executable, "-m", "reme_agent", "mcp", "--worker", "--no-warm",
                             "--vault", str(vault.root)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **ENV, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    try:
        wait_for(lambda: vault.queue.get(item.id).status == "done", proc,
                 "mcp --worker did not run the queued item")
        assert "[[rate-limit|rate limit]]" in vault.store.read_text(GW)
    finally:
        out, err = proc.communicate(timeout=90)   # stdin closed: the stdio server ends
    assert proc.returncode == 0, err
    assert f"worker: done autolink {GW}" in err and "worker:" not in out
