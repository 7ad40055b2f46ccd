"""Synchronizer: CREATE / UPDATE / INHERIT with section discipline; transcript mode, no model."""

from __future__ import annotations

import datetime as dt

import pytest
from agentscope.message import AssistantMsg, UserMsg

from reme_agent.errors import ModelNotConfigured
from reme_agent.jobs.synchronizer import (
    coerce_messages,
    merge_sections,
    run_synchronizer,
    section_problems,
)
from reme_agent.testing import ScriptedChatModel, TextBlock, tool_call
from reme_agent.toolkit.daily import daily_status
from reme_agent.toolkit.notes import property_read
from tests.jobs.conftest import (
    DAILY_JWT,
    DAILY_TODAY,
    SETTINGS,
    TODAY,
    answers,
    build,
    text_of,
    vault_hash,
)

CHAT = [{"role": "user", "content": "Let's rotate the JWT keys with a dual-key verifier."},
        {"role": "assistant", "content": "Done: the verifier accepts both keys for 24h."}]
NEW = f"daily/{TODAY.isoformat()}/dual-key-rollout/dual-key-rollout.md"
TODAY_JWT = f"daily/{TODAY.isoformat()}/jwt-rotation/jwt-rotation.md"


def sync(vault, turns, messages=CHAT, **kwargs):
    model = ScriptedChatModel(turns)
    result = run_synchronizer(vault, messages, model=model, today=TODAY, session_id="s-42",
                              **kwargs)
    return result, model


def body(vault, path: str) -> str:
    return text_of(vault, path).split("---\n", 2)[2]


# -- CREATE / UPDATE / INHERIT ------------------------------------------------------------
def test_synchronizer_creates_a_daily_note_with_sections(vault) -> None:
    result, model = sync(vault, [
        [tool_call("c1", "daily_write", slug="dual-key-rollout", title="Dual-key rollout",
                   description="Rolling out the dual-key JWT verifier.",
                   body="## Objective\nRoll out the dual-key verifier.\n\n## Progress\n"
                        "- Verifier accepts both keys for 24h.\n")],
        [TextBlock(text=f"Wrote {NEW}.")],
    ])

    assert result.ok and result.created == [NEW] and result.written == [NEW]
    props = property_read(vault, NEW)["properties"]
    assert props["originSessionId"] == "s-42" and props["status"] == "active"
    assert body(vault, NEW).startswith("# Dual-key rollout\n\n## Objective\n")
    assert model.calls[0]["tool_names"] == ["daily_read", "daily_list", "daily_write",
                                            "daily_attach"]
    user = model.calls[0]["messages"][1].get_text_content()
    assert "[user] Let's rotate the JWT keys" in user and DAILY_JWT in user  # recent notes


def test_update_appends_by_section_and_keeps_the_objective(vault) -> None:
    result, _ = sync(vault, [
        [tool_call("c1", "daily_read", path=DAILY_TODAY)],
        [tool_call("c2", "daily_write", slug="search-tuning", mode="append",
                   body="## Objective\nSomething else entirely.\n\n## Progress\n- Ran the blend eval."
                        "\n\n## Findings\n- Blend beats RRF by 2 points of nDCG.\n- k=60 is fine.\n\n"
                        "## Next\n- Make blend the default.\n\n## Materials\n"
                        "- evals/results/fusion.json\n- evals/results/blend.json\n")],
        [TextBlock(text="Updated.")],
    ])

    assert result.ok and result.written == [DAILY_TODAY] and result.created == []
    assert body(vault, DAILY_TODAY) == (
        "# Search tuning\n\n"
        "## Objective\nPick the default fusion method.\n\n"
        "## Progress\n- Ran the eval with RRF.\n- Ran the blend eval.\n\n"
        "## Findings\n- Blend beats RRF by 2 points of nDCG.\n- k=60 is fine.\n\n"
        "## Next\n- Make blend the default.\n\n"
        "## Materials\n- evals/results/fusion.json\n- evals/results/blend.json\n")


