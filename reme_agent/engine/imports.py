"""Cheaper imports of two third-party packages on the cold-start path (G6).

Both skip work that only checks the package's own code, never anything of ours:

- ``unchecked_overrides``: chromadb decorates ~40 methods with ``overrides.override``, which
  at import time disassembles the calling frame to find the base classes and compares type
  signatures (``dis``, ``inspect``, ``typing``): about a fifth of ``import chromadb``. While
  chromadb is imported the decorator only marks the method (what ``EnforceOverrides``
  looks for); the checks come back afterwards for anyone else. Since the embedded store is
  opened through the Rust bindings (``projections/chroma_rust.py``), only the full client
  (a chroma server, the fallback) still imports chromadb.
- ``without_pkg_resources``: jieba imports the deprecated ``pkg_resources`` (~0.1 s) only to
  open its own data files, and falls back to plain ``open`` when it cannot.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator
from typing import Any

__all__ = ["unchecked_overrides", "without_pkg_resources"]


@contextlib.contextmanager
def unchecked_overrides() -> Iterator[None]:
    """``@override`` marks without checking while the block runs (see the module doc)."""
    try:
        module = importlib.import_module("overrides.overrides")  # the module, not the function
    except ImportError:  # another chromadb without the dependency: nothing to skip
        yield
        return
    real = getattr(module, "_overrides", None)
    if real is None:
        yield
        return

    def mark(method: Any, check_signature: bool, check_at_runtime: bool) -> Any:
        method.__override__ = True
        return method

    module._overrides = mark
    try:
        yield
    finally:
        module._overrides = real


@contextlib.contextmanager
def without_pkg_resources() -> Iterator[None]:
    """Make ``import pkg_resources`` fail while the block runs, if nobody loaded it yet."""
    if "pkg_resources" in sys.modules:
        yield
        return
    sys.modules["pkg_resources"] = None  # type: ignore[assignment]  # import -> ImportError
    try:
        yield
    finally:
        if sys.modules.get("pkg_resources", 0) is None:
            del sys.modules["pkg_resources"]
