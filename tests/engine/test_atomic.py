"""engine/atomic.replaced: the old file or the new one, never half, and no temp left."""

from __future__ import annotations

from pathlib import Path

import pytest

from reme_agent.engine.atomic import replaced


def test_the_block_replaces_the_file_whole(tmp_path: Path) -> None:
    target = tmp_path / "settings.json"
    target.write_text("old\n", encoding="utf-8")
    with replaced(target, prefix=".t-", text=True, fsync=True) as fh:
        fh.write("new\n")
        assert target.read_text(encoding="utf-8") == "old\n", "not visible before the end"
    assert target.read_text(encoding="utf-8") == "new\n"
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]


def test_a_failure_inside_keeps_the_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "cache.bin"
    target.write_bytes(b"old")
    with pytest.raises(ValueError), replaced(target, prefix=".t-", suffix=".tmp") as fh:
        fh.write(b"half")
        raise ValueError("encoding failed")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["cache.bin"]

