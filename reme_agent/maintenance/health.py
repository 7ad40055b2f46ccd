"""Step 6, health: D1 dangling links, D3 overloaded nodes, D10 broken provenance -> health.md.

DESIGN §9 maintainer. Read-only over the notes; the report goes to
`audit/<date>/health.md` (appended once per distinct finding set per day, so a second run on
an unchanged vault adds nothing).

- D10 broken provenance: a link whose target names `daily/...` or `resource/...` and
  resolves to no file: the material a claim came from is gone (moved or deleted by hand).
- D1 dangling: every other link that resolves to no file. Links count as resolving when any
  file has that name (an image or a PDF is not dangling), as in `lint_dangling`.
- D3 overloaded: knowledge nodes over the split thresholds (`split.overloaded`).

Between maintenance runs, `queue_overloaded` checks the notes an `index` or `watch` run
changed: a knowledge note grown past a split threshold (by hand edits; the distiller checks
its own writes) gets a `split` item in the follow-up queue and a D3 line in today's health
report, in the same format.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from reme_agent.maintenance.followups import SPLIT, enqueue
from reme_agent.maintenance.report import StepResult
from reme_agent.maintenance.split import SplitParams, overload, overloaded
from reme_agent.schema.audit import append_audit, audit_path
from reme_agent.schema.layout import AUDIT, DAILY, KNOWLEDGE, META, RESOURCE, layer_of

if TYPE_CHECKING:
    from reme_agent.engine.view import VaultView
    from reme_agent.vault import Vault

__all__ = ["find_problems", "queue_overloaded", "run_health"]

_PROVENANCE = (f"{DAILY}/", f"{RESOURCE}/")


def _is_provenance(target: str) -> bool:
    t = target.strip().replace("\\", "/").lstrip("/")
    while t.startswith("./"):
        t = t[2:]
    return t.startswith(_PROVENANCE)


def find_problems(vault: Vault, view: VaultView, params: SplitParams) -> dict[str, list[Any]]:
    """{"D1": [...], "D3": [...], "D10": [...]} for the whole vault (meta/ and audit/ aside)."""
    d1: list[dict[str, Any]] = []
    d10: list[dict[str, Any]] = []
    for source, meta in sorted(view.notes.items()):
        if source.startswith((f"{META}/", f"{AUDIT}/")):
            continue
        for link in meta.links:
            if view.resolve(link, source) is not None:
                continue
            item = {"source": source, "line": link.line, "target": link.target,
                    "predicate": link.predicate}
            if ambiguous := view.resolver.ambiguous(link.target):
                item["ambiguous"] = ambiguous
            (d10 if _is_provenance(link.target) else d1).append(item)
    return {"D1": d1, "D3": overloaded(vault, view, params), "D10": d10}


def _render(problems: dict[str, list[Any]]) -> str:
    titles = {"D1": "D1 dangling links", "D3": "D3 overloaded nodes (split candidates)",
              "D10": "D10 broken provenance (links to missing daily/ or resource/ files)"}
    lines = []
    for key, items in problems.items():
        lines.append(f"### {titles[key]}: {len(items)}")
        for it in items[:200]:
            if key == "D3":
                lines.append(f"- `{it['path']}`: ~{it['tokens']} tokens, {it['blocks']} blocks")
            else:
                pred = f"{it['predicate']}:: " if it.get("predicate") else ""
                amb = f" (ambiguous: {', '.join(it['ambiguous'])})" if it.get("ambiguous") else ""
                lines.append(f"- `{it['source']}`:{it['line']} {pred}`[[{it['target']}]]`{amb}")
        if len(items) > 200:
            lines.append(f"- … {len(items) - 200} more")
        lines.append("")
    return "\n".join(lines).rstrip()


def run_health(vault: Vault, view: VaultView, *, params: SplitParams, now: datetime,
               dry_run: bool = False) -> StepResult:
    result = StepResult("health", dry_run=dry_run)
    local = now.astimezone()
    problems = find_problems(vault, view, params)
    result.found = {"D1": len(problems["D1"]), "D3": len(problems["D3"]),
                    "D10": len(problems["D10"]), "dangling": problems["D1"],
                    "overloaded": problems["D3"], "broken_provenance": problems["D10"]}
    sig = hashlib.sha1(json.dumps(problems, sort_keys=True, default=str).encode()).hexdigest()[:12]
    path = audit_path("health", local.date())
    if dry_run:
        return result
    if vault.store.exists(path) and f"<!-- sig:{sig} -->" in vault.store.read_text(path):
        return result  # the same findings are already in today's report
    append_audit(vault, "health", "health check", _render(problems) + f"\n\n<!-- sig:{sig} -->",
                 now=local)
    result.changed.append(path)
    result.actions.append({"action": "report", "path": path})
    return result


def queue_overloaded(vault: Vault, paths: Iterable[str], params: SplitParams, *, source: str,
                     now: datetime | None = None) -> list[dict[str, Any]]:
    """D3 on the indexed notes in `paths` (e.g. an index run's changed files): each knowledge
    note over a split threshold that has no pending split item gets one, and one health entry
    lists them. Returns {path, tokens, blocks} of the newly queued notes."""
    queued: list[dict[str, Any]] = []
    for path in dict.fromkeys(paths):
        if layer_of(path) != KNOWLEDGE or not path.lower().endswith(".md"):
            continue
        found = overload(vault, path, params)
        if found is None:
            continue
        got = enqueue(vault, SPLIT, path, f"overloaded (D3) after an edit: ~{found['tokens']} "
                      f"tokens, {found['blocks']} blocks", source=source,
                      tokens=found["tokens"], blocks=found["blocks"],
                      token_threshold=params.token_threshold,
                      block_threshold=params.block_threshold)
        if got is not None and got[1]:  # already pending: already reported
            queued.append(found)
    if queued:
        append_audit(vault, "health", f"overloaded after an edit (seen by {source})",
                     _render({"D3": queued}) + "\n\nQueued for a split (`reme-agent worker` "
                     "or `maintain` runs it when a model is configured).",
                     now=(now or datetime.now()).astimezone())
    return queued
