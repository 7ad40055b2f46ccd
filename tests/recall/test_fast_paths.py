"""The fast paths of a search (issue G6) give what the plain computation gives.

A generated vault (bench/generate.py: 160 linked bilingual notes, the hash embedder, a real
index) and queries of every kind the pipeline treats differently (keywords, titles, typos,
verbatim phrases, Chinese). Each optimisation is checked against a slow reference: the
candidates against the sequential algorithm on uncached chroma and SQLite reads, the
threaded vector side against the inline one, warm caches against cold ones, the answer's
JSON against `dataclasses.asdict`, grouping and link expansion against their
straightforward versions.
"""

from __future__ import annotations

import dataclasses
import random
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from itertools import zip_longest
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from reme_agent.engine.projections.vector_flat import FlatIndex
from reme_agent.engine.tokenize import tokenize
from reme_agent.recall import vector_side
from reme_agent.recall.candidates import BlockHit, hybrid_candidates
from reme_agent.recall.fusion import fuse
from reme_agent.recall.group import ChunkResult, NodeResult, catalog_for, group_by_node
from reme_agent.recall.names import index_for, max_edits, osa_distance
from reme_agent.recall.rows import rows_for
from reme_agent.recall.search import SearchResponse, _excluder, search
from reme_agent.recall.timings import Timings, collect, stage
from reme_agent.recall.vector_side import start_vector_side
from reme_agent.vault import Vault, open_vault
from tests.recall.conftest import SETTINGS

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from generate import generate_vault  # noqa: E402

NOTES = 160


@pytest.fixture(scope="module")
def gen_vault(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Vault]:
    from bench_search import add_signals

    root = tmp_path_factory.mktemp("fast") / "vault"
    paths = generate_vault(root, NOTES)
    add_signals(root, paths)
    vault = open_vault(root, SETTINGS, create=True)
    vault.index()
    yield vault
    vault.close()


def _queries(vault: Vault) -> list[str]:
    rng = random.Random(4)
    text = (vault.root / "knowledge/n000007/n000007.md").read_text(encoding="utf-8")
    sentence = next(line for line in text.splitlines() if line.count(" ") > 8)
    words = sentence.rstrip(".").split()
    return ["vector index latency", "检索向量融合", "Topic 12", "Topic 21",   # a title, a typo
            "主题 9", " ".join(words[2:8]), "who owns the memory budget",
            *(" ".join(rng.sample(words, 3)) for _ in range(4)), "nothing matches zzqx"]


# -- candidates ---------------------------------------------------------------------------


def _stored_vectors(vault: Vault, ids: list[str]) -> dict[str, np.ndarray]:
    got = vault.vector._col.get(ids=ids, include=["embeddings"])
    return {i: np.asarray(v, dtype=np.float32)
            for i, v in zip(got["ids"], got["embeddings"], strict=True)}


def reference_candidates(vault: Vault, query: str, *, candidates: int, overfetch: float,
                         allowed_path: Callable[[str], bool], extra_ids: list[str],
                         fusion: str = "blend", vector_weight: float = 0.3) -> list[BlockHit]:
    """The candidate stage as it ran before issue G6: sequential, no cache, one SQL read."""
    paths_of = vault.indexer.path_of_block

    def allowed_id(bid: str) -> bool:
        return allowed_path(paths_of(bid) or "")

    extra = [d for d in dict.fromkeys(extra_ids) if allowed_id(d)]
    qvec = vault.embedder.embed_query(query)
    vector_top = [(d, s) for d, s in vault.vector.query_embedding(qvec, int(candidates * overfetch))
                  if allowed_id(d)][:candidates]
    also = [d for d, _ in vector_top] + extra
    keyword_top, keyword_of = vault.keyword.top(tokenize(query), candidates, allowed_id, also)
    have = {d for d, _ in keyword_top}
    keyword_top += [(d, keyword_of.get(d, 0.0)) for d in extra if d not in have]
    have = {d for d, _ in vector_top}
    keyword_in = {d for d, _ in keyword_top}
    missing = [d for d, _ in keyword_top if d not in have]
    keyword_top += [(d, keyword_of.get(d, 0.0)) for d, _ in vector_top if d not in keyword_in]
    embs = _stored_vectors(vault, missing) if missing else {}
    vector_top += [(d, float(np.dot(embs[d], qvec))) for d in missing if d in embs]
    fused = fuse(fusion, vector_top, keyword_top, vector_weight)
    vec, kw = dict(vector_top), dict(keyword_top)
    rows = vault.state.blocks_by_id(fused)
    hits = [BlockHit(b, r.path, r.start_line, r.end_line, r.text, r.heading, s,
                     vec.get(b), kw.get(b)) for b, s in fused.items() if (r := rows.get(b))]
    hits.sort(key=lambda h: (-h.base, h.path, h.start_line))
    return hits


