"""`reme-agent sync | distill | hook`: the LLM jobs and hooks on the command line (DESIGN §9).

A job command prints the JobResult (text, or JSON with --json) and exits 1 when the job
stopped on an error or left failed/refused writes. `hook` reads the event JSON on stdin and always exits 0
(see `reme_agent.hooks`).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from reme_agent.cli.context import Ctx, common


def _emit(c: Ctx, result: Any) -> None:
    data = result.model_dump(mode="json", exclude=None if c.as_json else {"tool_calls"})
    c.emit(data, result.render())
    if not result.ok:
        raise click.exceptions.Exit(1)


def _day(value: str | None) -> Any:
    import datetime as dt

    if value is None:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a YYYY-MM-DD date.") from None


@click.command("sync")
@common
@click.option("--messages", "messages_file", required=True, type=click.Path(exists=True,
              dir_okay=False, path_type=Path), help="JSON list of {role, content} messages, "
              "{\"messages\": [...]}, or a JSONL transcript (Claude Code's).")
@click.option("--mode", type=click.Choice(["auto", "llm", "transcript"]), default="auto",
              show_default=True, help="llm summarises with the configured model; transcript "
              "appends the raw turns; auto = llm when a model is configured, else transcript.")
@click.option("--session-id", default=None, help="The conversation's id (originSessionId); "
              "default: the file's own `session_id` / `sessionId`, if it has one.")
@click.option("--hint", default="", help="A hint for the model, e.g. the task's name.")
@click.option("--slug", default=None, help="transcript mode: the note's slug.")
@click.option("--date", "day", default=None, help="The day to write (default today).")
def sync_cmd(c: Ctx, messages_file: Path, mode: str, session_id: str | None, hint: str,
             slug: str | None, day: str | None) -> None:
    """Record a conversation in today's daily note (the synchronizer).

    Only turns no earlier sync of the session recorded are written: running it twice, or
    on a transcript that grew, adds nothing twice. Without a model configured, the default
    --mode auto records the raw turns (transcript mode) and says so on stderr.

    \b
    Example:
      reme-agent sync --messages chat.json --mode transcript
      reme-agent sync --messages chat.json --session-id s-42 --json
    """
    from reme_agent.hooks import read_transcript
    from reme_agent.jobs.synchronizer import choose_mode, run_synchronizer

    # the hooks' reader: a JSON list, {"messages": [...]} or a JSONL transcript (Claude Code's)
    messages, file_session = read_transcript(messages_file)
    session_id = session_id or file_session  # the flag wins over the file's own id
    today = _day(day)
    v = c.open()
    try:
        if mode == "auto" and choose_mode(v, mode) == "transcript":
            click.echo("No chat model configured: recording the raw turns "
                       "(--mode transcript).", err=True)
        mode = choose_mode(v, mode)
        result = run_synchronizer(v, messages, mode=mode, session_id=session_id, hint=hint,
                                  slug=slug, today=today)
    finally:
        v.close()
    _emit(c, result)


@click.command("distill")
@common
@click.argument("daily_paths", nargs=-1, required=True)
@click.option("--hint", default="", help="A hint for the model, e.g. what matters most.")
@click.option("--flip/--no-flip", "flip_status", default=True, show_default=True,
              help="Set fully distilled daily notes to status distilled.")
def distill_cmd(c: Ctx, daily_paths: tuple[str, ...], hint: str, flip_status: bool) -> None:
    """Distill daily notes into knowledge notes (Read-Modify-Write; needs a model).

    \b
    Example:
      reme-agent distill daily/2026-11-28/search-tuning
      reme-agent distill daily/2026-11-28/a/a.md daily/2026-11-28/b --hint "focus on decisions"
    """
    from reme_agent.jobs.distiller import run_distiller

    v = c.open()
    try:
        result = run_distiller(v, list(daily_paths), hint=hint, flip_status=flip_status)
    finally:
        v.close()
    _emit(c, result)


@click.command("hook")
@common
@click.argument("name", type=click.Choice(["session_end", "pre_compact", "stop"]))
@click.option("--mode", type=click.Choice(["auto", "llm", "transcript"]), default="auto",
              show_default=True, help="Sync mode: auto = llm when a model is configured.")
def hook_cmd(c: Ctx, name: str, mode: str) -> None:
    """Run a host hook with the event JSON on stdin; always exits 0 (errors go to stderr).

    \b
    Event: {"session_id", "transcript_path" or "messages", "cwd"} (Claude Code's shape).
    Example:
      echo '{"session_id": "s1", "messages": [{"role": "user", "content": "hi"}]}' \\
        | reme-agent hook pre_compact --vault ./vault
    """
    from reme_agent.config import load_settings
    from reme_agent.hooks import parse_event, run_hook, vault_for
    from reme_agent.vault import open_vault

    try:
        event = parse_event("" if sys.stdin.isatty() else sys.stdin.read())  # no pipe: {}
        root = vault_for(event, c.vault_arg or os.environ.get("REME_VAULT"))
        answer = _warm_hook(c, name, mode, event, root)
        if answer is not None:   # a warm process ran it (cli/warm.py)
            if not answer["ok"]:
                _hook_error(name, answer.get("type") or "Error", answer["error"])
                return
            report = answer["data"]
        else:
            v = open_vault(root, load_settings(c.configs, vault=root))
            try:
                kwargs: dict[str, Any] = {} if name == "stop" else {"mode": mode}
                report = run_hook(name, v, event, **kwargs)
            finally:
                v.close()
    except Exception as exc:  # never fail or block the host: one line on stderr, exit 0
        _hook_error(name, type(exc).__name__, str(exc))
        return
    click.echo(json.dumps(report, ensure_ascii=False, default=str))


def _hook_error(name: str, kind: str, message: str) -> None:
    one_line = " ".join(message.split())
    click.echo(f"Error: reme-agent hook {name}: {kind}: {one_line}", err=True)


def _warm_hook(c: Ctx, name: str, mode: str, event: Any, root: Path) -> dict[str, Any] | None:
    """Run the hook in the vault's warm process if one serves it with the same settings.

    Paths in the event are made absolute here (the warm process has another working
    directory), which changes no file they name."""
    from reme_agent.cli.warm import HOOK_TIMEOUT, ask

    data = event.model_dump(mode="json", exclude_none=True)
    if data.get("cwd"):
        data["cwd"] = os.path.abspath(data["cwd"])
    elif data.get("transcript_path"):
        data["transcript_path"] = os.path.abspath(os.path.expanduser(data["transcript_path"]))
    return ask(root, "hook", {"name": name, "mode": mode, "event": data}, c.configs,
               answer_timeout=HOOK_TIMEOUT)
