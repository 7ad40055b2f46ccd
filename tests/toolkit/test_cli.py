"""The tools on the command line: tools --json, tool <name>, read, traverse, lint."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from reme_agent.cli import cli
from reme_agent.toolkit import TOOLS
from reme_agent.toolkit.notes import property_read

BM25 = "knowledge/bm25/bm25.md"


@pytest.fixture(autouse=True)
def hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REME_EMBEDDER__NAME", "hash")


def run(vault, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [*args, "--vault", str(vault.root)])
    return result.exit_code, result.stdout, result.stderr


def test_tools_json_lists_every_tool_with_its_schema(vault) -> None:
    code, out, _ = run(vault, "tools", "--json")
    tools = json.loads(out)["tools"]
    assert code == 0 and [t["name"] for t in tools] == [s.name for s in TOOLS]
    read = next(t for t in tools if t["name"] == "read")
    assert read["read_only"] and read["parameters"]["required"] == ["path"]
    assert read["parameters"]["properties"]["start_line"]["description"]


def test_read_command_prints_text_or_json(vault) -> None:
    code, out, _ = run(vault, "read", BM25, "--start", "11", "--end", "11")
    assert code == 0 and out.splitlines()[1] == "# BM25"
    code, out, _ = run(vault, "read", BM25, "--json")
    assert code == 0 and json.loads(out)["stamp"] == vault.store.stamp(BM25)


def test_traverse_command_walks_the_graph(vault) -> None:
    code, out, _ = run(vault, "traverse", BM25, "--direction", "in", "--json")
    sources = {e["source"] for e in json.loads(out)["edges"]}
    assert code == 0 and "knowledge/hybrid-search/hybrid-search.md" in sources


def test_lint_command_reports_and_strict_fails(messy) -> None:
    code, out, _ = run(messy, "lint", "--json")
    data = json.loads(out)
    assert code == 0 and {k: v["count"] for k, v in data.items()} == {
        "dangling": 2, "orphans": 1, "collisions": 1, "alias_links": 0, "redirect_links": 0,
        "schema": 1}
    code, out, _ = run(messy, "lint", "--strict")
    assert code == 1 and "== schema ==" in out


def test_lint_command_is_quiet_on_a_clean_vault(vault) -> None:
    code, out, _ = run(vault, "lint", "--strict")
    assert code == 0 and "No dangling links." in out


def test_every_tool_is_reachable_as_a_subcommand(vault) -> None:
    code, out, _ = run(vault, "tool", "property_update", "--path", BM25,
                       "--properties", '{"importance": 9}', "--json")
    assert code == 0 and json.loads(out)["changed"]
    assert property_read(vault, BM25, ["importance"])["properties"] == {"importance": 9}
    code, out, _ = run(vault, "tool", "list", "--folder", "knowledge", "--where",
                       '{"role": "method"}', "--json")
    assert [f["path"] for f in json.loads(out)["files"]] == ["knowledge/hybrid-search/hybrid-search.md"]
    code, out, _ = run(vault, "tool", "graph_traverse", "--seeds", BM25, "--direction", "in",
                       "--include-archived")
    assert code == 0 and "hop 1 (in)" in out
    code, out, _ = run(vault, "tool", "property_read", "--path", BM25, "--keys", "title",
                       "--keys", "role")
    assert code == 0 and "title: BM25" in out and "role: concept" in out


def test_traverse_command_leaves_archived_notes_out_like_the_tool(vault) -> None:
    daily = "daily/2026-11-28/search-tuning/search-tuning.md"
    code, out, _ = run(vault, "traverse", BM25, "--direction", "in", "--json")
    assert code == 0 and daily in json.loads(out)["nodes"]
    text = (vault.root / daily).read_text(encoding="utf-8")
    (vault.root / daily).write_text(text.replace("status: active", "status: archived"),
                                    encoding="utf-8")   # a person archives it by hand
    vault.refresh([daily])
    for flags, shown in (((), False), (("--exclude-archived",), False),
                         (("--include-archived",), True)):
        code, out, _ = run(vault, "traverse", BM25, "--direction", "in", *flags, "--json")
        assert code == 0 and (daily in json.loads(out)["nodes"]) is shown, flags


def test_tool_help_shows_the_docstring_text(vault) -> None:
    result = CliRunner().invoke(cli, ["tool", "read", "--help"])
    assert result.exit_code == 0 and "--start-line" in result.output
    assert "First line to return" in result.output


def test_errors_are_one_line_on_stderr_with_exit_code_1(vault) -> None:
    code, out, err = run(vault, "read", "knowledge/bm25/bm52.md")
    assert code == 1 and out == ""
    assert err.strip().splitlines() == [err.strip()] and "No file at" in err
    code, _, err = run(vault, "tool", "daily_status", "--path", "daily/2026-11-29/refactor",
                       "--status", "active")
    assert code == 1 and "moving back" in err
    code, _, err = run(vault, "tool", "read")
    assert code == 2 and "--path" in err  # click usage error for a missing required option
