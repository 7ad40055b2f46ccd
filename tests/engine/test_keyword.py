"""Keyword projection (DESIGN §6): BM25 parity with rank_bm25, incremental updates."""

from __future__ import annotations

import random

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from reme_agent.engine.projections import keyword as keyword_module
from reme_agent.engine.projections.keyword import KeywordProjection


def _corpus(seed: int, n_docs: int, vocab: int = 300) -> list[list[str]]:
    """Zipf-ish random corpus: common terms (negative idf) and rare ones, some empty docs."""
    rng = random.Random(seed)
    words = [f"t{i}" for i in range(vocab)]
    weights = [1.0 / (i + 1) for i in range(vocab)]
    return [rng.choices(words, weights, k=rng.randint(0, 40)) for _ in range(n_docs)]


def _queries(seed: int) -> list[list[str]]:
    rng = random.Random(seed)
    qs = [["t0"], ["t0", "t1", "t2"], ["t5", "t5", "t77"], ["t299", "missing"], ["missing"], []]
    qs += [[f"t{rng.randint(0, 299)}" for _ in range(rng.randint(1, 6))] for _ in range(20)]
    return qs


def _assert_parity(kp: KeywordProjection, docs: dict[str, list[str]]) -> None:
    ids = list(docs)
    ref = BM25Okapi([docs[i] for i in ids])
    for q in _queries(7):
        got = kp.scores(q)
        ours = np.array([got.get(i, 0.0) for i in ids])
        assert np.allclose(ours, ref.get_scores(q)), q
        assert set(got) <= set(ids)


def test_parity_with_rank_bm25_on_random_corpus() -> None:
    corpus = _corpus(1, 400)
    kp = KeywordProjection(tokenizer=str.split)
    docs = {f"d{i}": toks for i, toks in enumerate(corpus)}
    kp.add_many(docs.items())
    assert len(kp) == 400
    _assert_parity(kp, docs)
    # the corpus really exercises the negative-idf (epsilon) rule
    ref = BM25Okapi(corpus)
    assert any(ref.idf[w] == pytest.approx(0.25 * ref.average_idf) for w in ("t0", "t1"))


def test_parity_with_custom_parameters() -> None:
    corpus = _corpus(2, 150)
    kp = KeywordProjection(k1=1.2, b=0.5, epsilon=0.1, tokenizer=str.split)
    kp.add_many((f"d{i}", t) for i, t in enumerate(corpus))
    ref = BM25Okapi(corpus, k1=1.2, b=0.5, epsilon=0.1)
    for q in _queries(3):
        got = kp.scores(q)
        assert np.allclose([got.get(f"d{i}", 0.0) for i in range(150)], ref.get_scores(q))


def test_parity_survives_removes_replaces_and_slot_reuse() -> None:
    corpus = _corpus(3, 300)
    extra = _corpus(4, 200)
    kp = KeywordProjection(tokenizer=str.split)
    docs = {f"d{i}": toks for i, toks in enumerate(corpus)}
    kp.add_many(docs.items())
    rng = random.Random(5)
    for step in range(600):
        doc_id = f"d{rng.randint(0, 349)}"
        if rng.random() < 0.4:
            kp.remove(doc_id)
            docs.pop(doc_id, None)
        else:
            toks = extra[step % len(extra)]
            kp.add(doc_id, tokens=toks)
            docs.pop(doc_id, None)
            docs[doc_id] = toks
    assert len(kp) == len(docs)
    assert kp.doc_ids() == set(docs)
    _assert_parity(kp, docs)


def test_query_returns_positive_scores_best_first() -> None:
    kp = KeywordProjection()
    kp.add("apple", "Apple pie recipe with cinnamon")
    kp.add("tart", "An apple tart and apple crumble")
    kp.add("car", "The car needs new tyres")
    hits = kp.query("apple recipes", 10)
    assert [h[0] for h in hits] == ["apple", "tart"] or [h[0] for h in hits] == ["tart", "apple"]
    assert all(s > 0 for _, s in hits)
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    assert kp.query("apple", 1)[0][0] in {"apple", "tart"}
    assert kp.query("nothing matches", 5) == []
    assert kp.query("apple", 0) == []


