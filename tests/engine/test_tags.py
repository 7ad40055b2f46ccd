"""Inline #tags and the tags property, as Obsidian reads them (`engine/tags.py`)."""

from __future__ import annotations

import pytest

from reme_agent.engine.tags import body_tags, property_tags

BODY = """# Heading #inheading
Text #alpha and #beta/gamma, then #tag. and (#paren)
a#glued and #1984 and #y1984 and #2024/05 and #项目 and #🎉party #ALPHA
`#code span` <!-- #html --> %% #obsidian-comment %% [[note#heading]] https://x.org/#frag
```
#fenced
```

    #indented

<!--
#htmlblock
-->
#start-of-line
"""


def test_body_tags_follow_obsidian_rules() -> None:
    assert body_tags(BODY) == ["inheading", "alpha", "beta/gamma", "tag", "y1984", "项目",
                               "🎉party", "obsidian-comment", "start-of-line"]


@pytest.mark.parametrize("text", ["# Heading only", "C# and F#", "issue #42, #7.", "x\n```\n#a\n```"])
def test_text_without_tags(text: str) -> None:
    assert body_tags(text) == []


def test_property_tags_accept_lists_strings_and_the_legacy_key() -> None:
    assert property_tags({"tags": "a, b  c"}) == ["a", "b", "c"]
    assert property_tags({"tags": ["#x", "X", None, True, 7], "tag": "y"}) == ["x", "7", "y"]
    assert property_tags({"tags": {"not": "a list"}}) == []
