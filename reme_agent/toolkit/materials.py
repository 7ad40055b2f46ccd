"""`daily_attach`: a session's long output, code or file stored beside its daily note (L4).

DESIGN §2: a daily workspace is `daily/<date>/<slug>/`, the summary note `<slug>.md` plus
sibling materials. The summary keeps what happened; a 300-line script, a build log or a
result table goes into a material, linked from the summary's Materials section, so the note
stays readable and the distiller reads the material only when it needs it (seed
architecture, Distiller "read": material files are read on demand).

- Where: `daily/<date>/<slug>/<filename>`. In a vault with Obsidian day notes the materials of
  a task go into a folder named like the day note, beside it: `<day note without .md>/
  <slug>/<filename>` (`daily/2026-11-30/<slug>/` for `daily/2026-11-30.md`, the same folder a
  workspace has), and the link into the task's ``# <slug>`` section.
- What: a note (`<filename>.md`, frozen frontmatter, the content as its body, fenced when a
  `language` is given) or a plain-text attachment (`.txt`, `.log`, `.csv`, `.tsv`, if
  `toolkit.attachment_extensions` allows it), written as given. Any other name becomes a
  note (`query.sql` -> `query.sql.md`), so nothing a program would run lands in the vault.
  Binary types (images, PDF) cannot come as text: `upload` brings those.
- Limits: the file must fit `index.max_file_bytes` (a bigger one would never be searchable);
  the name is one file name (no folder, no `..`, no hidden or control characters, nothing a
  [[link]] cannot name) and not the summary's own name.
- Once: a material is frozen. The same content again changes nothing and the summary gets
  its link once, so a re-run is harmless; other content under an existing name is refused.
- All or nothing (DESIGN §5): the material, the summary's new line and any link a new name
  makes ambiguous elsewhere (rewritten as `create_note` does) are one journalled
  `Transaction`, planned on stamped reads and redone from fresh reads when a file changed
  meanwhile (the same redo policy as `FileStore.cas_edit`).
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from reme_agent.engine.fmedit import edit_frontmatter
from reme_agent.engine.links import LinkResolver, extract_links
from reme_agent.engine.parser import dump_note, normalize_eol, restore_eol, split_note
from reme_agent.engine.retarget import retarget
from reme_agent.engine.transaction import Transaction
from reme_agent.errors import InvalidArgument, NoteNotFound, PathEscape
from reme_agent.schema.daynotes import section_body, with_section
from reme_agent.schema.layout import RESOURCE, is_record, is_slug, layer_of, slugify
from reme_agent.schema.sections import add_line
from reme_agent.toolkit.common import now_iso, parse_day
from reme_agent.toolkit.daily import daily_layout, daily_write_path
from reme_agent.toolkit.naming import link_to
from reme_agent.toolkit.notes import check_write, ends_nl
from reme_agent.toolkit.policy import (
    check_change,
    check_link_safe_name,
    check_new_name,
    file_kind,
)
from reme_agent.toolkit.results import ToolResult, tool

if TYPE_CHECKING:
    from reme_agent.vault import Vault

TEXT_ATTACHMENTS = frozenset({".txt", ".log", ".csv", ".tsv"})
"""Attachment types whose content is plain text (the others in the default
`toolkit.attachment_extensions` are images, PDF, audio and video)."""
_LANGUAGE = re.compile(r"^[A-Za-z0-9_+#.-]{1,30}$")


@tool
def daily_attach(vault: Vault, slug: str, filename: str, content: str,
                 description: str | None = None, language: str | None = None,
                 date: str | None = None, origin_session_id: str | None = None) -> ToolResult:
    """Store a long output, code or file of a session beside its daily note, linked from it.

    For what is too long for the note itself (a tool's output, a script, a log, a table):
    the file goes to daily/<date>/<slug>/<filename> and a link to it is added to the note's
    Materials section. Write the day's note with daily_write first. A material is written
    once: the same content again changes nothing; new content needs a new name.

    Args:
        slug: Slug of the day's note the material belongs to, e.g. "search-tuning".
        filename: File name, e.g. "query-plan" (stored as query-plan.md), "build.log" or
            "results.csv". A name not ending in .md, .txt, .log, .csv or .tsv becomes a note
            (filename + ".md").
        content: The text to store, as it is.
        description: One line shown next to the link, e.g. "EXPLAIN of the slow query".
        language: Store a note's content as a fenced code block in this language, e.g.
            "python", "sql", "text" (notes only).
        date: Day as YYYY-MM-DD; default today.
        origin_session_id: Id of the conversation it comes from (originSessionId).
    """
    plan = plan_material(vault, slug, filename, content, description, language, date,
                         origin_session_id)
    (created, linked), changed = Transaction.run(vault.store, plan.apply)
    warning = vault.try_refresh([plan.path, *changed]) if changed else None
    data = {"path": plan.path, "note": plan.note, "kind": plan.kind, "created": created,
            "linked": linked, "bytes": len(plan.data), "stamp": vault.store.stamp(plan.path),
            "warning": warning}
    if created:
        text = f"Stored {plan.path} ({len(plan.data)} bytes)"
    else:
        text = f"{plan.path} already holds this content; nothing stored"
    text += f"; linked from {plan.note}" if linked else f"; {plan.note} already links it"
    return ToolResult(data, text + (f"; {warning}" if warning else ""))


@dataclass(frozen=True)
class MaterialPlan:
    """What `daily_attach` writes: the material's path and bytes, and the note linking it."""

    vault: Vault
    path: str
    kind: str
    data: bytes
    note: str
    slug: str
    day_note: bool
    line_text: str | None

    def apply(self, tx: Transaction) -> tuple[bool, bool]:
        """Plan the material and the summary's link inside `tx`: (created, linked)."""
        view = self.vault.view()
        old = _existing(tx, self.path)
        if old is not None and not self._same(old):
            raise InvalidArgument(f"{self.path!r} already exists with other content; a "
                                  "material is written once.",
                                  "Store the new content under another name, e.g. "
                                  f"{_next_name(self.path)!r}.")
        after = view.resolver
        if old is None:
            aliases = [PurePosixPath(self.path).stem] if self.kind == "note" else []
            after = view.after({}, added={self.path: aliases})
            # a new name may make other links ambiguous: rewritten with the create (as
            # `create_note` does); the summary is rewritten here too if it has such a link
            retarget(tx, view, {}, after, skip=is_record,
                     immutable=lambda p: layer_of(p) == RESOURCE)
            tx.create(self.path, self.data)
        linked = self._link(tx, after)
        return old is None, linked

    def _same(self, old: bytes) -> bool:
        if self.kind != "note":
            return old == self.data
        new_body = split_note(self.data.decode("utf-8"), self.path).body
        return split_note(old.decode("utf-8", "replace"), self.path).body == new_body

    def _link(self, tx: Transaction, resolver: LinkResolver) -> bool:
        """Add the material's line to the entry's Materials section (once)."""
        text = tx.read(self.note)
        parts = split_note(text, self.note)
        if parts.error:
            raise InvalidArgument(f"{self.note!r} has malformed frontmatter: {parts.error}",
                                  "Fix it in an editor first.")
        status = parts.frontmatter.get("status") or "active"
        if status != "active":
            raise InvalidArgument(f"{self.note!r} is {status}; only an active daily note "
                                  "takes new materials.", "Attach to today's note of the task.")
        body = normalize_eol(parts.body)
        entry = section_body(body, self.slug) if self.day_note else body
        if entry is None:
            raise InvalidArgument(f"The day note {self.note!r} has no '# {self.slug}' "
                                  "section yet.", f"Write it with daily_write(slug="
                                  f"{self.slug!r}) first, then attach.")
        if any(resolver.resolve(x.target, self.note) == self.path
               for x in extract_links(entry)):
            return False
        link = link_to(self.vault, self.path, source=self.note, resolver=resolver)
        line = f"- {link}" + (f" — {self.line_text}" if self.line_text else "")
        new_entry = add_line(entry, "materials", line)
        new_body = with_section(body, self.slug, new_entry, "replace") if self.day_note \
            else new_entry
        new_text = edit_frontmatter(parts.with_body(restore_eol(new_body, parts.eol)),
                                    {"updated": now_iso()}, path=self.note)
        check_write(self.vault, self.note, text, new_text)
        tx.write(self.note, new_text)
        return True


def plan_material(vault: Vault, slug: str, name: str, content: str, description: str | None,
                  language: str | None, date: str | None,
                  origin_session_id: str | None) -> MaterialPlan:
    """Check every argument and compose the file; nothing is read or written yet."""
    if not content.strip():
        raise InvalidArgument("`content` is empty.", "Pass the text to store.")
    if not is_slug(slug):
        raise InvalidArgument(f"{slug!r} is not a slug.", f"Use kebab-case, e.g. {slugify(slug)!r}.")
    day = parse_day(date, "date") if date else _dt.date.today()
    path, kind = material_path(vault, day.isoformat(), slug, name)
    note = daily_write_path(vault, day.isoformat(), slug)
    if not vault.store.exists(note):
        raise InvalidArgument(f"There is no daily note {note!r} to attach to yet.",
                              f"Write it first with daily_write(slug={slug!r}, "
                              f"date={day.isoformat()!r}, ...), then attach.")
    if kind == "note":
        data = _note_text(path, content, description, language, origin_session_id)
    elif language:
        raise InvalidArgument(f"`language` is for notes; {PurePosixPath(path).name!r} is "
                              "stored as it is.", "Leave language out, or name it without "
                              "the extension to store a note.")
    else:
        data = content
    raw = data.encode("utf-8")
    limit = vault.settings.index.max_file_bytes
    if len(raw) > limit:
        raise InvalidArgument(f"Refused: the material is {len(raw)} bytes; the limit is "
                              f"{limit} (index.max_file_bytes: a bigger file is never "
                              "indexed, so nobody would find it). Nothing was written.",
                              "Store the part that matters, or split it into parts "
                              "(name-1, name-2).")
    line = " ".join(description.split()) if description else None
    return MaterialPlan(vault, path, kind, raw, note, slug,
                        daily_layout(vault) is not None, line)


def material_path(vault: Vault, day: str, slug: str, name: str) -> tuple[str, str]:
    """(vault path, "note" | "attachment") of material `name` of the task `slug` on `day`;
    InvalidArgument (or PathEscape) for a name that cannot be one (see the module doc)."""
    raw = name.strip() if isinstance(name, str) else ""
    if not raw:
        raise InvalidArgument("`filename` is empty.", 'Pass a file name, e.g. "query-plan".')
    if "/" in raw or "\\" in raw:
        raise InvalidArgument(f"Refused material name {raw!r}: give a file name, not a path.",
                              f"Use e.g. {PurePosixPath(raw.replace(chr(92), '/')).name!r}.")
    try:  # `..`, hidden names, control characters, over-long names
        vault.store.normalize(raw)
    except PathEscape as exc:
        raise InvalidArgument(exc.message, 'Use a plain file name, e.g. "query-plan".') from None
    kind = file_kind(vault, raw)
    suffix = PurePosixPath(raw).suffix.lower()
    if kind == "attachment" and suffix not in TEXT_ATTACHMENTS:
        raise InvalidArgument(f"Refused material {raw!r}: a {suffix} file is binary and "
                              "cannot come as text.", "Bring binary files with `upload`.")
    file = raw if kind is not None else raw + ".md"
    if PurePosixPath(file).stem == slug and file_kind(vault, file) == "note":
        raise InvalidArgument(f"Refused material name {raw!r}: that is the daily note itself.",
                              f"Use another name, e.g. '{slug}-output'.")
    note = daily_write_path(vault, day, slug)
    # a workspace's own folder; beside an Obsidian day note, a folder named like it
    folder = f"{note[:-3]}/{slug}" if daily_layout(vault) is not None \
        else str(PurePosixPath(note).parent)
    path = vault.store.normalize(f"{folder}/{file}")
    kind_now = check_change(vault, path, "create", exists=False)
    check_link_safe_name(path, "create")
    check_new_name(vault, path, "create")
    return path, kind_now


# -- helpers ------------------------------------------------------------------------------
def _note_text(path: str, content: str, description: str | None, language: str | None,
               origin_session_id: str | None) -> str:
    """A material note: frozen frontmatter (DESIGN §3: materials are frozen) + the content."""
    body = content
    if language:
        if not _LANGUAGE.match(language):
            raise InvalidArgument(f"{language!r} is not a code language name.",
                                  'Use e.g. "python", "sql" or "text".')
        body = _fenced(content, language)
    fm: dict[str, Any] = {"title": PurePosixPath(path).stem}
    if description:
        fm["description"] = " ".join(description.split())
    fm |= {"lifecycle": "frozen", "scope": "instance", "source": "auto", "role": "reference",
           "created": now_iso()}
    if origin_session_id:
        fm["originSessionId"] = origin_session_id
    return dump_note(fm, ends_nl(body))


def _fenced(content: str, language: str) -> str:
    """`content` in a code fence longer than any backtick run inside it."""
    runs = [len(m.group(0)) for m in re.finditer(r"`{3,}", content)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return f"{fence}{language}\n{content.rstrip(chr(10))}\n{fence}\n"


def _existing(tx: Transaction, path: str) -> bytes | None:
    try:
        return tx.read_bytes(path)
    except NoteNotFound:
        return None


def _next_name(path: str) -> str:
    p = PurePosixPath(path)
    stem = p.stem
    m = re.match(r"^(.*)-(\d+)$", stem)
    nxt = f"{m.group(1)}-{int(m.group(2)) + 1}" if m else f"{stem}-2"
    return nxt + p.suffix if p.suffix.lower() != ".md" else nxt
