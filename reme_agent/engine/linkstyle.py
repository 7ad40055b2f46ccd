"""How a link is written, as Obsidian writes it (DESIGN §4; Obsidian "New link format").

Every place a tool or a job *writes* link text (a `move`'s retargets, merge, split,
auto-link, the synchronizer, jobs naming targets by full path) goes through this module, so
what lands in a file follows one rule:

- ``shortest`` (default; Obsidian's "Shortest path when possible"): the file name, ``[[BM25]]``,
  or the full vault path ``[[knowledge/BM25]]`` only when the name alone would not name
  exactly that file;
- ``path`` (Obsidian's "Absolute path in vault"): always the full vault path, ``[[knowledge/BM25]]``.

Markdown notes are written without ``.md`` (as Obsidian does); other files keep their
extension (``[[paper.pdf]]``). ``[[target|shown]]`` only when the shown text differs from the
target. Every target is checked to resolve back to its file; if it would not (an odd name),
the full path with its extension is written, which always does.
"""

from __future__ import annotations

import posixpath
from typing import Literal

from reme_agent.engine.links import LinkResolver

__all__ = ["LINK_STYLES", "LinkStyle", "format_link", "keep_style", "link_target"]

LinkStyle = Literal["shortest", "path"]
LINK_STYLES: tuple[str, ...] = ("shortest", "path")


def _is_md(path: str) -> bool:
    return path.lower().endswith(".md")


def _no_md(path: str) -> str:
    return path[:-3] if _is_md(path) else path


def link_target(path: str, resolver: LinkResolver, style: str = "shortest",
                source: str | None = None) -> str:
    """The target text for a link to `path` in the given style (see the module docstring)."""
    if style == "shortest":
        name = _no_md(posixpath.basename(path))
        if resolver.resolve(name, source) == path:
            return name
    full = _no_md(path)
    return full if resolver.resolve(full, source) == path else path


def format_link(path: str, resolver: LinkResolver, style: str = "shortest",
                shown: str | None = None, source: str | None = None) -> str:
    """``[[target]]`` or ``[[target|shown]]`` for a new link to `path`."""
    target = link_target(path, resolver, style, source)
    shown = shown.strip() if shown else None
    return f"[[{target}|{shown}]]" if shown and shown != target else f"[[{target}]]"


def keep_style(old_target: str, new_path: str, resolver: LinkResolver,
               source: str | None = None, *, markdown: bool = False,
               how: str | None = None) -> str:
    """The target text for a link written as `old_target` that must now name `new_path`,
    in the style it was written (a `move` keeps each link's style):

    - a name (``[[BM25]]``) stays a name: the new file name, or the full path if that
      name is ambiguous now;
    - a path (``[[knowledge/bm25/bm25.md]]``) stays a full path, with ``.md`` if it had it,
      with a leading ``/`` if it had one;
    - a relative path (``[[../x]]``) stays relative to `source`; so does a Markdown link's
      path that resolved under its note's folder (`how` "relative": ``[x](sub/x.md)``,
      Obsidian's "relative path" format, which writes no ``./``).

    `markdown`: the target of a Markdown link (decoded; `links.markdown_destination`
    encodes it), resolved as such (`LinkResolver.resolve`).
    """
    raw = old_target.strip().replace("\\", "/")
    ext = _is_md(raw) and _is_md(new_path)
    if raw.startswith(("./", "../")) or (markdown and how == "relative"):
        rel = posixpath.relpath(new_path, posixpath.dirname(source or ""))
        bare = rel.startswith("../") or (markdown and not raw.startswith("./"))
        text = rel if bare else "./" + rel
        text = text if ext else _no_md(text)
    elif "/" in raw.strip("/"):
        text = ("/" if raw.startswith("/") else "") + (new_path if ext else _no_md(new_path))
    else:
        text = link_target(new_path, resolver, "shortest", source)
        if ext and resolver.resolve(text + ".md", source) == new_path:
            text += ".md"
    return (text if resolver.resolve(text, source, markdown=markdown) == new_path
            else new_path)