def test_remove_and_readd_update_scores() -> None:
    kp = KeywordProjection()
    kp.add("a", "vector database index")
    kp.add("b", "cooking with garlic")
    kp.add("c", "gardening in spring")
    for i in range(5):  # BM25Okapi gives idf 0 to a term in half the docs: keep it rare
        kp.add(f"filler{i}", f"unrelated filler text number {i}")
    assert [h[0] for h in kp.query("vector index", 5)] == ["a"]
    kp.remove("a")
    assert kp.query("vector index", 5) == []
    assert "a" not in kp and len(kp) == 7
    kp.remove("a")  # unknown id: no error
    kp.add("b", "a vector index for garlic recipes")  # replaces b
    assert [h[0] for h in kp.query("vector", 5)] == ["b"]
    assert kp.query("cooking", 5) == []


def test_add_returns_tokens_and_accepts_saved_tokens() -> None:
    kp = KeywordProjection()
    toks = kp.add("a", "Running the indexing on my notes")
    assert toks == ["run", "index", "note"]
    kp2 = KeywordProjection()
    kp2.add("a", tokens=toks)
    kp.add("b", "unrelated words here")
    kp2.add("b", "unrelated words here")
    assert kp.scores(["index"]) == kp2.scores(["index"])
    with pytest.raises(ValueError):
        kp.add("c")


def test_chinese_query_finds_chinese_doc() -> None:
    kp = KeywordProjection()
    kp.add("zh1", "我们讨论了向量数据库的索引设计和检索效果。")
    kp.add("zh2", "周末去海边游泳，晚上吃烤鱼。")
    kp.add("en1", "Vector databases store embeddings.")
    hits = kp.query("向量数据库怎么设计索引？", 5)
    assert hits[0][0] == "zh1"
    assert "zh2" not in [h[0] for h in hits]


def test_allowed_filter_is_applied_in_score_order() -> None:
    kp = KeywordProjection(tokenizer=str.split)
    for i in range(20):
        kp.add(f"d{i}", tokens=["x"] * (i + 1) + ["pad"] * 5)
    for i in range(30):  # so that "x" is in fewer than half the docs (positive idf)
        kp.add(f"other{i}", tokens=["pad", f"w{i}"])
    calls: list[str] = []

    def allowed(doc_id: str) -> bool:
        calls.append(doc_id)
        return int(doc_id[1:]) % 2 == 0

    hits = kp.query("x", 3, allowed=allowed)
    assert [h[0] for h in hits] == ["d18", "d16", "d14"]
    assert len(calls) <= 6


def test_empty_index() -> None:
    kp = KeywordProjection()
    assert kp.query("anything", 5) == []
    assert kp.scores(["anything"]) == {}
    assert len(kp) == 0


def test_tokens_of_and_clear() -> None:
    kp = KeywordProjection(tokenizer=str.split)
    kp.add("a", tokens=["x", "y", "x", "z"])
    assert kp.tokens_of("a") == ["x", "x", "y", "z"]
    assert kp.tokens_of("missing") is None
    kp.add("e", tokens=[])
    assert kp.tokens_of("e") == []
    kp2 = KeywordProjection(tokenizer=str.split)
    kp2.add("a", tokens=kp.tokens_of("a"))
    kp2.add("e", tokens=[])
    assert kp2.scores(["x", "z"]) == kp.scores(["x", "z"])
    kp.clear()
    assert len(kp) == 0 and kp.scores(["x"]) == {} and kp.tokens_of("a") is None
    kp.add("b", tokens=["x"])
    assert set(kp.scores(["x"])) == {"b"}


def test_export_import_round_trip_keeps_scores_ties_and_later_updates() -> None:
    """A cold open from the snapshot arrays must equal the live index, and stay a normal,
    updatable index afterwards (removes, re-adds, slot reuse, term leaving the vocabulary)."""
    corpus = _corpus(8, 300)
    live = KeywordProjection(tokenizer=str.split)
    docs = {f"d{i}": toks for i, toks in enumerate(corpus)}
    live.add_many(docs.items())
    rng = random.Random(9)
    for step in range(200):  # fragment the live index: free slots, stale postings, free tids
        doc_id = f"d{rng.randint(0, 299)}"
        if step % 3 == 0:
            live.remove(doc_id)
            docs.pop(doc_id, None)
        else:
            toks = corpus[(step * 7) % len(corpus)] + [f"new{step}"]
            live.add(doc_id, tokens=toks)
            docs.pop(doc_id, None)
            docs[doc_id] = toks

    loaded = KeywordProjection(tokenizer=str.split)
    loaded.import_arrays(*live.export_arrays())
    assert loaded.doc_ids() == live.doc_ids() == set(docs)
    _assert_parity(loaded, docs)
    for q in _queries(11):
        assert loaded.query(" ".join(q), 20) == live.query(" ".join(q), 20), q  # same tie order
    for doc_id in list(docs)[:20]:
        assert sorted(loaded.tokens_of(doc_id) or []) == sorted(docs[doc_id])

    for step in range(150):  # the imported index keeps working as a live one
        doc_id = f"d{rng.randint(0, 320)}"
        if step % 2:
            loaded.remove(doc_id)
            docs.pop(doc_id, None)
        else:
            toks = corpus[(step * 5) % len(corpus)] + ["fresh"]
            loaded.add(doc_id, tokens=toks)
            docs.pop(doc_id, None)
            docs[doc_id] = toks
    _assert_parity(loaded, docs)


