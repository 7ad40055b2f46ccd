"""Distiller: R-M-W decisions, E-1 and CAS in code, status flip decided after the run."""

from __future__ import annotations

import datetime as dt
import itertools

import pytest

from reme_agent.errors import InvalidArgument, NoteNotFound
from reme_agent.jobs.distiller import estimate_tokens, run_distiller
from reme_agent.testing import ScriptedChatModel, TextBlock, tool_call
from reme_agent.toolkit.daily import daily_list
from reme_agent.toolkit.materials import daily_attach
from reme_agent.toolkit.notes import property_read
from tests.jobs.conftest import (
    AUTH,
    DAILY_JWT,
    DAILY_TODAY,
    JWT,
    TODAY,
    ZHANG,
    answered_body,
    answers,
    text_of,
    vault_hash,
)

NEW = "knowledge/dual-key-verifier/dual-key-verifier.md"
FM = {"title": "Dual-key verifier", "description": "Accepts tokens signed by the old or new key.",
      "lifecycle": "evolving", "scope": "class", "source": "curated", "role": "method"}
BODY = f"# Dual-key verifier\n\nAccepts both keys during a rotation.\n\npart_of:: [[{JWT}]]\n"


def status(vault, path: str) -> str:
    return property_read(vault, path)["properties"]["status"]


def distill(vault, turns, queue, paths=(DAILY_JWT,), **kwargs):
    """Run the distiller with scripted turns (it enqueues into `queue`, the vault's own)."""
    assert queue is vault.queue
    model = ScriptedChatModel(turns)
    result = run_distiller(vault, list(paths), model=model, today=TODAY, **kwargs)
    return result, model


_IDS = itertools.count()


def call_id() -> str:
    """Tool call ids must be unique within a reply."""
    return f"w{next(_IDS)}"


def edit(old: str, new: str):
    """A turn writing back the last `read` answer with one replacement (stamp passed on)."""
    def turn(messages, tools):
        stamp, whole = answered_body(messages)
        assert old in whole
        return [tool_call(call_id(), "write", path=JWT, text=whole.replace(old, new),
                          overwrite=True, stamp=stamp)]
    return turn


# -- decisions ----------------------------------------------------------------------------
def test_distiller_creates_a_knowledge_node_links_it_and_flips_the_daily(vault, queue) -> None:
    result, model = distill(vault, [
        [tool_call("c1", "daily_read", path=DAILY_JWT)],
        [tool_call("c2", "search", query="dual-key verifier")],
        [tool_call("c3", "write", path=NEW, frontmatter=FM, body=BODY)],
        [tool_call("c4", "lint_schema", folder="knowledge/dual-key-verifier")],
        [tool_call("c5", "daily_status", path=DAILY_JWT, status="distilled")],
        [TextBlock(text="Created the dual-key verifier node.")],
    ], queue)

    assert result.error is None and result.ok
    assert result.created == [NEW] and result.written == [NEW, DAILY_JWT]
    assert result.read == [DAILY_JWT]
    assert [(e.source, e.target, e.predicate) for e in result.linked] == [(NEW, JWT, "part_of")]
    assert result.flipped == [DAILY_JWT] and status(vault, DAILY_JWT) == "distilled"
    assert result.lint == [] and result.summary == "Created the dual-key verifier node."
    assert "No notes with schema errors." in answers(model)[3]
    assert [(i.kind, i.path) for i in result.enqueued] == [("autolink", NEW)]
    assert queue.pending("autolink")[0].payload == {"level": "L1"}
    assert "lint_schema" in model.calls[0]["tool_names"]


def test_distiller_updates_a_note_in_place_and_keeps_its_links(vault, queue) -> None:
    result, _ = distill(vault, [
        [tool_call("c1", "daily_read", path=DAILY_JWT)],
        [tool_call("c2", "read", path=JWT)],
        edit("Keys rotate every 90 days.", "Keys rotate every 30 days (was 90 until 2026-11)."),
        [tool_call("c4", "daily_status", path=DAILY_JWT, status="distilled")],
        [TextBlock(text="Updated the rotation period.")],
    ], queue)

    text = text_of(vault, JWT)
    assert "every 30 days" in text and "every 90 days." not in text  # overridden, not stacked
    assert f"part_of:: [[{AUTH}]]" in text and f"owner:: [[{ZHANG}]]" in text
    assert result.written == [JWT, DAILY_JWT] and result.created == [] and result.linked == []
    assert result.flipped == [DAILY_JWT] and result.ok