def test_replace_that_drops_append_only_lines_is_sent_back_then_fixed(vault) -> None:
    kept = ("# Search tuning\n\n## Objective\nPick the default fusion method.\n\n## Progress\n"
            "- Ran the eval with RRF.\n- Ran blend.\n\n## Findings\n"
            "- Blend beats RRF by 2 points of nDCG.\n\n## Materials\n"
            "- evals/results/fusion.json\n")
    result, model = sync(vault, [
        [tool_call("c1", "daily_read", path=DAILY_TODAY)],
        [tool_call("c2", "daily_write", slug="search-tuning", mode="replace",
                   body="# Search tuning\n\n## Objective\nNew goal.\n\n## Progress\n- Ran blend.\n")],
        [tool_call("c3", "daily_write", slug="search-tuning", mode="replace", body=kept)],
        [TextBlock(text="Updated.")],
    ])

    error = answers(model)[1]
    assert "Objective is set once" in error and "Progress is append-only" in error
    assert "'- Ran the eval with RRF.'" in error and "Findings" in error
    assert body(vault, DAILY_TODAY) == kept and result.ok


def test_a_second_section_violation_is_refused_and_audited(vault) -> None:
    before = text_of(vault, DAILY_TODAY)
    bad = "# Search tuning\n\n## Objective\nPick the default fusion method.\n\n## Progress\n- x\n"
    result, model = sync(vault, [
        [tool_call("c1", "daily_read", path=DAILY_TODAY)],
        [tool_call("c2", "daily_write", slug="search-tuning", mode="replace", body=bad)],
        [tool_call("c3", "daily_write", slug="search-tuning", mode="replace", body=bad)],
        [TextBlock(text="gave up")],
    ])

    assert text_of(vault, DAILY_TODAY) == before
    assert [i.path for i in result.refused] == [DAILY_TODAY]
    audit = text_of(vault, f"audit/{dt.date.today().isoformat()}/refused.md")
    assert DAILY_TODAY in audit and "append-only" in audit
    assert "for the rest of this job" in answers(model)[2]


def test_inherit_creates_todays_note_linked_to_the_earlier_active_one(vault) -> None:
    before = text_of(vault, DAILY_JWT)
    result, _ = sync(vault, [
        [tool_call("c1", "daily_read", path=DAILY_JWT)],
        [tool_call("c2", "daily_write", slug="jwt-rotation", title="JWT rotation",
                   body=f"inherits:: [[{DAILY_JWT}]]\n\n## Objective\n"
                        "Rotate the JWT signing keys without logging anybody out.\n\n"
                        "## Progress\n- Deployed the dual-key verifier.\n\n"
                        "## Next\n- Retire the old key tomorrow.\n")],
        [TextBlock(text="Inherited.")],
    ])

    assert result.created == [TODAY_JWT] and text_of(vault, DAILY_JWT) == before
    assert [(e.source, e.target, e.predicate) for e in result.linked] == [
        (TODAY_JWT, DAILY_JWT, "inherits")]
    assert "Rotate the JWT signing keys" in body(vault, TODAY_JWT)


def test_the_inherits_link_is_added_in_code_when_the_model_forgets_it(vault) -> None:
    result, _ = sync(vault, [
        [tool_call("c1", "daily_write", slug="jwt-rotation", title="JWT rotation",
                   body="## Progress\n- Deployed the verifier.\n")],
        [TextBlock(text="ok")],
    ])
    # written in the vault's style: the name alone would be ambiguous (today's note has it)
    shortest = DAILY_JWT.removesuffix(".md")
    assert body(vault, TODAY_JWT).startswith(f"# JWT rotation\n\ninherits:: [[{shortest}]]\n")
    assert [e.predicate for e in result.linked] == ["inherits"]


def test_the_synchronizer_never_writes_knowledge_or_lints(vault) -> None:
    before = vault_hash(vault)
    result, model = sync(vault, [
        [tool_call("c1", "write", path="knowledge/x/x.md", body="x")],
        [tool_call("c2", "lint_schema")],
        [TextBlock(text="ok")],
    ])
    seen = answers(model)
    assert all("doesn't exist" in s or "not found" in s.lower() for s in seen), seen
    assert vault_hash(vault) == before and result.written == []


# -- sibling materials ----------------------------------------------------------------------
SCRIPT = "\n".join(["import jwt", "", "def rotate(keys):"]
                   + [f"    keys.add(new_key({i}))  # step {i}" for i in range(40)]) + "\n"
