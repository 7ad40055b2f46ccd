"""The one table of tools (STYLE §2): names, groups, permissions; every face loops over it.

A tool is a plain function taking `vault` first. Its Google docstring is the spec the model
reads; `ToolSpec.params()` turns the signature + `Args:` into annotated parameters and fails
on an undocumented one, so a docstring cannot drift from its function.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

import docstring_parser
from pydantic import Field, TypeAdapter, WithJsonSchema, create_model

from reme_agent.errors import InvalidArgument
from reme_agent.toolkit import (
    activity,
    daily,
    files,
    lint,
    materials,
    notes,
    retrieve,
    tags,
    unlink,
)
from reme_agent.toolkit.actor import acting_as, current_actor
from reme_agent.toolkit.results import ToolResult, hints_of

if TYPE_CHECKING:
    from reme_agent.vault import Vault

Group = Literal["retrieve", "read", "write", "tags", "fileops", "daily", "lint"]
GROUPS: dict[str, str] = {
    "retrieve": "Find notes: hybrid search and link-graph traversal.",
    "read": "List, read and inspect notes and their properties; what changed lately.",
    "write": "Create and edit notes and their frontmatter properties.",
    "tags": "Tags used in frontmatter and the notes carrying them.",
    "fileops": "Move, copy and delete files; upload and download materials.",
    "daily": "Daily workspaces: read, list, write and move their status.",
    "lint": "Find dangling links, orphans, name collisions, links Obsidian cannot resolve, "
            "links to merged notes and schema problems.",
}


@dataclass(frozen=True)
class ToolSpec:
    name: str
    fn: Callable[..., Any]
    group: str
    read_only: bool
    destructive: bool = False
    """May remove or replace what a person wrote (MCP `destructiveHint`)."""
    asks_when: Callable[[Mapping[str, Any]], bool] | None = None
    """For a destructive tool: which calls need a person's confirmation (None = every call).
    Faces that can ask (AgentScope's permission flow) ask for these unless told otherwise."""

    def needs_confirmation(self, args: Mapping[str, Any]) -> bool:
        """True if this call can destroy something (a delete, a move, a copy over a file)."""
        if not self.destructive:
            return False
        return self.asks_when is None or bool(self.asks_when(args))
    kind: Literal["atomic", "job"] = "atomic"  # jobs appear only in the service tier

    @functools.cached_property
    def doc(self) -> docstring_parser.Docstring:
        return docstring_parser.parse(self.fn.__doc__ or "")

    @property
    def description(self) -> str:
        """What the model reads about the tool (the docstring without its Args section)."""
        parts = [self.doc.short_description or "", self.doc.long_description or ""]
        return "\n\n".join(p.strip() for p in parts if p and p.strip())

    def params(self) -> list[inspect.Parameter]:
        """Parameters after `vault`: real types + docstring text (KeyError if undocumented)."""
        hints = hints_of(self.fn)
        docs = {p.arg_name: " ".join((p.description or "").split()) for p in self.doc.params}
        out = []
        for p in list(inspect.signature(self.fn).parameters.values())[1:]:
            if not docs.get(p.name):
                raise KeyError(f"tool {self.name!r}: parameter {p.name!r} is not documented "
                               "in the docstring's Args section")
            hint = hints[p.name]
            meta: tuple[Any, ...] = (Field(description=docs[p.name]),)
            union = TypeAdapter(hint).json_schema()
            if (typed := type_list(union)) is not union:
                meta += (WithJsonSchema(typed),)
            out.append(p.replace(annotation=Annotated[(hint, *meta)]))
        return out

    def input_schema(self) -> dict[str, Any]:
        """JSON schema of the arguments (what `reme-agent tools --json` prints)."""
        fields = {p.name: (p.annotation, ... if p.default is inspect.Parameter.empty else p.default)
                  for p in self.params()}
        schema = create_model(f"{self.name}_args", **fields).model_json_schema()  # type: ignore[call-overload]
        return _strip_titles(schema)

    def bind(self, vault: Vault, as_text: bool = False,
             actor: str | None = None) -> Callable[..., Any]:
        """Same name, doc and schema, with `vault` filled in and hidden from the model.

        `as_text=True` returns the readable text (for the model); else the ToolResult dict.
        `actor` names the caller in audit entries ("mcp", a job name; default "agent").
        """
        fn = self.fn

        @functools.wraps(fn)
        def bound(**kwargs: Any) -> Any:
            with acting_as(actor or current_actor.get()):
                result = fn(vault, **kwargs)
            return result.text if as_text and isinstance(result, ToolResult) else result

        params = self.params()
        ret = str if as_text else dict[str, Any]
        del bound.__wrapped__  # the schema comes from __signature__, not from the raw function
        bound.__name__ = bound.__qualname__ = self.name
        bound.__signature__ = inspect.Signature(params, return_annotation=ret)  # type: ignore[attr-defined]
        bound.__annotations__ = {p.name: p.annotation for p in params} | {"return": ret}
        return bound


_BRANCH_KEYS = {"type", "items", "additionalProperties", "enum"}


def type_list(schema: dict[str, Any]) -> dict[str, Any]:
    """`anyOf` of single-type branches as one `type` list, e.g. `["string", "null"]`.

    Why: the Ollama client (used by AgentScope's OllamaChatModel) rebuilds each property from
    `type`/`items`/`description`/`enum` only, so an `anyOf` (every `X | None` parameter)
    reached the model with no type at all. A type list is plain JSON Schema, the form
    OpenAI's structured-outputs guide gives for nullable fields, and survives that client.
    Only unions whose branches cannot constrain each other are merged (one branch per type;
    `enum` only beside `null`, which joins the enum); anything else is returned unchanged.
    """
    branches = schema.get("anyOf")
    if set(schema) != {"anyOf"} or not isinstance(branches, list) or len(branches) < 2:
        return schema
    types = [b.get("type") for b in branches]
    if (not all(isinstance(t, str) for t in types) or len(set(types)) < len(types)
            or any(set(b) - _BRANCH_KEYS for b in branches)):
        return schema
    merged: dict[str, Any] = {"type": types}
    for b in branches:
        merged.update({k: v for k, v in b.items() if k != "type"})
    if "enum" in merged:
        if len(branches) != 2 or "null" not in types:
            return schema
        merged["enum"] = [*merged["enum"], None]
    return merged


def _strip_titles(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip_titles(v) for k, v in node.items()
                if not (k == "title" and isinstance(v, str))}
    if isinstance(node, list):
        return [_strip_titles(v) for v in node]
    return node


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("search", retrieve.search, "retrieve", read_only=True),
    ToolSpec("graph_traverse", retrieve.graph_traverse, "retrieve", read_only=True),
    ToolSpec("list", notes.list_notes, "read", read_only=True),
    ToolSpec("read", notes.read_note, "read", read_only=True),
    ToolSpec("stat", notes.stat_note, "read", read_only=True),
    ToolSpec("property_read", notes.property_read, "read", read_only=True),
    ToolSpec("recent", activity.recent, "read", read_only=True),
    ToolSpec("write", notes.write_note, "write", read_only=False),
    ToolSpec("property_update", notes.property_update, "write", read_only=False),
    ToolSpec("property_delete", notes.property_delete, "write", read_only=False),
    ToolSpec("link_remove", unlink.link_remove, "write", read_only=False, destructive=True),
    ToolSpec("tags_list", tags.tags_list, "tags", read_only=True),
    ToolSpec("tags_stat", tags.tags_stat, "tags", read_only=True),
    ToolSpec("move", files.move, "fileops", read_only=False, destructive=True),
    ToolSpec("copy", files.copy, "fileops", read_only=False, destructive=True,
             asks_when=lambda args: bool(args.get("overwrite"))),
    ToolSpec("delete", files.delete, "fileops", read_only=False, destructive=True),
    ToolSpec("upload", files.upload, "fileops", read_only=False),
    ToolSpec("download", files.download, "fileops", read_only=False),
    ToolSpec("daily_read", daily.daily_read, "daily", read_only=True),
    ToolSpec("daily_list", daily.daily_list, "daily", read_only=True),
    ToolSpec("daily_write", daily.daily_write, "daily", read_only=False),
    ToolSpec("daily_attach", materials.daily_attach, "daily", read_only=False),
    ToolSpec("daily_status", daily.daily_status, "daily", read_only=False),
    ToolSpec("lint_dangling", lint.lint_dangling, "lint", read_only=True),
    ToolSpec("lint_orphans", lint.lint_orphans, "lint", read_only=True),
    ToolSpec("lint_collisions", lint.lint_collisions, "lint", read_only=True),
    ToolSpec("lint_schema", lint.lint_schema, "lint", read_only=True),
    ToolSpec("lint_alias_links", lint.lint_alias_links, "lint", read_only=True),
    ToolSpec("lint_redirect_links", lint.lint_redirect_links, "lint", read_only=True),
)
BY_NAME: dict[str, ToolSpec] = {s.name: s for s in TOOLS}


