"""Read and write tools: list, read, stat, property_read, write, property_update/delete (L4).

Writes follow DESIGN §5: an existing file is replaced only through the store's CAS (the
caller's stamp, or the one read just before), a new one is created with O_EXCL, and an
overwrite that drops existing outbound links is refused (E-1) before anything is written.
Every successful write re-indexes the file so `search` sees it at once.
"""

from __future__ import annotations

import datetime as _dt
import logging
import unicodedata
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from reme_agent.engine.fmedit import edit_frontmatter
from reme_agent.engine.links import extract_links, missing_edges
from reme_agent.engine.names import LinkNames, link_names
from reme_agent.engine.parser import (
    dump_note,
    eol_of,
    normalize_eol,
    restore_eol,
    split_frontmatter,
    split_note,
)
from reme_agent.engine.retarget import retarget
from reme_agent.engine.transaction import Transaction
from reme_agent.errors import (
    ConservationViolation,
    InvalidArgument,
    NoteExists,
    ReMeError,
    StampChanged,
)
from reme_agent.schema.frontmatter import status_move_error, type_errors
from reme_agent.schema.layout import RESOURCE, is_record, layer_of
from reme_agent.toolkit.common import (
    PAGE_STAMP,
    file_stamp,
    is_note,
    norm_folder,
    page_stamp,
    short,
)
from reme_agent.toolkit.naming import note_path, restyle_named_links
from reme_agent.toolkit.policy import check_change, check_link_safe_name, check_new_name
from reme_agent.toolkit.results import ToolResult, tool

if TYPE_CHECKING:
    from reme_agent.vault import Vault

log = logging.getLogger("reme_agent.toolkit")

READ_MAX_CHARS = 200_000
"""Most text one `read` returns (~50k tokens): a huge note comes a page at a time."""


# -- read ---------------------------------------------------------------------------------
@tool
def list_notes(vault: Vault, folder: str = "", recursive: bool = True, glob: str | None = None,
               where: dict[str, Any] | None = None, limit: int = 200) -> ToolResult:
    """List files in the vault, optionally filtered by name and by frontmatter values.

    Args:
        folder: Vault-relative folder to list, e.g. "knowledge"; "" lists the whole vault.
        recursive: Also list files in subfolders.
        glob: Shell pattern matched against the path or the file name, e.g. "*.md".
        where: Frontmatter filter, e.g. {"role": "method", "tags": "search"}. Every key must
            match: a null value matches notes without that key; a single value matches an
            equal value or, for list-valued keys like tags, membership; a list value needs
            all its items in a list-valued key, or one of them equal to a single value.
        limit: Maximum number of files returned (1-10000).
    """
    _check_limit(limit, 10_000)
    base = norm_folder(vault, folder)
    paths = vault.store.list(base, recursive=recursive, pattern=glob or None)
    rows = vault.index_rows()
    if where:
        metas = {p: vault.note_meta(p, rows.get(p)) for p in paths if is_note(vault, p)}
        paths = [p for p in paths if p in metas and matches(metas[p].frontmatter, where)]
    items = [_entry(vault, p, rows) for p in paths[:limit]]
    data = {"folder": base, "count": len(paths), "truncated": len(paths) > limit, "files": items}
    return ToolResult(data, _list_text(base, items, len(paths)))


@tool
def read_note(vault: Vault, path: str, start_line: int | None = None,
              end_line: int | None = None) -> ToolResult:
    """Read a note, or a range of its lines, with the stamp needed to write it back.

    A very long note comes in pages: the answer then says truncated and gives next_start_line.
    A line range or a page comes with a page stamp ("page-..."): property edits, link_remove
    and delete take it, but `write` replaces the whole note and needs the stamp of a whole read.

    Args:
        path: Vault-relative path, e.g. "knowledge/bm25/bm25.md", or a note name as in a
            [[link]], e.g. "BM25" or an alias such as "王芳".
        start_line: First line to return (1-based, inclusive); omit for the start.
        end_line: Last line to return (inclusive); omit for the end.
    """
    norm = note_path(vault, path)
    text, stamp = vault.store.read_stamped(norm)
    eol = "\r" if eol_of(text) == "\r" else "\n"  # an old-Mac note has CR lines
    lines = text.split(eol)
    if text.endswith(eol):
        lines = lines[:-1]
    first, last = _line_range(start_line, end_line, len(lines))
    whole = first == 1 and last >= len(lines)
    if whole and len(text) <= READ_MAX_CHARS:
        part, truncated, cut = text, False, False
    else:
        wanted = last
        part, last, cut = _page(lines, first, wanted)
        part = part.replace("\n", eol)
        truncated = cut or last < wanted
        stamp = page_stamp(stamp)  # `write` must not take this page for the whole note
    data: dict[str, Any] = {"path": norm, "stamp": stamp, "text": part, "start_line": first,
                            "end_line": last, "total_lines": len(lines)}
    head = f"[{norm} | lines {first}-{last} of {len(lines)} | stamp {stamp}]"
    if truncated:
        nxt = last + 1 if last < len(lines) else None
        data |= {"truncated": True, "next_start_line": nxt}
        size = len(text.encode("utf-8")) / 1e6
        shown = f"line {last} cut at {READ_MAX_CHARS} characters" if cut else \
            f"showing lines {first}-{last}"
        more = f"pass start_line={nxt} to read on" if nxt else "no lines follow"
        head += f"\n[truncated: note is {size:.1f} MB; {shown}; {more}]"
    return ToolResult(data, f"{head}\n{part}")


