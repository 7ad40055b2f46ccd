"""The node-level pipeline: filters, degradation, grouping, expansion, access log, faces."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

import pytest
from click.testing import CliRunner

from reme_agent.errors import InvalidArgument
from reme_agent.recall.search import SearchResponse, search, search_blocks
from tests.recall.conftest import SETTINGS, VaultFactory, days_ago, note, write_meta

QUERY = "platypus venom spurs"
HIT = "Platypus venom spurs are found on the hind legs of males."
FILLER = "Unrelated gardening remarks about tomatoes, compost and watering cans."


def _paths(response: SearchResponse) -> list[str]:
    return [n.path for n in response.results]


# -- filters ----------------------------------------------------------------------------


def test_archived_nodes_are_hidden_by_default_and_shown_on_request(
        make_vault: VaultFactory) -> None:
    cold, warm = "knowledge/cold/cold.md", "knowledge/warm/warm.md"
    vault = make_vault({cold: note(HIT), warm: note(HIT + " Also in zoos.")})
    assert cold in _paths(search(vault, QUERY, log_access=False))
    write_meta(vault, "archived", {"threshold": 1.0, "archived": [cold]})
    assert cold not in _paths(search(vault, QUERY, log_access=False))
    assert warm in _paths(search(vault, QUERY, log_access=False))
    assert cold in _paths(search(vault, QUERY, include_archived=True, log_access=False))


def test_meta_and_audit_notes_are_never_hits_unless_asked_for(make_vault: VaultFactory) -> None:
    vault = make_vault({"audit/2024-05-01/health.md": note(HIT),
                        "meta/notes.md": note(HIT),
                        "knowledge/p/p.md": note(HIT)})
    assert _paths(search(vault, QUERY, log_access=False)) == ["knowledge/p/p.md"]
    assert _paths(search(vault, QUERY, prefix="audit/", log_access=False)) == [
        "audit/2024-05-01/health.md"]
    assert _paths(search(vault, QUERY, layers=["audit"], log_access=False)) == [
        "audit/2024-05-01/health.md"]


def test_prefix_and_layer_filters(make_vault: VaultFactory) -> None:
    vault = make_vault({"knowledge/a/a.md": note(HIT), "daily/2024-05-01/b/b.md": note(HIT),
                        "resource/c/c.md": note(HIT)})
    assert _paths(search(vault, QUERY, prefix="daily/", log_access=False)) == [
        "daily/2024-05-01/b/b.md"]
    assert set(_paths(search(vault, QUERY, layers=["knowledge", "resource"],
                             log_access=False))) == {"knowledge/a/a.md", "resource/c/c.md"}
    with pytest.raises(InvalidArgument):
        search(vault, QUERY, layers=["digest"])


def test_query_rewrite_replaces_the_query_on_the_vector_side_only(
        make_vault: VaultFactory) -> None:
    vault = make_vault({"knowledge/p/p.md": note(HIT), "knowledge/g/g.md": note(FILLER)})
    vec = SETTINGS.search.model_copy(update={"vector_weight": 1.0})
    bm25 = SETTINGS.search.model_copy(update={"vector_weight": 0.0})
    top = search(vault, "zzqx wobble", query_rewrite=QUERY, options=vec, log_access=False)
    assert _paths(top)[0] == "knowledge/p/p.md"
    assert _paths(search(vault, "zzqx wobble", query_rewrite=QUERY, options=bm25,
                         log_access=False)) == []


def test_bad_arguments_are_refused(make_vault: VaultFactory) -> None:
    vault = make_vault({"knowledge/p/p.md": note(HIT)})
    for kwargs in ({"expand_depth": 4}, {"expand_depth": -1}, {"top_chunks_per_path": 0},
                   {"limit": 0}):
        with pytest.raises(InvalidArgument):
            search(vault, QUERY, **kwargs)
    with pytest.raises(InvalidArgument):
        search(vault, "  ")


# -- degradation ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["communities", "archived", "access_log", "recency"])
@pytest.mark.parametrize("content", ["{torn", json.dumps({"version": 9, "computed_at":
                                                          "2024-01-01T00:00:00Z"})])
def test_unusable_meta_files_degrade_with_one_warning(make_vault: VaultFactory,
                                                      caplog: pytest.LogCaptureFixture,
                                                      name: str, content: str) -> None:
    vault = make_vault({"knowledge/p/p.md": note(HIT)})
    (vault.root / "meta").mkdir(exist_ok=True)
    (vault.root / "meta" / f"{name}.json").write_text(content, encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="reme_agent.recall"):
        first = search(vault, QUERY, log_access=False)
        second = search(vault, QUERY, log_access=False)
    assert _paths(first) == _paths(second) == ["knowledge/p/p.md"]
    assert first.results[0].factors["community"] == 1.0
    assert len(second.warnings) == 1 and f"meta/{name}.json" in second.warnings[0]
    assert second.signals_freshness[name] is None
    assert sum(f"{name}.json" in r.getMessage() for r in caplog.records) == 1
    assert "[warning]" in second.render()


def test_freshness_is_reported_and_old_signals_warn(make_vault: VaultFactory) -> None:
    vault = make_vault({"knowledge/p/p.md": note(HIT)})
    write_meta(vault, "communities", {"communities": {"knowledge/p/p.md": 1}},
               computed_at=days_ago(15))
    write_meta(vault, "archived", {"archived": []}, computed_at=days_ago(1))
    response = search(vault, QUERY, log_access=False)
    fresh = response.signals_freshness
    assert fresh["communities"].startswith(days_ago(15).date().isoformat())
    assert fresh["archived"].startswith(days_ago(1).date().isoformat())
    assert fresh["recency"] is None
    assert len(response.warnings) == 1 and "communities.json" in response.warnings[0]
    assert "15 days ago" in response.warnings[0]


# -- grouping ---------------------------------------------------------------------------


def test_grouping_caps_chunks_per_node_and_surfaces_the_node(make_vault: VaultFactory) -> None:
    body = "\n\n".join(f"Platypus venom spurs, paragraph {i}." for i in range(6))
    vault = make_vault({
        "knowledge/platypus/platypus.md": note(body, title="Platypus facts",
                                               description="What we know about platypuses."),
        "knowledge/other/other.md": note(HIT),
        "knowledge/plain/plain.md": note("# Plain heading\n\n" + HIT)})
    response = search(vault, QUERY, log_access=False)
    paths = _paths(response)
    assert len(paths) == len(set(paths))
    node = response.results[paths.index("knowledge/platypus/platypus.md")]
    assert node.title == "Platypus facts"
    assert node.description == "What we know about platypuses."
    assert len(node.chunks) == 2
    assert node.score >= node.chunks[0].score >= node.chunks[1].score  # decayed sum of blocks
    assert all(c.start_line <= c.end_line for c in node.chunks)
    assert response.results[paths.index("knowledge/plain/plain.md")].title == "Plain heading"
    three = search(vault, QUERY, top_chunks_per_path=3, log_access=False)
    assert max(len(n.chunks) for n in three.results) == 3
    assert [n.score for n in response.results] == sorted(
        (n.score for n in response.results), reverse=True)
    assert len(search(vault, QUERY, limit=1, log_access=False).results) == 1


# -- expansion --------------------------------------------------------------------------


def _chain_vault(make_vault: VaultFactory):
    notes = {"knowledge/a/a.md": note(HIT + "\n\nuses:: [[knowledge/b/b.md]]"),
             "knowledge/b/b.md": note(FILLER + " [[knowledge/c/c.md]]", title="Bee"),
             "knowledge/c/c.md": note(FILLER + " [[knowledge/d/d.md]]"),
             "knowledge/d/d.md": note(FILLER),
             "knowledge/z/z.md": note(FILLER + "\n\ncites:: [[knowledge/a/a.md]]")}
    return make_vault(notes)


def test_expansion_respects_depth(make_vault: VaultFactory) -> None:
    vault = _chain_vault(make_vault)
    one = search(vault, QUERY, limit=1, expand_depth=1, log_access=False)
    assert _paths(one) == ["knowledge/a/a.md"]
    rows = {e["path"]: e for e in one.expansion}
    assert set(rows) == {"knowledge/b/b.md", "knowledge/z/z.md"}
    assert rows["knowledge/b/b.md"] == {
        "path": "knowledge/b/b.md", "title": "Bee", "predicate": "uses", "direction": "out",
        "depth": 1, "via": "knowledge/a/a.md", "seed": "knowledge/a/a.md"}
    assert rows["knowledge/z/z.md"]["direction"] == "in"
    assert rows["knowledge/z/z.md"]["predicate"] == "cites"
    two = search(vault, QUERY, limit=1, expand_depth=2, log_access=False)
    assert {e["path"]: e["depth"] for e in two.expansion}["knowledge/c/c.md"] == 2
    three = search(vault, QUERY, limit=1, expand_depth=3, log_access=False)
    assert {e["path"] for e in three.expansion} == {"knowledge/b/b.md", "knowledge/z/z.md",
                                                   "knowledge/c/c.md", "knowledge/d/d.md"}
    assert search(vault, QUERY, limit=1, expand_depth=0, log_access=False).expansion == []
    text = three.render()
    assert "[expansion] 1 inbound, 3 outbound" in text
    assert "(depth 3, via knowledge/c/c.md)" in text


def test_expansion_respects_budgets_and_skips_results_and_archived(
        make_vault: VaultFactory) -> None:
    spokes = [f"knowledge/s{i:02d}/s{i:02d}.md" for i in range(15)]
    notes = {"knowledge/hub/hub.md": note(HIT + " " + " ".join(f"[[{s}]]" for s in spokes))}
    notes.update({s: note(FILLER) for s in spokes})
    vault = make_vault(notes)
    opts = SETTINGS.search.model_copy(update={"max_links_per_direction": 10,
                                              "expand_path_budget": 30})
    full = search(vault, QUERY, limit=1, options=opts, log_access=False)
    assert len(full.expansion) == 10                        # per direction per hop
    small = search(vault, QUERY, limit=1, log_access=False,
                   options=opts.model_copy(update={"expand_path_budget": 4}))
    assert len(small.expansion) == 4
    write_meta(vault, "archived", {"archived": spokes[:12]})
    rest = search(vault, QUERY, limit=1, options=opts, log_access=False)
    assert {e["path"] for e in rest.expansion} == set(spokes[12:])
    shown = search(vault, QUERY, limit=1, options=opts, include_archived=True, log_access=False)
    assert len(shown.expansion) == 10
    many = search(vault, QUERY, limit=5, options=opts, log_access=False)
    assert not {e["path"] for e in many.expansion} & set(_paths(many))


# -- access log -------------------------------------------------------------------------


def test_searches_log_one_hit_per_node_per_day(make_vault: VaultFactory) -> None:
    vault = make_vault({"knowledge/p/p.md": note(HIT), "knowledge/q/q.md": note(HIT)})
    for _ in range(20):
        search(vault, QUERY)
    search(vault, QUERY, log_access=False)
    vault.access_log.flush()
    data = json.loads((vault.root / "meta" / "access_log.json").read_text(encoding="utf-8"))
    today = datetime.now(UTC).date().isoformat()
    assert data["version"] == 1
    for path in ("knowledge/p/p.md", "knowledge/q/q.md"):
        assert data["entries"][path]["hit_days"] == [today]
        assert data["entries"][path]["hits_30d"] == 1
    assert vault.signals.freshness()["access_log"] is not None


def test_search_writes_nothing_but_the_access_log(make_vault: VaultFactory) -> None:
    vault = make_vault({"knowledge/p/p.md": note(HIT)})
    before = {p for p in vault.store.list()}
    search(vault, QUERY, expand_depth=2)
    vault.access_log.flush()
    assert {p for p in vault.store.list()} - before == {"meta/access_log.json"}


def test_a_broken_access_log_never_fails_a_search(make_vault: VaultFactory,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    vault = make_vault({"knowledge/p/p.md": note(HIT)})

    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("buffer on fire")

    monkeypatch.setattr(vault.access_log, "record", boom)
    assert _paths(search(vault, QUERY)) == ["knowledge/p/p.md"]


# -- faces ------------------------------------------------------------------------------


def test_render_follows_the_seed_layout(make_vault: VaultFactory) -> None:
    vault = _chain_vault(make_vault)
    text = search(vault, QUERY, limit=1, log_access=False).render()
    lines = text.splitlines()
    assert lines[0] == "========== knowledge/a/a.md =========="
    assert lines[1].startswith("[node] ")
    assert lines[2].startswith("[score=") and "centrality=" in lines[2] and "recency=" in lines[2]
    assert any(line.startswith("---------- chunk @1-") for line in lines)
    assert "→ knowledge/b/b.md  Bee  [uses]" in text
    assert "← knowledge/z/z.md" in text
    assert "No results" in search(vault, "zzqx", options=SETTINGS.search.model_copy(
        update={"vector_weight": 0.0}), log_access=False).render()


def test_as_dict_is_json_and_carries_every_field(make_vault: VaultFactory) -> None:
    vault = _chain_vault(make_vault)
    data = json.loads(json.dumps(search(vault, QUERY, log_access=False).as_dict()))
    assert set(data) == {"query", "results", "expansion", "signals_freshness", "warnings",
                         "index_freshness"}
    node = data["results"][0]
    assert set(node) == {"path", "title", "description", "score", "factors", "chunks",
                         "match", "weak"}
    assert set(node["chunks"][0]) == {"block_id", "start_line", "end_line", "text", "score"}


def test_baseline_search_blocks_still_works(make_vault: VaultFactory) -> None:
    vault = make_vault({"knowledge/p/p.md": note(HIT)})
    hits = search_blocks(vault, QUERY, 3)
    assert hits[0].path == "knowledge/p/p.md" and hits[0].score == hits[0].base


def test_cli_search_exposes_the_pipeline(make_vault: VaultFactory) -> None:
    from reme_agent.cli import cli

    vault = _chain_vault(make_vault)
    write_meta(vault, "archived", {"archived": ["knowledge/a/a.md"]})
    vault.close()
    runner = CliRunner()
    env = {"REME_EMBEDDER__NAME": "hash"}
    args = ["search", QUERY, "--vault", str(vault.root), "--json", "--limit", "2"]
    out = runner.invoke(cli, args, env=env)
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert "knowledge/a/a.md" not in [r["path"] for r in data["results"]]
    out = runner.invoke(cli, [*args[:-1], "1", "--include-archived", "--expand-depth", "2",
                              "--top-chunks-per-path", "1", "--fusion", "rrf",
                              "--vector-weight", "0.5"], env=env)
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    first = data["results"][0]
    assert first["path"] == "knowledge/a/a.md" and len(first["chunks"]) == 1
    assert set(first["factors"]) == {"base", "centrality", "community", "recency", "layer"}
    assert max(e["depth"] for e in data["expansion"]) == 2
    text = runner.invoke(cli, ["search", QUERY, "--vault", str(vault.root), "--path-prefix",
                               "knowledge/b"], env=env)
    # b holds nothing about the query: the floor says so instead of padding (DESIGN §7)
    assert text.exit_code == 0 and text.output.startswith("No good match")
    assert "knowledge/b/b.md" in text.output
    log = json.loads((vault.root / "meta" / "access_log.json").read_text(encoding="utf-8"))
    assert "knowledge/a/a.md" in log["entries"]


def test_node_score_adds_decayed_scores_of_its_other_blocks() -> None:
    from reme_agent.recall.group import _node_score

    assert _node_score([1.0, 0.5, 0.5], 0.0) == 1.0
    assert _node_score([1.0, 0.5, 0.5], 0.3) == pytest.approx(1.0 + 0.15 + 0.045)
