"""The jobs' prompts over MCP: a real server process on stdio and the official `mcp` client.

No model is configured anywhere here: the prompts are for the host's own model.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from pathlib import Path

import pytest
from mcp import ClientSession
from mcp.shared.exceptions import MCPError

from reme_agent.config import Settings
from reme_agent.jobs.base import protocol_text
from reme_agent.mcp_prompts import PROMPTS, distill_prompt, maintain_prompt, sync_prompt
from tests.host_text import tools_named
from tests.jobs.conftest import DAILY_JWT, DAILY_TODAY, SETTINGS, build
from tests.test_mcp import _stdio_session

ARGUMENTS = {"distill": {"paths": False, "date": False, "hint": False},
             "sync": {"summary": False, "messages": False, "session_id": False, "hint": False},
             "maintain": {"steps": False, "folder": False},
             "recall": {"query": True}}
TODAY = dt.date.today().isoformat()


def _text(result) -> str:  # type: ignore[no-untyped-def]
    assert len(result.messages) == 1 and result.messages[0].role == "user"
    return result.messages[0].content.text


def test_expert_tier_serves_the_four_prompts_built_from_the_job_prompts(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()

    async def body(session: ClientSession) -> None:
        listed = {p.name: p for p in (await session.list_prompts()).prompts}
        assert {name: {a.name: a.required for a in p.arguments} for name, p in listed.items()} \
            == ARGUMENTS
        assert all(p.description and all(a.description for a in p.arguments)
                   for p in listed.values())
        tools = {t.name for t in (await session.list_tools()).tools}

        with pytest.raises(MCPError, match="No active daily notes"):
            await session.get_prompt("distill", {})
        wrote = await session.call_tool("daily_write", {"slug": "jwt-rotation",
                                                        "body": "## Findings\n- 30-day keys"})
        daily = wrote.structured_content["path"]

        distill = _text(await session.get_prompt("distill", {"hint": "decisions first"}))
        assert protocol_text() in distill
        assert "You are the distiller" in distill and f"- {daily}" in distill
        assert "decisions first" in distill and str(vault) in distill
        assert {"daily_read", "write", "lint_schema", "daily_status", "daily_list"} \
            <= tools_named(distill) <= tools
        assert _text(await session.get_prompt("distill", {"paths": daily.rsplit("/", 1)[0]})) \
            .count(f"- {daily}") == 1  # a workspace folder names its summary note
        with pytest.raises(MCPError, match="No file at 'daily/2020-01-01/nope/nope.md'"):
            await session.get_prompt("distill", {"paths": "daily/2020-01-01/nope"})
        with pytest.raises(MCPError, match="not a date"):
            await session.get_prompt("distill", {"date": "yesterday"})

        sync = _text(await session.get_prompt("sync", {"messages": json.dumps(
            [{"role": "user", "content": "We keep BM25 with jieba."},
             {"role": "system", "content": "hidden system turn"}]), "session_id": "s-77"}))
        assert "We keep BM25 with jieba." in sync and "hidden system turn" not in sync
        assert f"- {daily} ({TODAY})" in sync  # the recent active note it may UPDATE
        assert "s-77" in sync and tools_named(sync) <= tools
        bare = _text(await session.get_prompt("sync", {}))
        assert "record the conversation of this session" in bare

        maintain = _text(await session.get_prompt("maintain", {"steps": "split, schema"}))
        assert maintain.rstrip().endswith('Curate the whole vault (folder "") with these steps, '
                                          "in this order: schema, split.")  # no knowledge/ yet
        assert "about 2000 tokens" in maintain and tools_named(maintain) <= tools
        assert "`link_remove` the wrong link with the reason" in maintain
        with pytest.raises(MCPError, match=r"Unknown maintenance steps \['tidy'\]"):
            await session.get_prompt("maintain", {"steps": "schema,tidy"})
        with pytest.raises(MCPError, match="No folder 'nowhere'"):
            await session.get_prompt("maintain", {"folder": "nowhere"})

        recall = _text(await session.get_prompt("recall", {"query": "how do keys rotate?"}))
        assert recall.rstrip().endswith("Question: how do keys rotate?")
        assert {"search", "graph_traverse", "read"} <= tools_named(recall) <= tools
        assert protocol_text() not in recall
        with pytest.raises(MCPError, match="Missing required arguments"):
            await session.get_prompt("recall", {})
        with pytest.raises(MCPError, match="Unknown prompt"):
            await session.get_prompt("dream", {})
        assert not (await session.call_tool("stat", {"path": daily})).is_error  # still serving

    asyncio.run(_stdio_session(vault, "expert", body))


def test_the_service_tier_lists_the_same_prompts(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()

    async def body(session: ClientSession) -> set[str]:
        return {p.name for p in (await session.list_prompts()).prompts}

    assert asyncio.run(_stdio_session(vault, "service", body)) == set(ARGUMENTS) \
        == {p.name for p in PROMPTS}


# -- the builders, in process ------------------------------------------------------------------
def test_distill_without_paths_takes_the_active_dailies_of_the_date_given(tmp_path: Path) -> None:
    vault = build(tmp_path / "vault")
    try:
        every = distill_prompt(vault)
        assert f"- {DAILY_JWT}" in every and f"- {DAILY_TODAY}" in every
        one_day = distill_prompt(vault, date=DAILY_JWT.split("/")[1])
        assert f"- {DAILY_JWT}" in one_day and DAILY_TODAY not in one_day
        both = distill_prompt(vault, paths=f"{DAILY_TODAY}, {DAILY_JWT}")
        assert both.index(DAILY_TODAY) < both.index(DAILY_JWT)  # the order asked for
    finally:
        vault.close()


def test_prompts_follow_the_vault_language(tmp_path: Path) -> None:
    settings = Settings(**SETTINGS.model_dump() | {"jobs": {"language": "zh"}})
    vault = build(tmp_path / "vault", settings=settings)
    try:
        assert "你是长期记忆库" in maintain_prompt(vault, "orphans")
        assert "按以下顺序对 knowledge 执行这些整理步骤:orphans" in maintain_prompt(vault, "orphans")
        assert "未给出" in sync_prompt(vault)
    finally:
        vault.close()
