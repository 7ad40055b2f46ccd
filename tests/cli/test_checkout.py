"""`bench/` and `evals/` come from the source checkout, never from site-packages."""

from __future__ import annotations

import sys
import tomllib
import types
from pathlib import Path

import pytest

from reme_agent.cli.checkout import ROOT, load_package
from reme_agent.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def test_the_checkout_is_this_repository() -> None:
    assert ROOT == REPO and (ROOT / "evals" / "__init__.py").is_file()


def test_evals_load_from_the_checkout_and_work_there() -> None:
    evals = load_package("evals", what="eval suite", command="eval")
    from evals.harness import WORK_DIR
    from evals.report import RESULTS_DIR

    assert Path(evals.__file__).resolve() == REPO / "evals" / "__init__.py"
    assert WORK_DIR == REPO / "evals" / "work" and RESULTS_DIR == REPO / "evals" / "results"
    assert "site-packages" not in str(WORK_DIR)


def test_the_eval_command_offers_the_datasets_the_evals_know() -> None:
    from evals.run import DATASETS
    from reme_agent.cli import evals as eval_cli

    assert eval_cli.DATASETS == DATASETS


def test_a_missing_folder_is_a_config_error_naming_it(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "evals_copy", raising=False)
    with pytest.raises(ConfigError, match="eval suite is not at .*ships with the source checkout"):
        load_package("evals_copy", what="eval suite", command="eval", root=tmp_path)


def test_another_module_of_the_same_name_is_refused(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    other = types.ModuleType("evals")
    other.__file__ = str(tmp_path / "evals" / "__init__.py")
    monkeypatch.setitem(sys.modules, "evals", other)
    with pytest.raises(ConfigError, match="Another module named 'evals'"):
        load_package("evals", what="eval suite", command="eval")


def test_only_reme_agent_is_installed() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert config["tool"]["setuptools"]["packages"]["find"]["include"] == ["reme_agent*"]


def test_a_same_named_package_outside_a_checkout_is_not_loaded(tmp_path: Path) -> None:
    """Installed from a wheel, ROOT is site-packages, where `evals` may be another project's."""
    (tmp_path / "evals_other").mkdir()
    (tmp_path / "evals_other" / "__init__.py").write_text("raise RuntimeError('not ours')\n")
    with pytest.raises(ConfigError, match="ships with the source checkout"):
        load_package("evals_other", what="eval suite", command="eval", root=tmp_path)
