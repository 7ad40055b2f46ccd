"""Every tool schema we send, as AgentScope serialises it into a real request, against the
constraints OpenAI documents for function calling.

The schemas are captured from the scripted server (not from `input_schema()`): every atomic
tool and both job specs (the MCP service tier's table), the lazily activated groups with
AgentScope's own `reset_tools`, and the toolkits the synchronizer and distiller build.

Rules, and where they come from (OpenAI API docs, read 2026-12):
- Chat completions API reference, `tools[].function`: `type: "function"`; `name` "must be
  a-z, A-Z, 0-9, or contain underscores and dashes, with a maximum length of 64" (the API
  answers `does not match '^[a-zA-Z0-9_-]{1,64}$'`); `description`; `parameters` "described
  as a JSON Schema object"; `strict` is the only other field.
- Structured Outputs guide, "Supported schemas" (the subset a function's parameters must
  keep to for `strict: true`, which we hold ourselves to although we do not send it): types
  string, number, boolean, integer, object, array, enum, anyOf (and null in unions);
  string `pattern` and `format` (date-time, time, date, duration, email, hostname, ipv4, ipv6,
  uuid); number `multipleOf`, `maximum`, `exclusiveMaximum`, `minimum`, `exclusiveMinimum`;
  array `minItems`, `maxItems`; `$defs`/`$ref` definitions; not supported: `allOf`, `not`,
  `dependentRequired`, `dependentSchemas`, `if`, `then`, `else`; the root must be an object,
  not `anyOf`; at most 5000 object properties, 10 levels of nesting, 120,000 characters of
  property names + enum and const values, 1000 enum values (and 15,000 characters for one
  string enum of more than 250 values).
- Function-calling guide, best practices: "Aim for fewer than 20 functions available at the
  start of a turn" (a soft suggestion; we hold the jobs' toolkits to it).
Our own additions: every function and every parameter has a description (the model reads
nothing else), no `title` noise, and no `$ref` left (AgentScope inlines them; none may remain).
Not applied: strict mode's "all fields required" and `additionalProperties: false` (we do not
send `strict: true`, and our optional parameters are optional).
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
from collections.abc import Iterator
from typing import Any, Literal

import jsonschema
import pytest
from pydantic import BaseModel, TypeAdapter

from reme_agent.jobs.distiller import run_distiller
from reme_agent.jobs.models import build_chat_model
from reme_agent.jobs.synchronizer import run_synchronizer
from reme_agent.jobs.tools import JOB_TOOLS
from reme_agent.toolkit.agentscope import build_toolkit
from reme_agent.toolkit.registry import GROUPS, TOOLS, type_list
from tests.jobs.conftest import DAILY_JWT, NOTES, TODAY, build
from tests.wire.conftest import wire_settings
from tests.wire.fake_llm import ScriptedLLMServer, call

NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
FUNCTION_KEYS = {"name", "description", "parameters", "strict"}
TYPES = {"string", "number", "boolean", "integer", "object", "array", "null"}
FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
KEYWORDS = {
    "type", "properties", "required", "items", "anyOf", "enum", "const", "additionalProperties",
    "description", "default",                                  # annotations
    "pattern", "format",                                       # strings
    "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",  # numbers
    "minItems", "maxItems",                                    # arrays
}
UNSUPPORTED = {"allOf", "not", "dependentRequired", "dependentSchemas", "if", "then", "else"}
MAX_PROPERTIES, MAX_DEPTH, MAX_STRING_CHARS, MAX_ENUM_VALUES = 5000, 10, 120_000, 1000
MAX_JOB_FUNCTIONS = 20


# -- the checker ---------------------------------------------------------------------------
def openai_problems(tool: dict[str, Any]) -> list[str]:
    """Every way one `tools[]` entry breaks the documented rules (empty = fine)."""
    fn = tool.get("function") or {}
    name = fn.get("name", "?")
    out: list[str] = []
    if tool.get("type") != "function" or set(tool) != {"type", "function"}:
        out.append(f"{name}: tool entry must be {{type: function, function}}: {sorted(tool)}")
    if not isinstance(name, str) or not NAME.match(name):
        out.append(f"{name!r}: name does not match {NAME.pattern}")
    if set(fn) - FUNCTION_KEYS:
        out.append(f"{name}: unknown function fields {sorted(set(fn) - FUNCTION_KEYS)}")
    if not (isinstance(fn.get("description"), str) and fn["description"].strip()):
        out.append(f"{name}: no description")
    params = fn.get("parameters")
    if not isinstance(params, dict) or params.get("type") != "object" or "anyOf" in params:
        return [*out, f"{name}: parameters must be an object schema (not anyOf)"]
    if not isinstance(params.get("properties"), dict):
        out.append(f"{name}: parameters have no properties")
    missing = set(params.get("required", [])) - set(params.get("properties") or {})
    if missing:
        out.append(f"{name}: required names unknown properties {sorted(missing)}")
    for prop, schema in (params.get("properties") or {}).items():
        if not (isinstance(schema, dict) and schema.get("description")):
            out.append(f"{name}.{prop}: no description")
    stats = {"properties": 0, "chars": 0, "enum": 0}
    out += _walk(params, f"{name}.parameters", 1, stats)
    if stats["properties"] > MAX_PROPERTIES:
        out.append(f"{name}: {stats['properties']} object properties > {MAX_PROPERTIES}")
    if stats["chars"] > MAX_STRING_CHARS:
        out.append(f"{name}: {stats['chars']} characters of names/enums > {MAX_STRING_CHARS}")
    if stats["enum"] > MAX_ENUM_VALUES:
        out.append(f"{name}: {stats['enum']} enum values > {MAX_ENUM_VALUES}")
    return out


def _walk(node: Any, where: str, depth: int, stats: dict[str, int]) -> list[str]:
    if not isinstance(node, dict):
        return [f"{where}: a schema must be an object, got {node!r}"]
    out = []
    bad = set(node) - KEYWORDS
    if bad & UNSUPPORTED:
        out.append(f"{where}: unsupported composition {sorted(bad & UNSUPPORTED)}")
    if bad - UNSUPPORTED:
        out.append(f"{where}: keywords outside the documented subset {sorted(bad - UNSUPPORTED)}")
    types = node.get("type", [])
    for t in [types] if isinstance(types, str) else types:
        if t not in TYPES:
            out.append(f"{where}: unknown type {t!r}")
    if "format" in node and node["format"] not in FORMATS:
        out.append(f"{where}: unsupported format {node['format']!r}")
    if "object" in ([types] if isinstance(types, str) else types) and depth > MAX_DEPTH:
        out.append(f"{where}: objects nested deeper than {MAX_DEPTH} levels")
    enum = node.get("enum", [])
    stats["enum"] += len(enum)
    strings = [v for v in [*enum, node.get("const")] if isinstance(v, str)]
    stats["chars"] += sum(map(len, strings))
    if len(enum) > 250 and sum(map(len, strings)) > 15_000:
        out.append(f"{where}: an enum of {len(enum)} values over 15,000 characters")
    for key, sub in (node.get("properties") or {}).items():
        stats["properties"] += 1
        stats["chars"] += len(key)
        out += _walk(sub, f"{where}.{key}", depth + 1, stats)
    if isinstance(node.get("items"), dict):
        out += _walk(node["items"], f"{where}[]", depth + 1, stats)
    if isinstance(node.get("additionalProperties"), dict):
        out += _walk(node["additionalProperties"], f"{where}{{}}", depth + 1, stats)
    for i, branch in enumerate(node.get("anyOf") or []):
        out += _walk(branch, f"{where}|{i}", depth, stats)
    return out


# -- what AgentScope sends -----------------------------------------------------------------
@pytest.fixture(scope="module")
def sent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, list[dict]]]:
    """The `tools` array of real requests, by source (each captured from the server)."""
    from agentscope.agent import Agent, InjectionConfig, ReActConfig
    from agentscope.message import UserMsg

    root = tmp_path_factory.mktemp("schemas")
    captured: dict[str, list[dict]] = {}

    def reply(toolkit: Any, turns: list) -> ScriptedLLMServer:
        with ScriptedLLMServer(turns) as server:
            agent = Agent(name="probe", system_prompt="Probe.",
                          model=build_chat_model(wire_settings(server).model),
                          toolkit=toolkit, react_config=ReActConfig(max_iters=3),
                          injection_config=InjectionConfig(inject_runtime_state=False))
            asyncio.run(agent.reply(UserMsg("user", "hi")))
        return server

    with ScriptedLLMServer(["ok", "ok"]) as server:
        vault = build(root / "vault", NOTES, wire_settings(server))
        run_synchronizer(vault, [{"role": "user", "content": "hi"}], today=TODAY)
        run_distiller(vault, [DAILY_JWT], today=TODAY, flip_status=False)
    captured["synchronizer"], captured["distiller"] = (b["tools"] for b in server.bodies)
    captured["service"] = reply(build_toolkit(vault, extra=JOB_TOOLS), ["ok"]).bodies[0]["tools"]
    groups = {f"memory_{g}": True for g in GROUPS}
    lazy = reply(build_toolkit(vault, lazy_groups=True), [[call("reset_tools", **groups)], "ok"])
    captured["reset_tools"] = lazy.bodies[0]["tools"]
    captured["lazy"] = lazy.bodies[1]["tools"]
    yield captured
    vault.close()


def test_we_capture_every_tool_each_face_sends(sent) -> None:
    names = [t["function"]["name"] for t in sent["service"]]
    assert names == [s.name for s in (*TOOLS, *JOB_TOOLS)]
    assert [t["function"]["name"] for t in sent["reset_tools"]] == ["reset_tools"]
    assert sorted(t["function"]["name"] for t in sent["lazy"]) == sorted(
        ["reset_tools", *(s.name for s in TOOLS)])
    assert {t["function"]["name"] for t in sent["synchronizer"]} == {"daily_read", "daily_list",
                                                                    "daily_write", "daily_attach"}
    assert "write" in {t["function"]["name"] for t in sent["distiller"]}


def test_every_tool_we_send_keeps_to_the_documented_openai_rules(sent) -> None:
    problems = [f"[{source}] {p}" for source, tools in sent.items()
                for tool in tools for p in openai_problems(tool)]
    assert problems == []


def test_job_toolkits_offer_fewer_than_twenty_functions(sent) -> None:
    assert len(sent["synchronizer"]) < MAX_JOB_FUNCTIONS
    assert len(sent["distiller"]) < MAX_JOB_FUNCTIONS


GOOD = {"type": "function", "function": {
    "name": "read", "description": "Read a note.",
    "parameters": {"type": "object", "required": ["path"], "properties": {
        "path": {"type": "string", "description": "Vault path."},
        "limit": {"type": ["integer", "null"], "default": None, "description": "Max."}}}}}


@pytest.mark.parametrize(("change", "problem"), [
    (lambda t: t["function"].update(name="memory.read"), "does not match"),
    (lambda t: t["function"].update(name="r" * 65), "does not match"),
    (lambda t: t["function"].update(description=" "), "no description"),
    (lambda t: t["function"].update(examples=[]), "unknown function fields"),
    (lambda t: t["function"]["parameters"].update(type="array"), "must be an object schema"),
    (lambda t: t["function"]["parameters"].update(required=["nope"]), "unknown properties"),
    (lambda t: t["function"]["parameters"]["properties"]["path"].pop("description"),
     "path: no description"),
    (lambda t: t["function"]["parameters"]["properties"]["path"].update(title="Path"),
     "outside the documented subset ['title']"),
    (lambda t: t["function"]["parameters"]["properties"]["path"].update(
        allOf=[{"type": "string"}]), "unsupported composition ['allOf']"),
    (lambda t: t["function"]["parameters"]["properties"]["path"].update(
        {"$ref": "#/$defs/P"}), "outside the documented subset ['$ref']"),
    (lambda t: t["function"]["parameters"]["properties"]["path"].update(format="uri"),
     "unsupported format 'uri'"),
    (lambda t: t["function"]["parameters"]["properties"]["path"].update(type="file"),
     "unknown type 'file'"),
    (lambda t: t["function"]["parameters"]["properties"]["path"].update(
        enum=[f"v{i}" for i in range(1001)]), "enum values > 1000"),
    (lambda t: t["function"]["parameters"]["properties"].update(deep=_nested(11)),
     "nested deeper than 10"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_the_checker_finds_each_documented_violation(change, problem: str) -> None:
    tool = copy.deepcopy(GOOD)
    assert openai_problems(tool) == []
    change(tool)
    assert any(problem in p for p in openai_problems(tool)), openai_problems(tool)


def _nested(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "string", "description": "leaf"}
    for _ in range(levels):
        node = {"type": "object", "description": "level", "properties": {"x": node}}
    return node


# -- nullable and union parameters: one type list, on every face ---------------------------
def params_of(tools: list[dict], name: str) -> dict[str, Any]:
    return next(t["function"]["parameters"] for t in tools if t["function"]["name"] == name)


def test_optional_and_union_parameters_are_sent_as_type_lists(sent) -> None:
    service = sent["service"]
    read = params_of(service, "read")["properties"]
    assert read["start_line"]["type"] == ["integer", "null"] and "anyOf" not in read["start_line"]
    seeds = params_of(service, "graph_traverse")["properties"]["seeds"]
    assert seeds["type"] == ["array", "string"] and seeds["items"] == {"type": "string"}
    status = params_of(service, "daily_list")["properties"]["status"]
    assert status["enum"] == ["active", "distilled", "archived", None]
    assert "anyOf" not in json.dumps(sent)  # every union we have is a plain type list


@pytest.mark.parametrize(("tool", "args", "ok"), [
    ("read", {"path": "a.md", "start_line": None}, True),
    ("read", {"path": "a.md", "start_line": 3}, True),
    ("read", {"path": "a.md", "start_line": "3"}, False),
    ("graph_traverse", {"seeds": "a.md"}, True),
    ("graph_traverse", {"seeds": ["a.md", "b.md"]}, True),
    ("graph_traverse", {"seeds": 3}, False),
    ("graph_traverse", {"seeds": ["a.md", 3]}, False),
    ("daily_list", {"status": None}, True),
    ("daily_list", {"status": "distilled"}, True),
    ("daily_list", {"status": "done"}, False),
    ("write", {"path": "a.md", "frontmatter": {"role": "concept"}}, True),
    ("write", {"path": "a.md", "frontmatter": "role: concept"}, False),
])
def test_the_sent_schemas_accept_what_the_functions_accept(sent, tool: str, args: dict,
                                                           ok: bool) -> None:
    """The agent validates a model's arguments with jsonschema against exactly these schemas."""
    schema = params_of(sent["service"], tool)
    if ok:
        jsonschema.validate(args, schema)
    else:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(args, schema)