def _key(hits: list[BlockHit]) -> list[tuple[Any, ...]]:
    return [(h.block_id, h.path, h.start_line, h.end_line, h.text, h.base, h.vector, h.keyword)
            for h in hits]


@pytest.mark.parametrize("mode", ["off", "ann", "all"])
def test_candidates_equal_the_sequential_uncached_algorithm(gen_vault: Vault, mode: str) -> None:
    vault = gen_vault
    allowed = _excluder(vault, False, prefix=None, layers=None)
    rng = random.Random(1)
    all_ids = sorted(vault.keyword.doc_ids())
    for round_ in range(2):            # cold caches, then warm ones
        for q in _queries(vault):
            extra = rng.sample(all_ids, 6)
            side = start_vector_side(vault, q, 75, mode=mode)
            got = hybrid_candidates(vault, q, fusion="blend", vector_weight=0.3, candidates=50,
                                    allowed_path=allowed, vector_overfetch=1.5,
                                    extra_ids=extra, vector_side=side)
            want = reference_candidates(vault, q, candidates=50, overfetch=1.5,
                                        allowed_path=allowed, extra_ids=extra)
            assert _key(got) == _key(want), (mode, round_, q)


def _answers(vault: Vault) -> list[dict[str, Any]]:
    return [search(vault, q, log_access=False, now=NOW).as_dict() for q in _queries(vault)]


NOW = datetime(2026, 12, 1, tzinfo=UTC)