def test_import_rejects_arrays_that_do_not_match_their_ids() -> None:
    kp = KeywordProjection(tokenizer=str.split)
    kp.add_many([("a", ["x", "y"]), ("b", ["y"])])
    terms, ids, arrays = kp.export_arrays()
    with pytest.raises(ValueError):
        KeywordProjection(tokenizer=str.split).import_arrays(terms, ids[:1], arrays)


def test_export_of_an_empty_index_imports_as_empty() -> None:
    loaded = KeywordProjection(tokenizer=str.split)
    loaded.import_arrays(*KeywordProjection(tokenizer=str.split).export_arrays())
    assert len(loaded) == 0 and loaded.query("x", 5) == []
    loaded.add_many([("a", ["x"]), ("b", ["y"]), ("c", ["z"])])
    assert loaded.query("x", 5)[0][0] == "a"


# -- one query scored once (issue G6) ----------------------------------------------------------


def _index(seed: int = 5, n_docs: int = 120) -> tuple[KeywordProjection, dict[str, list[str]]]:
    kp = KeywordProjection()
    docs = {f"d{i}": toks for i, toks in enumerate(_corpus(seed, n_docs, vocab=60))}
    for doc_id, toks in docs.items():
        kp.add(doc_id, tokens=toks)
    return kp, docs


def test_query_scores_give_what_top_gives() -> None:
    kp, docs = _index()
    ids = sorted(docs)

    def allowed(doc_id: str) -> bool:
        return int(doc_id[1:]) % 3 != 0

    for q in _queries(7)[:15]:
        top, also = kp.top(q, 12, allowed, ids[::7])
        scores = kp.query_scores(q)
        assert scores.top(12, allowed) == top
        assert scores.of(ids[::7]) == also
        assert scores.of(["no-such-doc"]) == {}


def test_query_scores_taken_before_a_write_score_the_new_index() -> None:
    kp, docs = _index()
    q = ["t40", "t41", "t42"]
    scores = kp.query_scores(q)
    kp.add("fresh", tokens=q * 3)            # holds every query term
    kp.remove("d1")
    assert scores.top(5) == kp.top(q, 5)[0] and "fresh" in dict(scores.top(5))
    assert scores.of(["fresh", "d1", "d2"]) == kp.top(q, 1, also=["fresh", "d1", "d2"])[1]
    assert "fresh" in scores.of(["fresh"]) and "d1" not in scores.of(["d1"])


def test_memoised_scores_and_coverage_follow_writes() -> None:
    kp, _ = _index()
    q = _queries(9)[0]
    before = kp.scores(q)
    cov_before = kp.coverage(q, ["d3", "d4"])
    assert kp.scores(q) == before and kp.coverage(q, ["d3", "d4"]) == cov_before
    kp.add("extra", tokens=list(q))
    fresh = KeywordProjection()
    for doc_id in kp.doc_ids():
        fresh.add(doc_id, tokens=kp.tokens_of(doc_id))
    assert kp.scores(q) == pytest.approx(fresh.scores(q), abs=1e-12)
    assert kp.scores(q) != before
    assert kp.coverage(q, ["d3", "d4", "extra"]) == fresh.coverage(q, ["d3", "d4", "extra"])