@tool
def stat_note(vault: Vault, path: str) -> ToolResult:
    """Size, modification time, stamp, frontmatter and link counts of one file.

    Args:
        path: Vault-relative path, e.g. "knowledge/bm25/bm25.md", or a note name as in a
            [[link]].
    """
    st = vault.store.stat(note_path(vault, path))
    view = vault.view()
    meta = view.notes.get(st.path)
    out = meta.links if meta else []
    resolved = [view.resolve(link, st.path) for link in out]
    data = {"path": st.path, "size": st.size,
            "mtime": _dt.datetime.fromtimestamp(st.mtime).astimezone().isoformat(),
            "stamp": st.stamp, "frontmatter": meta.frontmatter if meta else {},
            "title": meta.title if meta else st.path.rsplit("/", 1)[-1],
            "links_out": len(out), "links_out_dangling": sum(r is None for r in resolved),
            "links_in": len(view.inbound(st.path)), "parse_error": meta.error if meta else None}
    text = "\n".join(f"{k}: {v}" for k, v in data.items() if k != "frontmatter")
    fm = "\n".join(f"  {k}: {v}" for k, v in data["frontmatter"].items())
    return ToolResult(data, text + ("\nfrontmatter:\n" + fm if fm else "\nfrontmatter: (none)"))


@tool
def property_read(vault: Vault, path: str, keys: list[str] | None = None) -> ToolResult:
    """Read frontmatter properties of a note (all of them, or only some keys).

    Args:
        path: Vault-relative path of the note, or its name as in a [[link]].
        keys: Property names to return; omit for all. Missing keys are listed in "missing".
    """
    norm = note_path(vault, path)
    text, stamp = vault.store.read_stamped(norm)
    parts = split_note(text, norm)
    if parts.error:
        raise InvalidArgument(str(parts.error))
    fm = parts.frontmatter
    props = fm if keys is None else {k: fm[k] for k in keys if k in fm}
    missing = [] if keys is None else [k for k in keys if k not in fm]
    data = {"path": norm, "stamp": stamp, "properties": props, "missing": missing}
    lines = [f"{k}: {v!r}" if not isinstance(v, str) else f"{k}: {v}" for k, v in props.items()]
    tail = f"\nmissing: {', '.join(missing)}" if missing else ""
    return ToolResult(data, f"[{norm} | stamp {stamp}]\n" + ("\n".join(lines) or "(no properties)") + tail)


# -- write --------------------------------------------------------------------------------
@tool
def write_note(vault: Vault, path: str, body: str | None = None,
               frontmatter: dict[str, Any] | None = None, text: str | None = None,
               overwrite: bool = False, stamp: str | None = None) -> ToolResult:
    """Create a note, or replace one (read it first and pass its stamp).

    Give either `frontmatter` and/or `body`, or the full `text`. When replacing, an omitted
    `frontmatter` keeps the current one and an omitted `body` keeps the current body. A
    replacement must keep every existing [[link]] with its predicate, else it is refused.
    A link you name by full path ([[knowledge/bm25/bm25.md]]) is stored in the vault's
    link style ([[bm25]] by default).

    Args:
        path: Vault-relative path ending in .md, e.g. "knowledge/bm25/bm25.md".
        body: Markdown body (without the frontmatter).
        frontmatter: Properties as a JSON object, e.g. {"title": "BM25", "role": "concept"}.
        text: The whole file (frontmatter block included); use instead of body/frontmatter.
        overwrite: Replace the file if it exists (needs `stamp`); false refuses to touch an
            existing file.
        stamp: The stamp `read` returned; required to replace a file, and the write is
            refused if the file changed since.
    """
    return put_note(vault, path, body, frontmatter, text, overwrite, stamp, restyle=True)


