"""Architecture rules of DESIGN §1 / STYLE §1, checked on the source with `ast`.

The whole layer order is the import-linter contract in pyproject.toml (`lint-imports`, run by
`make test`), which ignores type-only imports; these tests keep what it cannot say: the rules
below hold for `if TYPE_CHECKING:` imports too, the engine's vocabulary, and who writes files.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "reme_agent"


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def modules(sub: str) -> list[Path]:
    return sorted((PKG / sub).rglob("*.py"))


def test_the_engine_knows_nothing_above_it() -> None:
    for path in modules("engine"):
        above = {m for m in imports_of(path) if m.startswith("reme_agent.")
                 and not m.startswith(("reme_agent.engine", "reme_agent.errors"))}
        assert not above, f"{path.name} imports {above}"


def test_the_engine_knows_nothing_of_daily_or_knowledge() -> None:
    for path in modules("engine"):
        text = path.read_text(encoding="utf-8")
        for word in ('"daily', '"knowledge', "'daily", "'knowledge"):
            assert word not in text, f"{path.name} mentions {word}"


def test_jobs_never_touch_the_store_directly() -> None:
    for path in modules("jobs"):
        bad = {m for m in imports_of(path) if m.startswith("reme_agent.engine.store")}
        assert not bad, f"{path.name} imports {bad}"


def test_the_toolkit_never_imports_jobs() -> None:
    for path in modules("toolkit"):
        bad = {m for m in imports_of(path) if m.startswith("reme_agent.jobs")}
        assert not bad, f"{path.name} imports {bad}"


def test_only_the_store_opens_vault_files_for_writing() -> None:
    """No module but engine/store.py writes files with Path.write_text / write_bytes."""
    allowed = {PKG / "engine" / "store.py", PKG / "demo.py"}
    for path in sorted(PKG.rglob("*.py")):
        if path in allowed:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            receiver = node.func.value
            via_store = (isinstance(receiver, ast.Attribute) and receiver.attr == "store") or \
                (isinstance(receiver, ast.Name) and receiver.id == "store")
            if node.func.attr in ("write_text", "write_bytes") and not via_store:
                raise AssertionError(f"{path.relative_to(PKG)}:{node.lineno} writes a file "
                                     "outside engine/store.py")