@pytest.mark.parametrize("seed", [1, 2])
def test_an_index_on_snapshot_arrays_answers_as_one_built_in_memory(
        seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """G6: documents on the (mapped) base arrays and in the pool, postings split between the
    base and what was added since, pool compaction: every answer, ties included, equals an
    index that lived through the same changes in memory only."""
    monkeypatch.setattr(keyword_module, "_POOL_MIN_GARBAGE", 64)   # compact the pool often
    compactions: list[int] = []
    real = KeywordProjection._compact_pool
    monkeypatch.setattr(KeywordProjection, "_compact_pool",
                        lambda self: (compactions.append(1), real(self))[1])
    corpus = _corpus(seed, 300)
    extra = _corpus(seed + 10, 200)
    built, loaded = _built_and_loaded(corpus)
    rng = random.Random(seed)
    queries = [" ".join(q) for q in _queries(seed)]
    for step in range(400):
        doc_id = f"d{rng.randint(0, 340)}"
        for kp in (built, loaded):
            if step % 3 == 0:
                kp.remove(doc_id)
            else:
                kp.add(doc_id, tokens=extra[step % len(extra)] + [f"new{step % 7}"])
        if step % 50 == 49:
            for q in queries:
                assert _by_score(loaded.query(q, 1000)) == _by_score(built.query(q, 1000)), q
                assert sorted(loaded.containing_all(q.split(), 1000)) == \
                    sorted(built.containing_all(q.split(), 1000))
            assert loaded.scores(["t0", "t3"]) == built.scores(["t0", "t3"])
            sample = [f"d{i}" for i in range(0, 340, 7)]
            assert loaded.coverage(["t1", "t9", "zz"], sample) == \
                built.coverage(["t1", "t9", "zz"], sample)
            assert [loaded.tokens_of(d) for d in sample] == [built.tokens_of(d) for d in sample]
    assert loaded.doc_ids() == built.doc_ids() and len(loaded) == len(built)
    assert compactions, "the pool must have been compacted at least once"
    again = KeywordProjection(tokenizer=str.split)
    again.import_arrays(*loaded.export_arrays())
    for q in queries:   # a snapshot of the loaded index keeps even its ties
        assert again.query(q, 20) == loaded.query(q, 20)


def _by_score(hits: list[tuple[str, float]]) -> list[tuple[str, float]]:
    return sorted(hits, key=lambda hit: (-hit[1], hit[0]))


def _built_and_loaded(corpus: list[list[str]]) -> tuple[KeywordProjection, KeywordProjection]:
    """An index built in memory over `corpus` (d0, d1, ...) and one on its exported arrays,
    read-only as a mapped snapshot gives them."""
    built = KeywordProjection(tokenizer=str.split)
    built.add_many((f"d{i}", toks) for i, toks in enumerate(corpus))
    loaded = KeywordProjection(tokenizer=str.split)
    terms, ids, arrays = built.export_arrays()
    loaded.import_arrays(terms, ids, {k: _read_only(v) for k, v in arrays.items()})
    return built, loaded


def _read_only(a: np.ndarray) -> np.ndarray:
    """A read-only view, as a mapped snapshot gives: writing into it would raise."""
    view = a.view()
    view.flags.writeable = False
    return view


# -- fast paths against their references (G6, issue 19) ------------------------------------


def reference_dense(kp: KeywordProjection, tokens: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """BM25 of every slot as the index computed it before G6 k100: a temporary per step,
    parts concatenated, one bincount (the in-place version must give the same bits)."""
    m = keyword_module
    n_slots = len(kp._ids)
    idf = kp._idf_table()
    avgdl = kp._total_len / len(kp._slot)
    k1, b = kp.k1, kp.b
    slot_parts, score_parts = [], []
    for term in tokens:
        tid = kp._tid.get(term)
        if tid is None:
            continue
        for packed in kp._parts(tid):
            slots = (packed >> m._TF_BITS) & m._SLOT_MASK
            tf = (packed & m._TF_MASK).astype(np.float64)
            dl = kp._dl[slots]
            slot_parts.append(slots)
            score_parts.append(idf[tid] * (tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))))
    if not slot_parts:
        return np.zeros(n_slots), np.zeros(0, dtype=np.int64)
    all_slots = np.concatenate(slot_parts)
    dense = np.bincount(all_slots, weights=np.concatenate(score_parts), minlength=n_slots)
    return dense, np.unique(all_slots)


def reference_ranked(kp: KeywordProjection, dense: np.ndarray, slots: np.ndarray, k: int,
                     allowed=None) -> list[tuple[str, float]]:  # type: ignore[no-untyped-def]
    """Every slot sorted by (score descending, slot), then filtered: no head, no memo."""
    order = slots[np.lexsort((slots, -dense[slots]))]
    out = [(kp._ids[s], float(dense[s])) for s in order.tolist() if kp._ids[s] is not None
           and (allowed is None or allowed(kp._ids[s]))]
    return out[:k]