def put_note(vault: Vault, path: str, body: str | None = None,
               frontmatter: dict[str, Any] | None = None, text: str | None = None,
               overwrite: bool = False, stamp: str | None = None, *,
               restyle: bool = False) -> ToolResult:
    """`write` (see its docstring); `restyle`: links new in this write that name a note by
    its full path are written in the vault's link style (`naming.restyle_named_links`)."""
    norm = vault.store.normalize(path)
    if not PurePosixPath(norm).suffix:
        name = PurePosixPath(norm).name
        folder_note = "" if PurePosixPath(norm).parent.name == name else \
            f" or, as its folder's note, '{norm}/{name}.md'"  # knowledge/x -> knowledge/x/x.md
        raise InvalidArgument(f"{norm!r} has no file extension.",
                              f"Notes end in .md, e.g. '{norm}.md'{folder_note}.")
    if text is not None and (body is not None or frontmatter is not None):
        raise InvalidArgument("Pass either `text`, or `frontmatter`/`body`, not both.")
    if text is None and body is None and frontmatter is None:
        raise InvalidArgument("Nothing to write.", "Pass `body` (and `frontmatter`) or `text`.")
    exists = vault.store.exists(norm)
    check_change(vault, norm, "write", exists=exists, want="note")
    if not exists:
        check_link_safe_name(norm, "write")
        check_new_name(vault, norm, "write")
    current = vault.store.read_stamped(norm) if exists else None
    _check_stamp(norm, current, overwrite, stamp)
    new_text = text if text is not None else _compose(norm, current, body, frontmatter)
    if restyle:
        new_text = restyled(vault, norm, current[0] if current else None, new_text)
    _check_text(vault, norm, current[0] if current else None, new_text)
    if current is None:
        new_stamp = create_note(vault, norm, new_text)
    else:
        new_stamp = vault.store.write_if_unchanged(norm, new_text, current[1])
    return written(vault, norm, new_stamp, new_text, created=current is None)


@tool
def property_update(vault: Vault, path: str, properties: dict[str, Any],
                    stamp: str | None = None) -> ToolResult:
    """Set frontmatter properties of a note; the body is kept byte for byte.

    Args:
        path: Vault-relative path of the note, or its name as in a [[link]].
        properties: Keys and new values as a JSON object, e.g. {"importance": 7}. Other keys
            are kept; use property_delete to remove a key.
        stamp: Optional stamp from `read`; the update is refused if the file changed since.
    """
    if not properties:
        raise InvalidArgument("`properties` is empty.", 'Pass e.g. {"importance": 7}.')
    return edit_properties(vault, path, set_=properties, stamp=stamp)


@tool
def property_delete(vault: Vault, path: str, keys: list[str], stamp: str | None = None) -> ToolResult:
    """Remove frontmatter properties from a note; the body is kept byte for byte.

    Args:
        path: Vault-relative path of the note, or its name as in a [[link]].
        keys: Property names to remove, e.g. ["confidence"]. Absent keys are reported.
        stamp: Optional stamp from `read`; the change is refused if the file changed since.
    """
    if not keys:
        raise InvalidArgument("`keys` is empty.", 'Pass e.g. ["confidence"].')
    return edit_properties(vault, path, remove=keys, stamp=stamp)


# -- helpers ------------------------------------------------------------------------------
def check_write(vault: Vault, path: str, old_text: str | None, new_text: str) -> None:
    """What every note write passes before it lands: the path policy, a name links can
    reach (a new note), valid frontmatter, a legal status move and E-1 (see `write`)."""
    check_change(vault, path, "write", exists=old_text is not None, want="note")
    if old_text is None:
        check_link_safe_name(path, "write")
        check_new_name(vault, path, "write")
    _check_text(vault, path, old_text, new_text)


