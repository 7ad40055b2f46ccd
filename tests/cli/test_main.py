"""The command table and the exit codes of `reme_agent.cli.main` (through `main()`)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reme_agent.cli import COMMANDS, cli, main

CLI_PKG = Path(__file__).resolve().parents[2] / "reme_agent" / "cli"
EVERY_COMMAND = ["autolink", "bench", "config", "demo", "distill", "eval", "export-agents",
                 "hook", "index", "init", "lint", "maintain", "mcp", "read", "search", "serve", "sync",
                 "tool", "tools", "traverse", "watch", "worker"]


@pytest.fixture
def vault(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("REME_EMBEDDER__NAME", "hash")
    root = tmp_path / "vault"
    assert main(["init", "--vault", str(root)]) == 0
    return root


def run_python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env}, check=False)


# -- one table, no side effects ----------------------------------------------------------
def test_the_group_holds_exactly_the_commands_of_the_table() -> None:
    names = [c.name for c in COMMANDS]
    assert len(names) == len(set(names))
    assert sorted(names) == EVERY_COMMAND == sorted(cli.commands)
    assert all(cli.commands[c.name] is c for c in COMMANDS)


def test_no_command_module_registers_itself_or_knows_the_group() -> None:
    """Command modules build commands; only main.py adds them to the group."""
    for path in sorted(CLI_PKG.glob("*.py")):
        if path.name in ("main.py", "__init__.py"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert node.module not in ("reme_agent.cli", "reme_agent.cli.main"), path.name
            if isinstance(node, ast.Attribute):
                assert node.attr not in ("add_command", "commands"), f"{path.name}:{node.lineno}"


def test_only_the_cli_package_imports_click() -> None:
    pkg = CLI_PKG.parent
    for path in sorted(pkg.rglob("*.py")):
        if CLI_PKG in path.parents:
            continue
        text = path.read_text(encoding="utf-8")
        assert "import click" not in text and "from click" not in text, path


def test_importing_the_cli_loads_no_heavy_dependency() -> None:
    """`reme-agent --help` stays fast: every heavy import is inside a command body."""
    out = run_python("import sys, reme_agent.cli; print(sorted(m for m in ('agentscope', "
                     "'chromadb', 'numpy', 'networkx', 'mcp', 'jieba', 'pydantic', 'evals') "
                     "if m in sys.modules))")
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr


# -- exit codes ----------------------------------------------------------------------------
def test_success_is_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "--reference"]) == 0
    assert "search:" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["no-such-command"], ["search"], ["index", "--no-such-flag"],
                                  ["search", "q", "--fusion", "nope"],
                                  ["maintain", "--every", "soon"]])
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Error:" in err and "Traceback" not in err


def test_a_reme_error_is_one_error_line_and_exit_1(vault: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["read", "knowledge/none/none.md", "--vault", str(vault)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: ") and len(err.strip().splitlines()) == 1


def test_every_failure_uses_the_same_prefix(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "messages.json"
    bad.write_text("{not json")
    assert main(["sync", "--messages", str(bad), "--vault", str(tmp_path)]) == 1
    assert capsys.readouterr().err.startswith("Error: Line 1 of the transcript file")


def test_a_failure_the_command_reports_exits_1(vault: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    note = vault / "knowledge" / "a" / "a.md"
    note.parent.mkdir(parents=True)
    note.write_text("---\ntitle: A\n---\nSee [[nowhere]].\n", encoding="utf-8")
    assert main(["lint", "--vault", str(vault), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["dangling"]["count"] == 1
    assert main(["lint", "--vault", str(vault), "--json", "--strict"]) == 1


def test_an_internal_error_is_3_without_a_traceback(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    import reme_agent.config

    def boom() -> str:
        raise RuntimeError("boom")

    monkeypatch.setattr(reme_agent.config, "reference_yaml", boom)
    monkeypatch.delenv("REME_DEBUG", raising=False)
    assert main(["config", "--reference"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("Error: internal error: RuntimeError: boom") and "Traceback" not in err
    monkeypatch.setenv("REME_DEBUG", "1")
    assert main(["config", "--reference"]) == 3
    assert "Traceback" in capsys.readouterr().err


def test_index_keeps_stdout_clean_and_warns_on_stderr(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    (root / ".reme").mkdir(parents=True)
    (root / "knowledge").mkdir()
    (root / "knowledge" / "ok.md").write_text("---\ntitle: Ok\n---\nfine\n", encoding="utf-8")
    (root / "knowledge" / "bin.md").write_bytes(b"\xff\x00binary")
    out = subprocess.run([sys.executable, "-m", "reme_agent", "index", "--vault", str(root)],
                         capture_output=True, text=True, check=False,
                         env={**os.environ, "REME_EMBEDDER__NAME": "hash"})
    assert out.returncode == 0, out.stderr
    assert "bin.md" not in out.stdout and "1 skipped" in out.stdout
    assert "skipped knowledge/bin.md" in out.stderr


def test_every_error_line_starts_with_the_same_prefix() -> None:
    """No command prints its own `error:` / `ERROR` spelling; ClickException adds `Error: `."""
    for path in sorted(CLI_PKG.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
                bad = ("error:" in text.lower() and "Error: " not in text
                       and "--" not in text)  # help text may name an option
                assert not bad, f"{path.name}:{node.lineno}: {text!r}"


def test_demo_json_is_one_json_document(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REME_EMBEDDER__NAME", "hash")
    assert main(["demo", "--vault", str(tmp_path / "demo"), "--json"]) == 0
    out = capsys.readouterr().out
    data = json.loads(out)
    assert data["copied"] > 0 and data["index"]["files"] == data["copied"]
    assert len(data["queries"]) == 5 and all(q["results"] for q in data["queries"])


def test_eval_without_its_data_is_a_user_error_naming_the_file(tmp_path: Path) -> None:
    # a process of its own: the eval command quiets the reme_agent logger for its run
    done = subprocess.run([sys.executable, "-m", "reme_agent", "eval", "--dataset", "locomo",
                           "--data", str(tmp_path / "none"), "--embedder", "hash",
                           "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work")],
                          capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("Error: The eval data file ")
    assert "locomo_dev.json" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_the_eval_data_folder_defaults_next_to_the_checkout(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from reme_agent.cli.checkout import load_package

    load_package("evals", what="eval suite", command="eval")
    from evals.datasets import DEFAULT_DATA, data_dir

    monkeypatch.delenv("REME_EVAL_DATA", raising=False)
    assert data_dir() == DEFAULT_DATA == CLI_PKG.parents[2] / "shared" / "data"