def reference_containing_all(kp: KeywordProjection, tokens: list[str], k: int) -> list[str]:
    """Documents whose own terms include every distinct query term, best BM25 first."""
    uniq = list(dict.fromkeys(tokens))
    if not uniq or any(t not in kp._tid for t in uniq):
        return []
    need = {kp._tid[t] for t in uniq}
    dense, matched = reference_dense(kp, uniq)
    every = np.array([s for s in matched.tolist() if (t := kp._doc_terms(s)) is not None
                      and need <= set(t[0].tolist())], dtype=np.int64)
    return [d for d, _ in reference_ranked(kp, dense, every, k)] if len(every) else []


def _edited_indexes(seed: int) -> list[KeywordProjection]:
    """An index built in memory and one on read-only snapshot arrays, both then edited
    (removed base slots keep their postings, added documents reuse freed slots)."""
    corpus = _corpus(seed, 250, vocab=40)
    extra = _corpus(seed + 20, 120, vocab=40)
    built, loaded = _built_and_loaded(corpus)
    rng = random.Random(seed)
    for step in range(150):
        doc_id = f"d{rng.randint(0, 280)}"
        for kp in (built, loaded):
            if rng.random() < 0.35:
                kp.remove(doc_id)
            else:
                kp.add(doc_id, tokens=extra[step % len(extra)])
    return [built, loaded]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_in_place_scores_are_bit_identical_to_the_reference(seed: int) -> None:
    """Also when a query's terms were scored just before (kept per-term contributions,
    e.g. a repeated word: as asked, then distinct) and after writes in between."""
    rng = random.Random(seed)
    for kp in _edited_indexes(seed):
        q: list[str] = []
        for step in range(60):
            if step % 3 == 2:   # the same terms again: distinct, repeated or a subset
                q = rng.choice([list(dict.fromkeys(q)), q + q[:1], q[::-1][:2]]) or ["t1"]
            else:
                q = [f"t{rng.randint(0, 45)}" for _ in range(rng.randint(1, 6))]
            if step % 10 == 9:
                kp.add(f"w{step}", tokens=q * 2)
                kp.remove(f"d{rng.randint(0, 280)}")
            dense, matched = kp._dense_uncached(q)
            want, want_matched = reference_dense(kp, q)
            assert dense.tobytes() == want.tobytes(), q
            assert np.array_equal(np.sort(matched), want_matched), q


@pytest.mark.parametrize("seed", [4, 5, 6])
def test_ranking_heads_and_phrase_candidates_equal_a_full_sort(
        seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Top-k (with and without a filter, after another ranking of the same scores filled
    the head memo) and the phrase candidates (checked in score order, or counted when the
    scan runs out) equal sorting every matching document."""
    rng = random.Random(seed)
    for scan, cost in ((keyword_module._PHRASE_SCAN, 1), (3, 1),
                       (keyword_module._PHRASE_SCAN, keyword_module._CHECK_COST)):
        monkeypatch.setattr(keyword_module, "_PHRASE_SCAN", scan)
        monkeypatch.setattr(keyword_module, "_CHECK_COST", cost)
        monkeypatch.setattr(keyword_module, "_HEAD_KEPT", rng.choice([1, 4, 512]))
        for kp in _edited_indexes(seed):
            for _ in range(25):
                q = [f"t{rng.randint(0, 45)}" for _ in range(rng.randint(1, 5))]
                k = rng.choice([1, 3, 10, 40, 500])
                banned = {f"d{i}" for i in rng.sample(range(280), 150)}
                dense, matched = reference_dense(kp, q)
                uniq = list(dict.fromkeys(q))
                first = rng.random() < 0.5
                if first:
                    got_phrase = kp.containing_all(q, k)
                scores = kp.query_scores(q)
                assert scores.top(k) == reference_ranked(kp, dense, matched, k), q
                assert scores.top(k, lambda d, banned=banned: d not in banned) == \
                    reference_ranked(kp, dense, matched, k,
                                     lambda d, banned=banned: d not in banned), q
                if not first:
                    got_phrase = kp.containing_all(q, k)
                want_phrase = reference_containing_all(kp, q, k)
                assert got_phrase == want_phrase, (q, k, scan)
                if uniq == q:
                    assert got_phrase == [d for d, _ in reference_ranked(
                        kp, dense, matched, len(matched))
                        if set(uniq) <= set(kp.tokens_of(d) or ())][:k]
