"""Folders that are never a vault root: the file system's root, system folders, the home folder.

A vault gets `.reme/` (its index) at its root, and every tool may write anywhere under it;
`--vault /` or `--vault ~` (a typo, an unset variable: `--vault "$NOTES"`) would make the
whole disk or home folder a vault, index it, and create `/.reme`. So these are refused
before anything is created. The home folder is allowed when Obsidian already treats it as
a vault (`.obsidian/` there): the person chose it. Paths are compared resolved, so a
symlink to `/` is refused too.
"""

from __future__ import annotations

import os
from pathlib import Path

SYSTEM_FOLDERS = frozenset({
    "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32", "/media",
    "/mnt", "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr",
    "/usr/bin", "/usr/lib", "/usr/local", "/usr/sbin", "/usr/share", "/var", "/var/lib",
    "/var/log", "/var/tmp",
    # macOS
    "/Applications", "/Library", "/System", "/Users", "/Volumes", "/private",
    "/private/etc", "/private/tmp", "/private/var",
})
"""Exact folders refused; a folder *inside* one (e.g. `/var/lib/app/vault`, a read-only
vault under `/usr/share`) is a legitimate vault."""

VIRTUAL_TREES = ("/proc", "/sys", "/dev")
"""Kernel file systems: nothing inside them is a vault."""


def unusable_root(path: Path) -> str | None:
    """Why `path` (an existing folder) cannot be a vault root, or None."""
    try:
        real = path.resolve()
    except OSError:
        return None
    text = str(real)
    if real.parent == real:
        return "the file system's root"
    try:
        home = Path.home().resolve()
    except (OSError, RuntimeError):
        home = None
    if real == home:
        return None if (real / ".obsidian").is_dir() else "your home folder"
    if os.name == "posix" and (text in SYSTEM_FOLDERS
                               or any(text.startswith(f"{t}/") for t in VIRTUAL_TREES)):
        return "a system folder"
    return None
