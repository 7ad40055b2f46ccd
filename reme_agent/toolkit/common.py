"""Helpers shared by the tool families (folders, dates, the re-index after a write).

Tools that reason about links (move, delete, lint) plan against `vault.view()`
(`engine.view.VaultView`): the files as they are now, not as the index last saw them.
"""

from __future__ import annotations

import datetime as _dt
import logging
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from reme_agent.errors import InvalidArgument

if TYPE_CHECKING:
    from reme_agent.vault import Vault

log = logging.getLogger("reme_agent.toolkit")


def is_note(vault: Vault, path: str) -> bool:
    """Files the indexer parses (frontmatter + links): .md, .markdown, .txt by default."""
    return path.lower().endswith(tuple(e.lower() for e in vault.settings.index.extensions))


def in_folder(path: str, folder: str) -> bool:
    return not folder or path == folder or path.startswith(folder.rstrip("/") + "/")


def norm_folder(vault: Vault, folder: str) -> str:
    """'' for the whole vault, else a normalised folder that must exist."""
    if not folder.strip() or folder.strip() in ("/", "."):
        return ""
    norm = vault.store.normalize(folder).rstrip("/")
    if not vault.store.is_dir(norm):
        tops = sorted(p.name for p in vault.root.iterdir() if p.is_dir() and
                      not p.name.startswith("."))
        raise InvalidArgument(f"No folder {norm!r} in the vault.",
                              f"Top folders are: {', '.join(tops) or '(none)'}; "
                              "pass '' for the whole vault.")
    return norm


def now_iso() -> str:
    return _dt.datetime.now().astimezone().replace(microsecond=0).isoformat()


def parse_day(value: str, name: str) -> _dt.date:
    try:
        return _dt.date.fromisoformat(value.strip())
    except ValueError:
        raise InvalidArgument(f"{name} {value!r} is not a date.",
                              "Use YYYY-MM-DD, e.g. 2026-11-30.") from None


def short(text: str, width: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[:width - 1] + "…"


def stem(path: str) -> str:
    return PurePosixPath(path).stem


PAGE_STAMP = "page-"
"""Prefix of the stamp a partial `read` (a line range, a page of a long note) returns."""


def page_stamp(stamp: str) -> str:
    """The stamp of a partial read: the same bytes, marked so that `write`, which replaces
    the whole note, can tell the caller has not seen all of it."""
    return PAGE_STAMP + stamp


def file_stamp(stamp: str | None) -> str | None:
    """The file's stamp from a stamp a tool gave out (a page stamp names the same bytes):
    for edits that keep what the caller did not see (properties, a delete, a status)."""
    return stamp[len(PAGE_STAMP):] if stamp and stamp.startswith(PAGE_STAMP) else stamp
