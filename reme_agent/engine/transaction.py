"""Multi-file changes, all or nothing, also across a crash (DESIGN §5, multi-file operations).

A `Transaction` is planned against stamped reads (`read`, `write`, `create`, `move`,
`delete`) and committed in one go: every stamp it read is checked first (a change anywhere
discards the whole plan, and `Transaction.run` redoes it from fresh reads, at most 3 times),
then an intent journal is written, then the files, then the journal is removed. `move`
(the tool), merge, split and the archive move all commit through it.

The journal, `.reme/journal/<id>.json` (version 1), is written to a temp file, fsynced and
renamed into place *before any vault file is touched*. It holds, in the order they are
applied (creates, rewrites, moves, deletes), one step per file:

    {"op": "create", "path", "new": base64, "new_stamp"}
    {"op": "write",  "path", "old": base64, "old_stamp", "new": base64, "new_stamp"}
    {"op": "move",   "path", "dst", "stamp"}            # the bytes moved (after any write)
    {"op": "delete", "path", "old": base64, "old_stamp"}

plus `"state": "prepared" | "committed"`. The committing process holds an exclusive `flock`
on `.reme/journal/<id>.lock` for as long as it works; a journal whose lock can be taken
belongs to a dead process. `recover(store)` rolls such journals; the vault runs it when it
is opened (`open_vault`), before an index run and before every commit (the next write).

Roll forward or back — the rule at each phase of a commit killed there:
- before the journal is in place: nothing was touched; a stale temp file is ignored;
- journal "prepared", some steps applied: **back**. Every applied step is undone from the
  journal (old bytes restored, created files removed, moved files moved back, deleted files
  recreated), newest first. Back is the safe direction here: the files to undo are the ones
  this change itself wrote, seconds ago; going forward would write files a person may have
  edited since the plan was checked;
- every step applied (whether or not "committed" was written yet): **forward** — the change
  is complete, so the journal is simply removed;
- journal "committed" (written only after the last step): **forward**, as above.
A step is undone only while its file still has the bytes the change left there (its stamp);
a file someone edited after the crash is left alone and reported, and the journal is then
kept as `<id>.unresolved.json` for a person. A journal is removed only after its roll.
Rolling is idempotent: a recoverer killed half-way is rolled again by the next opener.

`REME_TX_KILL_AT=<k>` (test seam, read at every step) SIGKILLs the process at the k-th
checkpoint of this process, so a test can kill a commit or a recovery at every step.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as _dt
import fcntl
import json
import logging
import os
import signal
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from reme_agent.engine.cas import MAX_REDOS, redo_on_stamp_change
from reme_agent.engine.locks import flock_until

# The store's own helpers: one way to fsync a folder and to turn text into bytes.
from reme_agent.engine.store import (
    FileStore,
    _bytes,
    _fsync_dir,
    decode_text,
    encode_like,
    stamp_of,
)
from reme_agent.errors import NoteExists, StampChanged

log = logging.getLogger("reme_agent.engine")

__all__ = ["JOURNAL_DIR", "KILL_ENV", "Recovery", "Transaction", "checkpoints", "recover"]

JOURNAL_DIR = "journal"
KILL_ENV = "REME_TX_KILL_AT"
_VERSION = 1
_ORDER = {"create": 0, "write": 1, "move": 2, "delete": 3}

T = TypeVar("T")


# -- the kill seam -----------------------------------------------------------------------------
_passed = 0


def checkpoints() -> int:
    """Checkpoints this process has passed (commits and recoveries)."""
    return _passed


def _checkpoint() -> None:
    """A step boundary; with REME_TX_KILL_AT=k the k-th one kills the process (tests only)."""
    global _passed
    _passed += 1
    if os.environ.get(KILL_ENV) == str(_passed):
        os.kill(os.getpid(), signal.SIGKILL)


# -- planning ----------------------------------------------------------------------------------
@dataclass
class _Seen:
    old: bytes | None     # None: the file did not exist when planned
    stamp: str | None


class Transaction:
    """A planned multi-file change: reads are stamped; commit checks all, writes all, or none."""

    def __init__(self, store: FileStore) -> None:
        self.store = store
        self._seen: dict[str, _Seen] = {}
        self._ops: dict[str, tuple[str, bytes | None]] = {}   # path -> (kind, new bytes)
        self._moves: dict[str, str] = {}                      # src -> dst

    @classmethod
    def run(cls, store: FileStore, build: Callable[[Transaction], T],
            max_redos: int = MAX_REDOS) -> tuple[T, list[str]]:
        """Plan with `build(tx)` and commit; a file changing under the plan discards it and
        plans again from fresh reads (at most `max_redos` times, then `StampChanged`).
        Returns what `build` returned and the paths the commit changed."""
        def attempt(redo: int) -> tuple[T, list[str]]:
            tx = cls(store)
            planned = build(tx)
            return planned, tx.commit()

        return redo_on_stamp_change(attempt, max_redos)

    def read_bytes(self, path: str) -> bytes:
        """The file's bytes as the plan sees them (its pending new bytes if already planned)."""
        op = self._ops.get(path)
        if op is not None and op[1] is not None:
            return op[1]
        seen = self._seen.get(path)
        if seen is None:
            data = self.store.read_bytes(path)
            seen = self._seen[path] = _Seen(data, stamp_of(data))
        if seen.old is None:
            raise NoteExists(path)  # pragma: no cover - a planned create was read back
        return seen.old

    def read(self, path: str) -> str:
        """The file's text as the plan sees it (its pending new text if already planned)."""
        return decode_text(self.read_bytes(path), path)

    def stamp(self, path: str) -> str | None:
        seen = self._seen.get(path)
        return seen.stamp if seen else None

    def write(self, path: str, text: str | bytes) -> None:
        """Replace a file the plan has read."""
        if path not in self._seen:
            raise ValueError(f"plan error: {path!r} written before it was read")
        old = self._seen[path].old
        self._ops[path] = ("create" if old is None else "write", encode_like(text, old))

    def create(self, path: str, text: str | bytes) -> None:
        """Create a new file (refused at commit if it appeared meanwhile)."""
        self._absent(path)
        self._ops[path] = ("create", _bytes(text))

    def delete(self, path: str) -> None:
        if path not in self._seen:
            self.read_bytes(path)
        self._ops[path] = ("delete", None)

    def move(self, src: str, dst: str) -> None:
        """Rename `src` (with its planned new text, if any) to the free path `dst`."""
        if src not in self._seen:
            self.read_bytes(src)
        self._absent(dst)
        self._moves[src] = dst

    def _absent(self, path: str) -> None:
        if path in self._seen and self._seen[path].old is not None:
            raise NoteExists(path)
        if path not in self._seen and self.store.resolve(path).exists():
            raise NoteExists(path)
        self._seen[path] = _Seen(None, None)

    @property
    def planned(self) -> dict[str, str]:
        """path -> 'create' | 'write' | 'delete' | 'move' (a move's target: 'create')."""
        out = {p: kind for p, (kind, _) in self._ops.items()}
        for src, dst in self._moves.items():
            out[src], out[dst] = "move", "create"
        return out

    def new_text(self, path: str) -> str | None:
        op = self._ops.get(path)
        return decode_text(op[1], path) if op and op[1] is not None else None

    def old_text(self, path: str) -> str | None:
        seen = self._seen.get(path)
        return decode_text(seen.old, path) if seen and seen.old is not None else None

    # -- committing --------------------------------------------------------------------------
    def check(self) -> None:
        """Every file the plan read still has its stamp (and new files are still absent)."""
        for path, seen in self._seen.items():
            current = self.store.stamp(path)
            if current != seen.stamp:
                raise StampChanged(path, seen.stamp or "absent", current)

    def steps(self) -> list[dict[str, Any]]:
        """The journal's steps, in the order they are applied."""
        out: list[dict[str, Any]] = []
        for path, (kind, data) in sorted(self._ops.items(), key=lambda i: _ORDER[i[1][0]]):
            seen = self._seen[path]
            step: dict[str, Any] = {"op": kind, "path": path}
            if kind in ("write", "delete"):
                assert seen.old is not None
                step |= {"old": _b64(seen.old), "old_stamp": seen.stamp}
            if kind in ("create", "write"):
                assert data is not None
                step |= {"new": _b64(data), "new_stamp": stamp_of(data)}
            out.append(step)
        writes = [s for s in out if s["op"] in ("create", "write")]
        for src, dst in self._moves.items():
            op = self._ops.get(src)
            moved = stamp_of(op[1]) if op and op[1] is not None else self._seen[src].stamp
            writes.append({"op": "move", "path": src, "dst": dst, "stamp": moved})
        return writes + [s for s in out if s["op"] == "delete"]

    def commit(self) -> list[str]:
        """Check every stamp, journal the plan, apply it; on a failure undo, then raise."""
        recover(self.store)  # the next writer finishes what a killed one left
        self.check()
        steps = self.steps()
        if not steps:
            return []
        _checkpoint()
        with _Journal.begin(self.store, steps) as journal:
            applied = 0
            try:
                for step in steps:
                    _apply(self.store, step)
                    applied += 1
                    _checkpoint()
                journal.mark_committed()
            except BaseException:
                # What was written is restored byte for byte; if even that fails, the
                # journal stays and the next opener rolls it back.
                if not _undo(self.store, steps[:applied]):
                    journal.keep()
                raise
        return _paths(steps)


