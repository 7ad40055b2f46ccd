"""`reme-agent sync` and `reme-agent distill` through click, checked through the vault."""

from __future__ import annotations

import datetime as dt
import json

from click.testing import CliRunner

from reme_agent.cli import cli
from tests.jobs.conftest import DAILY_JWT, vault_hash


def run(vault, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, [*args, "--vault", str(vault.root)])


def test_sync_transcript_mode_writes_the_days_note(vault, tmp_path) -> None:
    messages = tmp_path / "chat.json"
    messages.write_text(json.dumps([{"role": "user", "content": "remember the blend"},
                                    {"role": "assistant", "content": "noted"}]), encoding="utf-8")
    got = run(vault, "sync", "--messages", str(messages), "--mode", "transcript",
              "--session-id", "cli-1", "--json")
    assert got.exit_code == 0, got.output
    data = json.loads(got.output)
    path = f"daily/{dt.date.today().isoformat()}/session-cli-1/session-cli-1.md"
    assert data["created"] == [path] and "tool_calls" in data
    assert "remember the blend" in (vault.root / path).read_text(encoding="utf-8")


def test_llm_jobs_without_a_model_exit_1_and_change_nothing(vault, tmp_path) -> None:
    messages = tmp_path / "chat.json"
    messages.write_text('[{"role": "user", "content": "hi"}]', encoding="utf-8")
    before = vault_hash(vault)
    got = run(vault, "sync", "--messages", str(messages), "--mode", "llm")
    assert got.exit_code == 1 and "needs a chat model" in got.output
    assert got.output.startswith("Error: ") and "--mode transcript" in got.output
    got = run(vault, "distill", DAILY_JWT)
    assert got.exit_code == 1 and "distiller job needs a chat model" in got.output
    assert vault_hash(vault) == before


def test_bad_message_files_are_a_clear_error(vault, tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"messages": 3}', encoding="utf-8")
    got = run(vault, "sync", "--messages", str(bad), "--mode", "transcript")
    assert got.exit_code == 1 and "JSON list of messages" in got.output


def test_sync_without_a_model_falls_back_to_transcript_and_says_so(vault, tmp_path) -> None:
    messages = tmp_path / "chat.json"
    messages.write_text(json.dumps([{"role": "user", "content": "keep the blend"},
                                    {"role": "assistant", "content": "kept"}]), encoding="utf-8")
    got = run(vault, "sync", "--messages", str(messages), "--session-id", "s-42", "--json")
    assert got.exit_code == 0, got.output
    assert got.stderr == "No chat model configured: recording the raw turns (--mode transcript).\n"
    assert json.loads(got.stdout)["mode"] == "transcript"
    again = run(vault, "sync", "--messages", str(messages), "--session-id", "s-42")
    assert again.exit_code == 0 and "Nothing new to record." in again.stdout
    path = f"daily/{dt.date.today().isoformat()}/session-s-42/session-s-42.md"
    assert (vault.root / path).read_text(encoding="utf-8").count("keep the blend") == 1
