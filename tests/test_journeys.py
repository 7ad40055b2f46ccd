"""What a user trips over on a fresh machine (the user-journey sweep, 2026-12-02).

Each test is one step a user took that used to end in a traceback, a wrong message or a
failed command; the vault, the index and the command line are real.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from reme_agent.cli import main


@pytest.fixture(autouse=True)
def hash_embedder(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("REME_EMBEDDER__NAME", "hash")
    level = logging.getLogger("reme_agent").level
    yield
    logging.getLogger("reme_agent").setLevel(level)  # `eval` quiets it in-process


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith("Error: ")
    return err


@pytest.mark.parametrize("command", ["init", "index"])
def test_a_file_given_as_the_vault_is_a_one_line_user_error(
        command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    note = tmp_path / "note.md"
    note.write_text("# a note\n")
    assert main([command, "--vault", str(note)]) == 1
    assert "is a file, not a vault folder" in one_error_line(capsys)
    assert note.read_text() == "# a note\n"


def test_init_under_a_file_is_a_one_line_user_error(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "note.md").write_text("x")
    assert main(["init", "--vault", str(tmp_path / "note.md" / "vault")]) == 1
    assert "Cannot create the vault folder" in one_error_line(capsys)


def test_lint_runs_on_a_vault_without_a_knowledge_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A plain Obsidian vault (notes at the top, no knowledge/) lints like any other."""
    vault = tmp_path / "obsidian"
    (vault / "audit" / "2026-12-01").mkdir(parents=True)
    (vault / "audit" / "2026-12-01" / "health.md").write_text("# Health report\n")
    (vault / "Ideas.md").write_text("See [[Missing note]] and [[Plan]].\n")
    (vault / "Plan.md").write_text("# Plan\n")
    (vault / "Lonely.md").write_text("# Nobody links here\n")
    assert main(["lint", "--vault", str(vault), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    # the whole vault, as the maintain prompt checks it; audit/ reports are not orphans
    assert [i["path"] for i in report["orphans"]["items"]] == ["Lonely.md"]
    assert [i["target"] for i in report["dangling"]["items"]] == ["Missing note"]
    # an explicit folder that does not exist is still the user's mistake
    assert main(["lint", "--vault", str(vault), "--folder", "knowledge"]) == 1
    assert "No folder 'knowledge'" in one_error_line(capsys)


def test_daily_write_says_appended_when_it_appends(tmp_path: Path) -> None:
    """An agent told "Replaced" after an append believes it lost the earlier entry."""
    from reme_agent import Settings, open_vault
    from reme_agent.toolkit import get_tool

    vault = open_vault(tmp_path / "v", Settings(), create=True)
    try:
        daily_write = get_tool("daily_write").fn
        first = daily_write(vault, slug="standup", body="Shipped the parser.")
        assert first.text.startswith("Created daily/")
        second = daily_write(vault, slug="standup", body="Reviewed the indexer.")
        path = second.data["path"]
        assert second.text.startswith(f"Appended to {path} (stamp ")
        text = (vault.root / path).read_text(encoding="utf-8")
        assert "Shipped the parser." in text and "Reviewed the indexer." in text
        third = daily_write(vault, slug="standup", body="Only this.", mode="replace")
        assert third.text.startswith(f"Replaced {path} (stamp ")
    finally:
        vault.close()


@pytest.mark.parametrize(("dataset", "name", "content"), [
    ("locomo", "locomo_dev.json", '{"a": 1}'),
    ("locomo", "locomo_dev.json", '[{"sample_id": "x"}]'),
    ("locomo", "locomo_dev.json", "not json"),
    ("cmrc", "cmrc2018_dev_half.json", "[1, 2]"),
])
def test_eval_data_of_the_wrong_shape_is_a_one_line_user_error(
        dataset: str, name: str, content: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / name).write_text(content, encoding="utf-8")
    code = main(["eval", "--dataset", dataset, "--data", str(tmp_path), "--embedder", "hash",
                 "--limit", "2", "--no-progress", "--out", str(tmp_path / "out"),
                 "--work", str(tmp_path / "work")])
    assert code == 1
    err = one_error_line(capsys)
    assert f"The eval data file {tmp_path / name} is not" in err and "--data FOLDER" in err


def test_eval_data_given_as_the_file_says_to_pass_its_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "locomo_dev.json"
    data.write_text("[]", encoding="utf-8")
    assert main(["eval", "--dataset", "locomo", "--data", str(data), "--embedder", "hash",
                 "--no-progress", "--out", str(tmp_path / "out")]) == 1
    assert f"The eval data path {data} is a file." in one_error_line(capsys)


def test_the_demo_hint_names_a_command_that_runs_after_make_demo(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`make demo` installs reme-agent into .venv/bin, which is not on PATH."""
    import subprocess

    from reme_agent import Settings
    from reme_agent.demo import run_demo

    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
    lines: list[str] = []
    run_demo(tmp_path / "demo", Settings(embedder={"name": "hash"}), echo=lines.append)
    command = lines[-1].split("try: ", 1)[1].split(" search ", 1)[0]
    assert command != "reme-agent"
    out = subprocess.run([command, "--help"], capture_output=True, text=True, check=True)
    assert "reme-agent" in out.stdout


def test_a_list_option_takes_the_json_list_its_help_shows(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`tool graph_traverse --help` shows seeds as ["knowledge/bm25/bm25.md"] (the model's
    description); typed like that, the option looked for a file named '["knowledge/..."]'."""
    vault = tmp_path / "v"
    for name, body in [("a", "See [[b]] and [[c]].\n"), ("b", "B.\n"), ("c", "C.\n")]:
        (vault / "knowledge" / name).mkdir(parents=True)
        (vault / "knowledge" / name / f"{name}.md").write_text(body, encoding="utf-8")
    assert main(["index", "--vault", str(vault)]) == 0
    capsys.readouterr()
    assert main(["tool", "graph_traverse", "--vault", str(vault), "--json",
                 "--seeds", '["knowledge/b/b.md", "knowledge/c/c.md"]', "--seeds", "[draft]",
                 "--direction", "in"]) == 1
    assert "No file at '[draft]'" in one_error_line(capsys)  # a plain "[name]" stays a name
    assert main(["tool", "graph_traverse", "--vault", str(vault), "--json",
                 "--seeds", '["knowledge/b/b.md", "knowledge/c/c.md"]', "--direction", "in"]) == 0
    rows = json.loads(capsys.readouterr().out)["edges"]
    assert {(r["source"], r["target"]) for r in rows} == {
        ("knowledge/a/a.md", "knowledge/b/b.md"), ("knowledge/a/a.md", "knowledge/c/c.md")}


def test_the_distill_prompt_names_its_own_bad_date_argument(tmp_path: Path) -> None:
    """The MCP prompt's argument is `date`; the error called it `start` (daily_list's)."""
    from reme_agent import Settings, open_vault
    from reme_agent.errors import InvalidArgument
    from reme_agent.mcp_prompts import distill_prompt

    vault = open_vault(tmp_path / "v", Settings(), create=True)
    try:
        with pytest.raises(InvalidArgument, match=r"^date '2026-99-01' is not a date\."):
            distill_prompt(vault, date="2026-99-01")
        with pytest.raises(InvalidArgument, match="No active daily notes on 2026-11-30"):
            distill_prompt(vault, date=" 2026-11-30 ")
    finally:
        vault.close()


def claude_line(role: str, text: str) -> str:
    return json.dumps({"type": role, "message": {"role": role, "content": text}})


@pytest.mark.parametrize("shape", ["jsonl", "one-line", "wrapped-list"])
def test_sync_reads_a_claude_code_transcript_like_the_hooks_do(
        shape: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`sync --messages ~/.claude/.../s.jsonl` said "Cannot read: Extra data: line 2"; a
    transcript of one line, or a list of Claude's wrapped lines, recorded nothing."""
    lines = [claude_line("user", "Rotate the JWT key every 30 days."),
             claude_line("assistant", "Noted: 30 days, old key valid for 24 hours.")]
    lines = lines[:1] if shape == "one-line" else lines
    text = "\n".join(lines) + "\n" if shape != "wrapped-list" else "[" + ",".join(lines) + "]"
    transcript = tmp_path / "s.jsonl"
    transcript.write_text(text, encoding="utf-8")
    vault = tmp_path / "v"
    assert main(["init", "--vault", str(vault)]) == 0
    assert main(["sync", "--vault", str(vault), "--messages", str(transcript), "--json",
                 "--mode", "transcript", "--session-id", "cc-1", "--date", "2026-11-30"]) == 0
    out = capsys.readouterr().out
    result = json.loads(out[out.index("{"):])
    assert result["turns"]["new"] == len(lines)
    note = (vault / result["written"][0]).read_text(encoding="utf-8")
    assert "Rotate the JWT key every 30 days." in note


def test_sync_of_a_file_without_messages_is_a_one_line_user_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "chat.json"
    bad.write_text('"just a string"', encoding="utf-8")
    vault = tmp_path / "v"
    vault.mkdir()
    assert main(["sync", "--vault", str(vault), "--messages", str(bad)]) == 1
    assert "holds no list of messages" in one_error_line(capsys)
    assert not (vault / "daily").exists()


def files_of(root: Path) -> dict[str, bytes]:
    """Every file a person sees in the vault (dot-folders such as .reme/ left out)."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)}


def test_session_end_writes_what_the_model_decided_and_nothing_else(tmp_path: Path) -> None:
    import datetime as dt

    from reme_agent.hooks import run_hook
    from reme_agent.testing import ScriptedChatModel, TextBlock, tool_call
    from tests.jobs.conftest import build

    today = dt.date(2026, 11, 30)
    vault = build(tmp_path / "v")
    try:
        before = files_of(vault.root)
        new = f"daily/{today.isoformat()}/release/release.md"
        model = ScriptedChatModel([
            [tool_call("s1", "daily_write", slug="release", body="## Progress\n- Tagged v1.2.\n")],
            [TextBlock(text="recorded")],
            [tool_call("d1", "daily_read", path=new)],
            [TextBlock(text="nothing durable")],  # the model decides to write nothing
        ])
        report = run_hook("session_end", vault, {"session_id": "r1", "messages": [
            {"role": "user", "content": "tag the release"}]}, model=model, today=today)
        assert report["sync"]["created"] == [new] and report["distill"]["written"] == []
        after = files_of(vault.root)
        changed = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
        assert changed == {new}
        assert "- Tagged v1.2." in after[new].decode()
    finally:
        vault.close()


def test_demo_fresh_never_deletes_a_folder_that_is_not_a_demo_vault(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`reme-agent demo --vault ~/Obsidian/Work --fresh` deleted the whole vault."""
    mine = tmp_path / "Work"
    (mine / "Projects").mkdir(parents=True)
    (mine / "Projects" / "Plan.md").write_text("# my plan\n", encoding="utf-8")
    assert main(["demo", "--vault", str(mine), "--fresh", "--no-progress"]) == 1
    err = one_error_line(capsys)
    assert "is not a demo vault" in err and "'Projects/Plan.md'" in err
    assert (mine / "Projects" / "Plan.md").read_text(encoding="utf-8") == "# my plan\n"

    demo = tmp_path / "demo-vault"  # a real demo vault is rebuilt, its edits undone
    assert main(["demo", "--vault", str(demo), "--json"]) == 0
    edited = next(demo.glob("knowledge/*/*.md"))
    edited.write_text("changed\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["demo", "--vault", str(demo), "--fresh", "--json"]) == 0
    assert edited.read_text(encoding="utf-8") != "changed\n"
    assert main(["demo", "--vault", str(mine / "Projects" / "Plan.md")]) == 1
    assert "is a file" in one_error_line(capsys)


def test_bench_without_eval_data_names_the_option_that_needs_none(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """On a fresh clone `reme-agent bench` (real text by default) needs LoCoMo / CMRC files."""
    assert main(["bench", "--notes", "10", "--queries", "5", "--data", str(tmp_path / "none"),
                 "--out", str(tmp_path / "out"), "--skip", "maintain", "--skip", "autolink"]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]  # after the bench's progress lines
    assert err.startswith("Error: The eval data file") and "`reme-agent bench --text vocab`" in err


def test_search_layers_take_the_json_list_its_help_shows(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    vault = tmp_path / "v"
    for path in ["knowledge/otters/otters.md", "daily/2026-11-30/otters/otters.md"]:
        (vault / path).parent.mkdir(parents=True)
        (vault / path).write_text("Sea otters hold hands while sleeping.\n", encoding="utf-8")
    assert main(["index", "--vault", str(vault)]) == 0
    capsys.readouterr()
    assert main(["search", "otters", "--vault", str(vault), "--json",
                 "--layers", '["daily"]']) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    assert [r["path"] for r in results] == ["daily/2026-11-30/otters/otters.md"]


def test_build_toolkit_takes_one_group_or_tool_name_as_a_string(tmp_path: Path) -> None:
    from reme_agent import Settings, build_toolkit, open_vault
    from reme_agent.toolkit.registry import select

    assert [s.name for s in select(only="search")] == ["search"]
    assert {s.group for s in select(groups="read", tier="expert")} == {"read"}
    vault = open_vault(tmp_path / "v", Settings(), create=True)
    try:
        toolkit = build_toolkit(vault, groups="retrieve")
        names = {t["function"]["name"] for t in asyncio.run(toolkit.get_tool_schemas())}
        assert names == {s.name for s in select(groups=["retrieve"])} == {"search",
                                                                           "graph_traverse"}
    finally:
        vault.close()


def test_eval_without_matplotlib_says_so_before_running(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """After `pip install -e .` (no evals extra) the run finished, then died on the chart
    with `internal error: ModuleNotFoundError`."""
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)   # as if not installed
    assert main(["eval", "--dataset", "synthetic", "--limit", "2", "--embedder", "hash",
                 "--no-progress", "--out", str(tmp_path / "out"),
                 "--work", str(tmp_path / "work")]) == 1
    assert "pip install -e '.[evals]'" in one_error_line(capsys)
    assert not (tmp_path / "out").exists() and not (tmp_path / "work").exists()


def test_ctrl_c_stops_the_mcp_server_like_serve_and_watch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl-C is the way to stop a server: `serve`, `watch` and `worker` exit 0; `mcp`
    printed "Aborted!" and exited 130."""
    import reme_agent.mcp_server

    def interrupted(*_args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(reme_agent.mcp_server, "serve", interrupted)
    (tmp_path / "v").mkdir()
    assert main(["mcp", "--vault", str(tmp_path / "v"), "--no-warm"]) == 0
    assert "Aborted" not in capsys.readouterr().err


@pytest.mark.parametrize(("path", "says"), [
    ("knowledge/x/x", "Notes end in .md, e.g. 'knowledge/x/x.md'."),
    ("knowledge/x", "e.g. 'knowledge/x.md' or, as its folder's note, 'knowledge/x/x.md'."),
    ("notes.txt", "`write` makes notes (.md, .markdown); .txt files are attachments."),
])
def test_write_to_a_path_that_is_no_note_says_which_path_would_do(
        path: str, says: str, tmp_path: Path) -> None:
    """'knowledge/x/x' suggested 'knowledge/x/x/x.md'; a new .txt said it would "turn a
    note into an attachment" (there was no note) and to "keep the file's extension"."""
    from reme_agent import Settings, open_vault
    from reme_agent.errors import InvalidArgument
    from reme_agent.toolkit import get_tool

    vault = open_vault(tmp_path / "v", Settings(), create=True)
    try:
        with pytest.raises(InvalidArgument) as got:
            get_tool("write").fn(vault, path=path, body="hello")
        assert says in str(got.value)
        assert not any(p.is_file() for p in vault.root.rglob("*") if ".reme" not in p.parts)
    finally:
        vault.close()


def test_the_demo_says_what_search_says_about_weak_matches(tmp_path: Path) -> None:
    """The demo listed a query's weak results as plain hits while `reme-agent search` on the
    same vault answered "No good match" for it: the two must agree, result by result."""
    from reme_agent import Settings, open_vault
    from reme_agent.demo import run_demo
    from reme_agent.recall.search import search

    lines: list[str] = []
    out = run_demo(tmp_path / "demo", Settings(embedder={"name": "hash"}), echo=lines.append)
    with open_vault(tmp_path / "demo", Settings(embedder={"name": "hash"})) as vault:
        for shown in out["queries"]:
            response = search(vault, shown["query"], limit=3, log_access=False)
            assert [(h["path"], h["weak"]) for h in shown["results"]] == \
                [(n.path, n.weak) for n in response.results]
    weak_queries = [q for q in out["queries"]
                    if q["results"] and all(h["weak"] for h in q["results"])]
    assert weak_queries, "the hash embedder leaves at least one demo query without a good match"
    assert sum("no good match" in line for line in lines) == len(weak_queries)
