"""Hooks: `reme-agent hook <name>` reads the host's event JSON on stdin and never fails the host."""

from __future__ import annotations

import datetime as dt
import json

from click.testing import CliRunner

from reme_agent.cli import cli
from reme_agent.hooks import event_messages, parse_event, run_hook
from reme_agent.testing import ScriptedChatModel, TextBlock, tool_call
from reme_agent.toolkit.notes import property_read
from tests.jobs.conftest import DAILY_JWT, DAILY_TODAY, TODAY, vault_hash
from tests.jobs.conftest import vault as vault  # noqa: F401  (the fixture)

DAY = dt.date.today().isoformat()


def hook(vault, name: str, event: object, *extra: str):  # type: ignore[no-untyped-def]
    stdin = event if isinstance(event, str) else json.dumps(event)
    return CliRunner().invoke(cli, ["hook", name, "--vault", str(vault.root), *extra],
                              input=stdin)


def note(vault, sid: str) -> str:  # type: ignore[no-untyped-def]
    return (vault.root / f"daily/{DAY}/session-{sid}/session-{sid}.md").read_text(encoding="utf-8")


def claude_transcript(path, lines) -> None:  # type: ignore[no-untyped-def]
    """Claude Code's JSONL shape: each line wraps a message; tool results are not text."""
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")


USER = {"type": "user", "message": {"role": "user", "content": "Fix the flaky search test."}}
TOOL = {"type": "user", "message": {"role": "user", "content": [
    {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}}
BOT = {"type": "assistant", "message": {"role": "assistant", "content": [
    {"type": "text", "text": "Fixed: the index was not refreshed."},
    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]}}
MORE = {"type": "user", "message": {"role": "user", "content": "Thanks, also bump the version."}}


def test_pre_compact_reads_messages_from_stdin_and_records_them(vault) -> None:
    got = hook(vault, "pre_compact", {"session_id": "s1", "hook_event_name": "PreCompact",
                                      "messages": [{"role": "user", "content": "remember X"}]})
    assert got.exit_code == 0 and got.stderr == ""
    report = json.loads(got.stdout)
    assert report["hook"] == "pre_compact" and report["mode"] == "transcript"
    assert report["sync"]["created"] == [f"daily/{DAY}/session-s1/session-s1.md"]
    assert "**user**: remember X" in note(vault, "s1")


def test_session_end_reads_a_claude_code_transcript_without_duplicates(vault, tmp_path) -> None:
    transcript = tmp_path / "s2.jsonl"
    claude_transcript(transcript, [USER, TOOL, BOT])
    event = {"session_id": "s2", "transcript_path": "s2.jsonl", "cwd": str(tmp_path)}
    assert hook(vault, "pre_compact", event).exit_code == 0
    claude_transcript(transcript, [USER, TOOL, BOT, MORE])  # the host's transcript grows
    got = hook(vault, "session_end", event)

    assert got.exit_code == 0, got.stderr
    report = json.loads(got.stdout)
    assert report["distill"] is None and report["distill_skipped"] == "no model configured"
    text = note(vault, "s2")
    assert text.count("Fix the flaky search test.") == 1 and text.count("bump the version") == 1
    assert "tool_result" not in text and "Fixed: the index was not refreshed." in text


def test_session_end_syncs_then_distills_todays_active_notes(vault) -> None:
    new = f"daily/{TODAY.isoformat()}/flaky-test/flaky-test.md"
    model = ScriptedChatModel([
        # synchronizer
        [tool_call("s1", "daily_write", slug="flaky-test", body="## Progress\n- Fixed it.\n")],
        [TextBlock(text="recorded")],
        # distiller, on today's active notes (the new one and the existing one)
        [tool_call("d1", "daily_read", path=new)],
        [tool_call("d2", "daily_status", path=new, status="distilled")],
        [TextBlock(text="nothing durable")],
    ])
    report = run_hook("session_end", vault, {"session_id": "s3", "messages": [
        {"role": "user", "content": "fix the flaky test"}]}, model=model, today=TODAY)

    assert report["mode"] == "llm" and report["sync"]["created"] == [new]
    assert report["distill"]["flipped"] == [new]
    assert property_read(vault, new)["properties"]["status"] == "distilled"
    skipped = {i["path"] for i in report["distill"]["skipped"]}
    assert skipped == {DAILY_TODAY}  # read never, so not flipped
    assert model.remaining == 0


def test_stop_reports_active_daily_notes_and_changes_nothing(vault) -> None:
    before = vault_hash(vault)
    got = hook(vault, "stop", {"session_id": "s4"})
    assert got.exit_code == 0
    report = json.loads(got.stdout)
    assert [a["path"] for a in report["active"]] == [DAILY_JWT, DAILY_TODAY]
    assert report["count"] == 2 and "2 daily note(s) not yet distilled" in report["systemMessage"]
    assert vault_hash(vault) == before


def test_hook_errors_go_to_stderr_and_exit_0(vault, tmp_path) -> None:
    before = vault_hash(vault)
    got = hook(vault, "pre_compact", "{not json")
    assert got.exit_code == 0 and got.stdout == ""
    assert got.stderr.startswith("Error: reme-agent hook pre_compact: InvalidArgument: The hook "
                                 "event is not JSON (")
    assert "Send one JSON object on stdin" in got.stderr  # what to do
    assert got.stderr.count("\n") == 1  # one line
    got = hook(vault, "pre_compact", {"messages": 3})  # pydantic's message spans lines
    assert "The hook event's 'messages' is wrong: Input should be a valid list (got 3)" \
        in got.stderr and "errors.pydantic.dev" not in got.stderr
    assert got.stderr.count("\n") == 1
    missing = tmp_path / "missing.jsonl"
    got = hook(vault, "session_end", {"transcript_path": str(missing)})
    assert got.exit_code == 0 and got.stderr.count("\n") == 1
    assert f"The transcript file '{missing}' (transcript_path) does not exist" in got.stderr
    broken = tmp_path / "broken.jsonl"
    claude_transcript(broken, [USER])
    broken.write_text(broken.read_text() + "{cut off\n", encoding="utf-8")
    got = hook(vault, "session_end", {"transcript_path": str(broken)})
    assert "Line 2 of the transcript file" in got.stderr and got.stderr.count("\n") == 1
    got = CliRunner().invoke(cli, ["hook", "stop", "--vault", str(tmp_path / "nowhere")],
                             input="{}")
    assert got.exit_code == 0 and "No vault at" in got.stderr
    assert vault_hash(vault) == before


def test_the_vault_defaults_to_the_event_cwd(vault, monkeypatch) -> None:
    monkeypatch.delenv("REME_VAULT", raising=False)
    got = CliRunner().invoke(cli, ["hook", "stop"],
                             input=json.dumps({"cwd": str(vault.root.parent)}))
    assert got.exit_code == 0, got.stderr
    assert json.loads(got.stdout)["count"] == 2


def test_events_parse_from_text_dicts_and_json_lists(tmp_path) -> None:
    assert parse_event("").session_id is None
    assert parse_event({"session_id": "x", "other": 1}).session_id == "x"
    listing = tmp_path / "t.json"
    listing.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}),
                       encoding="utf-8")
    assert event_messages(parse_event({"transcript_path": str(listing)})) == [
        {"role": "user", "content": "hi"}]