def create_note(vault: Vault, path: str, text: str) -> str:
    """Create a new note (O_EXCL: NoteExists if someone got there first); returns its stamp.

    A new name can change what existing links mean: a second ``bm25.md`` makes every
    ``[[bm25]]`` ambiguous, a file named like an alias takes that alias's links. As Obsidian
    does when a second "Foobar" appears, those links are rewritten first (each to the
    shortest form that still names its file), with the create, in one journalled
    transaction (DESIGN §5); a plain create when no link is affected.

    Whether any link is affected is asked of the index first (notes with a link, an embed, a
    Markdown link or a property link whose key is one of the new names': the link-key
    index and the reference keys), so a create costs no vault walk when nothing can change:
    5,000 notes took ~2 s a create with the walk. A link typed into a note since it was
    last indexed is not seen by that check (`watch` keeps it current).
    """
    names = link_names(split_note(text, path).frontmatter)
    if not _links_it_may_take(vault, path, names):
        return vault.store.create(path, text)
    view = vault.view()
    after = view.after({}, added={path: names.aliases})
    tx = Transaction(vault.store)
    changed = retarget(tx, view, {}, after, skip=is_record,
                       immutable=lambda p: layer_of(p) == RESOURCE)
    if not changed:
        return vault.store.create(path, text)
    tx.create(path, text)
    tx.commit()
    warning = vault.try_refresh(list(changed))
    if warning:
        log.warning("%s", warning)
    return vault.store.stamp(path) or ""


def _links_it_may_take(vault: Vault, path: str, names: LinkNames) -> bool:
    """Whether the index knows a link a new file with these names could take over. An index
    that cannot be opened (a full disk, a chroma server down) answers "maybe": a write
    never fails because of the index, the vault walk decides instead."""
    try:
        return bool(vault.indexer.sources_naming(path, names.aliases, names.redirects))
    except (ReMeError, OSError) as exc:
        log.debug("link-key check fell back to a vault walk: %s", exc)
        return True


def restyled(vault: Vault, path: str, old_text: str | None, new_text: str) -> str:
    """`new_text` with the links it newly names by full path in the vault's link style."""
    parts = split_note(new_text, path)
    old_body = split_note(old_text, path).body if old_text else None
    body = restyle_named_links(vault, path, old_body, parts.body)
    return new_text if body == parts.body else parts.with_body(body)


def written(vault: Vault, path: str, stamp: str, text: str, *, created: bool,
            verb: str | None = None) -> ToolResult:
    """The answer of a note write (re-indexed so `search` sees it at once); `verb` says what
    happened to an existing note when it was not replaced (a model trusts the word)."""
    warning = vault.try_refresh([path])
    verb = "Created" if created else verb or "Replaced"
    data = {"path": path, "stamp": stamp, "created": created,
            "bytes": len(text.encode("utf-8")), "warning": warning}
    return ToolResult(data, f"{verb} {path} (stamp {stamp})" + (f"; {warning}" if warning else ""))


def edit_properties(vault: Vault, path: str, set_: Mapping[str, Any] | None = None,
                    remove: list[str] | tuple[str, ...] = (), stamp: str | None = None) -> ToolResult:
    """Frontmatter edit under CAS (`FileStore.cas_edit`): redone when another writer got in
    between, unless the caller passed its own `stamp`. Only the lines of the keys that
    change are rewritten (`engine.fmedit`)."""
    norm = note_path(vault, path)
    planned: dict[str, Any] = {}

    def edit(text: str) -> str | None:
        check_change(vault, norm, "write", exists=True, want="note")
        parts = split_note(text, norm)
        if parts.error:
            raise InvalidArgument(f"Cannot edit properties of {norm!r}: {parts.error.message}",
                                  "Fix the frontmatter in an editor (or with `write` text=...) "
                                  "first.")
        fm = parts.frontmatter
        check_new_keys(set_ or {}, keep=fm)
        new_text = edit_frontmatter(text, set_, remove, norm)  # only the touched keys' lines
        new_fm = split_note(new_text, norm).frontmatter
        _check_frontmatter(norm, fm, new_fm)
        planned.update(fm=new_fm, missing=[k for k in remove if k not in fm])
        return None if new_text == text else new_text

    done = vault.store.cas_edit(norm, edit, stamp=file_stamp(stamp))
    warning = vault.try_refresh([norm]) if done.status == "written" else None
    assert done.stamp is not None
    return _props_result(norm, done.stamp, done.status == "written", planned["fm"],
                         planned["missing"], warning)


def _props_result(path: str, stamp: str, changed: bool, fm: dict[str, Any], missing: list[str],
                  warning: str | None) -> ToolResult:
    data = {"path": path, "stamp": stamp, "changed": changed, "properties": fm,
            "missing": missing, "warning": warning}
    text = f"{'Updated' if changed else 'No change to'} {path} (stamp {stamp})"
    if missing:
        text += f"; not present: {', '.join(missing)}"
    return ToolResult(data, text + (f"; {warning}" if warning else ""))