def test_distiller_link_only_adds_one_predicate_line(vault, queue) -> None:
    def add_link(messages, tools):
        stamp, whole = answered_body(messages)
        return [tool_call(call_id(), "write", path=AUTH, text=whole + f"uses:: [[{JWT}]]\n",
                          overwrite=True, stamp=stamp)]

    before = text_of(vault, AUTH)
    result, _ = distill(vault, [
        [tool_call("c1", "daily_read", path=DAILY_JWT)],
        [tool_call("c2", "read", path=AUTH)],
        add_link,
        [TextBlock(text="Linked.")],
    ], queue, flip_status=False)

    # the model named the target by full path; the file gets the vault's (shortest) style
    assert text_of(vault, AUTH) == before + "uses:: [[jwt-key-rotation]]\n"
    assert [(e.source, e.target, e.predicate) for e in result.linked] == [(AUTH, JWT, "uses")]
    assert result.flipped == [] and status(vault, DAILY_JWT) == "active"


def test_a_changed_relation_goes_through_link_remove_and_is_audited(vault, queue) -> None:
    # the daily note says the owner changed: the old link may go only by name, with a reason
    lee = "knowledge/李四/李四.md"
    vault.store.write(lee, "---\ntitle: 李四\ndescription: 后端工程师。\nlifecycle: evolving\n"
                           "scope: instance\nsource: curated\nrole: profile\n---\n# 李四\n")
    vault.index()
    result, _ = distill(vault, [
        [tool_call("c1", "daily_read", path=DAILY_JWT)],
        [tool_call("c2", "read", path=JWT)],
        [tool_call("c3", "link_remove", path=JWT, links=[f"owner:: [[{ZHANG}]]"],
                   reason="daily note: 李四 owns key rotation from 2026-11")],
        [tool_call("c4", "read", path=JWT)],
        edit(f"part_of:: [[{AUTH}]]\n", f"part_of:: [[{AUTH}]]\nowner:: [[{lee}]]\n"),
        [TextBlock(text="Owner changed.")],
    ], queue, flip_status=False)

    text = text_of(vault, JWT)
    assert "owner:: [[李四]]" in text and "张三" not in text
    assert f"part_of:: [[{AUTH}]]" in text
    assert result.ok and result.written == [JWT]
    assert sorted(vault.graph.outbound(JWT)) == [(AUTH, "part_of"), (lee, "owner")]
    audits = list((vault.root / "audit").rglob("unlinked.md"))
    assert len(audits) == 1 and "李四 owns key rotation" in audits[0].read_text("utf-8")


def test_the_distiller_cannot_unlink_outside_knowledge(vault, queue) -> None:
    before = text_of(vault, DAILY_JWT)
    result, model = distill(vault, [
        [tool_call("c1", "daily_read", path=DAILY_JWT)],
        [tool_call("c2", "link_remove", path=DAILY_JWT, links=["[[auth-service]]"],
                   reason="tidy")],
        [TextBlock(text="Done.")],
    ], queue, flip_status=False)
    assert text_of(vault, DAILY_JWT) == before
    assert any("knowledge/" in a for a in answers(model))


def test_role_mismatch_creates_a_new_node_cross_linked_to_the_old_one(vault, queue) -> None:
    new = "knowledge/auth-on-call/auth-on-call.md"
    zhang_before = text_of(vault, ZHANG)
    result, model = distill(vault, [
        [tool_call("c1", "daily_read", path=DAILY_JWT)],
        [tool_call("c2", "search", query="张三 认证服务")],
        [tool_call("c3", "read", path=ZHANG)],  # a profile; the new unit is a method
        [tool_call("c4", "write", path=new,
                   frontmatter=FM | {"title": "Auth on-call", "description": "Who rotates keys."},
                   body=f"# Auth on-call\n\nThe on-call engineer rotates keys.\n\n"
                        f"related:: [[{ZHANG}]]\n")],
        [TextBlock(text="Created a method node linked to the profile.")],
    ], queue)

    assert ZHANG in answers(model)[1]  # recall found the profile first
    assert result.created == [new] and text_of(vault, ZHANG) == zhang_before
    assert property_read(vault, new)["properties"]["role"] == "method"
    assert [(e.source, e.target, e.predicate) for e in result.linked] == [(new, ZHANG, "related")]


