"""The tool contract: names, parameters, read-only/destructive flags and schemas are pinned."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from reme_agent.errors import InvalidArgument, ReMeError
from reme_agent.toolkit import TOOLS, ToolSpec, build_toolkit, get_tool, select
from reme_agent.toolkit.results import ToolResult
from tests.toolkit.conftest import call_toolkit, vault_hash

CONTRACT: dict[str, tuple[str, list[str], bool, bool]] = {
    # name: (group, parameters after vault, read_only, destructive)
    "search": ("retrieve", ["query", "limit", "path_prefix", "layers", "include_archived",
                            "expand_depth", "top_chunks_per_path", "query_rewrite"], True, False),
    "graph_traverse": ("retrieve", ["seeds", "direction", "depth", "predicates",
                                    "include_archived", "max_nodes"], True, False),
    "list": ("read", ["folder", "recursive", "glob", "where", "limit"], True, False),
    "read": ("read", ["path", "start_line", "end_line"], True, False),
    "stat": ("read", ["path"], True, False),
    "property_read": ("read", ["path", "keys"], True, False),
    "recent": ("read", ["timeframe", "folder", "limit"], True, False),
    "write": ("write", ["path", "body", "frontmatter", "text", "overwrite", "stamp"], False, False),
    "property_update": ("write", ["path", "properties", "stamp"], False, False),
    "property_delete": ("write", ["path", "keys", "stamp"], False, False),
    "link_remove": ("write", ["path", "links", "reason", "stamp"], False, True),
    "tags_list": ("tags", ["folder", "limit"], True, False),
    "tags_stat": ("tags", ["tag", "folder"], True, False),
    "move": ("fileops", ["src", "dst"], False, True),
    "copy": ("fileops", ["src", "dst", "overwrite", "stamp"], False, True),
    "delete": ("fileops", ["path", "stamp"], False, True),
    "upload": ("fileops", ["local_path", "dest"], False, False),
    "download": ("fileops", ["path", "local_path", "overwrite"], False, False),
    "daily_read": ("daily", ["path"], True, False),
    "daily_list": ("daily", ["start", "end", "status", "limit"], True, False),
    "daily_write": ("daily", ["slug", "body", "date", "title", "description", "tags",
                              "origin_session_id", "properties", "mode", "stamp"], False, False),
    "daily_attach": ("daily", ["slug", "filename", "content", "description", "language", "date",
                               "origin_session_id"], False, False),
    "daily_status": ("daily", ["path", "status", "stamp"], False, False),
    "lint_dangling": ("lint", ["folder"], True, False),
    "lint_orphans": ("lint", ["folder"], True, False),
    "lint_collisions": ("lint", ["folder"], True, False),
    "lint_schema": ("lint", ["folder"], True, False),
    "lint_alias_links": ("lint", ["folder"], True, False),
    "lint_redirect_links": ("lint", ["folder"], True, False),
}


def test_tool_names_are_exactly_the_contract() -> None:
    assert [s.name for s in TOOLS] == list(CONTRACT)


@pytest.mark.parametrize("spec", TOOLS, ids=lambda s: s.name)
def test_each_tool_has_pinned_parameters_and_flags(spec: ToolSpec) -> None:
    group, params, read_only, destructive = CONTRACT[spec.name]
    assert (spec.group, [p.name for p in spec.params()], spec.read_only, spec.destructive) == \
        (group, params, read_only, destructive)
    assert list(inspect.signature(spec.fn).parameters)[0] == "vault"
    assert spec.description and spec.description[0].isupper()


@pytest.mark.parametrize("spec", TOOLS, ids=lambda s: s.name)
def test_every_parameter_is_documented_in_the_schema(spec: ToolSpec) -> None:
    schema = spec.input_schema()
    assert schema["type"] == "object" and list(schema["properties"]) == CONTRACT[spec.name][1]
    assert all(prop.get("description") for prop in schema["properties"].values())


def test_params_fail_on_an_undocumented_parameter() -> None:
    def bad(vault: object, documented: str, secret: int = 1) -> ToolResult:
        """Do something.

        Args:
            documented: Is documented.
        """
        return ToolResult({})

    with pytest.raises(KeyError, match="secret"):
        ToolSpec("bad", bad, "read", read_only=True).params()


def test_agentscope_schemas_match_the_registry(vault) -> None:
    toolkit = build_toolkit(vault)
    schemas = {s["function"]["name"]: s["function"]
               for s in asyncio.run(toolkit.get_tool_schemas())}
    assert list(schemas) == list(CONTRACT)
    for spec in TOOLS:
        fn = schemas[spec.name]
        assert "vault" not in fn["parameters"]["properties"]
        assert list(fn["parameters"]["properties"]) == CONTRACT[spec.name][1]
        assert fn["parameters"].get("required", []) == spec.input_schema().get("required", [])
        assert "Args:" not in fn["description"]


def test_agentscope_flags_follow_the_table(vault) -> None:
    toolkit = build_toolkit(vault)
    unattended = build_toolkit(vault, allow_destructive=True)
    for spec in TOOLS:
        tool = asyncio.run(toolkit.get_tool(spec.name))
        assert tool.is_read_only is spec.read_only
        assert tool.is_concurrency_safe is spec.read_only
        decision = asyncio.run(tool.check_permissions({}, None))
        # only destructive calls ask (G1); everything else is allowed, or an agent parks
        want = "ask" if spec.needs_confirmation({}) else "allow"
        assert decision.behavior.value == want, spec.name
        job_tool = asyncio.run(unattended.get_tool(spec.name))
        assert asyncio.run(job_tool.check_permissions({}, None)).behavior.value == "allow"
    assert {s.name for s in TOOLS if s.needs_confirmation({})} == {"delete", "move",
                                                                      "link_remove"}


def test_groups_and_only_narrow_the_toolkit(vault) -> None:
    names = [s.name for s in select(groups=["retrieve", "lint"])]
    assert names == ["search", "graph_traverse", "lint_dangling", "lint_orphans",
                     "lint_collisions", "lint_schema", "lint_alias_links",
                     "lint_redirect_links"]
    toolkit = build_toolkit(vault, only=["search", "read", "write"], tier="expert")
    got = [s["function"]["name"] for s in asyncio.run(toolkit.get_tool_schemas())]
    assert got == ["search", "read", "write"]


def test_each_build_returns_a_new_toolkit(vault) -> None:
    assert build_toolkit(vault) is not build_toolkit(vault)


def test_service_tier_adds_job_specs_and_expert_does_not(vault) -> None:
    def run_job(vault: object, note: str) -> ToolResult:
        """Run a job.

        Args:
            note: What to do.
        """
        return ToolResult({"ok": True})

    job = ToolSpec("run_job", run_job, "jobs", read_only=False, kind="job")
    assert "run_job" in [s.name for s in select(tier="service", extra=[job])]
    assert "run_job" not in [s.name for s in select(tier="expert", extra=[job])]


def test_lazy_groups_become_agentscope_tool_groups(vault) -> None:
    toolkit = build_toolkit(vault, groups=["read", "lint"], lazy_groups=True)
    assert sorted(g.name for g in toolkit.tool_groups) == ["basic", "memory_lint", "memory_read"]


@pytest.mark.parametrize("kwargs", [{"groups": ["nope"]}, {"only": ["nope"]}, {"tier": "gold"}])
def test_unknown_groups_names_and_tiers_are_refused(vault, kwargs) -> None:
    with pytest.raises(InvalidArgument):
        build_toolkit(vault, **kwargs)


def test_unknown_tool_name_suggests_close_matches() -> None:
    with pytest.raises(InvalidArgument, match="Did you mean"):
        get_tool("serch")


# -- every tool, through the real Toolkit and directly -------------------------------------
BM25 = "knowledge/bm25/bm25.md"
GOOD_CALLS: dict[str, tuple[dict, str]] = {
    # name: (arguments, a piece of the text the model gets)
    "search": ({"query": "inverse document frequency"}, BM25),
    "graph_traverse": ({"seeds": [BM25], "direction": "both"}, "part_of"),
    "list": ({"folder": "knowledge"}, "Hybrid search"),
    "read": ({"path": BM25}, "stamp "),
    "stat": ({"path": BM25}, "links_in: 3"),
    "property_read": ({"path": BM25}, "role: concept"),
    "recent": ({"folder": "knowledge"}, "edited: knowledge/"),
    "write": ({"path": "knowledge/new/new.md", "body": "# New\n"}, "Created knowledge/new/new.md"),
    "property_update": ({"path": BM25, "properties": {"importance": 6}}, "Updated"),
    "property_delete": ({"path": BM25, "keys": ["aliases"]}, "Updated"),
    "link_remove": ({"path": BM25, "links": ["part_of:: [[hybrid search]]"],
                     "reason": "test"}, "Removed 1 link(s)"),
    "tags_list": ({}, "#search (3)"),
    "tags_stat": ({"tag": "ranking"}, BM25),
    "move": ({"src": "resource/paper.pdf", "dst": "resource/papers/bm25.pdf"}, "rewrote 1 link"),
    "copy": ({"src": BM25, "dst": "knowledge/bm25-copy/bm25-copy.md"}, "Copied"),
    "delete": ({"path": "daily/2026-11-28/search-tuning/transcript.txt"}, "Deleted"),
    "upload": ({"local_path": "INBOX/scan.png"}, "resource/scan.png"),
    "download": ({"path": BM25, "local_path": "OUTBOX/bm25.md"}, "Downloaded"),
    "daily_read": ({"path": "daily/2026-11-28/search-tuning"}, "transcript.txt"),
    "daily_list": ({"status": "distilled"}, "refactor"),
    "daily_write": ({"slug": "new-day", "body": "hello", "date": "2026-12-03"}, "Created"),
    "daily_attach": ({"slug": "search-tuning", "filename": "run.log", "content": "ok\n",
                      "date": "2026-11-28"}, "Stored daily/2026-11-28/search-tuning/run.log"),
    "daily_status": ({"path": "daily/2026-11-29/refactor", "status": "archived"},
                     "distilled -> archived"),
    "lint_dangling": ({}, "No dangling links."),
    "lint_orphans": ({}, "No orphans."),
    "lint_collisions": ({}, "No name collisions."),
    "lint_schema": ({}, "No notes with schema errors."),
    "lint_alias_links": ({}, "No links Obsidian does not resolve."),
    "lint_redirect_links": ({}, "No links through a merge redirect."),
}
BAD_CALLS: dict[str, dict] = {
    "search": {"query": "   "},
    "graph_traverse": {"seeds": ["knowledge/none.md"]},
    "list": {"folder": "../outside"},
    "read": {"path": "knowledge/none.md"},
    "stat": {"path": "/etc/passwd"},
    "property_read": {"path": "resource/paper.pdf"},
    "recent": {"timeframe": "last tuesday"},
    "write": {"path": BM25, "body": "x"},
    "property_update": {"path": BM25, "properties": {"importance": 99}},
    "property_delete": {"path": BM25, "keys": []},
    "link_remove": {"path": BM25, "links": ["[[nowhere]]"], "reason": "test"},
    "tags_list": {"limit": 0},
    "tags_stat": {"tag": ""},
    "move": {"src": BM25, "dst": "knowledge/hybrid-search/hybrid-search.md"},
    "copy": {"src": "knowledge/none.md", "dst": "knowledge/y.md"},
    "delete": {"path": BM25, "stamp": "0" * 64},
    "upload": {"local_path": "/etc/hostname"},
    "download": {"path": BM25, "local_path": "/tmp/reme-outside.md"},
    "daily_read": {"path": "knowledge/bm25"},
    "daily_list": {"start": "yesterday"},
    "daily_write": {"slug": "Bad Slug", "body": "x"},
    "daily_attach": {"slug": "search-tuning", "filename": "../x", "content": "x", "date": "2026-11-28"},
    "daily_status": {"path": "daily/2026-11-29/refactor", "status": "active"},
    "lint_dangling": {"folder": "nowhere"},
    "lint_orphans": {"folder": "nowhere"},
    "lint_collisions": {"folder": "nowhere"},
    "lint_schema": {"folder": ["knowledge"]},
    "lint_alias_links": {"folder": "nowhere"},
    "lint_redirect_links": {"folder": "nowhere"},
}


def test_the_tables_cover_every_tool() -> None:
    assert list(GOOD_CALLS) == list(BAD_CALLS) == list(CONTRACT)


@pytest.mark.parametrize("name", list(GOOD_CALLS))
def test_every_tool_succeeds_through_the_toolkit(io_vault, name) -> None:
    vault, inbox, outbox = io_vault
    (inbox / "scan.png").write_bytes(b"\x89PNG\x00")
    args, needle = GOOD_CALLS[name]
    args = {k: v.replace("INBOX", str(inbox)).replace("OUTBOX", str(outbox))
            if isinstance(v, str) else v for k, v in args.items()}
    state, text = call_toolkit(build_toolkit(vault, only=[name]), name, **args)
    assert state == "success", text
    assert needle in text


@pytest.mark.parametrize("name", list(BAD_CALLS))
def test_every_bad_call_is_a_typed_error_and_changes_nothing(vault, name) -> None:
    before = vault_hash(vault)
    state, text = call_toolkit(build_toolkit(vault), name, **BAD_CALLS[name])
    assert state == "error" and len(text) > 20, text
    with pytest.raises(ReMeError) as err:
        get_tool(name).fn(vault, **BAD_CALLS[name])
    assert str(err.value) == text
    assert vault_hash(vault) == before
