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
    assert body_tags(BODY) == ["inheading", "alpha", "beta/gamma", "tag", "y1984", "2024/05",
                               "项目", "🎉party", "obsidian-comment", "start-of-line"]


@pytest.mark.parametrize("text", ["# Heading only", "C# and F#", "issue #42, #7.", "x\n```\n#a\n```"])
def test_text_without_tags(text: str) -> None:
    assert body_tags(text) == []


@pytest.mark.parametrize(("text", "tags"), [
    # where a tag may start: tables, blockquotes and callouts, footnotes, a chain
    ("| a | #cell |\n|---|---|\n|#row| x |", ["cell", "row"]),
    ("> [!note] #callout\n>#quoted\n> > #nested", ["callout", "quoted", "nested"]),
    ("[^1]: see #foot", ["foot"]),
    ("#Bob#Alice and #c.#d", ["Bob", "Alice", "c"]),
    # where it stops: Obsidian's set (ASCII punctuation but _-/, General Punctuation)
    ("#tag’s #ell… #dash—x #a+b #a=b #a~b #a;b #a'b", ["tag", "ell", "dash", "a"]),
    ("#👨\u200d👩\u200d👧 family", ["👨"]),            # the ZWJ is General Punctuation
    ("#项目，下一步 and #完成。", ["项目，下一步", "完成。"]),   # CJK punctuation is not
    ("#❤️ #café #١٢٣ #a//b #end/", ["❤️", "café", "١٢٣", "a//b", "end"]),
    # no tags: math, entities, escapes, full-width sign, URLs, HTML attributes
    ("$#x$ and $a #m$ and $$\n#block\n$$ costs $5 #real and $6", ["real"]),
    ("&#123; \\#esc ＃全角 https://x.com/#frag <a href='#x'>", []),
    ("[[note|#alias]] [[a note #x]] ![[pic|#y]] #real", ["real"]),
])
def test_odd_inputs_follow_obsidian(text: str, tags: list[str]) -> None:
    assert body_tags(text) == tags


def test_property_tags_accept_lists_strings_and_the_legacy_key() -> None:
    assert property_tags({"tags": "a, b  c"}) == ["a", "b", "c"]
    assert property_tags({"tags": ["#x", "X", None, True, 7], "tag": "y"}) == ["x", "7", "y"]
    assert property_tags({"tags": {"not": "a list"}}) == []
    assert property_tags({"tags": ["project/", "#Project"]}) == ["project"]   # as `#project/`