# -- E-1 ----------------------------------------------------------------------------------
def test_e1_drop_is_sent_back_once_naming_the_link_then_fixed(vault, queue) -> None:
    owner = f"owner:: [[{ZHANG}]]\n"
    result, model = distill(vault, [
        [tool_call("c1", "daily_read", path=DAILY_JWT)],
        [tool_call("c2", "read", path=JWT)],
        edit(owner, ""),                          # drops the owner link
        edit("90 days.", "90 days; see the runbook."),  # the model's retry keeps it
        [tool_call("c5", "daily_status", path=DAILY_JWT, status="distilled")],
        [TextBlock(text="done")],
    ], queue)

    error = answers(model)[2]
    assert f"owner:: [[{ZHANG}]]" in error and "drops existing links" in error
    assert "see the runbook" in text_of(vault, JWT) and owner in text_of(vault, JWT)
    assert result.refused == [] and result.failed == [] and result.flipped == [DAILY_JWT]


def test_e1_second_violation_is_refused_audited_and_the_old_body_kept(vault, queue) -> None:
    before = text_of(vault, JWT)
    owner = f"owner:: [[{ZHANG}]]\n"
    result, model = distill(vault, [
        [tool_call("c1", "daily_read", path=DAILY_JWT)],
        [tool_call("c2", "read", path=JWT)],
        edit(owner, ""),
        edit(owner, "Owner: 张三\n"),
        [tool_call("c5", "daily_status", path=DAILY_JWT, status="distilled")],
        [TextBlock(text="gave up")],
    ], queue)

    assert text_of(vault, JWT) == before
    assert "Refused" in answers(model)[3] and "for the rest of this job" in answers(model)[3]
    assert [i.path for i in result.refused] == [JWT]
    audit = f"audit/{dt.date.today().isoformat()}/refused.md"
    assert result.refused[0].audit == audit
    report = text_of(vault, audit)
    # the dropped link is named, in a code span: an audit note holds no link
    assert JWT in report and f"owner:: `[[{ZHANG}]]`" in report and "Owner: 张三" in report
    assert result.flipped == [] and status(vault, DAILY_JWT) == "active"
    assert JWT in result.skipped[0].reason and not result.ok


# -- CAS ----------------------------------------------------------------------------------
def test_concurrent_edit_causes_a_cas_redo_and_no_lost_update(vault, queue) -> None:
    human = "Rotation is automated by the deploy pipeline.\n"

    def concurrent_edit_then_write(messages, tools):
        stamp, whole = answered_body(messages)
        path = vault.root / JWT  # a person edits the note between the job's read and write
        path.write_text(path.read_text(encoding="utf-8") + human, encoding="utf-8")
        return [tool_call(call_id(), "write", path=JWT, overwrite=True, stamp=stamp,
                          text=whole.replace("90 days", "30 days"))]

    result, model = distill(vault, [
        [tool_call("c1", "daily_read", path=DAILY_JWT)],
        [tool_call("c2", "read", path=JWT)],
        concurrent_edit_then_write,
        [tool_call("c4", "read", path=JWT)],   # the redo: read again ...
        edit("90 days", "30 days"),          # ... and redo the edit on the new text
        [tool_call("c6", "daily_status", path=DAILY_JWT, status="distilled")],
        [TextBlock(text="done")],
    ], queue)

    assert "changed since it was read" in answers(model)[2]
    final = text_of(vault, JWT)
    assert "30 days" in final and human in final  # both edits: never a lost update
    assert result.failed == [] and result.skipped == [] and result.flipped == [DAILY_JWT]