CODE_CHAT = [CHAT[0], {"role": "assistant",
                       "content": f"Here is the rotation script:\n```python\n{SCRIPT}```"}]
SCRIPT_NOTE = f"daily/{TODAY.isoformat()}/dual-key-rollout/rotate-keys.md"


def create_then_attach(**attach):
    return [
        [tool_call("c1", "daily_write", slug="dual-key-rollout", title="Dual-key rollout",
                   body="## Objective\nRoll out the dual-key verifier.\n\n## Progress\n"
                        "- Wrote the rotation script.\n")],
        [tool_call("c2", "daily_attach", slug="dual-key-rollout",
                   **({"filename": "rotate-keys", "content": SCRIPT, "language": "python",
                       "description": "The key rotation script"} | attach))],
        [TextBlock(text=f"Wrote {NEW}.")],
    ]


def test_a_long_code_output_is_stored_beside_the_note_and_linked(vault) -> None:
    result, model = sync(vault, create_then_attach(), messages=CODE_CHAT)

    assert result.ok and result.created == [NEW, SCRIPT_NOTE]
    assert result.written == [NEW, SCRIPT_NOTE]
    assert [(e.source, e.target) for e in result.linked] == [(NEW, SCRIPT_NOTE)]
    assert text_of(vault, SCRIPT_NOTE).endswith(f"```python\n{SCRIPT}```\n")
    props = property_read(vault, SCRIPT_NOTE)["properties"]
    assert props["originSessionId"] == "s-42" and props["lifecycle"] == "frozen"  # by the guard
    assert body(vault, NEW).endswith("## Materials\n- [[rotate-keys]] — The key rotation "
                                     "script\n")
    view = vault.view()
    assert [view.resolve(x, NEW) for x in view.notes[NEW].links] == [SCRIPT_NOTE]
    assert answers(model)[1].startswith(f"Stored {SCRIPT_NOTE}")


def test_syncing_the_same_conversation_again_stores_nothing_twice(vault) -> None:
    sync(vault, create_then_attach(), messages=CODE_CHAT)
    before = vault_hash(vault)

    again, model = sync(vault, [], messages=CODE_CHAT)  # an empty script: any model call fails
    assert again.summary == "Nothing new to record." and model.calls == []
    assert vault_hash(vault) == before
    # the tool itself is idempotent too: the model repeating its calls changes nothing
    more = [*CODE_CHAT, {"role": "user", "content": "Thanks."}]
    repeat, _ = sync(vault, create_then_attach()[1:], messages=more)
    assert repeat.ok and repeat.written == [] and vault_hash(vault) == before


def test_oversize_and_unsafe_materials_are_refused_and_nothing_is_half_written(
        tmp_path) -> None:
    limit = 2000  # a small limit keeps the conversation under AgentScope's compression
    vault = build(tmp_path / "small", settings=SETTINGS.model_copy(
        update={"index": SETTINGS.index.model_copy(update={"max_file_bytes": limit})}))
    result, model = sync(vault, [
        [tool_call("c1", "daily_write", slug="dual-key-rollout", body="## Progress\n- ran\n")],
        [tool_call("c2", "daily_attach", slug="dual-key-rollout", filename="huge.log",
                   content="x" * (limit + 1))],
        [tool_call("c3", "daily_attach", slug="dual-key-rollout", filename="../../escape",
                   content="x")],
        [tool_call("c4", "daily_attach", slug="dual-key-rollout", filename=".hidden",
                   content="x")],
        [TextBlock(text="Could not store the log.")],
    ], messages=CODE_CHAT)

    seen = answers(model)
    assert f"the limit is {limit}" in seen[1] and "Nothing was written" in seen[1]
    assert "not a path" in seen[2] and "hidden" in seen[3]
    folder = vault.root / NEW.rsplit("/", 1)[0]
    assert sorted(p.name for p in folder.iterdir()) == ["dual-key-rollout.md"]
    assert "## Materials" not in body(vault, NEW) and not (vault.root / "escape.md").exists()
    huge = NEW.rsplit("/", 1)[0] + "/huge.log"
    assert [(i.path, i.tool) for i in result.failed] == [(huge, "daily_attach")]
    vault.close()