class _Ref(BaseModel):
    x: int


@pytest.mark.parametrize(("hint", "expected"), [
    (str | None, {"type": ["string", "null"]}),
    (list[str] | None, {"type": ["array", "null"], "items": {"type": "string"}}),
    (Literal["a", "b"] | None, {"type": ["string", "null"], "enum": ["a", "b", None]}),
    (Literal["a"] | int, None),        # the enum would constrain the integer too
    (int | float | None, {"type": ["integer", "number", "null"]}),
    (_Ref | None, None),               # a $ref branch stays an anyOf
    (str, None),
])
def test_type_list_merges_only_unions_whose_branches_cannot_constrain_each_other(
        hint: Any, expected: dict | None) -> None:
    schema = TypeAdapter(hint).json_schema()
    assert type_list(schema) == (expected or schema)


def test_the_registry_schema_is_the_one_agentscope_sends(sent) -> None:
    """`reme-agent tools --json` shows the wire schema (descriptions aside: AgentScope keeps
    the docstring's line breaks, the registry joins them)."""
    def shape(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: shape(v) for k, v in node.items() if k != "description"}
        return [shape(v) for v in node] if isinstance(node, list) else node

    for spec in TOOLS:
        assert shape(params_of(sent["service"], spec.name)) == shape(spec.input_schema()), \
            spec.name