def matches(fm: Mapping[str, Any], where: Mapping[str, Any]) -> bool:
    """The `list` frontmatter filter (see its docstring)."""
    for key, want in where.items():
        have = fm.get(key)
        if want is None:
            if have is not None:
                return False
        elif isinstance(want, list):
            if isinstance(have, list):
                if not all(_same(w, have) for w in want):
                    return False
            elif not any(_eq(w, have) for w in want):
                return False
        elif not (_same(want, have) if isinstance(have, list) else _eq(want, have)):
            return False
    return True


def _same(want: Any, have: list[Any]) -> bool:
    return any(_eq(want, h) for h in have)


def _eq(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return a == b or str(a) == str(b)


def _entry(vault: Vault, path: str, rows: Mapping[str, Any]) -> dict[str, Any]:
    if not is_note(vault, path):
        return {"path": path}
    meta = vault.note_meta(path, rows.get(path))
    desc = meta.frontmatter.get("description")
    return {"path": path, "title": meta.title,
            "description": desc if isinstance(desc, str) else None}


def _list_text(base: str, items: list[dict[str, Any]], total: int) -> str:
    where = base or "the vault"
    if not items:
        return f"No files in {where} match."
    lines = [it["path"] + (f" — {it['title']}" if it.get("title") else "")
             + (f": {short(it['description'], 120)}" if it.get("description") else "")
             for it in items]
    more = f"\n… {total - len(items)} more (raise limit or narrow folder/glob)" \
        if total > len(items) else ""
    return f"{total} file(s) in {where}:\n" + "\n".join(lines) + more


def _check_limit(limit: int, top: int) -> None:
    if not 1 <= limit <= top:
        raise InvalidArgument(f"limit must be between 1 and {top}, got {limit}.")


def _page(lines: list[str], first: int, last: int) -> tuple[str, int, bool]:
    """Lines first..last that fit in READ_MAX_CHARS: (text, last line shown, line cut).

    At least one line is returned; a single line longer than the cap is cut (the flag says so).
    """
    budget = READ_MAX_CHARS
    end = first - 1
    while end < last and len(lines[end]) + (end >= first) <= budget:
        budget -= len(lines[end]) + (end >= first)  # + the newline joining it to the line before
        end += 1
    if end < first and last >= first:
        return lines[first - 1][:READ_MAX_CHARS], first, True
    return "\n".join(lines[first - 1:end]), end, False


def _line_range(start: int | None, end: int | None, total: int) -> tuple[int, int]:
    first = 1 if start is None else start
    last = total if end is None else min(end, total)
    if first < 1 or (end is not None and end < 1):
        raise InvalidArgument("Line numbers start at 1.", f"The file has {total} lines.")
    if first > max(total, 1):
        raise InvalidArgument(f"start_line {first} is past the end: the file has {total} lines.")
    if end is not None and end < first:
        raise InvalidArgument(f"end_line {end} is before start_line {first}.")
    return first, max(last, first if total else 0)


def _check_stamp(path: str, current: tuple[str, str] | None, overwrite: bool,
                 stamp: str | None) -> None:
    if current is None:
        if stamp is not None:
            raise StampChanged(path, stamp, None)
        return
    if not overwrite:
        raise NoteExists(path)
    if stamp is None:  # G5: an overwrite replaces what someone wrote; it needs a read first
        raise InvalidArgument(f"Refused to replace {path!r} without its stamp.",
                              f"Read {path!r} first and pass the stamp it gave with "
                              "overwrite=true (a person at the CLI can use --force).")
    if stamp.startswith(PAGE_STAMP):
        raise InvalidArgument(f"Refused to replace {path!r}: the stamp comes from a partial "
                              "read (a line range or a page), and `write` replaces the whole "
                              "note, so every line you did not read would be lost.",
                              "Read the whole note (no start_line/end_line) and write that "
                              "back; for properties use property_update, for a daily note "
                              "daily_write.")
    if stamp != current[1]:
        raise StampChanged(path, stamp, current[1])


def _compose(path: str, current: tuple[str, str] | None, body: str | None,
             frontmatter: dict[str, Any] | None) -> str:
    """New file text; omitted parts come from the current file, kept byte for byte.

    A new `frontmatter` for an existing note is applied key by key (`edit_frontmatter`):
    keys whose value is unchanged keep their lines, removed keys lose theirs, new keys are
    added after the last one. A new `body` gets the note's own line ending.
    """
    if current is None:
        check_new_keys(frontmatter or {})
        text = dump_note(frontmatter or {}, ends_nl(body or ""))
        return text
    parts = split_note(current[0], path)
    if parts.error and frontmatter is None:
        raise InvalidArgument(f"{path!r} has malformed frontmatter ({parts.error}).",
                              "Pass `frontmatter` (or the full `text`) to replace it.")
    new_body = parts.body if body is None else restore_eol(ends_nl(normalize_eol(body)),
                                                           parts.eol)
    if frontmatter is None:
        return parts.with_body(new_body)
    if parts.error:
        return dump_note(frontmatter, new_body)
    old = parts.frontmatter
    check_new_keys(frontmatter, keep=old)
    return edit_frontmatter(parts.with_body(new_body), frontmatter,
                            [k for k in old if k not in frontmatter], path)


def check_new_keys(properties: Mapping[str, Any], keep: Mapping[str, Any] | None = None) -> None:
    """Refuse a property name no one could type back: empty, padded with spaces, or holding
    a line break or another control character (YAML would store it as a quoted multi-line
    key that Obsidian's property editor cannot show), at any depth (`{"meta": {"a\\nb": 1}}`).
    Keys already in the note (`keep`, level by level) pass: a hand-written odd key stays
    editable. A key that is not text (YAML's `1:`) holds no control character."""
    keep = keep if keep is not None else {}
    for key, value in properties.items():
        if key not in keep and isinstance(key, str) and (
                not key.strip() or key != key.strip()
                or any(unicodedata.category(ch) == "Cc" or ch in "\u2028\u2029" for ch in key)):
            raise InvalidArgument(f"Refused property name {key!r}: a name must be one line of "
                                  "text without control characters or outer spaces.",
                                  'Use a plain name such as "status" or "due date".')
        _check_nested_keys(value, keep.get(key) if key in keep else None)


def _check_nested_keys(value: Any, old: Any) -> None:
    """`check_new_keys` inside a map or a list of maps (the old value's keys pass)."""
    if isinstance(value, Mapping):
        check_new_keys(value, keep=old if isinstance(old, Mapping) else {})
    elif isinstance(value, list) and any(isinstance(item, Mapping | list) for item in value):
        known: dict[Any, Any] = {}
        for item in old if isinstance(old, list) else ():
            if isinstance(item, Mapping):
                known.update(item)
        for item in value:
            _check_nested_keys(item, known if isinstance(item, Mapping) else None)


def ends_nl(text: str) -> str:
    """`text` ending in a newline (unless empty)."""
    return text if not text or text.endswith("\n") else text + "\n"


def _check_text(vault: Vault, path: str, old_text: str | None, new_text: str) -> None:
    """Refuse malformed or badly typed frontmatter, a status jump, or dropped links (E-1)."""
    new_fm, _, _, error = split_frontmatter(new_text, path)
    if error is not None:
        raise InvalidArgument(f"Refused write of {path!r}: {error}")
    old_fm = split_frontmatter(old_text, path)[0] if old_text is not None else {}
    _check_frontmatter(path, old_fm, new_fm)
    if old_text is None or "[[" not in old_text:
        return
    old_body = split_frontmatter(old_text, path)[1]
    new_body = split_frontmatter(new_text, path)[1]
    if _links_as_written(old_body) <= _links_as_written(new_body):
        return  # every link kept verbatim resolves as before: no vault walk needed
    view = vault.view()
    lost = missing_edges(old_body, new_body, lambda t: view.resolver.resolve(t, path))
    if lost:
        raise ConservationViolation(path, lost)


def _links_as_written(body: str) -> set[tuple[str, str | None]]:
    """(target as written, predicate) of each link: same text, same source -> same edge."""
    return {(link.target.strip(), link.predicate) for link in extract_links(body)}


def _check_frontmatter(path: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    """Refuse badly typed keys the write sets or changes (a hand-kept note's own
    `status: draft` does not block an edit of another key), an illegal status move, and a
    new property name no one could type back (also when it comes in a whole `text`)."""
    check_new_keys(new, keep=old)
    touched = {k: v for k, v in new.items() if k not in old or old[k] != v}
    errors = type_errors(touched) if touched else []
    if errors:
        raise InvalidArgument(f"Refused write of {path!r}: " + "; ".join(errors) + ".",
                              "Fix these properties and write again.")
    why = status_move_error(old.get("status"), new.get("status")) if "status" in old else None
    if why:
        raise InvalidArgument(f"Refused write of {path!r}: {why}.")
