"""File tools: move, copy, delete, upload, download (L4).

`move` keeps the graph intact: every link anywhere in the vault whose meaning the move would
change (a link to the moved file that no longer names it, a short name that becomes
ambiguous, a relative link inside the moved note; embeds and Markdown links too, which are
no edges but break the same way) is rewritten, each in the style it was
written (a name stays a name, a path stays a path; `engine.linkstyle.keep_style`); shown
text, anchor and predicate bytes are kept, and a link that still resolves is not touched
(`engine.retarget.plan_move`). It is all-or-nothing (DESIGN §5, `engine.transaction`):
every stamp is checked first, an intent journal is written, then all files are written and
the file is moved; if any step fails, what was written is restored byte for byte, and a
process killed mid-way is rolled back by the next one that opens the vault.

`upload` / `download` cross the vault boundary, so they only touch local folders listed in
the config (`toolkit.upload_dirs` / `toolkit.download_dirs`); an empty list disables them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from reme_agent.engine.atomic import replaced
from reme_agent.engine.fmedit import key_lines
from reme_agent.engine.links import EMBED, LINK, MARKDOWN
from reme_agent.engine.retarget import plan_move
from reme_agent.engine.transaction import Transaction
from reme_agent.errors import (
    InvalidArgument,
    NoteExists,
    NoteNotFound,
    PathEscape,
    StampChanged,
)
from reme_agent.schema.layout import RESOURCE, layer_of
from reme_agent.toolkit.common import file_stamp, is_note
from reme_agent.toolkit.naming import note_path
from reme_agent.toolkit.policy import (
    check_change,
    check_destination_folder,
    check_link_safe_name,
    check_new_name,
    file_kind,
)
from reme_agent.toolkit.results import ToolResult, tool

if TYPE_CHECKING:
    from reme_agent.engine.view import VaultView
    from reme_agent.vault import Vault


# -- tools --------------------------------------------------------------------------------
@tool
def move(vault: Vault, src: str, dst: str) -> ToolResult:
    """Move or rename a file and rewrite every link to it, all or nothing.

    Each link to it keeps its style (a [[Name]] link names the new file, a path link gets
    the new path), its shown text and predicate; links that still resolve are not touched.
    Embeds (![[Name]]) and Markdown links ([text](folder/Name.md)) follow the file the same
    way; links inside HTML comments (<!-- -->) are left as written.

    Args:
        src: Current vault-relative path, e.g. "knowledge/rrf/rrf.md", or the note's name as
            in a [[link]].
        dst: New vault-relative path, e.g. "knowledge/reciprocal-rank-fusion/reciprocal-rank-fusion.md".
    """
    s, d = note_path(vault, src, redirects=False), vault.store.normalize(dst)
    if s == d:
        raise InvalidArgument(f"src and dst are the same path {s!r}.")
    if not vault.store.exists(s):
        raise NoteNotFound(s, vault.store.suggest(s))
    if vault.store.resolve(d).exists():
        raise NoteExists(d)
    kind = check_change(vault, s, "move", exists=True)
    check_change(vault, d, "move", exists=False, want=kind)
    check_destination_folder(vault, d)
    if kind == "note":
        check_link_safe_name(d, "move")
    check_new_name(vault, d, "move", renaming=s)
    tx = Transaction(vault.store)
    links = plan_move(tx, vault.view(), s, d, alias_bare=False)
    tx.commit()   # every stamp checked, journalled, all or nothing (DESIGN §5)
    warning = vault.try_refresh([s, d, *links])
    rewritten = [{"path": p, "links": n} for p, n in links.items()]
    text = f"Moved {s} -> {d}; rewrote {sum(links.values())} link(s) in {len(links)} file(s)"
    text += "".join(f"\n  {r['path']} ({r['links']})" for r in rewritten)
    return ToolResult({"src": s, "dst": d, "rewritten": rewritten, "warning": warning},
                      text + (f"\n{warning}" if warning else ""))


@tool
def copy(vault: Vault, src: str, dst: str, overwrite: bool = False,
         stamp: str | None = None) -> ToolResult:
    """Copy a file to a new path inside the vault (links to the original are not changed).

    Replacing an existing file is a rewrite of it: pass overwrite=true and the stamp that
    `read` (or `stat`) gave for dst; a note's existing [[links]] must survive the copy.

    Args:
        src: Vault-relative path of the file to copy, or a note's name as in a [[link]].
        dst: Vault-relative path of the copy.
        overwrite: Replace dst if it already exists (needs `stamp`).
        stamp: The stamp of dst from `read`/`stat`; required to replace an existing file.
    """
    s, d = note_path(vault, src), vault.store.normalize(dst)
    if s == d:
        raise InvalidArgument(f"src and dst are the same path {s!r}.")
    if not vault.store.exists(s):
        raise NoteNotFound(s, vault.store.suggest(s))
    exists = vault.store.resolve(d).exists()
    kind = check_change(vault, d, "copy", exists=exists, want=file_kind(vault, s))
    if exists and not overwrite:
        raise NoteExists(d)
    if not exists:
        check_new_name(vault, d, "copy")
    if exists and stamp is None:
        raise InvalidArgument(f"Refused to replace {d!r} without its stamp.",
                              f"Read {d!r} first and pass its stamp with overwrite=true.")
    if kind == "note":
        from reme_agent.toolkit.notes import put_note  # a rewrite obeys E-1 and the stamp

        if not exists:
            check_link_safe_name(d, "copy")
        wrote = put_note(vault, d, text=vault.store.read_text(s), overwrite=exists,
                           stamp=stamp)
        new_stamp, warning = wrote.data["stamp"], wrote.data["warning"]
    else:
        data = vault.store.read_bytes(s)
        new_stamp = (vault.store.write_if_unchanged(d, data, stamp) if exists
                     else vault.store.create(d, data))
        warning = None
    return ToolResult({"src": s, "dst": d, "stamp": new_stamp, "warning": warning},
                      f"Copied {s} -> {d} (stamp {new_stamp})" + (f"; {warning}" if warning else ""))


@tool
def delete(vault: Vault, path: str, stamp: str | None = None) -> ToolResult:
    """Delete a file. Only when the user asked for it; reports the links left dangling
    (wikilinks, embeds, Markdown links and links in other notes' properties).

    Args:
        path: Vault-relative path of the file to delete, or a note's name as in a [[link]].
        stamp: Optional stamp from `read`; the delete is refused if the file changed since.
    """
    norm = note_path(vault, path, redirects=False)
    check_change(vault, norm, "delete", exists=True)
    if not vault.store.exists(norm):
        raise NoteNotFound(norm, vault.store.suggest(norm))
    current = vault.store.stamp(norm)
    if stamp is not None and file_stamp(stamp) != current:
        raise StampChanged(norm, stamp, current)
    view = vault.view()
    dangling = _left_pointing(vault, view, norm)
    vault.store.delete(norm)
    warning = vault.try_refresh([norm])
    broken = [x for x in dangling if x["now_resolves_to"] is None]
    text = f"Deleted {norm}; {len(broken)} link(s) now dangling"
    text += "".join(f"\n  {x['source']}:{x['line']} {_as_written(x)}" for x in broken)
    return ToolResult({"path": norm, "deleted": True, "dangling": dangling, "warning": warning},
                      text + (f"\n{warning}" if warning else ""))


@tool
def upload(vault: Vault, local_path: str, dest: str | None = None) -> ToolResult:
    """Copy a local file into the vault's resource/ folder (immutable materials).

    Only files inside the folders allowed by the config (toolkit.upload_dirs) can be uploaded.

    Args:
        local_path: Path of the local file, e.g. "/home/me/papers/bm25.pdf".
        dest: Vault path under resource/, e.g. "resource/papers/bm25.pdf"; default
            "resource/<file name>".
    """
    source = _inside(Path(local_path), vault.settings.toolkit.upload_dirs, "upload",
                     "toolkit.upload_dirs")
    if not source.is_file():
        raise InvalidArgument(f"No local file at {local_path!r}.")
    norm = vault.store.normalize(dest or f"{RESOURCE}/{source.name}")
    if layer_of(norm) != RESOURCE:
        raise InvalidArgument(f"Refused upload to {norm!r}: uploads go under resource/.",
                              f"Use e.g. 'resource/{source.name}'.")
    if vault.store.resolve(norm).exists():
        raise NoteExists(norm)
    check_change(vault, norm, "upload", exists=False)
    check_new_name(vault, norm, "upload")
    size = source.stat().st_size
    if size > vault.store.max_read_bytes:
        raise InvalidArgument(f"{local_path!r} is {size} bytes; the limit is "
                              f"{vault.store.max_read_bytes}.")
    stamp = vault.store.create(norm, source.read_bytes())
    warning = vault.try_refresh([norm]) if is_note(vault, norm) else None
    return ToolResult({"local_path": str(source), "path": norm, "stamp": stamp, "bytes": size,
                       "warning": warning}, f"Uploaded {source} -> {norm} ({size} bytes)")


@tool
def download(vault: Vault, path: str, local_path: str, overwrite: bool = False) -> ToolResult:
    """Copy a vault file to a local path (only into folders allowed by toolkit.download_dirs).

    Args:
        path: Vault-relative path of the file, e.g. "knowledge/bm25/bm25.md", or a note's
            name as in a [[link]].
        local_path: Local destination file path, e.g. "/home/me/export/bm25.md".
        overwrite: Replace the local file if it exists.
    """
    path = note_path(vault, path)
    data = vault.store.read_bytes(path)
    target = _inside(Path(local_path), vault.settings.toolkit.download_dirs, "download",
                     "toolkit.download_dirs")
    if target == vault.root or vault.root in target.parents:
        raise InvalidArgument("Refused: the destination is inside the vault.",
                              "Use `copy` to copy files within the vault.")
    if target.is_dir():
        raise InvalidArgument(f"{local_path!r} is a folder; give a file path.")
    if target.exists() and not overwrite:
        raise InvalidArgument(f"The local file {local_path!r} already exists.",
                              "Pass overwrite=true to replace it, or choose another path.")
    _write_local(target, data)
    return ToolResult({"path": vault.store.normalize(path), "local_path": str(target),
                       "bytes": len(data)}, f"Downloaded {path} -> {target} ({len(data)} bytes)")


# -- local files --------------------------------------------------------------------------
def _left_pointing(vault: Vault, view: VaultView, path: str) -> list[dict[str, Any]]:
    """Every link, embed, Markdown link and property link naming `path`, and what each
    names once it is gone (`kind`: link | embed | markdown | property)."""
    after = view.after({}, removed=[path])
    found = [{"source": src, "line": link.line, "target": link.target, "kind": LINK,
              "property": None, "predicate": link.predicate,
              "now_resolves_to": after.resolve(link.target, src)}
             for src, link in view.inbound(path)]
    lines: dict[str, dict[str, int]] = {}
    for src, ref, key in view.references_to(path):
        line = ref.line
        if key is not None:   # a frontmatter value: the line of its key
            if src not in lines:
                lines[src] = key_lines(vault.store.read_text(src))
            line = lines[src].get(key, 1)
        found.append({"source": src, "line": line, "target": ref.target,
                      "kind": "property" if key is not None else ref.kind, "property": key,
                      "predicate": None,
                      "now_resolves_to": after.resolve(ref.target, src,
                                                       markdown=ref.kind == MARKDOWN)})
    return sorted(found, key=lambda x: (x["source"], x["line"]))


def _as_written(item: dict[str, Any]) -> str:
    """A dangling reference in the shape the delete report lists links: `[[x]]`,
    `![[x]]`, `[](x)`, `[[x]] (property related)`."""
    target = item["target"]
    if item["kind"] == MARKDOWN:
        return f"[]({target})"
    if item["kind"] == EMBED:
        return f"![[{target}]]"
    return f"[[{target}]]" + (f" (property {item['property']})" if item["property"] else "")


def _inside(path: Path, allowed: list[str], verb: str, key: str) -> Path:
    """The resolved local path, if it lies inside one of the allowed folders."""
    if not allowed:
        raise InvalidArgument(f"{verb.capitalize()}s are disabled: `{key}` is empty in the config.",
                              f"Ask the user to add the local folder to `{key}`.")
    if "\x00" in str(path):
        raise PathEscape(str(path), "it contains a NUL byte")
    real = path.expanduser().resolve()
    roots = [Path(a).expanduser().resolve() for a in allowed]
    if not any(real == r or r in real.parents for r in roots):
        raise InvalidArgument(f"Refused {verb} of {str(path)!r}: it is outside the allowed "
                              f"folders ({', '.join(str(r) for r in roots)}).",
                              f"Use a path inside one of them, or ask the user to extend `{key}`.")
    return real


def _write_local(target: Path, data: bytes) -> None:
    """Atomic local write (outside the vault, so not the store's business)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with replaced(target, prefix=".tmp-") as fh:
        fh.write(data)

