"""What every tool returns, and the argument check every tool runs first (STYLE §2).

A tool answers twice from one value: `ToolResult` *is* a dict (the data Python callers and
`--json` get) and carries `.text` (what the model reads). `@tool` validates the arguments
against the type hints before the body runs, so a wrong type from any face (model, CLI,
Python) becomes an `InvalidArgument` naming the parameter, and nothing is touched. Text that
cannot be UTF-8 (a lone surrogate, which JSON allows as "\\ud800") is refused the same way,
before it can reach a file name or a file.
"""

from __future__ import annotations

import functools
import inspect
import json
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from reme_agent.errors import InvalidArgument

F = TypeVar("F", bound=Callable[..., Any])


class ToolResult(dict[str, Any]):
    """A tool's answer: the dict is for Python callers, `text` is what the model reads."""

    def __init__(self, data: Mapping[str, Any], text: str | None = None) -> None:
        super().__init__(data)
        self.text = text if text is not None else to_json(data)

    @property
    def data(self) -> dict[str, Any]:
        return dict(self)

    def __str__(self) -> str:
        return self.text


def to_json(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, indent=1, default=str)


def tool(fn: F) -> F:
    """Validate (and lightly coerce, e.g. "7" -> 7) every argument after `vault`."""
    sig = inspect.signature(fn)
    names = list(sig.parameters)[1:]
    adapters: dict[str, TypeAdapter[Any]] = {}

    @functools.wraps(fn)
    def checked(vault: Any, *args: Any, **kwargs: Any) -> Any:
        if not adapters:
            hints = hints_of(fn)
            adapters.update({n: TypeAdapter(hints[n]) for n in names})
        try:
            bound = sig.bind(vault, *args, **kwargs)
        except TypeError as exc:
            raise InvalidArgument(f"Bad call: {exc}.",
                                  f"Parameters are: {', '.join(names)}.") from None
        for name in names:
            if name in bound.arguments:
                bound.arguments[name] = _check(name, adapters[name], bound.arguments[name])
                _check_unicode(name, bound.arguments[name])
        return fn(*bound.args, **bound.kwargs)

    return checked  # type: ignore[return-value]


def hints_of(fn: Callable[..., Any]) -> dict[str, Any]:
    """Resolved type hints; `Vault` (imported only for type checking) stands for Any."""
    return typing.get_type_hints(fn, localns={"Vault": Any})


def _check(name: str, adapter: TypeAdapter[Any], value: Any) -> Any:
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        raise InvalidArgument(wrong_value(name, value, exc.errors()[0]["msg"]),
                              f"Expected {describe(adapter.json_schema())}.") from None


def wrong_value(name: str, value: Any, why: str) -> str:
    """One line naming the argument, its value (cut at 80 characters) and what is wrong."""
    shown = repr(value)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return f"Argument {name!r} has a wrong value {shown}: {why}."


def arguments_error(errors: Sequence[Mapping[str, Any]],
                    schemas: Mapping[str, Mapping[str, Any]]) -> str:
    """pydantic's errors for a call's arguments as one line: each argument named once, with
    its value and what it should be (`schemas`: each parameter's JSON schema)."""
    parts: dict[str, str] = {}
    for err in errors:
        loc = [str(p) for p in err.get("loc", ())]
        name = loc[0] if loc else "arguments"
        if name in parts:
            continue
        expected = f" Expected {describe(schemas[name])}." if name in schemas else ""
        if err.get("type") == "missing" and len(loc) == 1:
            parts[name] = f"Argument {name!r} is missing.{expected}"
        else:
            parts[name] = wrong_value(name, err.get("input"), str(err.get("msg"))) + expected
    return " ".join(parts.values()) or "Bad arguments."


def _check_unicode(name: str, value: Any) -> None:
    """InvalidArgument if any text in `value` (keys included) does not encode to UTF-8."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise InvalidArgument(
                    f"Argument {name!r} has text that is not valid Unicode: a lone surrogate "
                    f"({item[exc.start]!r}) at character {exc.start}.",
                    "Send the text as valid UTF-8 (no unpaired \\ud800-\\udfff escapes).") from None
        elif isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(item)


def describe(schema: Mapping[str, Any]) -> str:
    """A short human name for a JSON schema, e.g. "one of 'in', 'out'"."""
    if "enum" in schema:
        return "one of " + ", ".join(repr(v) for v in schema["enum"])
    if "anyOf" in schema:
        return " or ".join(describe(s) for s in schema["anyOf"])
    kind = schema.get("type", "any value")
    if isinstance(kind, list):  # {"type": ["array", "null"]}
        return " or ".join(describe({**schema, "type": k}) for k in kind)
    if kind == "array":
        return f"a list of {describe(schema.get('items', {}))}"
    if kind == "object":
        return "an object (JSON mapping)"
    return {"string": "a string", "integer": "an integer", "number": "a number",
            "boolean": "true or false", "null": "null"}.get(kind, str(kind))

