"""SIGTERM during a `maintain --every` run: the run stops at its next safe point, says so,
closes the vault and exits 0; a second SIGTERM stops it at once. A real subprocess gets real
signals; the model (the only double) sends them from inside the merge decision, so they land
mid-run, between the first group's question and its merge."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from reme_agent.vault import open_vault
from tests.maintenance.conftest import SETTINGS, VaultFactory, knowledge

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

NOTES = {
    "knowledge/hub/hub.md": knowledge("Hub", "[[a1]] [[a2]] [[b1]] [[b2]]"),
    "knowledge/a1/a1.md": knowledge("Alpha", "One. [[hub]]",
                                    description="Rotating the signing keys of the gateway."),
    "knowledge/a2/a2.md": knowledge("Alpha", "Two. [[hub]]",
                                    description="Rotating the signing keys of the gateway."),
    "knowledge/b1/b1.md": knowledge("Beta", "Three. [[hub]]",
                                    description="Backups of the ledger database every night."),
    "knowledge/b2/b2.md": knowledge("Beta", "Four. [[hub]]",
                                    description="Backups of the ledger database every night."),
}

# The maintain CLI in a process of its own, with a scripted model: each merge decision sends
# this process `KILLS` SIGTERMs, then answers "merge".
DRIVER = textwrap.dedent("""
    import os, signal, sys
    import reme_agent.jobs.maintainer_job as job
    from reme_agent.cli import main
    from reme_agent.testing import ScriptedChatModel, TextBlock

    kills = int(sys.argv[2])

    def decide(messages, tools):
        for _ in range(kills):
            os.kill(os.getpid(), signal.SIGTERM)
        return [TextBlock(text='{"merge": true, "reasons": "the same note"}')]

    model = ScriptedChatModel([decide, decide])
    run = job.run_maintainer
    job.run_maintainer = lambda *a, **k: run(*a, model=model, **k)
    sys.exit(main(["maintain", "--vault", sys.argv[1], "--every", "1h", "--json"]))
""")


def _maintain(root: Path, kills: int) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REME_")} | {
        "REME_EMBEDDER__NAME": "hash", "REME_INDEX__PROGRESS": "false"}
    return subprocess.run([sys.executable, "-c", DRIVER, str(root), str(kills)], env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def _notes(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in (root / "knowledge").rglob("*.md")}


def _journals(root: Path) -> list[Path]:
    """Intent journals left behind (a multi-file write cut short)."""
    return sorted((root / ".reme" / "journal").glob("*"))


@pytest.fixture
def root(make_vault: VaultFactory) -> Path:
    vault = make_vault(NOTES)
    vault.close()
    return vault.root


def test_sigterm_mid_run_stops_at_the_next_safe_point(root: Path) -> None:
    done = _maintain(root, kills=1)
    assert done.returncode == 0, done.stderr          # before: killed by the signal (-15)
    report = json.loads(done.stdout)
    assert report["stopped"] == "SIGTERM"
    steps = {s["step"]: s for s in report["steps"]}
    merge = steps["merge"]
    # the group being decided when the signal came is merged; the next one is not asked
    assert [a["action"] for a in merge["actions"]] == ["merged"] and merge["stopped"]
    assert len(merge["found"]["candidates"]) == 2
    for later in ("split", "health", "followups"):
        assert steps[later]["skipped"] == "stopped: SIGTERM"
    assert "SIGTERM" in done.stderr and "stopped early" in done.stderr
    left = _notes(root)
    assert len(left & {"knowledge/a1/a1.md", "knowledge/a2/a2.md"}) == 1   # merged
    assert {"knowledge/b1/b1.md", "knowledge/b2/b2.md"} <= left            # next time
    assert _journals(root) == []
    vault = open_vault(root, SETTINGS)   # links to the merged note were rewritten
    try:
        vault.index()
        assert [e for e in vault.graph.dangling_edges() if e[0].startswith("knowledge/")] == []
    finally:
        vault.close()


def test_a_second_sigterm_stops_at_once(root: Path) -> None:
    done = _maintain(root, kills=2)
    assert done.returncode == 130, done.stderr
    assert "second SIGTERM" in done.stderr
    assert _notes(root) == set(NOTES)           # the merge in progress never happened
    assert _journals(root) == []
