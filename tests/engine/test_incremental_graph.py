"""The graph after incremental runs must equal a graph rebuilt from scratch (PERF-3).

New, deleted and re-aliased notes change where *other* notes' links resolve (a new note can
resolve a dangling link, make a unique name ambiguous, win over an alias or a merge
redirect, or carry one). Random edit
sequences over colliding names, aliases, folder notes and uploads check that re-resolving
only the sources found through the link-key index gives exactly the full rebuild.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from reme_agent.config import Settings
from reme_agent.engine.indexer import Indexer
from reme_agent.engine.projections.graph import GraphProjection
from reme_agent.engine.projections.keyword import KeywordProjection
from reme_agent.vault import Vault, open_vault

HASH = Settings(embedder={"name": "hash"}, index={"progress": False})
NAMES = ["alpha", "Beta", "gamma", "café", "delta", "x.md"]   # x.md -> a file x.md.md
FOLDERS = ["", "a/", "b/", "alpha/", "a/b/"]
TARGETS = NAMES + ["a/alpha", "b/Beta.md", "./gamma", "../delta", "alpha/alpha", "nothing",
                   "img.png", "res/img.png", "Alias One", "alias two", "zeta", "Old Name",
                   "old/café", "gone/nothing.md", "../", "alpha/.", "a/b/..", "x.md",
                   "../alpha", "./Café.md", "alpha/"]
MERGED = ["Old Name", "alias two", "Beta"]


def graph_of(g: GraphProjection) -> tuple[list, list]:
    state = g.export_state()
    nodes = state["nodes"]
    edges = sorted((nodes[s], nodes[t], tuple(map(str, p))) for s, t, p in state["edges"])
    return sorted(zip(nodes, state["dangling"], strict=True)), edges


def rebuilt(v: Vault) -> tuple[list, list]:
    ref = Indexer(v.store, v.state, v.vector, KeywordProjection(), GraphProjection())
    ref._rebuild_graph(v.state.files())
    return graph_of(ref.graph)


def random_note(rng: random.Random) -> str:
    lines = []
    head = []
    if rng.random() < 0.4:
        aliases = rng.sample(["Alias One", "alias two", "alpha", "Beta"], rng.randint(1, 2))
        head.append(f"aliases: [{', '.join(aliases)}]")
    if rng.random() < 0.3:   # merge redirects: old paths and names resolve here, last
        old = rng.choice(["gone/nothing.md", "a/alpha.md", "old/café/café.md", "zeta.md"])
        head.append(f"merged_from: [{{path: {old}, title: {rng.choice(MERGED)}}}]")
    if head:
        lines += ["---", *head, "---"]
    lines.append(f"# note {rng.randint(0, 999)}")
    for _ in range(rng.randint(0, 4)):
        pred = rng.choice(["", "", "related:: "])
        lines.append(f"{pred}see [[{rng.choice(TARGETS)}]]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_incremental_graph_equals_a_full_rebuild(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    root = tmp_path / "v"
    root.mkdir()
    v = open_vault(root, HASH)
    try:
        v.index()
        notes: set[str] = set()
        for step in range(30):
            touched: list[str] = []
            for _ in range(rng.randint(1, 3)):
                roll = rng.random()
                if roll < 0.5 or not notes:
                    rel = f"{rng.choice(FOLDERS)}{rng.choice(NAMES)}.md"
                    (root / rel).parent.mkdir(parents=True, exist_ok=True)
                    (root / rel).write_text(random_note(rng), encoding="utf-8")
                    notes.add(rel)
                elif roll < 0.75:
                    rel = rng.choice(sorted(notes))
                    (root / rel).unlink()
                    notes.discard(rel)
                elif roll < 0.9:
                    rel = rng.choice(["img.png", "res/img.png"])
                    path = root / rel
                    path.parent.mkdir(parents=True, exist_ok=True)
                    if path.exists():
                        path.unlink()
                    else:
                        path.write_bytes(b"\x89PNG\r\n")
                else:
                    rel = rng.choice(sorted(notes))
                    (root / rel).write_text(random_note(rng), encoding="utf-8")
                touched.append(rel)
            if step % 4 == 3:
                # a whole-vault run sees notes only; uploads are named explicitly by tools
                v.refresh([t for t in touched if not t.endswith(".md")])
                v.index()
            else:
                v.refresh(touched)
            assert graph_of(v.graph) == rebuilt(v), f"step {step}: {touched}"
    finally:
        v.close()


def test_a_new_note_resolves_dangling_links_and_breaks_a_unique_name(tmp_path: Path) -> None:
    root = tmp_path / "v"
    (root / "a").mkdir(parents=True)
    (root / "a/alpha.md").write_text("# A\n", encoding="utf-8")
    (root / "src.md").write_text("[[alpha]] [[beta]]\n", encoding="utf-8")
    v = open_vault(root, HASH)
    try:
        v.index()
        assert [t for t, _ in v.graph.outbound("src.md")] == ["a/alpha.md", "beta"]
        (root / "beta.md").write_text("# B\n", encoding="utf-8")
        (root / "b").mkdir()
        (root / "b/alpha.md").write_text("# other alpha\n", encoding="utf-8")
        v.refresh(["beta.md", "b/alpha.md"])
        # beta now resolves; alpha became ambiguous, so it dangles
        assert [t for t, _ in v.graph.outbound("src.md")] == ["alpha", "beta.md"]
        assert v.graph.is_dangling("alpha") and not v.graph.is_dangling("beta.md")
        assert "beta" not in v.graph  # the dangling node nothing links to is gone
    finally:
        v.close()
