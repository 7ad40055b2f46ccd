"""The public API: `from reme_agent import ...` (README, docs and examples import these)."""

from __future__ import annotations

import subprocess
import sys

import reme_agent

PUBLIC = ["AutoLinker", "MemoryMiddleware", "ReMeError", "Settings", "Vault", "__version__",
          "arun_distiller", "arun_synchronizer", "build_server", "build_toolkit", "errors",
          "load_settings", "open_vault", "run_distiller", "run_maintainer", "run_synchronizer",
          "search", "start_followup_worker"]


def test_all_is_pinned_and_every_name_resolves() -> None:
    assert reme_agent.__all__ == PUBLIC
    for name in PUBLIC:
        assert getattr(reme_agent, name) is not None, name


def test_exports_are_the_implementations_not_copies() -> None:
    from reme_agent.errors import ReMeError
    from reme_agent.jobs.distiller import run_distiller
    from reme_agent.toolkit.agentscope import build_toolkit
    from reme_agent.vault import open_vault

    assert reme_agent.open_vault is open_vault and reme_agent.run_distiller is run_distiller
    assert reme_agent.build_toolkit is build_toolkit and reme_agent.ReMeError is ReMeError
    assert reme_agent.errors.ReMeError is ReMeError


def test_an_unknown_name_is_an_attribute_error() -> None:
    import pytest

    with pytest.raises(AttributeError, match="no_such_name"):
        reme_agent.no_such_name  # noqa: B018


def test_importing_the_package_loads_no_heavy_dependency() -> None:
    code = ("import sys, reme_agent; reme_agent.__all__; "
            "print(sorted(m for m in ('agentscope', 'chromadb', 'numpy', 'mcp') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
