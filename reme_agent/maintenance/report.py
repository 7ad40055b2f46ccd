"""What a maintenance step found and did: one `StepResult` per step (DESIGN §9 maintainer).

The same object is printed by the CLI (`--json` or text), returned by the `Maintainer` API,
and rendered into the run's `audit/<date>/maintain.md` entry, so the three never disagree.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["STEPS", "StepResult"]

STEPS: tuple[str, ...] = ("access", "communities", "decay", "merge", "split", "health")
"""The maintenance steps, in the fixed order they run in."""

_SHOWN = 20  # list items rendered per key in the audit note; the JSON has them all


@dataclass
class StepResult:
    step: str
    found: dict[str, Any] = field(default_factory=dict)      # counts and what was detected
    actions: list[dict[str, Any]] = field(default_factory=list)  # done (or planned: dry run)
    changed: list[str] = field(default_factory=list)         # vault paths written or removed
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0                                     # wall clock
    cpu_seconds: float = 0.0                                 # this process's CPU time
    dry_run: bool = False
    skipped: str | None = None                               # why the step did not run
    stopped: str | None = None                               # why it ended before its end

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        """One line for the CLI."""
        if self.skipped:
            return f"{self.step}: skipped ({self.skipped})"
        counts = ", ".join(f"{k}={v}" for k, v in self.found.items()
                           if isinstance(v, int | float) and not isinstance(v, bool))
        verb = "would change" if self.dry_run else "changed"
        stopped = f"; stopped early ({self.stopped})" if self.stopped else ""
        return (f"{self.step}: {counts or 'nothing found'}; {len(self.actions)} action(s), "
                f"{verb} {len(self.changed)} file(s) in {self.seconds:.2f} s{stopped}")

    def markdown(self) -> str:
        """The body of this step's entry in audit/<date>/maintain.md."""
        lines = [f"- {self.summary()}"]
        for key, value in self.found.items():
            if isinstance(value, list) and value:
                lines.append(f"- {key} ({len(value)}):")
                lines += [f"  - {_short(v)}" for v in value[:_SHOWN]]
                if len(value) > _SHOWN:
                    lines.append(f"  - … {len(value) - _SHOWN} more")
        if self.actions:
            lines.append(f"- actions ({len(self.actions)}):")
            lines += [f"  - {_short(a)}" for a in self.actions[:_SHOWN]]
            if len(self.actions) > _SHOWN:
                lines.append(f"  - … {len(self.actions) - _SHOWN} more")
        lines += [f"- warning: {w}" for w in self.warnings]
        return "\n".join(lines)


def _short(value: Any, width: int = 300) -> str:
    """One listed value: a string as written, anything else as JSON in a code span, so a
    list of pairs (`[["a.md", "b.md", 0.9]]`) is not read back as a wikilink of the
    audit note (it made dangling links)."""
    if isinstance(value, str):
        return value if len(value) <= width else value[:width - 1] + "…"
    text = json.dumps(value, ensure_ascii=False, default=str)
    text = text if len(text) <= width else text[:width - 1] + "…"
    if "`" not in text:
        return f"`{text}`"
    ticks = "`" * (max(len(run) for run in re.findall(r"`+", text)) + 1)
    return f"{ticks} {text} {ticks}"
