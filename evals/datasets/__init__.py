"""Eval datasets: each becomes one or more real vaults (files in memory, written on demand).

A dataset is generated in memory first (path -> file text), so the gold mapping from file
lines to gold units (a LoCoMo dia_id, a CMRC chunk) is known without touching the disk, and a
vault that is already on disk with the same content is reused (no re-embedding).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from reme_agent.errors import ConfigError

DATA_ENV = "REME_EVAL_DATA"
REPO = Path(__file__).resolve().parents[2]
DEFAULT_DATA = REPO.parent / "shared" / "data"
"""`../shared/data` next to the checkout (relative to the repository, not to one machine)."""


def data_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """Where the public eval data lives: --data, else $REME_EVAL_DATA, else ../shared/data."""
    if explicit:
        return Path(explicit).expanduser()
    if os.environ.get(DATA_ENV):
        return Path(os.environ[DATA_ENV]).expanduser()
    return DEFAULT_DATA


def data_file(name: str, explicit: str | os.PathLike[str] | None = None) -> Path:
    """A data file in `data_dir`; a missing one is the user's to fix (ConfigError, exit 1)."""
    folder = data_dir(explicit)
    if folder.is_file():
        raise ConfigError(f"The eval data path {folder} is a file.",
                          f"--data and ${DATA_ENV} name the folder holding {name}.")
    path = folder / name
    if not path.is_file():
        raise ConfigError(f"The eval data file {path} is missing.",
                          f"Pass --data FOLDER or set ${DATA_ENV} to the folder holding {name} "
                          "(evals/README.md says where to get it).")
    return path


def data_json(name: str, explicit: str | os.PathLike[str] | None, shape_ok: Callable[[Any], bool],
              shape: str) -> Any:
    """A data file's JSON, checked for the shape its loader reads: a wrong file (not JSON, or
    another dataset's) is the user's to fix, not an internal error."""
    path = data_file(name, explicit)
    hint = f"Pass --data FOLDER holding the {name} that evals/README.md names."
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"The eval data file {path} is not JSON ({exc}).", hint) from None
    if not shape_ok(data):
        raise ConfigError(f"The eval data file {path} is not in the expected shape ({shape}).",
                          hint)
    return data


@dataclass(frozen=True)
class Query:
    """One ground-truth query. `relevant` holds node keys, `relevant_blocks` block keys."""

    qid: str
    text: str
    relevant: frozenset[str]
    kind: str
    relevant_blocks: frozenset[str] = frozenset()
    forbidden: frozenset[str] = frozenset()   # node keys that must not show (archived notes)


@dataclass
class VaultSpec:
    """One vault: its files, its queries and how results map to gold keys."""

    name: str
    files: dict[str, str]                      # vault-relative path -> text (notes and meta/)
    queries: list[Query]
    line_keys: dict[str, dict[int, str]] = field(default_factory=dict)  # path -> line -> key
    node_keys: dict[str, str] = field(default_factory=dict)  # path -> node key (default: path)
    mtimes: dict[str, float] = field(default_factory=dict)   # optional file mtimes (epoch s)
    now: datetime | None = None     # the search clock (None = real time)

    def node_key(self, path: str) -> str:
        return self.node_keys.get(path, path)

    def block_key(self, path: str, start_line: int, end_line: int) -> str | None:
        """The gold unit a block's lines contain (the first one), or None."""
        lines = self.line_keys.get(path)
        if not lines:
            return None
        for line in range(start_line, end_line + 1):
            key = lines.get(line)
            if key is not None:
                return key
        return None

    def fingerprint(self) -> str:
        digest = hashlib.sha256()
        for path in sorted(self.files):
            digest.update(path.encode())
            digest.update(b"\0")
            digest.update(self.files[path].encode())
            digest.update(b"\0")
            digest.update(repr(self.mtimes.get(path)).encode())
        digest.update(repr(self.now).encode())
        return digest.hexdigest()[:16]


@dataclass
class Dataset:
    """A named set of vaults plus what each query kind / category is for."""

    name: str
    vaults: list[VaultSpec]
    kinds: dict[str, str] = field(default_factory=dict)   # kind -> what it exercises
    levels: tuple[str, ...] = ("node",)                    # "node" and/or "block"
    level_names: dict[str, str] = field(default_factory=lambda: {"node": "note", "block": "block"})
    notes: list[str] = field(default_factory=list)          # caveats for the report

    @property
    def n_queries(self) -> int:
        return sum(len(v.queries) for v in self.vaults)

    @property
    def n_files(self) -> int:
        return sum(1 for v in self.vaults for p in v.files if p.endswith(".md"))


def keyed_lines(text: str, pattern: re.Pattern[str]) -> dict[int, str]:
    """1-based file line -> first capture of `pattern` on that line."""
    out: dict[int, str] = {}
    for number, line in enumerate(text.split("\n"), start=1):
        match = pattern.search(line)
        if match:
            out[number] = match.group(1)
    return out


def round_robin(queries: list[Query], limit: int | None) -> list[Query]:
    """At most `limit` queries, taken round-robin over kinds, so a quick run sees every kind."""
    if limit is None:
        return list(queries)
    by_kind: dict[str, list[Query]] = {}
    for q in queries:
        by_kind.setdefault(q.kind, []).append(q)
    picked: list[Query] = []
    while len(picked) < limit and any(by_kind.values()):
        for kind in by_kind:
            if by_kind[kind] and len(picked) < limit:
                picked.append(by_kind[kind].pop(0))
    return picked


def slugify(text: str, limit: int = 60) -> str:
    """Kebab-case slug, any script kept (DESIGN §2), at most `limit` chars."""
    slug = re.sub(r"[^\w]+", "-", text.lower()).strip("-")
    return slug[:limit].strip("-") or "note"


Loader = Callable[..., Dataset]
