"""`reme-agent search` declares the search tool's options itself (so parsing imports no
toolkit, G6); they must be exactly the options the tool's signature makes."""

from __future__ import annotations

from reme_agent.cli.search import TOOL_OPTIONS, _search_params
from reme_agent.cli.tools import _option


def _shape(o: object) -> tuple[object, ...]:
    return (o.name, o.opts, o.secondary_opts, type(o.type).__name__, o.multiple,  # type: ignore[attr-defined]
            o.is_flag, o.required, o.default)  # type: ignore[attr-defined]


def test_declared_options_are_the_ones_the_tool_signature_makes() -> None:
    generated = [_option(p) for p in _search_params()]
    assert [_shape(o) for o in TOOL_OPTIONS] == [_shape(o) for o in generated]
