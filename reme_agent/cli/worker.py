"""`reme-agent worker`: drain the vault's follow-up queue (DESIGN §9; `jobs/followups.py`).

A composition root: it reads Settings, builds the wiring (auto-link L1 always; split only
with a model, unless `--no-llm`) and runs `drain()` on the main thread, so Ctrl-C hands the
item in progress back to the queue. One line per item goes to stderr; the summary (or
`--json`) to stdout.
"""

from __future__ import annotations

import time

import click

from reme_agent.cli.context import Ctx, common, sigterm_stops


def echo_err(text: str) -> None:
    """A progress line on stderr (stdout stays the result)."""
    click.echo(f"worker: {text}", err=True)


def _status(c: Ctx) -> None:
    v = c.open()
    try:
        counts = v.queue.counts()
        failed = v.queue.items("failed")
    finally:
        v.close()
    data = {"counts": counts, "failed": [{"id": i.id, "kind": i.kind, "path": i.path,
                                          "attempts": i.attempts, "error": i.error}
                                         for i in failed]}
    lines = [f"{kind}: " + ", ".join(f"{n} {s}" for s, n in states.items())
             for kind, states in counts.items()] or ["the follow-up queue is empty"]
    lines += [f"  failed #{i.id} {i.kind} {i.path}: {i.error}" for i in failed]
    c.emit(data, "\n".join(lines))


@click.command("worker")
@common
@click.option("--once", is_flag=True, help="Drain what is pending now, then exit.")
@click.option("--seconds", type=click.FloatRange(0), default=0.0,
              help="Stop after this many seconds (0 = until Ctrl-C).")
@click.option("--interval", type=click.FloatRange(0.05), default=2.0, show_default=True,
              help="Seconds between looks at the queue when it is empty.")
@click.option("--no-llm", is_flag=True,
              help="Use no model: auto-link L1 without the judge; split items stay pending.")
@click.option("--retry-failed", is_flag=True, help="Put failed items back to pending first.")
@click.option("--status", is_flag=True, help="Show the queue (counts, failed items); run nothing.")
def worker(c: Ctx, once: bool, seconds: float, interval: float, no_llm: bool,
           retry_failed: bool, status: bool) -> None:
    """Run the follow-up jobs the distiller, split, merge, index and watch queued.

    Auto-link L1 items need no model; split items need one (configure model.*), else they
    stay pending and are reported as waiting. Several workers (and `watch --worker`,
    `maintain`) may run at once: each item runs in one of them. Exits 1 when an item failed.

    \b
    Example:
      reme-agent worker --vault ./vault --once
      reme-agent worker --vault ./vault              # until Ctrl-C
      reme-agent worker --status --json
    """
    if status:
        _status(c)
        return
    from reme_agent.jobs.followups import DrainReport, Wiring, drain

    v = c.open()
    total = DrainReport()
    try:
        if retry_failed:
            echo_err(f"{v.queue.retry_failed()} failed item(s) back to pending")
        wiring = Wiring(v, use_model=False if no_llm else None)
        for kind, why in wiring.waiting.items():
            echo_err(f"not running {kind} items: {why}")
        deadline = time.monotonic() + seconds if seconds else None
        try:
            with sigterm_stops():
                if not once:
                    echo_err(f"draining {v.root}; Ctrl-C to stop")
                while True:
                    total.add(drain(v, wiring, echo=echo_err))
                    left = None if deadline is None else deadline - time.monotonic()
                    if once or (left is not None and left <= 0):
                        break
                    time.sleep(interval if left is None else min(interval, left))
        except KeyboardInterrupt:
            pass  # Ctrl-C or SIGTERM: the item in progress went back to the queue
    finally:
        v.close()
    c.emit(total.as_dict(), total.render())
    if total.failed:
        raise click.exceptions.Exit(1)
