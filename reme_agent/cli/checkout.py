"""The repository's `bench/` and `evals/` folders, loaded by path for `reme-agent bench|eval`.

Neither is installed (the wheel holds `reme_agent` only): they belong to the source checkout,
next to their data, and write there (`bench/out`, `evals/work`, `evals/results`), never into
site-packages. From an installed wheel the folders are missing, and the commands say so with a
ConfigError instead of an ImportError.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from reme_agent.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
"""The checkout holding `reme_agent/` (with `pip install -e .`, the clone itself)."""


def _missing(what: str, path: Path, command: str) -> ConfigError:
    extra = "[evals]" if command == "eval" else ""
    return ConfigError(f"The {what} is not at {path}.",
                       f"It ships with the source checkout: run `reme-agent {command}` from a "
                       f"clone of the repository (pip install -e '.{extra}').")


def load_script(path: Path, name: str, *, what: str, command: str) -> ModuleType:
    """A standalone script (e.g. bench/bench_suite.py) as a module named `name`."""
    if not path.is_file():
        raise _missing(what, path, command)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"Cannot load the {what} from {path}.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def load_package(name: str, *, what: str, command: str, root: Path = ROOT) -> ModuleType:
    """The checkout's top-level package `name` (e.g. `evals`), importable afterwards by name."""
    init = root / name / "__init__.py"
    loaded = sys.modules.get(name)
    if loaded is not None:
        if Path(getattr(loaded, "__file__", "") or "").resolve() == init.resolve():
            return loaded
        raise ConfigError(f"Another module named {name!r} is already imported "
                          f"({getattr(loaded, '__file__', None)}), not the one at {init}.",
                          f"Run `reme-agent {command}` from the repository checkout.")
    if not (init.is_file() and (root / "pyproject.toml").is_file()):
        # beside an installed wheel, site-packages/<name> would be some other distribution's
        raise _missing(what, init.parent, command)
    spec = importlib.util.spec_from_file_location(name, init,
                                                  submodule_search_locations=[str(init.parent)])
    if spec is None or spec.loader is None:
        raise ConfigError(f"Cannot load the {what} from {init.parent}.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module
