"""The kvault dataset: integrity of the hand-written vault and labels, the no-match metric,
and a small smoke run (hash embedder, a few queries per kind)."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from evals.ablations import NO_FACTORS, EvalConfig
from evals.datasets import Query, VaultSpec, kvault
from evals.harness import ConfigResult, run_dataset, score_query
from evals.metrics import answered_empty
from reme_agent.engine.names import note_aliases, note_title
from reme_agent.engine.parser import parse_note, split_frontmatter
from reme_agent.recall.signals import CommunitiesSignal

CJK = re.compile(r"[\u3400-\u9fff]")


@pytest.fixture(scope="module")
def spec() -> VaultSpec:
    return kvault.build()


@pytest.fixture(scope="module")
def notes(spec: VaultSpec) -> dict[str, str]:
    return {p: t for p, t in spec.files.items() if p.endswith(".md")}


@pytest.fixture(scope="module")
def records() -> list[dict[str, Any]]:
    return kvault.read_queries()


def _fold(text: str) -> str:
    return unicodedata.normalize("NFC", " ".join(text.split())).casefold()


def _names(path: str, text: str) -> list[str]:
    """Title (as the indexer shows it), file stem and aliases of a note."""
    fm, body, _, _ = split_frontmatter(text, path)
    return [note_title(path, fm, body), PurePosixPath(path).stem, *note_aliases(fm)]


def _osa(a: str, b: str) -> int:
    """Edit distance with adjacent transpositions (optimal string alignment)."""
    d = [[i + j if not i * j else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1,
                          d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[-1][-1]


# -- the vault ---------------------------------------------------------------------------------


def test_vault_is_a_realistic_hand_kept_vault(notes: dict[str, str]) -> None:
    assert len(notes) >= 60
    parsed = {p: parse_note(p, t) for p, t in notes.items()}
    assert all(n.error is None for n in parsed.values())
    with_title = [p for p, n in parsed.items() if n.frontmatter.get("title")]
    assert 10 <= len(with_title) < len(notes) - 10          # title on some, stem on others
    axes = ("lifecycle", "scope", "source", "role")
    assert not any(k in n.frontmatter for n in parsed.values() for k in axes)
    # Layouts: flat Obsidian names at the root and in folders, knowledge/<slug>/<slug>.md,
    # Obsidian daily notes.
    assert any("/" not in p for p in notes)
    assert sum(bool(re.fullmatch(r"knowledge/([^/]+)/\1\.md", p)) for p in notes) >= 5
    assert sum(bool(re.fullmatch(r"daily/\d{4}-\d{2}-\d{2}\.md", p)) for p in notes) >= 5
    # Aliases across languages: a Chinese-named note with an English alias and the reverse.
    aliases = {p: note_aliases(n.frontmatter) for p, n in parsed.items()}
    assert any(CJK.search(PurePosixPath(p).stem) and any(not CJK.search(a) for a in al)
               for p, al in aliases.items())
    assert any(not CJK.search(PurePosixPath(p).stem) and any(CJK.search(a) for a in al)
               for p, al in aliases.items())


def test_every_link_resolves_and_predicates_are_used(notes: dict[str, str]) -> None:
    resolver = kvault.resolver_for(notes)
    links = [(p, link) for p, t in notes.items() for link in parse_note(p, t).links]
    dangling = [(p, link.target) for p, link in links if resolver.resolve(link.target, p) is None]
    assert not dangling
    predicates = {link.predicate for _, link in links if link.predicate}
    assert {"owner", "depends_on", "author"} <= predicates
    assert any(link.alias for _, link in links)                        # [[target|shown]]
    assert any(resolver.resolve(link.target, p) and PurePosixPath(resolver.resolve(link.target, p)).stem.casefold() != link.target.casefold()
               and "/" not in link.target for p, link in links)      # a link by alias/title


def test_mtimes_clock_and_communities(spec: VaultSpec, notes: dict[str, str]) -> None:
    assert set(spec.mtimes) == set(notes)
    assert all(m <= kvault.NOW.timestamp() for m in spec.mtimes.values())
    assert spec.now == kvault.NOW
    signal = CommunitiesSignal.model_validate_json(spec.files["meta/communities.json"])
    assert set(signal.communities) == set(notes)
    assert 1 < len(set(signal.communities.values())) < len(notes)


# -- the labels --------------------------------------------------------------------------------


def test_kinds_counts_and_relevant_paths(spec: VaultSpec, notes: dict[str, str]) -> None:
    counts: dict[str, int] = {}
    for q in spec.queries:
        counts[q.kind] = counts.get(q.kind, 0) + 1
        assert q.relevant <= set(notes), q.text
        assert bool(q.relevant) == (q.kind != "no_match"), q.text
    assert set(counts) == set(kvault.KINDS)
    assert all(n >= kvault.MIN_PER_KIND for n in counts.values()), counts
    assert counts["no_match"] >= kvault.MIN_NO_MATCH
    assert len(spec.queries) >= 150
    assert len({q.qid for q in spec.queries}) == len(spec.queries)
    assert len({(q.kind, q.text) for q in spec.queries}) == len(spec.queries)


def test_title_alias_and_typo_labels(spec: VaultSpec, notes: dict[str, str]) -> None:
    for q in spec.queries:
        if q.kind not in ("title", "alias", "cross_lang_alias", "typo"):
            continue
        (path,) = q.relevant
        fm, body, _, _ = split_frontmatter(notes[path], path)
        title = note_title(path, fm, body)
        if q.kind == "title":
            assert q.text in (title, fm.get("title"), PurePosixPath(path).stem), q.text
        elif q.kind == "typo":
            names = [n for n in _names(path, notes[path]) if len(n) >= 5]
            assert min(_osa(_fold(q.text), _fold(n)) for n in names) in (1, 2), q.text
        else:
            assert _fold(q.text) in {_fold(a) for a in note_aliases(fm)}, q.text
            same_script = bool(CJK.search(q.text)) == bool(CJK.search(title))
            assert same_script == (q.kind == "alias"), q.text


def test_phrases_are_verbatim_in_exactly_their_notes(spec: VaultSpec,
                                                     notes: dict[str, str]) -> None:
    bodies = {p: _fold(split_frontmatter(t, p)[1]) for p, t in notes.items()}
    for q in spec.queries:
        if q.kind == "phrase":
            found = {p for p, body in bodies.items() if _fold(q.text) in body}
            assert found == set(q.relevant), q.text


def test_relation_and_multi_hop_links_resolve(records: list[dict[str, Any]],
                                              notes: dict[str, str]) -> None:
    edges = set(kvault.link_edges(notes))
    linked = [r for r in records if r["kind"] in ("relation", "multi_hop")]
    assert linked
    for record in linked:
        link = record["link"]
        assert (link["from"], link["to"], link["predicate"]) in edges, record["text"]
        assert {link["from"], link["to"]} & set(record["relevant"]), record["text"]
        if record["kind"] == "relation":   # relation: X's note names the answer by a predicate
            assert link["predicate"] and link["to"] in record["relevant"], record["text"]


# -- the no-match metric -----------------------------------------------------------------------


@dataclass
class _Node:
    path: str
    weak: bool = False
    chunks: tuple = ()


@dataclass
class _Response:
    results: list[_Node]
    expansion: tuple = ()


def test_answered_empty() -> None:
    assert answered_empty([]) == 1.0
    assert answered_empty([_Node("a", weak=True), {"path": "b", "weak": True}]) == 1.0
    assert answered_empty([_Node("a", weak=True), _Node("b")]) == 0.0
    assert answered_empty([{"path": "a"}]) == 0.0
    assert answered_empty([object()]) == 0.0          # no flag: a real answer (today's search)


def test_no_match_scored_by_empty_share_only() -> None:
    spec = VaultSpec("fake", {}, [])
    cfg = EvalConfig("default search()", "default", {}, mode="nodes")
    none = Query("n1", "kubernetes", frozenset(), "no_match")
    hit = Query("t1", "王芳", frozenset({"people/王芳.md"}), "title")
    result = ConfigResult(cfg)
    for query, nodes in ((none, []), (none, [_Node("x", weak=True)]), (none, [_Node("x")]),
                         (hit, [_Node("x"), _Node("people/王芳.md")])):
        result.rows.append(score_query(_Response(nodes), 1.0, spec, query, cfg, False))
    assert result.rows[0].node == {} and result.rows[0].extra["empty"] == 1.0
    assert [r.extra["empty"] for r in result.rows] == [1.0, 1.0, 0.0, 0.0]
    summary = result.summary(("node",))
    assert summary["kinds"]["no_match"]["extra"]["empty"]["mean"] == pytest.approx(2 / 3)
    assert "node" not in summary["kinds"]["no_match"] or not summary["kinds"]["no_match"]["node"]
    assert summary["levels"]["node"]["mrr"]["mean"] == 0.5     # answerable queries only
    assert summary["levels"]["node"]["mrr"]["n"] == 1


# -- smoke: a few queries per kind through the real harness and report ----------------------


def test_smoke_run_and_kind_report(tmp_path: Path) -> None:
    from evals import kind_report
    from evals.report import build_report, write_json

    ds = kvault.load(limit=2 * len(kvault.KINDS))
    assert {q.kind for q in ds.vaults[0].queries} == set(kvault.KINDS)
    configs = [
        EvalConfig("BM25 only", "text", {**NO_FACTORS, "fusion": "blend", "vector_weight": 0.0},
                   include_archived=True),
        EvalConfig("default search()", "default", {}, mode="nodes", expand_depth=1),
    ]
    data = run_dataset(ds, configs, embedder="hash", work_dir=tmp_path / "work",
                       progress=False).to_json()
    default = next(c for c in data["configs"] if c["name"] == "default search()")
    assert default["kinds"]["no_match"]["n"] == 2
    assert kind_report.empty_share(default) is not None
    assert kind_report.kind_value(default, "phrase", "hit@5") is not None
    assert default["levels"]["node"]["mrr"]["n"] == 2 * (len(kvault.KINDS) - 1)
    out = tmp_path / "results"
    write_json(data, out)
    report = build_report(out).read_text(encoding="utf-8")
    assert "### Per query kind (default search())" in report
    assert "| kvault | note | hit@1 | ≥ 0.85 |" not in report  # hash run: targets read USE only
    assert (out / "kvault.hash.kinds.png").stat().st_size > 0


def test_the_two_halves_partition_the_queries_and_share_every_kind(spec: VaultSpec) -> None:
    from evals.kvault_halves import split

    halves = split(spec.queries)
    assert sorted(q.qid for h in halves.values() for q in h) == sorted(q.qid for q in spec.queries)
    assert {q.kind for q in halves["A"]} == {q.kind for q in halves["B"]} == set(kvault.KINDS)
    for kind in kvault.KINDS:
        a = sum(q.kind == kind for q in halves["A"])
        b = sum(q.kind == kind for q in halves["B"])
        assert a - b in (0, 1)
