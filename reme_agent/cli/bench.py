"""`reme-agent bench`: the scale benchmark (bench/bench_suite.py) from the command line.

The suite lives in the source checkout's `bench/` folder next to its vault generator (it is
not part of the wheel), so this command loads it by path (`cli/checkout.py`); from an
installed wheel it says where to get it instead of failing with an import error.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import click

from reme_agent.cli.checkout import ROOT, load_script
from reme_agent.cli.context import current, json_option

SUITE = ROOT / "bench" / "bench_suite.py"


def load_suite(path: Path = SUITE) -> ModuleType:
    """bench/bench_suite.py as a module (bench/ is a folder of scripts, not a package)."""
    return load_script(path, "reme_bench_suite", what="benchmark suite", command="bench")


@click.command("bench")
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
@click.option("--text", type=click.Choice(["real", "vocab"]), default="real", show_default=True,
              help="real: notes cut from LoCoMo + CMRC (adds a quality row); vocab: word lists.")
@click.option("--data", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder with the LoCoMo / CMRC files (default $REME_EVAL_DATA or "
                   "../shared/data).")
@json_option
def bench(notes: int, embedder: str, queries: int, out: Path | None, keep: bool,
          profile: bool, skip: tuple[str, ...], text: str, data: Path | None,
          as_json: bool) -> None:
    """Benchmark indexing, search, traverse, maintain and memory on a generated vault.

    \b
    Example:
      reme-agent bench --notes 10000
      reme-agent bench --notes 100000 --skip maintain --skip autolink
      reme-agent bench --notes 2000 --embedder use --json
      reme-agent bench --notes 1000 --text vocab     # no LoCoMo / CMRC files needed
    """
    from reme_agent.errors import ConfigError

    suite = load_suite()
    try:
        result = suite.run_suite(notes, embedder, n_queries=queries, out=out, keep=keep,
                                 profile=profile, skip=frozenset(skip), text=text, data=data,
                                 echo=lambda s: click.echo(s, err=True))
    except ConfigError as exc:  # the default real text needs the eval data: say the way out
        if text == "real" and exc.hint:
            exc.hint += " Or run `reme-agent bench --text vocab`, which needs no data files."
        raise
    if as_json or current().as_json:
        import json

        click.echo(json.dumps(result.as_dict(), ensure_ascii=False, indent=1, default=str))
    else:
        click.echo(suite.render(result))
