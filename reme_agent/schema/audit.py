"""Human-facing audit notes: `audit/<YYYY-MM-DD>/<name>.md` (DESIGN §2, §5).

Jobs and tools append one Markdown entry per event (a refused write, a duplicate report, a
health check). Appends go through the store's CAS (`FileStore.cas_edit`), so two writers
appending to the same note at once both land; a lost race is redone (at most 3 times).

An entry holds no link: a `[[...]]` its text names (an error naming dropped links, a model's
reasons, a listed value) is written inside a code span. An audit note is a record, and a
link in it would be a graph edge: it would raise the in-degree of the notes it names, and
show up as a dangling link once they are gone.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import TYPE_CHECKING, Any

from reme_agent.engine.links import EMBED, LINK, extract_links
from reme_agent.errors import InvalidArgument
from reme_agent.schema.layout import AUDIT, is_slug, slugify

if TYPE_CHECKING:
    from reme_agent.engine.store import FileStore



def audit_path(name: str, day: _dt.date | None = None) -> str:
    """`audit/<day>/<name>.md`; `name` is a slug ('refused', 'health') or snake_case
    ('auto_link', the report names of the auto-link design)."""
    if not (is_slug(name) or is_slug(name.replace("_", "-"))):
        raise InvalidArgument(f"Audit note name {name!r} is not a slug.",
                              f"Use a kebab-case name such as {slugify(name)!r}.")
    return f"{AUDIT}/{(day or _dt.date.today()).isoformat()}/{name}.md"


def append_audit(target: Any, name: str, title: str, body: str, *,
                 now: _dt.datetime | None = None) -> str:
    """Append `## <time> — <title>` + `body` to today's audit note; returns its path.

    `target` is a Vault or a FileStore (jobs hold a Vault and never import the store).
    """
    store: FileStore = getattr(target, "store", target)
    when = (now or _dt.datetime.now().astimezone()).replace(microsecond=0)
    path = audit_path(name, when.date())
    entry = f"## {inert_links(when.isoformat() + ' — ' + title.strip())}\n\n" \
            f"{inert_links(body.strip())}\n"

    def append(text: str | None) -> str:
        if text is None:  # the day's first entry: O_EXCL create (a lost race appends)
            return f"# Audit: {name} ({when.date().isoformat()})\n\n{entry}"
        sep = "" if text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
        return f"{text}{sep}{entry}"

    store.cas_edit(path, append, create=True)
    return path


def inert_links(text: str) -> str:
    """`text` with every wikilink and embed put in a code span (links already in code stay)."""
    found = [x for x in extract_links(text, refs=True) if x.kind in (LINK, EMBED)]
    for link in sorted(found, key=lambda x: x.start, reverse=True):
        raw = text[link.start:link.end]
        ticks = "`" * (max((len(r) for r in re.findall(r"`+", raw)), default=0) + 1)
        pad = " " if len(ticks) > 1 else ""
        text = f"{text[:link.start]}{ticks}{pad}{raw}{pad}{ticks}{text[link.end:]}"
    return text