# -- transcript mode ----------------------------------------------------------------------
def test_transcript_mode_appends_raw_turns_without_a_model(vault) -> None:
    assert not vault.settings.model.configured
    first = run_synchronizer(vault, CHAT, mode="transcript", session_id="s-7", today=TODAY)
    path = f"daily/{TODAY.isoformat()}/session-s-7/session-s-7.md"
    assert first.mode == "transcript" and first.created == [path] and first.ok
    more = [UserMsg("user", "And the old key?"), AssistantMsg("bot", "Retired tomorrow.")]
    second = run_synchronizer(vault, more, mode="transcript", session_id="s-7", today=TODAY)
    assert second.written == [path] and second.created == []
    text = body(vault, path)
    assert "**user**: Let's rotate the JWT keys" in text
    assert "**bot** (assistant): Retired tomorrow." in text
    assert text.index("dual-key verifier") < text.index("And the old key?")
    assert property_read(vault, path)["properties"]["originSessionId"] == "s-7"


def test_a_resent_or_grown_conversation_records_each_turn_once(vault) -> None:
    path = f"daily/{TODAY.isoformat()}/session-s-8/session-s-8.md"
    first = run_synchronizer(vault, CHAT[:1], mode="transcript", session_id="s-8", today=TODAY)
    grown = run_synchronizer(vault, CHAT, mode="transcript", session_id="s-8", today=TODAY)
    same = run_synchronizer(vault, CHAT, mode="transcript", session_id="s-8", today=TODAY)
    text = body(vault, path)
    assert text.count("Let's rotate") == 1 and text.count("Done: the verifier") == 1
    assert first.turns == {"new": 1, "already_synced": 0}
    assert grown.written == [path] and grown.turns == {"new": 1, "already_synced": 1}
    assert same.written == [] and same.summary == "Nothing new to record."
    assert "syncedTurns" not in property_read(vault, path)["properties"]


def test_a_turn_said_twice_is_two_turns_and_stays_two(vault) -> None:
    chat = [{"role": "user", "content": "ok"}, {"role": "assistant", "content": "Next step?"},
            {"role": "user", "content": "ok"}]
    path = f"daily/{TODAY.isoformat()}/session-s-9/session-s-9.md"
    run_synchronizer(vault, chat[:2], mode="transcript", session_id="s-9", today=TODAY)
    run_synchronizer(vault, chat, mode="transcript", session_id="s-9", today=TODAY)
    run_synchronizer(vault, chat, mode="transcript", session_id="s-9", today=TODAY)
    assert body(vault, path).count("**user**: ok") == 2


def test_without_a_session_id_the_first_turn_names_the_conversation(vault) -> None:
    path = f"daily/{TODAY.isoformat()}/transcript/transcript.md"
    run_synchronizer(vault, CHAT, mode="transcript", today=TODAY)
    again = run_synchronizer(vault, CHAT, mode="transcript", today=TODAY)
    other = run_synchronizer(vault, [{"role": "user", "content": "A new chat."}, CHAT[1]],
                             mode="transcript", today=TODAY)
    assert again.summary == "Nothing new to record."
    assert other.turns == {"new": 2, "already_synced": 0}
    assert body(vault, path).count("Done: the verifier") == 2  # once per conversation


def test_the_llm_mode_gets_only_turns_not_yet_synced(vault) -> None:
    more = [*CHAT, {"role": "user", "content": "And the old key?"},
            {"role": "assistant", "content": "Retired tomorrow."}]
    first, model = sync(vault, [[TextBlock(text="nothing worth a note")]])
    assert first.turns == {"new": 2, "already_synced": 0} and first.ok
    second, model = sync(vault, [[TextBlock(text="still nothing")]], messages=more)
    transcript = model.calls[0]["messages"][1].get_text_content()
    assert "And the old key?" in transcript and "dual-key verifier" not in transcript
    third, model = sync(vault, [], messages=more)  # an empty script: any model call fails
    assert third.summary == "Nothing new to record." and model.calls == []