def test_a_model_that_fails_at_session_end_does_not_lose_the_session(vault) -> None:
    """The host compacts or ends the session right after the hook: with the model down,
    "auto" records the raw turns (as without a model) instead of nothing; "llm" asked
    for the model only, so it records nothing and says why."""
    event = {"session_id": "down", "messages": [
        {"role": "user", "content": "the deploy key lives in vault path ops/deploy"}]}
    asked = run_hook("session_end", vault, event, mode="llm", today=TODAY,
                     model=ScriptedChatModel([ConnectionError("Failed to connect")]))
    assert asked["mode"] == "llm" and asked["sync"]["written"] == []
    assert "ConnectionError" in asked["sync"]["error"]

    for name in ("pre_compact", "session_end"):
        report = run_hook(name, vault, {**event, "session_id": name}, today=TODAY,
                          model=ScriptedChatModel([ConnectionError("Failed to connect")]))
        assert report["mode"] == "transcript", name
        assert "The model failed (ConnectionError" in report["sync"]["summary"]
        text = (vault.root / f"daily/{TODAY.isoformat()}/session-{name.replace('_', '-')}/"
                f"session-{name.replace('_', '-')}.md").read_text(encoding="utf-8")
        assert text.count("the deploy key lives in vault path ops/deploy") == 1
    assert report["distill_skipped"] == "the model failed while recording the session"
