"""`reme-agent bench`: the scale benchmark (bench/bench_suite.py) from the command line.

The suite lives in the source checkout's `bench/` folder next to its vault generator (it is
not part of the wheel), so this command loads it by path; from an installed wheel it says
where to get it instead of failing with an import error. Loaded from `reme_agent/cli.py`
through its list of command modules.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import click

from reme_agent.cli import _Ctx, cli, json_option
from reme_agent.errors import ConfigError

SUITE = Path(__file__).resolve().parents[1] / "bench" / "bench_suite.py"


def load_suite(path: Path = SUITE) -> ModuleType:
    """bench/bench_suite.py as a module (bench/ is a folder of scripts, not a package)."""
    if not path.is_file():
        raise ConfigError(f"The benchmark suite is not at {path}.",
                          "It ships with the source checkout: run `reme-agent bench` from a "
                          "clone of the repository (pip install -e .).")
    spec = importlib.util.spec_from_file_location("reme_bench_suite", path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"Cannot load the benchmark suite from {path}.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


@cli.command("bench")
@click.option("--notes", type=click.IntRange(10, None), default=1000, show_default=True,
              help="Notes in the generated vault (~5.5 blocks each).")
@click.option("--embedder", type=click.Choice(["hash", "use", "e5"]), default="hash",
              show_default=True, help="hash is fast (lexical); use is the default model.")
@click.option("--queries", type=click.IntRange(5, None), default=100, show_default=True,
              help="Search queries timed per search mode.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for the generated vault (default bench/out).")
@click.option("--keep", is_flag=True, help="Keep the generated vault afterwards.")
@click.option("--profile", is_flag=True, help="Add cProfile top entries (index, search, traverse).")
@click.option("--skip", "skip", multiple=True, type=click.Choice(["maintain", "autolink"]),
              help="Leave out a slow step (repeatable), e.g. at 100k notes.")
@json_option
@click.pass_obj
def bench(obj: _Ctx, notes: int, embedder: str, queries: int, out: Path | None, keep: bool,
          profile: bool, skip: tuple[str, ...], as_json: bool) -> None:
    """Benchmark indexing, search, traverse, maintain and memory on a generated vault.

    \b
    Example:
      reme-agent bench --notes 10000
      reme-agent bench --notes 100000 --skip maintain --skip autolink
      reme-agent bench --notes 2000 --embedder use --json
    """
    suite = load_suite()
    result = suite.run_suite(notes, embedder, n_queries=queries, out=out, keep=keep,
                             profile=profile, skip=frozenset(skip),
                             echo=lambda s: click.echo(s, err=True))
    if as_json or obj.as_json:
        import json

        click.echo(json.dumps(result.as_dict(), ensure_ascii=False, indent=1, default=str))
    else:
        click.echo(suite.render(result))