def _paths(steps: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for step in steps:
        out += [step["path"]] + ([step["dst"]] if step["op"] == "move" else [])
    return list(dict.fromkeys(out))


# -- applying and undoing one step ------------------------------------------------------------
def _apply(store: FileStore, step: dict[str, Any]) -> None:
    op, path = step["op"], step["path"]
    if op == "create":
        store.create(path, _unb64(step["new"]))
    elif op == "write":
        store.write_if_unchanged(path, _unb64(step["new"]), step["old_stamp"])
    elif op == "move":
        current = store.stamp(path)
        if current != step["stamp"]:
            raise StampChanged(path, step["stamp"], current)
        store.move(path, step["dst"])   # refuses an existing target (NoteExists)
    else:
        store.delete(path, stamp=step["old_stamp"])


def _state(store: FileStore, step: dict[str, Any]) -> str:
    """'old', 'new' or 'foreign' (someone else's bytes): where this step's file stands."""
    op, path = step["op"], step["path"]
    current = store.stamp(path)
    if op == "create":
        return "old" if current is None else "new" if current == step["new_stamp"] else "foreign"
    if op == "write":
        return {step["old_stamp"]: "old", step["new_stamp"]: "new"}.get(current, "foreign")
    if op == "delete":
        return "new" if current is None else "old" if current == step["old_stamp"] else "foreign"
    moved = store.stamp(step["dst"])
    if current == step["stamp"] and moved is None:
        return "old"
    return "new" if current is None and moved == step["stamp"] else "foreign"


def _undo(store: FileStore, steps: list[dict[str, Any]]) -> bool:
    """Put every applied step back to its old state, newest first; False if one could not be.

    Steps are applied in order, so a step past the last one found in its new state was
    never applied: a file there with other bytes was edited by someone else afterwards and
    is no business of this roll. Before it, other bytes are a real conflict (reported).
    """
    states = [_state(store, s) for s in steps]
    last = max((i for i, st in enumerate(states) if st == "new"), default=-1)
    clean = True
    for i in range(len(steps) - 1, -1, -1):
        step, state = steps[i], states[i]
        try:
            if state == "new":
                _revert(store, step)
            elif state == "foreign" and i < last:
                clean = False
                log.error("left %s as it is: it changed after the interrupted change wrote "
                          "it (step %s)", step["path"], step["op"])
        except Exception as exc:  # keep undoing the rest; the journal names what is left
            clean = False
            log.error("could not undo %s of %s: %s", step["op"], step["path"], exc)
        _checkpoint()
    return clean


def _revert(store: FileStore, step: dict[str, Any]) -> None:
    op, path = step["op"], step["path"]
    if op == "create":
        store.delete(path, stamp=step["new_stamp"])
    elif op == "write":
        store.write_if_unchanged(path, _unb64(step["old"]), step["new_stamp"])
    elif op == "move":
        store.move(step["dst"], path)
    else:
        store.create(path, _unb64(step["old"]))


# -- the journal ------------------------------------------------------------------------------
def _folder(store: FileStore) -> Path:
    return store.internal / JOURNAL_DIR


@dataclass
class _Journal:
    store: FileStore
    path: Path
    lock_fd: int
    data: dict[str, Any] = field(repr=False)
    kept: bool = False

    @classmethod
    @contextlib.contextmanager
    def begin(cls, store: FileStore, steps: list[dict[str, Any]]) -> Iterator[_Journal]:
        """Lock, then write the journal durably; on leaving, remove it (unless kept)."""
        folder = _folder(store)
        folder.mkdir(parents=True, exist_ok=True)
        jid = f"{_dt.datetime.now(_dt.UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:12]}"
        fd = os.open(folder / f"{jid}.lock", os.O_CREAT | os.O_RDWR, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)   # taken before the journal is visible to recoverers
        journal = cls(store, folder / f"{jid}.json", fd,
                      {"version": _VERSION, "id": jid, "state": "prepared", "steps": steps})
        try:
            journal._save()
            yield journal
        finally:
            if not journal.kept:
                journal.path.unlink(missing_ok=True)
                _fsync_dir(folder)
            _release(folder / f"{jid}.lock", fd, remove=not journal.kept)
        _checkpoint()

    def _save(self) -> None:
        self.store.write_internal(f"{JOURNAL_DIR}/{self.path.name}", json.dumps(self.data).encode())
        _checkpoint()

    def mark_committed(self) -> None:
        self.data["state"] = "committed"
        self._save()

    def keep(self) -> None:
        self.kept = True


def _release(lock: Path, fd: int, *, remove: bool) -> None:
    if remove:
        lock.unlink(missing_ok=True)
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)