def test_a_write_without_the_jobs_own_read_is_refused(vault, queue) -> None:
    before = vault_hash(vault)
    result, model = distill(vault, [
        [tool_call("c1", "write", path=JWT, text="# JWT\n", overwrite=True)],
        [TextBlock(text="done")],
    ], queue, flip_status=False)

    assert "has not read it yet" in answers(model)[0]
    assert vault_hash(vault) == before and [i.path for i in result.failed] == [JWT]


def test_a_note_that_keeps_changing_is_skipped_after_max_redos(vault, queue) -> None:
    vault.settings.jobs.max_cas_redos = 1
    before = text_of(vault, JWT)
    bump = iter(range(10))

    def edit_under_the_job(messages, tools):
        stamp, whole = answered_body(messages)
        (vault.root / JWT).write_text(before + f"edit {next(bump)}\n", encoding="utf-8")
        return [tool_call(call_id(), "write", path=JWT, overwrite=True, stamp=stamp,
                          text=whole.replace("90", "30"))]

    result, model = distill(vault, [
        [tool_call("c1", "read", path=JWT)], edit_under_the_job,
        [tool_call("c3", "read", path=JWT)], edit_under_the_job,
        [TextBlock(text="done")],
    ], queue, flip_status=False)

    assert "Skipped" in answers(model)[3] and "30" not in text_of(vault, JWT)
    assert [i.path for i in result.skipped] == [JWT]
    assert JWT in text_of(vault, f"audit/{dt.date.today().isoformat()}/skipped.md")


# -- status flip --------------------------------------------------------------------------
def test_status_flips_only_for_dailies_whose_writes_all_succeeded(vault, queue) -> None:
    owner = f"owner:: [[{ZHANG}]]\n"
    result, _ = distill(vault, [
        [tool_call("c1", "daily_read", path=DAILY_TODAY)],
        [tool_call("c2", "write", path=NEW, frontmatter=FM, body=BODY)],
        [tool_call("c3", "daily_status", path=DAILY_TODAY, status="distilled")],
        [tool_call("c4", "daily_read", path=DAILY_JWT)],
        [tool_call("c5", "read", path=JWT)],
        edit(owner, ""), edit(owner, ""),        # refused for good
        [tool_call("c8", "daily_status", path=DAILY_JWT, status="distilled")],
        [TextBlock(text="done")],
    ], queue, paths=(DAILY_TODAY, DAILY_JWT))

    assert result.flipped == [DAILY_TODAY]
    assert status(vault, DAILY_TODAY) == "distilled" and status(vault, DAILY_JWT) == "active"
    assert [(i.path, JWT in i.reason) for i in result.skipped] == [(DAILY_JWT, True)]


def test_nothing_flips_when_the_model_did_not_ask_or_the_run_failed(vault, queue) -> None:
    result, _ = distill(vault, [
        [tool_call("c1", "daily_read", path=DAILY_JWT)],
        [TextBlock(text="nothing to do")],
    ], queue)
    assert result.flipped == [] and "did not mark it distilled" in result.skipped[0].reason

    result, _ = distill(vault, [
        [tool_call("c1", "daily_read", path=DAILY_JWT)],
        [tool_call("c2", "daily_status", path=DAILY_JWT, status="distilled")],
        # the script ends here: the agent stops with an error before finishing
    ], queue)
    assert result.error and "exhausted" in result.error and not result.ok
    assert result.flipped == [] and status(vault, DAILY_JWT) == "active"


def test_flip_status_false_leaves_dailies_active(vault, queue) -> None:
    result, _ = distill(vault, [
        [tool_call("c1", "daily_read", path=DAILY_JWT)],
        [tool_call("c2", "daily_status", path=DAILY_JWT, status="distilled")],
        [TextBlock(text="done")],
    ], queue, flip_status=False)
    assert result.flipped == [] and status(vault, DAILY_JWT) == "active"