def get_tool(name: str) -> ToolSpec:
    try:
        return BY_NAME[name]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(name, list(BY_NAME), n=3)
        raise InvalidArgument(f"No tool named {name!r}.",
                              f"Did you mean {', '.join(close)}?" if close
                              else f"Tools: {', '.join(BY_NAME)}.") from None


def select(groups: Collection[str] | None = None, only: Collection[str] | None = None,
           tier: str = "service", extra: Sequence[ToolSpec] = ()) -> list[ToolSpec]:
    """The specs a face exposes: atomic tools (filtered), plus job specs in the service tier."""
    if tier not in ("service", "expert"):
        raise InvalidArgument(f"tier must be 'service' or 'expert', got {tier!r}.")
    # groups="read" is one group (iterated, a str was its letters: "Unknown group(s) ['r', ...]")
    groups = [groups] if isinstance(groups, str) else groups
    only = [only] if isinstance(only, str) else only
    unknown = [g for g in groups or () if g not in GROUPS]
    if unknown:
        raise InvalidArgument(f"Unknown tool group(s) {unknown}.", f"Groups: {', '.join(GROUPS)}.")
    specs = [*TOOLS, *(s for s in extra if tier == "service" or s.kind == "atomic")]
    names = {s.name for s in specs}
    missing = [n for n in only or () if n not in names]
    if missing:
        raise InvalidArgument(f"Unknown tool name(s) {missing}.", f"Tools: {', '.join(sorted(names))}.")
    return [s for s in specs
            if (groups is None or s.group in groups or s.kind == "job")
            and (only is None or s.name in only)]
