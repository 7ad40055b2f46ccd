"""Rough edges (2026-12-02): small things a real user hits, through the public surface.

Each test is one item of docs/decisions.md, "Rough edges (2026-12-02)", checked on real
files through the tools, the command line or the MCP server; each failed on the code
before its fix.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from reme_agent.engine.parser import split_note
from reme_agent.toolkit.registry import BY_NAME
from reme_agent.vault import Vault
from tests.reliability.conftest import make_vault


def run(vault: Vault, tool: str, **args: object) -> dict:
    return BY_NAME[tool].fn(vault, **args)


def listing(vault: Vault) -> list[str]:
    """Every file and folder of the vault outside `.reme/`."""
    return sorted(p.relative_to(vault.root).as_posix() for p in vault.root.rglob("*")
                  if ".reme" not in p.relative_to(vault.root).parts)


# -- deleting the last property removes the frontmatter block (as Obsidian does) ----------
LAST = {
    "plain.md": ("---\ntitle: x\n---\n# Body\n\ntext\n", "# Body\n\ntext\n"),
    "bom-crlf.md": ("\ufeff---\r\ntitle: x\r\ntags: [a]\r\n---\r\nBody\r\n", "\ufeffBody\r\n"),
    "only.md": ("---\ntitle: x\n---", ""),
    "blank-lines.md": ("---\n\ntitle: x\n\n---\nBody\n", "Body\n"),
}


@pytest.mark.parametrize("path", sorted(LAST))
def test_deleting_the_last_property_removes_the_empty_block(tmp_path: Path, path: str) -> None:
    text, expected = LAST[path]
    vault = make_vault(tmp_path / "v", {path: text}, index=False)
    keys = list(split_note(text).frontmatter)
    run(vault, "property_delete", path=path, keys=keys)
    assert (vault.root / path).read_bytes() == expected.encode()
    vault.close()


KEPT = {
    # a comment is the person's own text: the block stays with it
    "comment.md": ("---\n# kept\ntitle: x\n---\nBody\n", "---\n# kept\n---\nBody\n"),
    # without the block, the body's own `---` lines would become the frontmatter
    "rule.md": ("---\ntitle: x\n---\n---\nnot: props\n---\n",
                "---\n---\n---\nnot: props\n---\n"),
}


@pytest.mark.parametrize("path", sorted(KEPT))
def test_the_empty_block_stays_when_removing_it_would_change_the_note(
        tmp_path: Path, path: str) -> None:
    text, expected = KEPT[path]
    vault = make_vault(tmp_path / "v", {path: text}, index=False)
    run(vault, "property_delete", path=path, keys=["title"])
    assert (vault.root / path).read_text(encoding="utf-8") == expected
    assert split_note(expected).frontmatter == {}
    vault.close()


# -- full-width and other compatibility look-alikes -------------------------------------------
WIDE = {"knowledge/ABC.md": "# ABC\n", "knowledge/会议(周一)/会议(周一).md": "# 周一\n",
        "knowledge/v2.md": "# v2\n", "knowledge/bm25/bm25.md": "# BM25\n"}


@pytest.mark.parametrize(("path", "twin"), [
    ("knowledge/ＡＢＣ.md", "knowledge/ABC.md"),                      # full-width letters
    ("knowledge/ａｂｃ.md", "knowledge/ABC.md"),                      # ... and another case
    ("knowledge/v２.md", "knowledge/v2.md"),                         # a full-width digit
    ("knowledge/会议（周一）/会议（周一）.md", "knowledge/会议(周一)/会议(周一).md"),  # brackets
    ("ｋｎｏｗｌｅｄｇｅ/new-note.md", "knowledge"),                   # a folder on the way
])
def test_a_new_name_matching_another_in_its_full_width_form_is_refused(
        tmp_path: Path, path: str, twin: str) -> None:
    from reme_agent.errors import ReMeError

    vault = make_vault(tmp_path / "v", WIDE, index=False)
    before = listing(vault)
    for tool, args in (("write", {"path": path, "body": "x\n"}),
                       ("copy", {"src": "knowledge/bm25/bm25.md", "dst": path})):
        with pytest.raises(ReMeError, match="full-width") as err:
            run(vault, tool, **args)
        assert repr(twin) in str(err.value)
    assert listing(vault) == before  # nothing made, no folder either
    vault.close()


def test_full_width_punctuation_alone_is_a_name_like_any_other(tmp_path: Path) -> None:
    """Chinese titles are typed with full-width punctuation: only a collision is refused."""
    vault = make_vault(tmp_path / "v", WIDE, index=False)
    for path in ("knowledge/问题：为什么？.md", "knowledge/会议（周二）/会议（周二）.md",
                 "knowledge/ＡＢＤ.md"):
        run(vault, "write", path=path, body="x\n")
        assert (vault.root / path).is_file()
    vault.close()


# -- reading a folder ------------------------------------------------------------------------
def test_reading_a_folder_says_it_is_one_and_how_to_list_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from reme_agent.cli import main
    from reme_agent.errors import FolderNotNote

    vault = make_vault(tmp_path / "v", WIDE, index=False)
    with pytest.raises(FolderNotNote, match="'knowledge/bm25' is a folder, not a note") as err:
        run(vault, "read", path="knowledge/bm25")
    assert "`list` (path='knowledge/bm25')" in str(err.value)
    assert "folder note 'knowledge/bm25/bm25.md'" in str(err.value)
    vault.close()
    assert main(["read", "knowledge", "--vault", str(vault.root)]) == 1
    err_text = capsys.readouterr().err
    assert err_text.startswith("Error: 'knowledge' is a folder, not a note.")
    assert "`list` (path='knowledge')" in err_text and "folder note" not in err_text
    assert len(err_text.strip().splitlines()) == 1


# -- sync --messages: the file's own session id ----------------------------------------------
TURNS = [{"role": "user", "content": "keep the blend"}, {"role": "assistant", "content": "kept"}]
CLAUDE_LINES = "\n".join(json.dumps({"type": t["role"], "sessionId": "cc-7", "message": t})
                         for t in TURNS) + "\n"


@pytest.mark.parametrize(("content", "flag", "session"), [
    (json.dumps({"session_id": "s-file", "messages": TURNS}), None, "s-file"),
    (CLAUDE_LINES, None, "cc-7"),                    # Claude Code's JSONL: sessionId a line
    (CLAUDE_LINES, "s-flag", "s-flag"),              # the flag wins
    (json.dumps(TURNS), None, "transcript-"),        # no id anywhere: the day's, as before
])
def test_sync_uses_the_session_id_inside_the_messages_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str, flag: str | None,
        session: str) -> None:
    from click.testing import CliRunner

    from reme_agent.cli import cli

    monkeypatch.setenv("REME_EMBEDDER__NAME", "hash")
    root = tmp_path / "v"
    root.mkdir()
    chat = tmp_path / "chat.jsonl"
    chat.write_text(content, encoding="utf-8")
    args = ["sync", "--messages", str(chat), "--mode", "transcript", "--json", "--vault",
            str(root), *(["--session-id", flag] if flag else [])]
    got = CliRunner().invoke(cli, args)
    assert got.exit_code == 0, got.output
    path = json.loads(got.stdout)["created"][0]
    note = split_note((root / path).read_text(encoding="utf-8"))
    if session.endswith("-"):
        assert note.frontmatter["originSessionId"].startswith(session)
    else:
        assert note.frontmatter["originSessionId"] == session
        assert path.endswith(f"/session-{session}/session-{session}.md")
        again = CliRunner().invoke(cli, args)  # the session's ledger: nothing twice
        assert again.exit_code == 0 and not json.loads(again.stdout)["created"]


# -- a vault root that is the disk, a system folder or the home folder -------------------
@pytest.mark.parametrize("command", [["init"], ["search", "notes"], ["index"],
                                     ["tool", "list"], ["demo", "--fresh"]])
def test_the_home_folder_is_refused_as_a_vault_and_nothing_is_created(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        command: list[str]) -> None:
    from reme_agent.cli import main

    home = tmp_path / "home"
    (home / "Downloads").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("REME_EMBEDDER__NAME", "hash")
    assert main([*command, "--vault", str(home)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: Refused ") and "it is your home folder" in err
    assert len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in home.iterdir()) == ["Downloads"]


def test_a_home_folder_obsidian_opened_as_a_vault_is_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from reme_agent.cli import main

    home = tmp_path / "home"
    (home / ".obsidian").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    assert main(["init", "--vault", str(home), "--no-obsidian-exclude"]) == 0
    assert (home / ".reme").is_dir()


@pytest.mark.parametrize("root", ["/", "/etc", "/usr", "/proc/self", "disk-link"])
def test_the_disk_and_system_folders_are_refused_as_vaults(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], root: str) -> None:
    from reme_agent.cli import main

    if root == "disk-link":
        (tmp_path / root).symlink_to("/")
        root = str(tmp_path / root)
    before = os.path.lexists("/.reme")
    assert main(["search", "notes", "--vault", root]) == 1
    err = capsys.readouterr().err
    assert "Refused vault folder" in err and ("system folder" in err or "file system's root" in err)
    assert os.path.lexists("/.reme") == before and not os.path.lexists(f"{root}/.reme")


# -- init in a vault whose Obsidian day notes live elsewhere --------------------------------
def _obsidian(root: Path, files: dict[str, object]) -> Path:
    for rel, value in files.items():
        (root / ".obsidian" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / ".obsidian" / rel).write_text(json.dumps(value), encoding="utf-8")
    return root


PERIODIC_0 = {"community-plugins.json": ["periodic-notes"],
              "plugins/periodic-notes/data.json": {
                  "daily": {"enabled": True, "folder": "Journal/", "format": "YYYY/MM/YYYY-MM-DD",
                            "template": ""}, "weekly": {"enabled": False}}}
PERIODIC_1 = {"community-plugins.json": ["calendar", "periodic-notes"],
              "plugins/periodic-notes/data.json": {
                  "activeCalendarSet": "Work", "calendarSets": [
                      {"id": "Default", "day": {"enabled": True, "folder": "Daily",
                                                "format": "YYYY-MM-DD"}},
                      {"id": "Work", "day": {"enabled": True, "folder": "Work/日记",
                                             "format": "YYYY年MM月DD日"}}]}}


@pytest.mark.parametrize(("settings", "folder", "day_note"), [
    ({"daily-notes.json": {"folder": "Journal", "format": "YYYY-MM-DD"}}, "Journal",
     "Journal/2026-12-01.md"),
    ({"daily-notes.json": {}}, "", "2026-12-01.md"),                      # Obsidian's default
    (PERIODIC_0, "Journal", "Journal/2026/12/2026-12-01.md"),
    (PERIODIC_1, "Work/日记", "Work/日记/2026年12月01日.md"),
    # the plugin installed but disabled: the core plugin's settings
    ({**PERIODIC_0, "community-plugins.json": [], "daily-notes.json": {"folder": "Days"}},
     "Days", "Days/2026-12-01.md"),
])
def test_init_makes_no_daily_folder_when_obsidian_keeps_day_notes_elsewhere(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        settings: dict[str, object], folder: str, day_note: str) -> None:
    from reme_agent.cli import main

    monkeypatch.setenv("REME_EMBEDDER__NAME", "hash")
    root = _obsidian(tmp_path / "v", settings)
    assert main(["init", "--vault", str(root), "--no-obsidian-exclude", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert "daily" not in data["created"] and not (root / "daily").exists()
    assert data["daily_notes"]["folder"] == folder
    assert {"knowledge", "audit", "meta", "resource"} <= set(data["created"])
    vault = make_vault(root, {}, index=False)
    run(vault, "daily_write", slug="standup", body="Talked about BM25.", date="2026-12-01")
    assert "Talked about BM25." in (root / day_note).read_text(encoding="utf-8")
    assert not (root / "daily").exists()
    vault.close()


def test_init_still_makes_daily_for_reme_agents_own_workspaces(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from reme_agent.cli import main

    monkeypatch.setenv("REME_EMBEDDER__NAME", "hash")
    plain = tmp_path / "plain"
    assert main(["init", "--vault", str(plain)]) == 0 and (plain / "daily").is_dir()
    periodic_off = _obsidian(tmp_path / "off", {
        "community-plugins.json": ["periodic-notes"],
        "plugins/periodic-notes/data.json": {"daily": {"enabled": False, "folder": "J"}}})
    assert main(["init", "--vault", str(periodic_off), "--no-obsidian-exclude"]) == 0
    assert (periodic_off / "daily").is_dir()


# -- bad arguments: one clear line on every face ---------------------------------------------
def _mcp_calls(vault: Vault, calls: list[dict[str, object]]) -> list[tuple[bool, str]]:
    import asyncio

    from mcp.client.client import Client

    from reme_agent.mcp_server import build_server

    async def go() -> list[tuple[bool, str]]:
        async with Client(build_server(vault, "expert")) as client:
            out = []
            for args in calls:
                got = await client.call_tool("search", args)
                out.append((bool(got.is_error), got.content[0].text))
            return out

    return asyncio.run(go())


def test_mcp_argument_type_errors_are_one_line_naming_the_argument(tmp_path: Path) -> None:
    vault = make_vault(tmp_path / "v", WIDE)
    got = _mcp_calls(vault, [{"query": "abc", "limit": "ten"}, {"limit": 3},
                             {"query": "abc", "layers": "knowledge"},
                             {"query": ["abc"], "limit": "x"}])
    vault.close()
    for is_error, text in got:
        assert is_error and "\n" not in text and "pydantic" not in text, text
        assert text.startswith("Error executing tool search: Argument ")
    assert "Argument 'limit' has a wrong value 'ten'" in got[0][1]
    assert "Expected an integer." in got[0][1]
    assert "Argument 'query' is missing. Expected a string." in got[1][1]
    assert "Argument 'layers' has a wrong value 'knowledge'" in got[2][1]
    assert "'query'" in got[3][1] and "'limit'" in got[3][1]   # each bad argument named


def test_search_limit_zero_is_one_clear_line_on_every_face(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from reme_agent.cli import main
    from reme_agent.toolkit import build_toolkit
    from tests.toolkit.conftest import call_toolkit

    why = "limit must be between 1 and 50, got 0."
    vault = make_vault(tmp_path / "v", WIDE)
    [(is_error, text)] = _mcp_calls(vault, [{"query": "abc", "limit": 0}])
    assert is_error and text == f"Error executing tool search: {why}"
    state, text = call_toolkit(build_toolkit(vault), "search", query="abc", limit=0)
    assert state == "error" and why in text and "Traceback" not in text
    vault.close()
    for command in (["search", "abc"], ["tool", "search", "--query", "abc"]):
        assert main([*command, "--limit", "0", "--vault", str(vault.root)]) == 1
        err = capsys.readouterr().err
        assert err == f"Error: {why}\n"


# -- SIGTERM stops the long-running commands cleanly -----------------------------------------
def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: str) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", int(port))) == 0


@pytest.mark.parametrize("command", [["serve"], ["watch"],
                                     ["mcp", "--transport", "http", "--tier", "expert"]])
def test_sigterm_stops_a_serving_command_and_removes_its_socket(
        tmp_path: Path, command: list[str]) -> None:
    import signal
    import subprocess
    import sys
    import time

    vault = make_vault(tmp_path / "v", WIDE)
    sock = vault.internal / "warm" / "serve.sock"
    vault.close()
    if command[0] == "mcp":
        command = [*command, "--port", str(_free_port())]
    env = {k: v for k, v in os.environ.items() if not k.startswith("REME_")} | {
        "REME_EMBEDDER__NAME": "hash", "REME_INDEX__PROGRESS": "false"}
    proc = subprocess.Popen([sys.executable, "-m", "reme_agent", *command, "--vault",
                             str(vault.root)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not sock.exists() or (command[0] == "mcp" and not _listening(command[-1])):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        time.sleep(0.5)  # past start-up, into the serving loop
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert not sock.exists()
    if command[0] == "mcp":  # where to connect: one plain line, not a WARNING record
        banner = [line for line in err.splitlines() if "/mcp" in line]
        assert banner == [f"MCP (expert tier) on http://127.0.0.1:{command[-1]}/mcp"], err
        assert "WARNING" not in err


def test_a_socket_left_by_a_killed_server_blocks_neither_clients_nor_the_next_server(
        tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    vault = make_vault(tmp_path / "v", WIDE)
    sock = vault.internal / "warm" / "serve.sock"
    vault.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("REME_")} | {
        "REME_EMBEDDER__NAME": "hash", "REME_INDEX__PROGRESS": "false"}
    base = [sys.executable, "-m", "reme_agent"]
    proc = subprocess.Popen([*base, "serve", "--vault", str(vault.root)], env=env,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not sock.exists():
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert sock.exists()  # nothing can clean up after kill -9
    got = subprocess.run([*base, "search", "ABC", "--json", "--vault", str(vault.root)],
                         env=env, capture_output=True, text=True, timeout=120, check=False)
    assert got.returncode == 0 and json.loads(got.stdout)["results"], got.stderr
    again = subprocess.run([*base, "serve", "--seconds", "1", "--vault", str(vault.root)],
                           env=env, capture_output=True, text=True, timeout=120, check=False)
    assert again.returncode == 0 and "serving search and hooks warm" in again.stderr
    assert not sock.exists()


def test_sigterm_stops_the_worker_like_ctrl_c(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    vault = make_vault(tmp_path / "v", WIDE, index=False)
    vault.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("REME_")} | {
        "REME_EMBEDDER__NAME": "hash", "REME_INDEX__PROGRESS": "false"}
    proc = subprocess.Popen([sys.executable, "-m", "reme_agent", "worker", "--no-llm",
                             "--vault", str(vault.root)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        while "draining" not in (line := proc.stderr.readline()):
            assert line, "the worker stopped before draining"
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out  # its summary, as after Ctrl-C
