"""The harness end to end on a tiny vault (hash embedder): known metrics, report, CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evals.ablations import NO_FACTORS, EvalConfig, standard_configs
from evals.datasets import Dataset, Query, VaultSpec, keyed_lines
from evals.harness import run_dataset
from evals.report import build_report, write_json

ANIMALS = {
    "zebra": ("The zebra has black and white stripes. (K1)", "It grazes on the savanna. (K2)"),
    "giraffe": ("The giraffe has a very long neck. (K3)", "It eats acacia leaves. (K4)"),
    "penguin": ("The penguin cannot fly but swims fast. (K5)", "It lives near the south pole. (K6)"),
    "camel": ("The camel stores fat in its hump. (K7)", "It crosses deserts for days. (K8)"),
    "owl": ("The owl hunts at night. (K9)", "It turns its head very far. (K10)"),
    "otter": ("The otter floats on its back. (K11)", "It cracks shells with stones. (K12)"),
    "koala": ("The koala sleeps most of the day. (K13)", "It only eats eucalyptus. (K14)"),
    "bison": ("The bison roams the prairie in herds. (K15)", "It weighs almost a tonne. (K16)"),
    "lynx": ("The lynx has tufted ears. (K17)", "It hunts hares in snowy forests. (K18)"),
    "heron": ("The heron wades in shallow water. (K19)", "It spears fish with its beak. (K20)"),
}
KEY = re.compile(r"\((K\d+)\)")


def tiny_dataset() -> Dataset:
    files, line_keys = {}, {}
    for name, (first, second) in ANIMALS.items():
        path = f"knowledge/{name}/{name}.md"
        files[path] = f"---\ntitle: {name.capitalize()}\n---\n{first}\n\n{second}\n"
        line_keys[path] = keyed_lines(files[path], KEY)
    queries = [
        # Hand-checked: only the zebra note says "stripes", and only its first block.
        Query("q1", "zebra stripes", frozenset({"knowledge/zebra/zebra.md"}), "found",
              relevant_blocks=frozenset({"K1"})),
        # Gold that cannot be returned (no such note): every metric is 0.
        Query("q2", "penguin", frozenset({"knowledge/none/none.md"}), "missing",
              relevant_blocks=frozenset({"K99"})),
    ]
    spec = VaultSpec("tiny", files, queries, line_keys)
    return Dataset("tiny", [spec], kinds={"found": "", "missing": ""}, levels=("node", "block"))


def test_tiny_vault_known_metrics(tmp_path: Path) -> None:
    configs = [
        EvalConfig("BM25 only", "text", {**NO_FACTORS, "vector_weight": 0.0}),
        EvalConfig("BM25 only (twin)", "text", {**NO_FACTORS, "vector_weight": 0.0}),
        EvalConfig("default search()", "default", {}, mode="nodes", expand_depth=1),
    ]
    run = run_dataset(tiny_dataset(), configs, embedder="hash", work_dir=tmp_path, progress=False)
    data = run.to_json()
    assert data["vaults"][0]["files"] == 10 and data["vaults"][0]["blocks"] == 20
    by_name = {c["name"]: c for c in data["configs"]}
    bm25 = by_name["BM25 only"]["levels"]
    assert bm25["node"]["mrr"]["mean"] == pytest.approx(0.5)
    assert bm25["node"]["p@5"]["mean"] == pytest.approx(0.1)
    assert bm25["node"]["hit@1"]["mean"] == pytest.approx(0.5)
    assert bm25["block"]["mrr"]["mean"] == pytest.approx(0.5)
    assert bm25["block"]["r@5"]["mean"] == pytest.approx(0.5)
    assert by_name["BM25 only (twin)"]["levels"] == bm25          # run once, reported twice
    found = run.results["default search()"].rows[0]
    assert found.node["mrr"] == 1.0 and found.block["mrr"] == 1.0
    assert by_name["BM25 only"]["kinds"]["missing"]["node"]["mrr"]["mean"] == 0.0
    assert by_name["default search()"]["latency_ms"]["p50"] > 0

    # A second run reuses the indexed vault (nothing re-embedded, same numbers).
    again = run_dataset(tiny_dataset(), configs[:1], embedder="hash", work_dir=tmp_path,
                        progress=False).to_json()
    assert again["vaults"][0]["reused"] is True
    assert again["configs"][0]["levels"] == bm25

    out = tmp_path / "results"
    written = write_json(data, out)
    assert json.loads(written.read_text())["dataset"] == "tiny"
    report = build_report(out)
    text = report.read_text()
    assert "## tiny (hash embedder)" in text and "**0.500**" in text
    assert (out / "tiny.hash.png").stat().st_size > 1000


def test_standard_grid_shape() -> None:
    from reme_agent.config import SearchSettings

    grid = standard_configs(SearchSettings())
    names = [c.name for c in grid]
    assert len(names) == len(set(names))
    assert {"BM25 only", "vector only", "rrf w=0.7", "default search()"} <= set(names)
    assert sum(c.group == "factors" for c in grid) >= 7
    assert any(c.mode == "nodes" and c.expand_depth for c in grid)


def test_eval_command_is_registered() -> None:
    from click.testing import CliRunner

    from reme_agent.cli import cli

    result = CliRunner().invoke(cli, ["eval", "--help"])
    assert result.exit_code == 0
    assert "--dataset" in result.output and "--embedder" in result.output