# -- recovery ---------------------------------------------------------------------------------
@dataclass
class Recovery:
    """What `recover` did with one journal left by a killed process."""

    id: str
    action: str            # "rolled back", "rolled forward" or "unresolved"
    paths: list[str]


def recover(store: FileStore) -> list[Recovery]:
    """Roll every journal a dead process left (see the module docstring); never two at once.

    A journal whose lock is held belongs to a live commit and is left alone.
    """
    folder = _folder(store)
    try:
        names = sorted(n for n in os.listdir(folder)
                       if n.endswith(".json") and not n.endswith(".unresolved.json")
                       and not n.startswith("."))
    except FileNotFoundError:
        return []
    out: list[Recovery] = []
    for name in names:
        journal = folder / name
        lock = journal.with_suffix(".lock")
        try:
            fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o644)
        except OSError as exc:  # a read-only vault: nothing can be rolled from here
            log.warning("cannot roll %s: %s", journal.name, exc)
            continue
        if not flock_until(fd, 0):
            os.close(fd)
            continue  # a live commit (or another recoverer) holds it
        done = None
        try:
            if journal.exists():   # another recoverer may have finished it meanwhile
                done = _roll(store, journal)
                out.append(done)
        except OSError:
            raise   # the disk said no: the journal stays, the next opener tries again
        except Exception as exc:  # a journal this code cannot read must not lock the vault
            log.error("journal %s could not be rolled (%s); kept for a person", name, exc)
            journal.rename(journal.with_suffix(".unresolved.json"))
        finally:
            _release(lock, fd, remove=done is None or done.action != "unresolved")
    return out


