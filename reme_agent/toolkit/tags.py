"""Tag tools: tags_list and tags_stat over a note's tags, as Obsidian's tag pane counts them (L4).

A note's tags are its `tags` (or legacy `tag`) property and the inline `#tags` of its body
(`engine/tags.py` has the rules: code and HTML comments hold none, `#1984` is none). Matching
is case-insensitive, as in Obsidian; `tags_stat("project")` also returns notes tagged with
nested tags such as `project/x`.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from reme_agent.engine.tags import merge_tags, property_tags
from reme_agent.errors import InvalidArgument
from reme_agent.toolkit.common import in_folder, norm_folder
from reme_agent.toolkit.results import ToolResult, tool

if TYPE_CHECKING:
    from reme_agent.engine.view import NoteMeta
    from reme_agent.vault import Vault


def tags_of(meta: NoteMeta) -> list[str]:
    """Every tag of one note: the property's first, then the body's new ones."""
    return merge_tags(property_tags(meta.frontmatter), meta.body_tags)


@tool
def tags_list(vault: Vault, folder: str = "", limit: int = 200) -> ToolResult:
    """All tags (the tags property and inline #tags), with how many notes carry each, most used first.

    Args:
        folder: Only count notes under this folder, e.g. "knowledge"; "" for the whole vault.
        limit: Maximum number of tags returned (1-5000).
    """
    if not 1 <= limit <= 5000:
        raise InvalidArgument(f"limit must be between 1 and 5000, got {limit}.")
    base = norm_folder(vault, folder)
    counts: Counter[str] = Counter()
    shown: dict[str, str] = {}
    for path, meta in vault.view().notes.items():
        if in_folder(path, base):
            for tag in tags_of(meta):
                counts[tag.casefold()] += 1
                shown.setdefault(tag.casefold(), tag)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    items = [{"tag": shown[k], "count": n} for k, n in ranked[:limit]]
    text = "\n".join(f"#{it['tag']} ({it['count']})" for it in items) or "No tags."
    return ToolResult({"folder": base, "count": len(ranked), "tags": items}, text)


@tool
def tags_stat(vault: Vault, tag: str, folder: str = "") -> ToolResult:
    """The notes carrying one tag (nested tags like "project/x" count for "project").

    Args:
        tag: The tag, with or without "#", e.g. "search".
        folder: Only look under this folder; "" for the whole vault.
    """
    want = tag.strip().lstrip("#").rstrip("/").casefold()   # "project/" asks for "project"
    if not want:
        raise InvalidArgument("`tag` is empty.", 'Pass a tag such as "search"; see tags_list.')
    base = norm_folder(vault, folder)
    hits = []
    for path, meta in sorted(vault.view().notes.items()):
        tags = [t for t in tags_of(meta)
                if t.casefold() == want or t.casefold().startswith(want + "/")]
        if tags and in_folder(path, base):
            hits.append({"path": path, "title": meta.title, "tags": tags})
    lines = [f"{h['path']} — {h['title']}" for h in hits]
    text = f"#{want}: {len(hits)} note(s)\n" + "\n".join(lines) if hits else f"No notes tagged #{want}."
    return ToolResult({"tag": want, "count": len(hits), "notes": hits}, text)