def test_search_answers_do_not_depend_on_threads_or_warm_caches(
        gen_vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    vault = gen_vault
    monkeypatch.setattr(vector_side, "INLINE_KINDS", frozenset())   # thread even for hash
    answers = {}
    for mode in ("off", "ann", "all"):
        monkeypatch.setattr(vector_side, "MODE", mode)
        vault.vector.cache.clear()
        rows_for(vault)._rows.clear()
        cold = _answers(vault)
        warm = _answers(vault)
        assert cold == warm, mode
        answers[mode] = cold
    assert answers["off"] == answers["ann"] == answers["all"]
    assert any(a["results"] for a in answers["off"]) and any(a["expansion"]
                                                             for a in answers["off"])


def test_rows_follow_the_index_generation(gen_vault: Vault, tmp_path: Path) -> None:
    root = tmp_path / "v"
    generate_vault(root, 12)
    vault = open_vault(root, SETTINGS, create=True)
    vault.index()
    path = "knowledge/n000003/n000003.md"
    ids = vault.state.block_ids(path)
    before = rows_for(vault).rows(ids)
    assert before == vault.state.blocks_by_id(ids)
    file = root / path
    file.write_text(file.read_text(encoding="utf-8").replace("\n\n", "\n\nA new first line.\n\n",
                                                             1), encoding="utf-8")
    vault.index()                                   # same block ids, lines moved down
    after = rows_for(vault).rows(ids)
    moved = [b for b in ids if b in after and after[b].start_line != before[b].start_line]
    assert moved and after == vault.state.blocks_by_id(ids)
    assert rows_for(vault).block_ids(path) == vault.state.block_ids(path)
    every = sorted(vault.state.files())
    many = rows_for(vault).block_ids_many([*every, "knowledge/none/none.md"])
    assert many == {p: vault.state.block_ids(p) for p in [*every, "knowledge/none/none.md"]}
    assert vault.state.block_ids_of(every) == {p: vault.state.block_ids(p) for p in every}
    assert vault.state.first_block_texts(every) == {p: vault.state.blocks_of(p)[0].text
                                                   for p in every}
    vault.close()


def test_catalog_entries_read_together_equal_one_by_one(tmp_path: Path) -> None:
    from reme_agent.recall.group import NodeCatalog

    root = tmp_path / "v"
    generate_vault(root, 12)
    (root / "knowledge/untitled/untitled.md").parent.mkdir(parents=True)
    (root / "knowledge/untitled/untitled.md").write_text("# 一个标题\n\nBody text.\n",
                                                         encoding="utf-8")
    vault = open_vault(root, SETTINGS, create=True)
    vault.index()
    every = [*sorted(vault.state.files()), "knowledge/none/none.md"]
    together = NodeCatalog(vault.state).many(every)
    alone = NodeCatalog(vault.state)
    assert together == {p: alone.get(p) for p in every}
    assert together["knowledge/untitled/untitled.md"].title == "一个标题"
    vault.close()


# -- the answer's JSON -----------------------------------------------------------------------


def reference_as_dict(response: SearchResponse) -> dict[str, Any]:
    """SearchResponse.as_dict as it was: dataclasses.asdict, then rounding."""
    out = dataclasses.asdict(response)
    for node in out["results"]:
        node["score"] = round(node["score"], 6)
        node["factors"] = {k: round(v, 6) for k, v in node["factors"].items()}
        for chunk in node["chunks"]:
            chunk["score"] = round(chunk["score"], 6)
    return out


def test_as_dict_equals_dataclasses_asdict_and_shares_nothing(gen_vault: Vault) -> None:
    vault = gen_vault
    seen_match = False
    for q in _queries(vault):
        response = search(vault, q, log_access=False)
        data = response.as_dict()
        assert data == reference_as_dict(response)
        seen_match |= any(n["match"] for n in data["results"])
        for node in data["results"]:
            node["factors"]["base"] = -1.0
            if node["match"]:
                node["match"]["kind"] = "changed"
        data["index_freshness"]["reindexed"].append("x")
        for e in data["expansion"]:
            e["path"] = "changed"
        assert response.as_dict() == reference_as_dict(response)
    assert seen_match


# -- grouping and expansion ----------------------------------------------------------------


def reference_group(hits: list[BlockHit], scores: dict[str, float],
                    factors: dict[str, dict[str, float]], catalog: Any, *,
                    top_chunks_per_path: int, limit: int, block_decay: float,
                    tiers: dict[str, int],
                    shown: Callable[[list[BlockHit]], list[BlockHit]]) -> list[NodeResult]:
    """group_by_node as it was: every node built, then sorted and cut."""
    from reme_agent.recall.group import _node_score

    by_path: dict[str, list[BlockHit]] = {}
    for hit in sorted(hits, key=lambda h: (-scores[h.block_id], h.path, h.start_line)):
        by_path.setdefault(hit.path, []).append(hit)
    nodes = []
    for path, blocks in by_path.items():
        info = catalog.get(path)
        nodes.append(NodeResult(
            path=path, title=info.title if info else path,
            description=info.description if info else "",
            score=_node_score([scores[b.block_id] for b in blocks], block_decay),
            factors={"base": blocks[0].base, **factors.get(path, {})},
            chunks=[ChunkResult(b.block_id, b.start_line, b.end_line, b.text, scores[b.block_id])
                    for b in blocks[:top_chunks_per_path]]))
    nodes.sort(key=lambda n: (-tiers.get(n.path, 0), -n.score, n.path))
    nodes = nodes[:limit]
    for node in nodes:
        blocks = shown(by_path[node.path])
        node.chunks = [ChunkResult(b.block_id, b.start_line, b.end_line, b.text,
                                   scores[b.block_id]) for b in blocks[:top_chunks_per_path]]
    return nodes


def test_grouping_equals_building_every_node(gen_vault: Vault) -> None:
    vault = gen_vault
    catalog = catalog_for(vault)
    catalog.sync()
    rng = random.Random(3)
    rows = list(vault.state.blocks_by_id(sorted(vault.keyword.doc_ids())[:400]).values())
    for trial in range(30):
        picked = rng.sample(rows, 120)
        levels = [0.1, 0.2, 0.5, 0.5, 0.9]          # few distinct scores: many ties
        hits = [BlockHit(r.id, r.path, r.start_line, r.end_line, r.text, r.heading,
                         rng.choice(levels)) for r in picked]
        scores = {h.block_id: h.score * rng.choice([1.0, 1.0, 0.5]) for h in hits}
        factors = {h.path: {"centrality": rng.random()} for h in hits}
        tiers = {h.path: rng.choice([0, 0, 0, 1, 3]) for h in hits}
        kwargs = {"top_chunks_per_path": 2, "limit": 10,
                  "block_decay": rng.choice([0.0, 0.3]), "tiers": tiers,
                  "shown": lambda blocks: list(reversed(blocks))}
        assert group_by_node(hits, scores, factors, catalog, **kwargs) == \
            reference_group(hits, scores, factors, catalog, **kwargs), trial


def reference_expand(graph: Any, seeds: list[str], catalog: Any, *, depth: int,
                     per_direction: int, budget: int, exclude: Callable[[str], bool],
                     suspended: Any = None) -> list[dict[str, Any]]:
    """expand_links as it was: filter every neighbour, then rank them, one by one."""
    seen = set(seeds)
    out: list[dict[str, Any]] = []
    frontier = [(s, s) for s in dict.fromkeys(seeds)]

    def allowed(node: str) -> bool:
        return not graph.is_dangling(node) and not exclude(node)

    def rank(nodes: list[str]) -> list[str]:
        if len(nodes) <= per_direction:
            return sorted(nodes)
        return sorted(nodes, key=lambda o: (-catalog.in_degree(graph, o, suspended), o)
                      )[:per_direction]

    for hop in range(1, depth + 1):
        queues = []
        for node, seed in frontier:
            for direction, links in (("out", graph.outbound(node)), ("in", graph.inbound(node))):
                predicates: dict[str, str | None] = {}
                for other, predicate in links:
                    if other == node or other in seen:
                        continue
                    if other not in predicates or predicates[other] is None:
                        predicates[other] = predicate
                fresh = rank([o for o in predicates if allowed(o)])
                queues.append([(o, predicates[o], direction, node, seed) for o in fresh])
        nxt = []
        for row in zip_longest(*queues):
            for item in row:
                if item is None or item[0] in seen:
                    continue
                other, predicate, direction, via, seed = item
                seen.add(other)
                info = catalog.get(other)
                out.append({"path": other, "title": info.title if info else other,
                            "predicate": predicate, "direction": direction, "depth": hop,
                            "via": via, "seed": seed})
                nxt.append((other, seed))
                if len(out) >= budget:
                    return out
        frontier = nxt
        if not frontier:
            break
    return out


def _expansion_setup(vault: Vault, hubs: int = 5) -> tuple[Any, list[str], list[str]]:
    """The vault's synced catalog, every indexed path, the `hubs` most-linked notes."""
    catalog = catalog_for(vault)
    catalog.sync()
    paths = sorted(vault.state.file_stats())
    return catalog, paths, sorted(paths, key=lambda p: -vault.graph.in_degree(p))[:hubs]


def test_link_expansion_equals_filtering_every_neighbour(gen_vault: Vault) -> None:
    from reme_agent.recall.expand import expand_links

    vault = gen_vault
    catalog, paths, hubs = _expansion_setup(vault)
    rng = random.Random(8)
    for trial in range(40):
        seeds = rng.sample(paths, 4) + rng.sample(hubs, 1)
        hidden = set(rng.sample(paths, 40))
        kwargs = {"depth": rng.choice([1, 2]), "per_direction": rng.choice([2, 3, 10]),
                  "budget": rng.choice([5, 30]), "exclude": hidden.__contains__}
        assert expand_links(vault.graph, seeds, catalog, **kwargs) == \
            reference_expand(vault.graph, seeds, catalog, **kwargs), trial


def test_link_expansion_over_archived_notes_equals_the_reference_in_few_lookups(
        gen_vault: Vault) -> None:
    """Archived neighbours are left out and their links do not rank others, as before; the
    archived status of a hop's neighbours is read in batches, not one lookup per note."""
    from reme_agent.recall.archive import Archived
    from reme_agent.recall.expand import expand_links

    vault = gen_vault
    catalog, paths, hubs = _expansion_setup(vault)
    rng = random.Random(9)
    for trial in range(30):
        archived = set(rng.sample(paths, 60))
        lookups: list[int] = []

        def status_of(ps: list[str], archived: set[str] = archived,
                      lookups: list[int] = lookups) -> dict[str, Any]:
            lookups.append(len(ps))
            return {p: "archived" if p in archived else None for p in ps}

        fast, slow = Archived(None, status_of), Archived(None, status_of)
        seeds = rng.sample(paths, 4) + rng.sample(hubs, 1)
        kwargs = {"depth": rng.choice([1, 2]), "per_direction": rng.choice([2, 3, 10]),
                  "budget": rng.choice([5, 30])}
        got = expand_links(vault.graph, seeds, catalog, exclude=fast.__contains__,
                           suspended=fast, **kwargs)
        fast_lookups, fast_paths = len(lookups), sum(lookups)
        want = reference_expand(vault.graph, seeds, catalog, exclude=slow.__contains__,
                                suspended=slow, **kwargs)
        assert got == want, trial
        assert not {e["path"] for e in got} & archived
        # the reference asks about most notes alone; batched, a lookup covers many
        assert fast_lookups * 4 <= fast_paths, (trial, fast_lookups, fast_paths)
        assert len(lookups) - fast_lookups > fast_lookups, trial


@pytest.mark.parametrize("eager", [0, 64])
def test_link_expansion_equals_the_reference_when_archived_linkers_reorder_a_hub(
        gen_vault: Vault, eager: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The expansion ranks a hub's neighbours by an upper bound (inbound edges) and counts
    the live in-degree only near the top: archiving the linkers of the best-linked
    neighbours (so the bound is wrong exactly where it is used) must not change the list.
    `eager` 0 ranks every list lazily (the test vault's hubs are shorter than the default)."""
    from reme_agent.recall import expand
    from reme_agent.recall.archive import Archived
    from reme_agent.recall.expand import expand_links

    monkeypatch.setattr(expand, "_EAGER", eager)

    vault = gen_vault
    graph = vault.graph
    catalog, paths, hubs = _expansion_setup(vault, hubs=8)
    rng = random.Random(11)
    for trial in range(40):
        hub = rng.choice(hubs)
        near = {o for o, _ in [*graph.inbound(hub), *graph.outbound(hub)]}
        top = sorted(near, key=lambda o: -graph.in_degree(o))[:6]
        linkers = sorted({s for o in top for s, _ in graph.inbound(o)})
        archived = set(rng.sample(linkers, min(len(linkers), rng.randint(1, 25))))
        archived |= set(rng.sample(paths, rng.randint(0, 10)))

        def status_of(ps: list[str], archived: set[str] = archived) -> dict[str, Any]:
            return {p: "archived" if p in archived else None for p in ps}

        fast, slow = Archived(None, status_of), Archived(None, status_of)
        kwargs = {"depth": rng.choice([1, 2]), "per_direction": rng.choice([1, 2, 3, 5]),
                  "budget": rng.choice([4, 30, 1000])}
        seeds = [hub, *rng.sample(paths, rng.randint(0, 2))]
        got = expand_links(graph, seeds, catalog, exclude=fast.__contains__, suspended=fast,
                           **kwargs)
        want = reference_expand(graph, seeds, catalog, exclude=slow.__contains__,
                                suspended=slow, **kwargs)
        assert got == want, trial


# -- names ------------------------------------------------------------------------------------


def test_fuzzy_names_equal_a_scan_of_every_name(gen_vault: Vault) -> None:
    index = index_for(gen_vault)
    from reme_agent.recall.names import _make, _usable
    from reme_agent.recall.namestore import bigrams
    from reme_agent.recall.normalize import compact

    with index.store.reading():
        entries = list(index.store.iter_entries())

    def scan(key: str) -> set[tuple[str, str, float]]:
        n = len(key)
        out = set()
        if n < 5 or n > 60:
            return out
        grams = set(bigrams(key))
        for entry in entries:
            length = len(entry.key)
            if not max(5, n - 2) <= length <= n + 2:
                continue
            limit = max_edits(min(length, n))
            if limit == 0 or abs(length - n) > limit:
                continue
            shared = len(grams & set(bigrams(entry.key)))
            if shared < max(1, max(n, length) - 1 - 2 * limit) or not _usable(entry):
                continue
            dist = osa_distance(key, entry.key, limit)
            if 0 < dist <= limit:
                m = _make(entry, "fuzzy", 0.9 - 0.05 * dist)
                out.add((m.path, m.name, m.strength))
        return out

    names = [e.name for e in entries[:300]]
    rng = random.Random(2)
    typos = []
    for name in names[:120]:
        chars = list(name)
        i = rng.randrange(len(chars))
        chars[i] = rng.choice("abcxyz主题")
        typos.append("".join(chars))
    hit = 0
    for q in typos + names[:50]:
        with index.store.reading():
            got = {(m.path, m.name, m.strength) for m in index._fuzzy(compact(q))}
        assert got == scan(compact(q)), q
        hit += bool(got)
    assert hit > 20


# -- timers -----------------------------------------------------------------------------------


def test_stage_times_are_exclusive_and_cost_nothing_when_off() -> None:
    assert stage("a") is stage("b")                 # no collector: one shared no-op
    with collect() as t:
        with stage("outer"):
            with stage("inner"):
                sum(range(20000))
            with stage("inner"):
                pass
        t.add("worker", 0.5, overlapped=True)
    assert set(t.seconds) == {"outer", "inner"} and t.calls["inner"] == 2
    assert t.overlapped == {"worker": 0.5}
    inner, outer = t.seconds["inner"], t.seconds["outer"]
    assert inner > 0 and outer >= 0
    assert stage("after") is stage("b")             # the collector is gone again


def test_a_search_reports_its_stages(gen_vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vector_side, "INLINE_KINDS", frozenset())
    monkeypatch.setattr(vector_side, "MODE", "ann")
    with collect() as exact:   # a small store's vectors are scanned in memory, inline
        search(gen_vault, "vector index latency", log_access=False)
    assert gen_vault.vector.flat.ready
    assert "ANN" in exact.seconds and "ANN" not in exact.overlapped
    monkeypatch.setattr(gen_vault.vector, "flat", FlatIndex(max_vectors=0))  # chroma's ANN
    with collect() as t:
        search(gen_vault, "vector index latency", log_access=False).render()
    assert {"embed query", "BM25", "names", "grouping", "expansion", "rendering",
            "freshness", "factors"} <= set(t.seconds)
    assert "ANN" in t.overlapped
    other = Timings()
    with collect(other):
        pass
    assert other.seconds == {}


def test_factored_scores_equal_combining_each_hit_alone(gen_vault: Vault) -> None:
    """Factors are worked out once per note and only the arithmetic per hit: every hit's
    score must be, to the last bit, `combine(evidence.boosted(hit), node_factors(note))`,
    and hits sorted by (tier, score, path, line)."""
    from reme_agent.recall.factors import combine, node_factors
    from reme_agent.recall.search import _ranked

    vault = gen_vault
    opts = vault.settings.search
    for q in [*_queries(vault), "Topic 3 who owns it", "主题 12"]:
        hits, ctx, _ = _ranked(vault, q, opts, include_archived=False, prefix=None,
                               layers=None, query_rewrite=None, now=NOW, candidates=50)
        assert hits
        for hit in hits:
            factors = node_factors(ctx, hit.path)
            assert hit.factors == factors
            assert hit.score == combine(ctx.evidence.boosted(hit, opts), factors), (q, hit.path)
        keys = [(-ctx.evidence.tier(h.path), -h.score, h.path, h.start_line) for h in hits]
        assert keys == sorted(keys)
