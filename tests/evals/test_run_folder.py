"""`reme-agent eval` writes a new run folder; the committed reference run is rewritten only
on purpose (`--out evals/results`)."""

from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path

import pytest

from evals.report import RESULTS_DIR
from evals.run import run_folder
from reme_agent.cli import main


def _snapshot(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_eval_with_the_default_out_leaves_the_committed_results_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = _snapshot(RESULTS_DIR)
    assert "report.md" in before and "synthetic.json" in before
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    assert main(["eval", "--dataset", "synthetic", "--limit", "2", "--embedder", "hash",
                 "--quick", "--no-progress", "--work", str(tmp_path / "work")]) == 0
    assert _snapshot(RESULTS_DIR) == before          # byte-identical, nothing added
    runs = list((here / ".reme" / "eval").iterdir())
    assert len(runs) == 1
    written = set(_snapshot(runs[0]))
    assert {"report.md", "synthetic.hash.json"} <= written
    assert "synthetic" in (runs[0] / "report.md").read_text(encoding="utf-8")


def test_each_run_gets_a_folder_of_its_own(tmp_path: Path) -> None:
    now = dt.datetime(2026, 12, 2, 9, 30, 5, tzinfo=dt.UTC)
    first, second = run_folder(tmp_path, now), run_folder(tmp_path, now)
    assert first.name == "20261202T093005Z" and second.name == "20261202T093005Z-2"
    assert first.is_dir() and second.is_dir() and not any(first.iterdir())