# -- lint, policy, queue ------------------------------------------------------------------
def test_lint_schema_self_check_and_fix_loop(vault, queue) -> None:
    broken = {k: v for k, v in FM.items() if k != "scope"}
    result, model = distill(vault, [
        [tool_call("c1", "daily_read", path=DAILY_JWT)],
        [tool_call("c2", "write", path=NEW, frontmatter=broken, body=BODY)],
        [tool_call("c3", "lint_schema", folder="knowledge/dual-key-verifier")],
        [tool_call("c4", "property_update", path=NEW, properties={"scope": "class"})],
        [tool_call("c5", "lint_schema", folder="knowledge/dual-key-verifier")],
        [tool_call("c6", "daily_status", path=DAILY_JWT, status="distilled")],
        [TextBlock(text="done")],
    ], queue)

    seen = answers(model)
    assert "missing required key 'scope'" in seen[2] and "No notes with schema errors." in seen[4]
    assert property_read(vault, NEW)["properties"]["scope"] == "class"
    assert result.lint == [] and result.flipped == [DAILY_JWT]


def test_lint_errors_left_by_the_model_are_reported(vault, queue) -> None:
    broken = {k: v for k, v in FM.items() if k != "scope"}
    result, _ = distill(vault, [
        [tool_call("c1", "write", path=NEW, frontmatter=broken, body=BODY)],
        [TextBlock(text="done")],
    ], queue, flip_status=False)
    assert result.lint and result.lint[0]["path"] == NEW


def test_tool_errors_reach_the_model_and_the_job_continues(vault, queue) -> None:
    result, model = distill(vault, [
        [tool_call("c1", "read", path="knowledge/no-such/no-such.md")],
        [tool_call("c2", "write", path=DAILY_JWT, text="# hijack\n", overwrite=True)],
        [tool_call("c3", "daily_status", path=DAILY_JWT, status="archived")],
        [tool_call("c4", "write", path=NEW, frontmatter=FM, body=BODY)],
        [TextBlock(text="done despite errors")],
    ], queue, flip_status=False)

    seen = answers(model)
    assert "No file at 'knowledge/no-such/no-such.md'" in seen[0]
    assert "writes only knowledge/ notes" in seen[1]
    assert "only sets status 'distilled'" in seen[2]
    assert result.created == [NEW] and result.summary == "done despite errors"
    assert [e.ok for e in result.tool_calls] == [False, False, False, True]


def test_an_overloaded_note_enqueues_a_split_and_leaves_it_pending(vault, queue,
                                                                    monkeypatch) -> None:
    monkeypatch.setattr(vault.settings.jobs, "split_token_threshold", 10)  # shared settings
    result, _ = distill(vault, [
        [tool_call("c1", "write", path=NEW, frontmatter=FM, body=BODY)],
        [TextBlock(text="done")],
    ], queue, flip_status=False)

    kinds = {(i.kind, i.path, i.status) for i in result.enqueued}
    assert kinds == {("split", NEW, "pending"), ("autolink", NEW, "pending")}
    assert [i.path for i in queue.pending("split")] == [NEW]
    split = next(i for i in result.enqueued if i.kind == "split")
    assert split.payload["tokens"] > 10 and split.payload["token_threshold"] == 10
    assert split.source == "distiller"


def test_the_distiller_works_on_a_day_with_materials(vault, queue) -> None:
    day = TODAY.isoformat()
    csv = "method,ndcg\nrrf,0.61\nblend,0.63\n"
    table = daily_attach(vault, "search-tuning", "eval.csv", csv, date=day)["path"]
    script = daily_attach(vault, "search-tuning", "blend", "score = 0.3 * v + 0.7 * k\n",
                          language="python", date=day)["path"]
    assert [n["path"] for n in daily_list(vault, start=day, end=day)["notes"]] == [DAILY_TODAY]
    untouched = vault_hash(vault)
    for material in (table, script):  # a material is not a daily note to distill
        model = ScriptedChatModel([[TextBlock(text="x")]])
        with pytest.raises(InvalidArgument, match="not a daily note"):
            run_distiller(vault, [material], model=model, today=TODAY)
        assert model.calls == [] and vault_hash(vault) == untouched
    before = {p: text_of(vault, p) for p in (table, script)}

    blend = "knowledge/blend-fusion/blend-fusion.md"
    result, model = distill(vault, [
        [tool_call("c1", "daily_read", path=DAILY_TODAY)],
        [tool_call("c2", "read", path=table)],
        [tool_call("c3", "write", path=blend, frontmatter=FM | {"title": "Blend fusion"},
                   body="# Blend fusion\n\nBlend beats RRF: nDCG 0.63 vs 0.61.\n")],
        [tool_call("c4", "daily_status", path=DAILY_TODAY, status="distilled")],
        [TextBlock(text="Distilled the fusion comparison.")],
    ], queue, paths=(DAILY_TODAY,))

    assert result.ok and result.flipped == [DAILY_TODAY] and result.created == [blend]
    assert result.read == [DAILY_TODAY, table]
    listing = answers(model)[0]
    assert f"{table} (" in listing and f"{script} (" in listing  # daily_read lists them
    assert {p: text_of(vault, p) for p in (table, script)} == before
    assert "status" not in property_read(vault, script)["properties"]  # frozen, not flipped
    assert status(vault, DAILY_TODAY) == "distilled"