def test_a_failed_write_gives_the_turns_back_for_the_next_sync(vault) -> None:
    path = f"daily/{TODAY.isoformat()}/session-s-10/session-s-10.md"
    run_synchronizer(vault, CHAT[:1], mode="transcript", session_id="s-10", today=TODAY)
    daily_status(vault, path, "distilled")  # a distilled note takes no new content
    refused = run_synchronizer(vault, CHAT, mode="transcript", session_id="s-10", today=TODAY)
    assert refused.error and refused.written == []
    text = text_of(vault, path).replace("status: distilled", "status: active")
    (vault.root / path).write_text(text, encoding="utf-8")
    retried = run_synchronizer(vault, CHAT, mode="transcript", session_id="s-10", today=TODAY)
    assert retried.turns == {"new": 1, "already_synced": 1}
    assert body(vault, path).count("Done: the verifier") == 1


def test_the_llm_mode_without_a_model_names_the_transcript_mode(vault) -> None:
    with pytest.raises(ModelNotConfigured, match="--mode transcript"):
        run_synchronizer(vault, CHAT, today=TODAY)
    assert not (vault.root / "daily" / TODAY.isoformat() / "session-s-42").exists()


# -- pure parts ---------------------------------------------------------------------------
def test_messages_are_coerced_from_msgs_and_dicts() -> None:
    got = coerce_messages([
        {"role": "system", "content": "You are..."},
        {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image"}]},
        UserMsg("alice", "hello"),
        {"role": "assistant", "content": "   "},
        {"role": "tool", "content": "result"},
    ])
    assert got == [{"role": "user", "name": "user", "text": "hi"},
                   {"role": "user", "name": "alice", "text": "hello"}]


def test_section_rules_merge_and_check() -> None:
    old = "# T\n\n## 目标\n做完。\n\n## Plan\n- a\n\n## 进展\n- 第一步\n\n## Notes\n- keep\n"
    merged = merge_sections(old, "## 目标\n别的\n\n## Plan\n- b\n\n## 进展\n- 第二步\n\n## Extra\n- new\n")
    assert merged == ("# T\n\n## 目标\n做完。\n\n## Plan\n- b\n\n## 进展\n- 第一步\n- 第二步\n\n"
                      "## Notes\n- keep\n\n## Extra\n- new\n")
    assert merge_sections(old, "- plain line") .count("- plain line") == 1
    assert "Progress" in merge_sections("# T\n", "- plain line")
    assert section_problems(old, merged) == []
    problems = section_problems(old, "# T\n\n## 目标\n变了\n")
    assert len(problems) == 3  # objective changed, 进展 and Notes lost lines


# -- a vault with Obsidian day notes ------------------------------------------------------
DAY = f"daily/{TODAY.isoformat()}.md"


def test_in_a_vault_with_day_notes_updates_merge_into_the_tasks_section(vault) -> None:
    vault.store.write(DAY, "# Monday\n\nMy own notes.\n")
    first, _ = sync(vault, [
        [tool_call("c1", "daily_write", slug="dual-key-rollout", title="Dual-key rollout",
                   body="## Objective\nRoll out the verifier.\n\n## Progress\n- Step one.\n")],
        [TextBlock(text="ok")]])
    assert first.ok and first.written == [DAY], first
    more = [*CHAT, {"role": "user", "content": "Step two is done too."}]  # a new turn
    second, _ = sync(vault, [
        [tool_call("c1", "daily_write", slug="dual-key-rollout", mode="append",
                   body="## Objective\nSomething else.\n\n## Progress\n- Step two.\n")],
        [TextBlock(text="ok")]], messages=more)
    assert second.ok and second.written == [DAY], second
    assert body(vault, DAY) == ("# Monday\n\nMy own notes.\n\n# dual-key-rollout\n\n"
                                "## Objective\nRoll out the verifier.\n\n"
                                "## Progress\n- Step one.\n- Step two.\n")
    assert not (vault.root / f"daily/{TODAY.isoformat()}/dual-key-rollout").exists()


def test_transcript_mode_writes_into_the_day_note(vault) -> None:
    vault.store.write(DAY, "# Monday\n")
    result = run_synchronizer(vault, CHAT, mode="transcript", session_id="s-7", today=TODAY)
    assert result.ok and result.written == [DAY]
    text = body(vault, DAY)
    assert text.startswith("# Monday\n\n# session-s-7\n\n## Transcript ")
    assert "**user**: Let's rotate the JWT keys" in text
