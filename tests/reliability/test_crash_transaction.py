"""kill -9 at every step of a multi-file change: 0 dangling links, old or new state (G1).

A child process runs the `move` tool on a note with 120 inbound links (and, second, a
merge/split-shaped transaction: creates, rewrites, deletes, inbound retargeting) and is
SIGKILLed at checkpoint k (`REME_TX_KILL_AT`, read by `engine.transaction` at every step).
Then this process opens the vault, which rolls the journal, and checks: every file is
byte-identical to the all-old or the all-new state (the whole vault, not file by file),
every link resolves with the real resolver, and after `index` the graph has no dangling
edge and the index matches the files. Kill points: every phase boundary (before the
journal, journal temp file, journal in place, each of the first and last steps, the mark,
the removal) and a sample of the write phase.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from reme_agent.engine.retarget import plan_move
from reme_agent.engine.store import stamp_of
from reme_agent.engine.transaction import JOURNAL_DIR, KILL_ENV, Transaction, checkpoints
from reme_agent.vault import open_vault
from tests.reliability.conftest import ROOT
from tests.reliability.tx_child import HUB, HUB_NEW, LOSER, SETTINGS, WINNER, mixed

INBOUND = 120
FORMS = ("[[hub]]", "[[hub|the hub]]", "uses:: [[hub]]", "[[knowledge/hub/hub.md]]",
         "[[hub#Details]]", "[links_to:: [[Hub]]]")


def fm(title: str) -> str:
    return f"---\ntitle: {title}\n---\n# {title}\n\n"


def move_notes() -> dict[str, str]:
    notes = {HUB: fm("Hub") + "Links out: [[other]] and [[./notes.md]].\n\n## Details\n\nx\n",
             "knowledge/hub/notes.md": fm("Hub notes") + "Back to [[hub]].\n",
             "knowledge/other/other.md": fm("Other") + "See [[hub]].\n"}
    for i in range(INBOUND):
        form = FORMS[i % len(FORMS)]
        notes[f"knowledge/s{i:03d}/s{i:03d}.md"] = fm(f"S{i}") + f"Note {i} cites {form}.\n"
    return notes


def mixed_notes() -> dict[str, str]:
    notes = {WINNER: fm("Winner") + "The winner.\n",
             LOSER: fm("Loser") + "The loser, see [[winner]].\n",
             "knowledge/other/other.md": fm("Other") + "See [[loser]] and [[winner]].\n"}
    for i in range(60):
        form = ("[[loser]]", "[[loser|the loser]]", "is_a:: [[knowledge/loser/loser.md]]")[i % 3]
        notes[f"daily/2026-11-28/d{i:02d}/d{i:02d}.md"] = fm(f"D{i}") + f"Day note {form}.\n"
    return notes


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".reme" not in p.relative_to(root).parts}


def child(root: Path, scenario: str, kill_at: int | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != KILL_ENV}
    if kill_at is not None:
        env[KILL_ENV] = str(kill_at)
    return subprocess.run([sys.executable, "-m", "tests.reliability.tx_child", str(root), scenario],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def dangling(root: Path) -> list[str]:
    """Every link in the vault that the real resolver cannot resolve (source: target)."""
    vault = open_vault(root, SETTINGS)          # a fresh opener: rolls the journal first
    try:
        view = vault.view()
        return [f"{src}: {link.target}" for src, meta in view.notes.items()
                for link in meta.links if view.resolve(link, src) is None]
    finally:
        vault.close()


def index_consistent(root: Path) -> None:
    vault = open_vault(root, SETTINGS)
    try:
        vault.index()
        assert vault.graph.dangling_edges() == []
        rows = vault.state.files()
        notes = {p: stamp_of(b) for p, b in snapshot(root).items() if p.endswith(".md")}
        assert {p: r.stamp for p, r in rows.items()} == notes
    finally:
        vault.close()


def run_to_the_end(root: Path, scenario: str) -> int:
    """The change without a kill, in this process (the tool's plan + commit, without its
    re-index); returns the checkpoints it passed. A tool that planned differently would
    show up below as a state that is neither all-old nor all-new."""
    vault = open_vault(root, SETTINGS)
    before = checkpoints()
    try:
        if scenario == "move":
            tx = Transaction(vault.store)
            plan_move(tx, vault.view(), HUB, HUB_NEW, alias_bare=False)
            tx.commit()
        else:
            mixed(vault)
    finally:
        vault.close()
    return checkpoints() - before


@pytest.fixture(scope="module")
def states(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict, dict, int]]:
    """Per scenario: (indexed template, all-old files, all-new files, checkpoints passed)."""
    out = {}
    for scenario, notes in (("move", move_notes()), ("mixed", mixed_notes())):
        base = tmp_path_factory.mktemp(scenario)
        template = base / "template"
        for rel, text in notes.items():
            (template / rel).parent.mkdir(parents=True, exist_ok=True)
            (template / rel).write_text(text, encoding="utf-8")
        vault = open_vault(template, SETTINGS, create=True)
        vault.index()
        assert vault.graph.dangling_edges() == []
        vault.close()
        done = base / "done"
        shutil.copytree(template, done)
        total = run_to_the_end(done, scenario)
        out[scenario] = (template, snapshot(template), snapshot(done), total)
    return out


def kill_points(total: int) -> list[int]:
    """Every phase boundary, the first and last steps, and every 15th step between."""
    edges = set(range(1, 6)) | set(range(max(1, total - 6), total + 1))
    return sorted(edges | set(range(15, total - 6, 15)))


def kill_and_check(template: Path, root: Path, scenario: str, k: int, total: int,
                   old: dict[str, bytes], new: dict[str, bytes]) -> str:
    """Kill the child at checkpoint k, open the vault again, check it: 'old' or 'new'."""
    shutil.copytree(template, root)
    run = child(root, scenario, kill_at=k)
    assert run.returncode == -9, (k, run.returncode, run.stderr[-2000:])
    assert dangling(root) == [], f"kill at checkpoint {k}/{total}"
    now = snapshot(root)
    assert now in (old, new), f"kill at checkpoint {k}: a mix of old and new files"
    assert not list((root / ".reme").glob(f"{JOURNAL_DIR}/*.json")), \
        "the journal outlived its roll"
    return "old" if now == old else "new"


@pytest.mark.parametrize("scenario", ["move", "mixed"])
def test_kill_9_at_every_step_leaves_no_dangling_link(states, scenario, tmp_path) -> None:
    template, old, new, total = states[scenario]
    assert old != new and total > (INBOUND if scenario == "move" else 60)
    points = kill_points(total)
    with ThreadPoolExecutor(4) as pool:   # each point is a child process and fsyncs
        got = dict(zip(points, pool.map(lambda k: kill_and_check(
            template, tmp_path / f"k{k}", scenario, k, total, old, new), points), strict=True))
    for k in (points[0], points[3], points[len(points) // 2], points[-4], points[-1]):
        index_consistent(tmp_path / f"k{k}")     # the index agrees after `index`
    figures = {state: sum(1 for v in got.values() if v == state) for state in ("old", "new")}
    # Killed before the last step: rolled back; after it: the change stands.
    assert figures["old"] > 0 and figures["new"] > 0, figures
    print(f"{scenario}: {len(points)} kill points of {total}, 0 dangling links, {figures}")


def test_a_recoverer_killed_mid_roll_is_rolled_again(states, tmp_path) -> None:
    template, old, _new, total = states["move"]
    root = tmp_path / "v"
    shutil.copytree(template, root)
    assert child(root, "move", kill_at=total // 2).returncode == -9   # half the links written
    assert child(root, "open", kill_at=20).returncode == -9          # the roll-back, killed too
    assert dangling(root) == []
    assert snapshot(root) == old


def test_a_live_commit_is_not_rolled_by_another_opener(states, tmp_path) -> None:
    """The committing process holds the journal's lock; another opener leaves it alone."""
    import fcntl

    from reme_agent.engine.transaction import recover

    template, old, _new, total = states["move"]
    root = tmp_path / "v"
    shutil.copytree(template, root)
    assert child(root, "move", kill_at=total // 2).returncode == -9
    journal = next((root / ".reme" / JOURNAL_DIR).glob("*.json"))
    fd = os.open(journal.with_suffix(".lock"), os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)       # as if its owner were still alive
    try:
        vault = open_vault(root, SETTINGS)
        assert recover(vault.store) == [] and journal.exists()
        vault.close()
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    assert dangling(root) == [] and snapshot(root) == old


def test_a_file_edited_after_the_crash_is_left_alone_and_the_journal_kept(states,
                                                                          tmp_path) -> None:
    template, old, _new, total = states["move"]
    root = tmp_path / "v"
    shutil.copytree(template, root)
    assert child(root, "move", kill_at=total // 2).returncode == -9
    edited = "knowledge/s000/s000.md"          # rewritten by the move before the kill
    text = (root / edited).read_text(encoding="utf-8")
    assert "[[center]]" in text  # a short link stays short (the new name)
    (root / edited).write_text(text + "A person's edit after the crash.\n", encoding="utf-8")
    vault = open_vault(root, SETTINGS)
    vault.close()
    assert (root / edited).read_text(encoding="utf-8").endswith("after the crash.\n")
    assert list((root / ".reme" / JOURNAL_DIR).glob("*.unresolved.json"))
    rest = {p: b for p, b in snapshot(root).items() if p != edited}
    assert rest == {p: b for p, b in old.items() if p != edited}   # everything else rolled back
