"""Progress bars: on a terminal (a real pty) for index, none with --no-progress, --json or a pipe."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from reme_agent.engine.progress import SILENT, auto

BAR_MARKS = ("\r", "%|", "it/s", "file/s", "block/s")


def make_vault(root: Path, notes: int = 5) -> Path:
    for i in range(notes):
        f = root / "knowledge" / f"n{i}" / f"n{i}.md"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f"---\ntitle: Note {i}\n---\n# Note {i}\n\nSome text about topic {i}.\n",
                     encoding="utf-8")
    return root


def run(args: list[str], tty: bool) -> tuple[int, str, str]:
    """`reme-agent <args>` in a new process; stderr is a pty when `tty` (stdout a pipe)."""
    env = {**os.environ, "REME_EMBEDDER__NAME": "hash"}
    cmd = [sys.executable, "-m", "reme_agent", *args]
    if not tty:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=180)
        return done.returncode, done.stdout, done.stderr
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a terminal's size
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=slave, env=env, text=True)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the child closed the pty
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    out = proc.stdout.read() if proc.stdout else ""
    return proc.wait(timeout=180), out, b"".join(chunks).decode("utf-8", "replace")


def test_index_shows_its_stages_on_a_terminal(tmp_path: Path) -> None:
    vault = make_vault(tmp_path / "v")
    code, out, err = run(["index", "--vault", str(vault)], tty=True)
    assert code == 0, err
    assert "reading" in err and "embedding" in err and "%|" in err
    assert out.startswith("5 files")  # the result itself stays on stdout, bar-free


@pytest.mark.parametrize("flag", ["--no-progress", "--json"])
def test_no_bar_with_no_progress_or_json_even_on_a_terminal(tmp_path: Path, flag: str) -> None:
    vault = make_vault(tmp_path / "v")
    code, out, err = run(["index", "--vault", str(vault), flag], tty=True)
    assert code == 0, err
    assert not any(mark in err for mark in BAR_MARKS), repr(err)
    if flag == "--json":
        assert json.loads(out)["files"] == 5


@pytest.mark.parametrize("command", [["index"], ["maintain", "--only", "communities"],
                                     ["autolink", "--levels", "L1,L4"]])
def test_piped_stderr_gets_no_bar(tmp_path: Path, command: list[str]) -> None:
    vault = make_vault(tmp_path / "v")
    code, out, err = run([*command, "--vault", str(vault)], tty=False)
    assert code == 0, err
    assert not any(mark in err for mark in BAR_MARKS), repr(err)
    assert out.strip()


def test_maintain_and_autolink_show_their_batches_on_a_terminal(tmp_path: Path) -> None:
    vault = make_vault(tmp_path / "v")
    code, _, err = run(["maintain", "--only", "communities", "--vault", str(vault)], tty=True)
    assert code == 0 and "maintain" in err and "step" in err, err
    code, _, err = run(["autolink", "--levels", "L1,L4", "--vault", str(vault)], tty=True)
    assert code == 0 and "auto-link L1" in err and "auto-link L4" in err, err


def test_auto_is_silent_off_a_terminal_or_when_disabled(tmp_path: Path) -> None:
    with open(tmp_path / "log", "w", encoding="utf-8") as plain:
        assert auto(True, plain) is SILENT
    master, slave = pty.openpty()
    with os.fdopen(slave, "w") as tty:
        assert auto(False, tty) is SILENT
        assert auto(True, tty) is not SILENT
    os.close(master)