def _roll(store: FileStore, journal: Path) -> Recovery:
    try:
        data = json.loads(journal.read_bytes())
        steps: list[dict[str, Any]] = data["steps"]
        jid = str(data.get("id", journal.stem))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.error("unreadable journal %s (%s); kept for a person", journal.name, exc)
        journal.rename(journal.with_suffix(".unresolved.json"))
        return Recovery(journal.stem, "unresolved", [])
    paths = _paths(steps)
    states = [_state(store, s) for s in steps]
    if data.get("state") == "committed" or all(s == "new" for s in states):
        action, clean = "rolled forward", all(s == "new" for s in states)
        if not clean:
            log.error("journal %s: the change was complete, but files changed since: %s",
                      jid, [s["path"] for s, st in zip(steps, states, strict=True) if st != "new"])
    else:
        action, clean = "rolled back", _undo(store, steps)
    if not clean and action == "rolled back":
        journal.rename(journal.with_suffix(".unresolved.json"))
        log.error("journal %s could not be rolled back cleanly; kept as %s", jid,
                  journal.with_suffix(".unresolved.json").name)
        return Recovery(jid, "unresolved", paths)
    journal.unlink()
    _fsync_dir(journal.parent)
    _checkpoint()
    shown = ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
    log.warning("an interrupted change (journal %s) was %s: %s", jid, action, shown)
    return Recovery(jid, action, paths)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"))

