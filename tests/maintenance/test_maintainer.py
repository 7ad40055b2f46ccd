"""The Maintainer as a whole: fixed order, idempotent reruns, dry run, no model, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from reme_agent.cli import cli
from reme_agent.cli.maintain import parse_duration
from reme_agent.errors import InvalidArgument
from reme_agent.maintenance.report import STEPS
from reme_agent.vault import open_vault
from tests.maintenance.conftest import (
    NOW,
    SETTINGS,
    VaultFactory,
    daily,
    days_ago,
    knowledge,
    maintainer,
    notes_snapshot,
    read_json,
)

DESC = "The same concept written down twice by accident."
NOTES = {
    "knowledge/hub/hub.md": knowledge("Hub", "[[dup-a]] [[dup-b]] [[leaf]] [[ghost]]"),
    "knowledge/dup-a/dup-a.md": knowledge("Duplicate note", "One. [[hub]]", description=DESC),
    "knowledge/dup-b/dup-b.md": knowledge("Duplicate note", "Two. [[hub]]", description=DESC),
    "knowledge/leaf/leaf.md": knowledge("Leaf", "A leaf. [[hub]]"),
    "daily/2026-08-01/cold/cold.md": daily("Cold", "[[hub]]", "distilled",
                                           days_ago(120).isoformat()),
}


@pytest.fixture
def vault(make_vault: VaultFactory):
    return make_vault(NOTES, mtimes={"daily/2026-08-01/cold/cold.md": days_ago(120)})


def payload(vault, name: str) -> dict:
    data = read_json(vault, f"meta/{name}.json")
    data.pop("computed_at")
    data.get("stats", {}).pop("previous_computed_at", None)
    data.get("stats", {}).pop("stability", None)
    return data


def test_all_steps_run_in_order_without_a_model(vault) -> None:
    report = maintainer(vault).run()
    assert [s.step for s in report.steps] == list(STEPS)
    assert all(s.skipped is None for s in report.steps), [s.skipped for s in report.steps]
    assert report.step("merge").found["groups"] == 1
    assert report.step("decay").found["newly_archived"] == 1
    assert report.step("health").found["D1"] == 1
    text = vault.store.read_text(f"audit/{NOW.astimezone().date()}/maintain.md")
    assert all(f"maintain: {s}" in text for s in STEPS)
    for name in ("communities", "recency", "archived"):
        assert (vault.root / f"meta/{name}.json").is_file()


def test_a_second_run_changes_nothing(vault) -> None:
    maintainer(vault).run()
    notes = notes_snapshot(vault)
    meta = {n: payload(vault, n) for n in ("communities", "archived")}
    day = NOW.astimezone().date()
    reports = {n: vault.store.read_text(f"audit/{day}/{n}.md") for n in ("duplicates", "health")}
    again = maintainer(vault).run()
    assert notes_snapshot(vault) == notes
    assert {n: payload(vault, n) for n in meta} == meta
    assert {n: vault.store.read_text(f"audit/{day}/{n}.md") for n in reports} == reports
    for step in again.steps:
        assert not [a for a in step.actions if a.get("action") not in ("write",)], step.step
        assert not [p for p in step.changed if not p.startswith("meta/")], step.step


def test_dry_run_writes_nothing(vault) -> None:
    before = {p.relative_to(vault.root).as_posix(): p.read_bytes()
              for p in vault.root.rglob("*") if p.is_file() and ".reme" not in p.parts}
    report = maintainer(vault).run(dry_run=True)
    after = {p.relative_to(vault.root).as_posix(): p.read_bytes()
             for p in vault.root.rglob("*") if p.is_file() and ".reme" not in p.parts}
    assert after == before
    assert report.dry_run and report.step("decay").actions[0]["action"] == "archive"


def test_unknown_steps_are_refused(vault) -> None:
    with pytest.raises(InvalidArgument, match="Unknown maintenance step"):
        maintainer(vault).run(["decay", "defrag"])


def test_a_failing_step_is_reported_and_the_rest_still_run(vault, monkeypatch) -> None:
    import reme_agent.maintenance.maintainer as mod

    def boom(*args, **kwargs):
        raise RuntimeError("louvain exploded")

    monkeypatch.setattr(mod, "detect_communities", boom)
    report = maintainer(vault).run()
    assert "louvain exploded" in report.step("communities").skipped
    assert report.step("health").skipped is None


def test_parse_duration() -> None:
    assert parse_duration("24h") == 86400 and parse_duration("30m") == 1800
    assert parse_duration("7d") == 7 * 86400 and parse_duration("90") == 90
    import click

    with pytest.raises(click.BadParameter):
        parse_duration("soon")


def test_the_cli_runs_the_maintainer_and_prints_json(vault, tmp_path: Path) -> None:
    runner = CliRunner()
    env = {"REME_EMBEDDER__NAME": "hash", "REME_INDEX__PROGRESS": "false"}
    vault.close()
    result = runner.invoke(cli, ["maintain", "--vault", str(vault.root), "--json",
                                 "--only", "communities", "--only", "health"], env=env)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [s["step"] for s in data["steps"]] == ["communities", "health"]
    reopened = open_vault(vault.root, SETTINGS)
    try:
        assert len(reopened.signals.communities() or {}) == 4     # checked through the API
    finally:
        reopened.close()
    twice = runner.invoke(cli, ["maintain", "--vault", str(vault.root), "--only", "access",
                                "--every", "0.01s", "--max-runs", "2"], env=env)
    assert twice.exit_code == 0, twice.output
    assert twice.output.count("maintain: 1 step(s)") == 2
    bad = runner.invoke(cli, ["maintain", "--vault", str(vault.root), "--every", "soon"], env=env)
    assert bad.exit_code == 2


def test_run_maintainer_lets_the_model_decide_and_merges(vault) -> None:
    from reme_agent.jobs.maintainer_job import run_maintainer
    from reme_agent.testing import ScriptedChatModel, TextBlock

    model = ScriptedChatModel([[TextBlock(text='{"merge": true, "reasons": "identical"}')]])
    report = run_maintainer(vault, ["communities", "merge"], model=model)
    action = report.step("merge").actions[0]
    winner, loser = "knowledge/dup-a/dup-a.md", "knowledge/dup-b/dup-b.md"  # tie: the older
    assert action["action"] == "merged" and action["winner"] == winner
    assert not vault.store.exists(loser)
    assert "[[dup-a]] [[dup-a|dup-b]]" in vault.store.read_text("knowledge/hub/hub.md")
    # the kept note is queued for auto-link L1 (`followups` was not among the steps asked)
    assert [(i.path, i.source) for i in vault.queue.pending("autolink")] == [(winner, "merge")]
    assert [s.step for s in report.steps] == ["communities", "merge"]


def test_run_maintainer_without_a_model_only_reports(vault) -> None:
    from reme_agent.jobs.maintainer_job import run_maintainer

    before = notes_snapshot(vault)
    report = run_maintainer(vault, ["communities", "merge"])
    assert report.step("merge").found["groups"] == 1 and report.step("merge").actions == []
    assert notes_snapshot(vault) == before and vault.queue.items() == []


def test_maintain_drains_the_follow_up_queue_as_its_last_step(vault) -> None:
    """`maintain` (no model) runs queued auto-link L1 items and leaves split items waiting."""
    hub, leaf = "knowledge/hub/hub.md", "knowledge/leaf/leaf.md"
    vault.store.write(leaf, knowledge("Leaf", "Every leaf hangs off the Hub."))
    vault.refresh([leaf])
    vault.queue.enqueue("autolink", leaf, reason="test", payload={"level": "L1"}, source="test")
    vault.queue.enqueue("split", hub, reason="test", source="test")
    vault.close()
    env = {"REME_EMBEDDER__NAME": "hash", "REME_INDEX__PROGRESS": "false"}
    result = CliRunner().invoke(cli, ["maintain", "--vault", str(vault.root), "--json"], env=env)
    assert result.exit_code == 0, result.output
    steps = json.loads(result.output)["steps"]
    assert [s["step"] for s in steps] == [*STEPS, "followups"]
    followups = steps[-1]
    assert [(a["kind"], a["path"], a["action"]) for a in followups["actions"]] == \
        [("autolink", leaf, "done")]
    assert followups["found"]["waiting"] == 1 and leaf in followups["changed"]
    reopened = open_vault(vault.root, SETTINGS)
    try:
        assert "[[hub|Hub]]" in reopened.store.read_text(leaf)
        assert [(i.kind, i.status) for i in reopened.queue.items()] == \
            [("autolink", "done"), ("split", "pending")]
        assert "maintain: followups" in reopened.store.read_text(
            f"audit/{_today()}/maintain.md")
    finally:
        reopened.close()
    dry = CliRunner().invoke(cli, ["maintain", "--vault", str(vault.root), "--dry-run",
                                   "--only", "followups", "--json"], env=env)
    assert dry.exit_code == 0 and json.loads(dry.output)["steps"] == []


def _today() -> str:
    import datetime as dt

    return dt.date.today().isoformat()
