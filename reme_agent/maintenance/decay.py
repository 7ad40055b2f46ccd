"""Step 3, decay and archive: topo-temporal score -> meta/recency.json, meta/archived.json.

DESIGN §3 (status machine), §8, §9; seed "拓扑与时间联合遗忘算法":

    Score = I · e^(−λ·Δt) + α · log(1 + in-degree)

I = frontmatter `importance` (1–10, default 5); Δt = days since the note's last activity:
the latest of its last read (meta/access_log.json), its frontmatter `updated` (or `created`)
and, with `decay_use_mtime`, its file mtime; in-degree = distinct live notes linking to it
(an archived note's links are suspended, `recall.archive`: it keeps nothing warm, while a
live note newly linking to an archived one does count, and may thaw it).
Every note outside meta/ and audit/ is scored; only streaming notes are archived.

Archiving (never a delete):
- A streaming note scoring under `archive_threshold` with `status: distilled` gets
  `status: archived` (the one forward step the DESIGN §3 machine allows; `updated` is not
  bumped, the maintainer's write is not activity) and is listed in meta/archived.json, which
  recall uses to hide it.
- An `active` note (or one without a status) is never archived, however cold: it has not
  been distilled yet, and archiving it would skip a step and could bury knowledge nobody
  extracted. It is reported as `stale_active` instead, for the distiller.
- Thaw: a listed note that was touched (read, edited, or newly linked) scores above the
  threshold on the next run, leaves `archived` and joins `thawed` in archived.json, so
  search returns it again. Its frontmatter keeps `status: archived` (the machine never
  moves back); `thawed` tells recall to treat it as live (it stays there while it stays
  warm), and a later cold spell lists it again without another write. A note a person
  archived by hand (never listed) is never thawed: recall hides it as its status says.
- The maintainer's own status write changes the file's mtime; archived.json remembers the
  stamp it left (`state`), and while the file still has that stamp its mtime is ignored in
  favour of the activity recorded at archive time, so the write does not thaw the note.
- `--move-archived` moves archived notes to `archive/<original path>` (inbound links
  rewritten in the same transaction); a thawed note under archive/ moves back. A daily
  workspace moves whole: its materials (the other files of its folder, `daily_attach`'s)
  go with its summary note, in the same transaction, so none is left behind in `daily/`.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from reme_agent.engine.fmedit import edit_frontmatter
from reme_agent.engine.parser import split_note
from reme_agent.engine.retarget import plan_moves
from reme_agent.engine.stop import stop_reason
from reme_agent.engine.transaction import Transaction
from reme_agent.engine.view import VaultView
from reme_agent.errors import ReMeError
from reme_agent.maintenance.access import rename_entries
from reme_agent.maintenance.report import StepResult
from reme_agent.recall.archive import archived_in
from reme_agent.recall.signals import ArchivedSignal, RecencySignal, iso_utc, parse_moment
from reme_agent.schema.frontmatter import status_move_error
from reme_agent.schema.layout import (
    AUDIT,
    META,
    RESOURCE,
    is_record,
    layer_of,
    workspace_materials,
)

if TYPE_CHECKING:
    from reme_agent.vault import Vault

log = logging.getLogger("reme_agent.maintenance")

__all__ = ["DecayParams", "decay_score", "run_decay"]



def decay_score(importance: float, days: float, in_degree: int, lam: float, alpha: float) -> float:
    """Score = I·e^(−λ·Δt) + α·log(1 + in-degree); Δt and in-degree are clamped at 0."""
    return importance * math.exp(-lam * max(0.0, days)) + alpha * math.log1p(max(0, in_degree))


def importance_of(frontmatter: dict[str, Any]) -> int:
    value = frontmatter.get("importance", 5)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 1 <= value <= 10:
        return 5
    return int(value)


@dataclass(frozen=True)
class DecayParams:
    lam: float
    alpha: float
    threshold: float
    use_mtime: bool = True
    archive_dir: str = "archive"


def _fm_time(frontmatter: dict[str, Any]) -> datetime | None:
    times = [t for t in (parse_moment(frontmatter.get("updated")),
                         parse_moment(frontmatter.get("created"))) if t is not None]
    return max(times) if times else None


def run_decay(vault: Vault, view: VaultView, *, now: datetime, params: DecayParams,
              last_read: dict[str, datetime], move_archived: bool = False,
              dry_run: bool = False, stop: threading.Event | None = None) -> StepResult:
    """Score every note, archive/thaw streaming notes, write recency.json + archived.json.

    `stop` set: no further status edit or move starts; the signals are still written, for
    what was done."""
    result = StepResult("decay", dry_run=dry_run)
    prev = vault.signals.get("archived")
    prev_list = set(prev.archived) if isinstance(prev, ArchivedSignal) else set()
    prev_state: dict[str, dict[str, str]] = {}
    if isinstance(prev, ArchivedSignal):
        raw = getattr(prev, "state", None) or (prev.model_extra or {}).get("state") or {}
        prev_state = {p: v for p, v in raw.items() if isinstance(v, dict)}

    prev_thawed = set(prev.thawed) if isinstance(prev, ArchivedSignal) else set()
    # archived notes' links keep nothing warm (the status as the files say it now)
    suspended = archived_in(prev, {p: r.frontmatter for p, r in view.notes.items()
                                   if isinstance(r.frontmatter, dict)})
    scores: dict[str, float] = {}
    activity: dict[str, datetime] = {}
    for path, row in sorted(view.notes.items()):
        if layer_of(path) in (META, AUDIT):
            continue
        fm = row.frontmatter if isinstance(row.frontmatter, dict) else {}
        times = [t for t in (last_read.get(path), _fm_time(fm)) if t is not None]
        kept = prev_state.get(path)
        # Untouched since the maintainer archived it: its own write is not activity.
        recorded = (parse_moment(kept.get("activity"))
                    if kept is not None and kept.get("stamp") == row.stamp else None)
        if recorded is not None:
            times.append(recorded)
        elif params.use_mtime or not times:
            times.append(datetime.fromtimestamp(row.mtime_ns / 1e9).astimezone())
        last = max(times)
        activity[path] = last
        days = (now - last).total_seconds() / 86400.0
        in_degree = vault.graph.in_degree(path, skip=suspended)
        scores[path] = round(decay_score(importance_of(fm), days, in_degree,
                                         params.lam, params.alpha), 6)

    streaming = sum(1 for p in scores if view.notes[p].frontmatter.get("lifecycle") == "streaming")
    archived: set[str] = set()
    to_archive: list[str] = []
    stale_active: list[dict[str, Any]] = []
    thawed: list[str] = []
    live: set[str] = set()   # archived in frontmatter, warm, thawed by the maintainer
    for path, score in scores.items():
        fm = view.notes[path].frontmatter
        if fm.get("lifecycle") != "streaming":
            continue
        status = fm.get("status") or "active"
        if score < params.threshold:
            if status == "archived":
                archived.add(path)
            elif status == "distilled":
                to_archive.append(path)
            else:
                stale_active.append({"path": path, "score": score, "status": status})
        else:
            if path in prev_list:
                thawed.append(path)
            if status == "archived" and (path in prev_list or path in prev_thawed):
                live.add(path)

    state: dict[str, dict[str, str]] = {p: prev_state[p] for p in archived
                                        if p in prev_state and
                                        prev_state[p].get("stamp") == view.notes[p].stamp}
    for path in sorted(archived):
        state.setdefault(path, {"stamp": view.notes[path].stamp,
                                "activity": iso_utc(activity[path])})

    # -- archive: status distilled -> archived (one CAS frontmatter edit per note) ----------
    for path in to_archive:
        if why := stop_reason(stop):
            result.stopped = why
            break
        action = {"action": "archive", "path": path, "score": scores[path]}
        if dry_run:
            result.actions.append(action)
            archived.add(path)
            continue
        try:
            stamp = _set_status(vault, path, "archived")
        except ReMeError as exc:
            result.warnings.append(f"could not archive {path}: {exc}")
            continue
        archived.add(path)
        state[path] = {"stamp": stamp, "activity": iso_utc(activity[path])}
        result.actions.append(action)
        result.changed.append(path)
    if result.changed:
        vault.try_refresh(list(result.changed))  # one index run for all the status edits
    for path in thawed:
        result.actions.append({"action": "thaw", "path": path, "score": scores.get(path)})

    # -- optional moves: archived -> archive/<path>; thawed under archive/ -> back ----------
    prefix = params.archive_dir.strip("/") + "/"
    moves: dict[str, str] = {}
    if move_archived:
        moves.update({p: prefix + p for p in sorted(archived) if not p.startswith(prefix)})
    moves.update({p: p[len(prefix):] for p in thawed if p.startswith(prefix)})
    carried: set[str] = set()
    for src, dst in moves.items():
        if why := stop_reason(stop):
            result.stopped = why
            break
        if src in carried:
            continue   # moved with its workspace
        files = _materials_moving(vault, src, dst, prefix)
        carried.update(files)
        action: dict[str, Any] = {"action": "move", "from": src, "to": dst}
        if files:
            action["with"] = sorted(files)
        if dry_run:
            result.actions.append(action)
            for old, new in {src: dst, **files}.items():
                _rename(old, new, archived, state, scores, live)
            continue
        try:
            written = move_note(vault, src, dst, with_files=files)
        except ReMeError as exc:
            result.warnings.append(f"could not move {src} -> {dst}: {exc}")
            continue
        for old, new in {src: dst, **files}.items():
            _rename(old, new, archived, state, scores, live)
        if dst in state:
            state[dst]["stamp"] = vault.store.stamp(dst) or state[dst]["stamp"]
        action["links_rewritten_in"] = sorted(p for p in written if p not in (src, dst))
        result.actions.append(action)
        result.changed += [p for p in written if p not in result.changed]

    recency = RecencySignal(scores=dict(sorted(scores.items())))
    listed = ArchivedSignal(threshold=params.threshold, archived=sorted(archived),
                            thawed=sorted(live), state=dict(sorted(state.items())))
    result.found = {
        "scored": len(scores),
        "streaming": streaming,
        "archived": len(archived),
        "newly_archived": sum(1 for a in result.actions if a["action"] == "archive"),
        "thawed": thawed,
        "stale_active": stale_active,
        "below_threshold": sum(1 for s in scores.values() if s < params.threshold),
    }
    if not dry_run:
        vault.signals.write_signal("recency", recency)
        vault.signals.write_signal("archived", listed)
        result.changed += ["meta/recency.json", "meta/archived.json"]
    return result


def _rename(src: str, dst: str, archived: set[str], state: dict[str, dict[str, str]],
            scores: dict[str, float], live: set[str]) -> None:
    for names in (archived, live):
        if src in names:
            names.discard(src)
            names.add(dst)
    if src in state:
        state[dst] = state.pop(src)
    if src in scores:
        scores[dst] = scores.pop(src)


def _set_status(vault: Vault, path: str, status: str) -> str:
    """CAS frontmatter edit (body kept byte for byte); returns the new stamp."""
    def edit(text: str) -> str:
        parts = split_note(text, path)
        why = status_move_error(parts.frontmatter.get("status"), status)
        if why:
            raise ReMeError(f"Refused status change of {path!r}: {why}.")
        return edit_frontmatter(text, {"status": status}, path=path)  # only the status line

    done = vault.store.cas_edit(path, edit)
    assert done.stamp is not None
    return done.stamp


def _materials_moving(vault: Vault, src: str, dst: str, prefix: str) -> dict[str, str]:
    """A workspace's materials, old path -> new: the folder of `src` becomes `dst`'s."""
    folder = src.rsplit("/", 1)[0]
    found = workspace_materials(src, vault.store.list(folder) if vault.store.is_dir(folder)
                                else [], under=prefix)
    to = dst.rsplit("/", 1)[0]
    return {p: to + p[len(folder):] for p in found}


def move_note(vault: Vault, src: str, dst: str,
              immutable: Callable[[str], bool] | None = None, *,
              with_files: dict[str, str] | None = None) -> list[str]:
    """Move one note (and `with_files`, old path -> new, e.g. its workspace's materials) and
    rewrite every link the move changes, all or nothing (DESIGN §5)."""
    path_map = {src: dst, **(with_files or {})}

    _, written = Transaction.run(vault.store, lambda tx: plan_moves(
        tx, vault.view(), path_map, skip=is_record,
        immutable=immutable or (lambda p: layer_of(p) == RESOURCE)))
    vault.try_refresh(written)
    rename_entries(vault, path_map)
    return written
