"""What a tool may change in the vault (DESIGN §2): the one check every writing tool calls.

The store already refuses hidden names (`.git/`, `.obsidian/`, `.reme/`, any case), control
characters and symlinks leading outside or into a hidden folder. On top of that, vault
meaning decides here:
- `meta/` (derived signals) and `audit/` (the record of refused writes) are written only by
  the code, never by a tool, whatever the case of the folder name;
- `resource/` files are immutable materials: created (upload, copy), never rewritten;
- only notes (`toolkit.note_extensions`, default .md) and inert attachments
  (`toolkit.attachment_extensions`: images, PDF, audio, video, plain text) are written,
  copied, moved or deleted at all, so no tool can plant a script, a plugin or a program's
  configuration; a copy or move keeps a note a note and an attachment an attachment;
- nothing moves into a folder the index ignores (it would vanish from search and leave
  its inbound links dangling).
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Literal

from reme_agent.engine.store import fs_fold
from reme_agent.errors import InvalidArgument
from reme_agent.schema.layout import AUDIT, META, RESOURCE

if TYPE_CHECKING:
    from reme_agent.vault import Vault

Kind = Literal["note", "attachment"]
Op = Literal["write", "create", "copy", "move", "delete", "upload"]
_CODE_ONLY = {META: "meta/ holds derived maintenance signals, rebuilt by the maintainer",
              AUDIT: "audit/ is the record of refused writes and reports, written only by "
                     "reme-agent itself"}


def file_kind(vault: Vault, path: str) -> Kind | None:
    """'note', 'attachment', or None for a file no tool may write (a script, a config)."""
    suffix = PurePosixPath(path).suffix.lower()
    cfg = vault.settings.toolkit
    if suffix in {e.lower() for e in cfg.note_extensions}:
        return "note"
    if suffix in {e.lower() for e in cfg.attachment_extensions}:
        return "attachment"
    return None


def check_change(vault: Vault, path: str, op: Op, *, exists: bool,
                 want: Kind | None = None) -> Kind:
    """Raise InvalidArgument unless a tool may `op` the normalised `path`; return its kind.

    `want` is the kind the file must have (a note for `write`, the source's kind for a copy
    or move destination).
    """
    top = PurePosixPath(path).parts[0].casefold() if path else ""
    if top in _CODE_ONLY:
        raise InvalidArgument(f"Refused {op} of {path!r}: {_CODE_ONLY[top]}.",
                              "Write notes under knowledge/ or daily/.")
    if top == RESOURCE and exists and op in ("write", "copy", "upload"):
        raise InvalidArgument(f"Refused to change {path!r}: resource/ files are immutable "
                              "materials.", "Write a note that links to it instead.")
    kind = file_kind(vault, path)
    if kind is None:
        cfg = vault.settings.toolkit
        raise InvalidArgument(
            f"Refused {op} of {path!r}: tools only touch notes "
            f"({', '.join(cfg.note_extensions)}) and attachments "
            f"({', '.join(cfg.attachment_extensions)}).",
            "Pick a path with one of these extensions; other files are left to the user.")
    if op == "write" and kind != want and not exists:  # a new file: no note to turn into one
        raise InvalidArgument(f"Refused {op} to {path!r}: `{op}` makes notes "
                              f"({', '.join(vault.settings.toolkit.note_extensions)}); "
                              f"{PurePosixPath(path).suffix} files are attachments.",
                              "Name the note with .md, or `upload` an attachment into resource/.")
    if want is not None and kind != want:
        raise InvalidArgument(f"Refused {op} to {path!r}: it would turn a {want} into "
                              f"a{'n' if kind == 'attachment' else ''} {kind}.",
                              "Keep the file's extension.")
    return kind


def check_destination_folder(vault: Vault, path: str) -> None:
    """A move target must stay where the index looks (not in an ignored folder)."""
    ignored = {d.casefold() for d in vault.settings.index.ignore_dirs}
    hit = next((p for p in PurePosixPath(path).parts[:-1] if p.casefold() in ignored), None)
    if hit is not None:
        raise InvalidArgument(f"Refused move to {path!r}: {hit}/ is not indexed, so the note "
                              "would vanish from search and its links would dangle.",
                              "Move it to an indexed folder, or delete it if that is meant.")


LINK_BREAKERS = "#^[]|"
"""Characters a `[[link]]` cannot carry in a target name (anchor, block id, brackets,
shown text): a note named with one could never be linked to, so no tool creates one."""


def check_link_safe_name(path: str, op: Op) -> None:
    """Refuse a new note path that no [[link]] could name."""
    bad = sorted({c for c in path if c in LINK_BREAKERS})
    if bad:
        raise InvalidArgument(f"Refused {op} to {path!r}: a [[link]] cannot name a file with "
                              f"{' '.join(bad)} in its path.",
                              "Use a name without # ^ [ ] | (e.g. replace them with '-').")


INVISIBLE = {**{chr(c): "a bidirectional control" for c in (*range(0x202A, 0x202F),
                                                            *range(0x2066, 0x206A),
                                                            0x200E, 0x200F, 0x061C)},
             "\u200b": "a zero-width space", "\u2060": "a word joiner",
             "\ufeff": "a byte-order mark", "\u2028": "a line separator",
             "\u2029": "a paragraph separator"}
"""Characters a name shows wrongly or not at all: a right-to-left override makes
`x\u202edm.exe` read as `xexe.md`, a zero-width space makes two names look alike, and a
line separator breaks a listing line. The zero-width joiners (emoji, Persian) are allowed."""


def check_new_name(vault: Vault, path: str, op: Op, *, renaming: str | None = None) -> None:
    """Refuse a new file path a person could not tell from another, or no link could name.

    On top of `check_link_safe_name` (for notes): no invisible or direction-changing
    characters, and no name that differs from an existing file or folder only in letter
    case, Unicode normalisation or compatibility forms (full-width `ＡＢＣ` for `ABC`; a name
    is never refused for holding full-width characters, only for matching another one).
    `renaming`: the file being renamed may be its own twin in its own folder, as in a
    case-only rename of the file name.
    """
    bad = next((c for c in path if c in INVISIBLE), None)
    if bad is not None:
        raise InvalidArgument(f"Refused {op} to {path.encode('unicode_escape').decode()!r}: "
                              f"the name holds {INVISIBLE[bad]} (U+{ord(bad):04X}), which "
                              "hides or disguises what the name says.",
                              "Use a name of visible characters only.")
    unportable = _unportable(path)
    if unportable is not None:
        raise InvalidArgument(f"Refused {op} to {path!r}: {unportable}, so the vault could "
                              "not be opened or synced on Windows (Obsidian refuses such "
                              "names on every system).",
                              'Replace * " < > ? : with "-" and drop trailing dots/spaces.')
    twin = vault.store.lookalike(path)
    own = twin == renaming and twin is not None and \
        PurePosixPath(twin).parent == PurePosixPath(path).parent  # a case-only rename
    if twin is not None and not own:
        mine = "/".join(vault.store.normalize(path).split("/")[:twin.count("/") + 1])
        if fs_fold(twin) == fs_fold(mine):
            why = ("only letter case or Unicode normalisation differ); macOS, Windows and "
                   "Obsidian's links take them for one file.")
        else:
            why = ("only full-width or other compatibility forms of the same letters, digits "
                   "or signs differ); a person cannot tell them apart in a list or a link.")
        raise InvalidArgument(f"Refused {op} to {path!r}: it looks the same as the existing "
                              f"{twin!r} ({why}",
                              f"Use {twin!r} itself, or a name that differs visibly.")


_NOT_ON_WINDOWS = '*"<>?:'
_DEVICES = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(1, 10)),
            *(f"lpt{i}" for i in range(1, 10))}


def _unportable(path: str) -> str | None:
    """Why a new path cannot exist on Windows, or None."""
    bad = sorted({c for c in path if c in _NOT_ON_WINDOWS})
    if bad:
        return f"a file name cannot hold {' '.join(bad)} there"
    for part in path.split("/"):
        if part.endswith((".", " ")):
            return f"{part!r} ends with a dot or a space, which Windows drops"
        if part.split(".", 1)[0].rstrip(" ").casefold() in _DEVICES:
            return f"{part!r} is a reserved device name there"
    return None