def test_a_missing_daily_fails_before_the_model_runs(vault, queue) -> None:
    before = vault_hash(vault)
    model = ScriptedChatModel([[TextBlock(text="x")]])
    with pytest.raises(NoteNotFound):
        run_distiller(vault, ["daily/2026-01-01/nope"], model=model)
    assert model.calls == [] and vault_hash(vault) == before


def test_token_estimate_counts_cjk_characters_and_latin_quarters() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd efgh") == 2
    assert estimate_tokens("向量检索") == 4
    assert estimate_tokens("BM25 向量") == 3


def test_the_distiller_returns_with_its_follow_ups_pending(vault) -> None:
    """Auto-link never blocks dream (seed auto_link §1.4): the L1 item is queued, not run."""
    body = BODY + "\nDuring the switch the auth service accepts both keys.\n"
    model = ScriptedChatModel([
        [tool_call("c1", "daily_read", path=DAILY_JWT)],
        [tool_call("c2", "write", path=NEW, frontmatter=FM, body=body)],
        [TextBlock(text="Created.")],
    ])
    result = run_distiller(vault, [DAILY_JWT], model=model, today=TODAY, flip_status=False)
    assert [(i.kind, i.path, i.status) for i in result.enqueued] == [("autolink", NEW, "pending")]
    assert "[[auth-service|auth service]]" not in vault.store.read_text(NEW)  # not linked yet
    assert [(i.id, i.status) for i in vault.queue.pending()] == \
        [(result.enqueued[0].id, "pending")]
    assert "queued autolink: " + NEW + " (pending)" in result.render()

    # a drainer (here: the default wiring, no model) runs it later
    from reme_agent.jobs.followups import drain

    report = drain(vault)
    assert [(i.kind, i.path, i.status) for i in report.ran] == [("autolink", NEW, "done")]
    assert "[[auth-service|auth service]]" in vault.store.read_text(NEW)  # mention linked, text kept
    assert report.changed == [NEW] and vault.queue.pending() == []


def test_e1_is_checked_once_by_the_tool_and_the_guard_scans_no_vault(vault, queue,
                                                                      monkeypatch) -> None:
    """The guard leaves E-1 to the tool (one whole-vault view per write that has links)
    and counts its strikes; recording a write that links nothing new costs no view."""
    views: list[int] = []
    real = vault.view
    monkeypatch.setattr(vault, "view", lambda: views.append(1) or real())
    owner = f"owner:: [[{ZHANG}]]\n"
    result, model = distill(vault, [
        [tool_call("c1", "daily_read", path=DAILY_JWT)],
        [tool_call("c2", "read", path=JWT)],
        edit(owner, ""),                                  # refused by the tool's E-1
        edit("90 days.", "90 days; see the runbook."),    # kept: no new link spelled
        [TextBlock(text="done")],
    ], queue, flip_status=False)
    assert "drops existing links" in answers(model)[2]
    assert "see the runbook" in text_of(vault, JWT) and result.refused == []
    # one for the write that drops a link (the tool's E-1; was four with the guard's E-1
    # pre-check and its record), none for the write that keeps every link as written, and
    # the distiller's closing lint_schema
    assert len(views) == 2, views
