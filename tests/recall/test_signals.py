"""Signal loader: lazy, cached, mtime-invalidated, version-checked, freshness (DESIGN §7-§8)."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reme_agent.engine.store import FileStore
from reme_agent.recall.signals import (
    ArchivedSignal,
    CommunitiesSignal,
    SignalStore,
    load_signal_text,
)


def _write(root: Path, name: str, payload: dict, *, version: object = 1,
           computed_at: datetime | None = None) -> None:
    data = {"version": version,
            "computed_at": (computed_at or datetime.now(UTC)).isoformat(), **payload}
    (root / "meta").mkdir(exist_ok=True)
    (root / "meta" / f"{name}.json").write_text(json.dumps(data), encoding="utf-8")


@pytest.fixture
def signals(tmp_path: Path) -> SignalStore:
    return SignalStore(FileStore(tmp_path), max_age_days=14)


def test_missing_files_are_missing_signals_without_warnings(signals: SignalStore) -> None:
    assert signals.communities() is None
    assert signals.archived() is None
    assert signals.access_log() is None
    assert signals.recency() is None
    assert signals.warnings() == []
    assert signals.freshness() == {"communities": None, "access_log": None, "recency": None,
                                   "archived": None}


def test_signal_is_cached_until_the_file_changes(signals: SignalStore, tmp_path: Path) -> None:
    _write(tmp_path, "communities", {"communities": {"a.md": 1}})
    first = signals.communities()
    assert first == {"a.md": 1}
    assert signals.communities() is first          # cached view, no re-read
    _write(tmp_path, "communities", {"communities": {"a.md": 2, "b.md": 2}})
    assert signals.communities() == {"a.md": 2, "b.md": 2}
    (tmp_path / "meta" / "communities.json").unlink()
    assert signals.communities() is None


@pytest.mark.parametrize("content, why", [
    ("{not json", "malformed JSON"),
    (json.dumps([1, 2]), "not an object"),
    (json.dumps({"version": 2, "computed_at": "2024-01-01T00:00:00Z", "communities": {}}),
     "version 2"),
    (json.dumps({"computed_at": "2024-01-01T00:00:00Z", "communities": {}}), "version None"),
    (json.dumps({"version": 1, "communities": {}}), "no computed_at"),
    (json.dumps({"version": 1, "computed_at": "2024-01-01T00:00:00Z",
                 "communities": {"a.md": "x"}}), "bad value"),
])
def test_unusable_file_degrades_with_one_logged_warning(signals: SignalStore, tmp_path: Path,
                                                        caplog: pytest.LogCaptureFixture,
                                                        content: str, why: str) -> None:
    (tmp_path / "meta").mkdir()
    (tmp_path / "meta" / "communities.json").write_text(content, encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="reme_agent.recall"):
        for _ in range(3):
            assert signals.communities() is None
            warnings = signals.warnings()
            assert len(warnings) == 1 and why in warnings[0]
    logged = [r for r in caplog.records if "communities.json" in r.getMessage()]
    assert len(logged) == 1                         # once per file state, not per call
    assert signals.freshness()["communities"] is None
    _write(tmp_path, "communities", {"communities": {"a.md": 1}})
    assert signals.communities() == {"a.md": 1}
    assert signals.warnings() == []


def test_stale_signal_is_used_with_a_warning(signals: SignalStore, tmp_path: Path,
                                             caplog: pytest.LogCaptureFixture) -> None:
    old = datetime.now(UTC) - timedelta(days=20)
    _write(tmp_path, "archived", {"threshold": 1.0, "archived": ["x.md"]}, computed_at=old)
    with caplog.at_level(logging.WARNING, logger="reme_agent.recall"):
        assert signals.archived() == {"x.md"}
        assert any("20 days ago" in w for w in signals.warnings())
        signals.warnings()
    assert sum("archived.json" in r.getMessage() for r in caplog.records) == 1
    assert signals.freshness()["archived"].startswith(old.date().isoformat())


def test_fresh_signal_has_no_warning_and_reports_computed_at(signals: SignalStore,
                                                             tmp_path: Path) -> None:
    _write(tmp_path, "archived", {"archived": []},
           computed_at=datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC) - timedelta(days=0))
    assert signals.warnings() == []
    assert signals.freshness()["archived"] == "2030-01-02T03:04:05Z"


def test_an_old_access_log_is_not_called_stale(signals: SignalStore, tmp_path: Path) -> None:
    _write(tmp_path, "access_log", {"entries": {}},
           computed_at=datetime.now(UTC) - timedelta(days=100))
    assert signals.access_log() == {}
    assert signals.warnings() == []


def test_write_signal_round_trips_and_invalidates(signals: SignalStore, tmp_path: Path) -> None:
    signals.write_signal("communities", CommunitiesSignal(communities={"a.md": 3},
                                                          stats={"modularity": 0.4}))
    assert signals.communities() == {"a.md": 3}
    text = (tmp_path / "meta" / "communities.json").read_text(encoding="utf-8")
    model = load_signal_text("communities", text)
    assert model.version == 1 and text.count('"computed_at"') == 1 and '"Z"' not in text
    assert json.loads(text)["computed_at"].endswith("Z")
    signals.write_signal("communities", CommunitiesSignal(communities={"a.md": 4}))
    assert signals.communities() == {"a.md": 4}
    with pytest.raises(TypeError):
        signals.write_signal("communities", ArchivedSignal())


def test_unknown_extra_keys_are_kept(tmp_path: Path, signals: SignalStore) -> None:
    _write(tmp_path, "recency", {"scores": {"a.md": 0.5}, "note": "from a newer maintainer"})
    assert signals.recency() == {"a.md": 0.5}
    assert signals.get("recency").model_extra == {"note": "from a newer maintainer"}
