"""What the name index keeps between queries (issue G6: the "names" stage at 10k notes): every
answer kept from one store version is dropped when the version moves, whoever moved it; the
batched reads answer as one read per item; the query-side shortcuts (spans, relation cues)
equal the definitions they replaced."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from reme_agent.engine.tokenize import tokenize
from reme_agent.recall import names, namestore
from reme_agent.recall.names import Kept, NameIndex
from reme_agent.recall.normalize import is_cjk, spaced, within_words
from reme_agent.recall.relations import LEXICON, asked_predicates
from reme_agent.vault import Vault, open_vault
from tests.recall.conftest import SETTINGS, note
from tests.recall.names_reference import ReferenceNameIndex

# every kind of lookup the index keeps: exact and contained names (keys), typos (bigram
# counts and keys: "Kafka Rebalancr" reads keys of bigrams that a new name shares later,
# "Zookeeper Quorm" bigrams no name of its length has yet), words of a name in another
# order (postings, totals, entries by eid)
QUERIES = ["circuit breaker", "Circuit Braeker", "what is the circuit breaker threshold",
           "breaker circuit storm", "payment gateway owner", "gateway payment",
           "Paymnet Gateway", "retry storm budget", "storm retry", "熔断", "支付网关负责人",
           "Kafka Rebalancr", "Zookeeper Quorm"]


def _write(root: Path, path: str, text: str) -> None:
    file = root / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text, encoding="utf-8")


@pytest.fixture
def vault(tmp_path: Path):
    root = tmp_path / "memo"
    _write(root, "熔断.md", note("下游失败时暂停调用。", aliases=["circuit breaker"]))
    _write(root, "payment-gateway.md", note("# Payment Gateway\n\nOwned by Priya."))
    _write(root, "retry-storm.md", note("## Retry storm budget\n\nBack off."))
    _write(root, "people/Priya Natarajan.md", note("Owns the gateway."))
    _write(root, "kafka.md", note("Partitions move.", title="Kafka Rebalance"))
    _write(root, "kafka-2.md", note("Partitions moved.", title="Kafka Rebalances"))
    v = open_vault(root, SETTINGS, create=True)
    v.index()
    yield v
    v.close()


def _answers(idx: NameIndex) -> list[dict[str, names.NameMatch]]:
    return [idx.match(q, tokenize(q)) for q in QUERIES]


def _reference(vault: Vault) -> list[dict[str, names.NameMatch]]:
    ref = ReferenceNameIndex(vault.state)
    ref.sync()
    return [ref.match(q, tokenize(q)) for q in QUERIES]


def _move_names(vault: Vault) -> None:
    """Names move between notes: every kept answer above is now wrong."""
    root = vault.root
    _write(root, "熔断.md", note("下游失败时暂停调用。", aliases=["断路器"]))
    _write(root, "breaker-notes.md", note("# Circuit Breaker\n\nThe pattern."))
    _write(root, "payment-gateway.md", note("# Payments API\n\nOwned by Priya."))
    _write(root, "gateway.md", note("Payment gateway retry storm notes.",
                                    title="Payment Gateway Retry Storm"))
    (root / "retry-storm.md").unlink()
    _write(root, "kafka-3.md", note("Done.", title="Kafka Rebalanced"))
    _write(root, "zk.md", note("Majority.", title="ZooKeeper Quorum"))
    for i, word in enumerate(["deploy", "audit", "change", "error", "access", "build"]):
        _write(root, f"logs/{word}.md", note(f"{i}", title=f"{word} log"))   # "log": commonest
    vault.index()


@pytest.mark.parametrize("whole_lengths", [True, False])
def test_answers_kept_from_an_older_store_are_dropped_when_another_writer_syncs(
        vault: Vault, whole_lengths: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not whole_lengths:   # bigram counts read and kept one by one
        monkeypatch.setattr(names, "GRAMS_PER_LENGTH", 0)
    reader = NameIndex(vault.state)
    reader.sync()
    before = _answers(reader)
    assert before == _reference(vault) and any(before)
    assert len(reader._by_key) and len(reader._gram_keys) and len(reader._by_eid)
    _move_names(vault)
    writer = NameIndex(vault.state)   # another process's index: it writes the store
    writer.sync()
    writer.close()
    # the reader does not sync (its own generation check is not what drops the answers):
    # the store version its read sees moved, so everything kept is read again
    after = _answers(reader)
    assert after == _reference(vault)
    assert after != before
    # and whatever is still kept is what the store holds now
    store = reader.store
    with store.reading():
        for key, entries in reader._by_key._got.items():
            assert list(entries) == store.entries_with_keys([key], names.MAX_SHARED), key
        by_eid = store.entries_by_eid(reader._by_eid._got)
        assert reader._by_eid._got == by_eid
        for (length, gram), n in reader._gram_n._got.items():
            assert store.gram_counts([length], [gram]).get((length, gram), 0) == n
        for pair, keys in reader._gram_keys._got.items():
            assert sorted(keys) == sorted(k for *_, k in store.keys_with_grams([pair], 5))
    reader.close()


def test_the_idf_floor_kept_from_an_older_store_is_read_again(vault: Vault) -> None:
    reader = NameIndex(vault.state)
    reader.sync()
    _answers(reader)
    _move_names(vault)
    writer = NameIndex(vault.state)
    writer.sync()
    reader.match("log")   # a read of the new version
    fresh = NameIndex(vault.state)
    fresh.sync()
    with fresh.store.reading() as version:
        fresh._fresh(version)
        expected = fresh._idf_floor(["payment"], 100)
    assert reader._idf_floor(["payment"], 100) == expected
    for idx in (reader, writer, fresh):
        idx.close()


def test_a_store_rebuilt_at_the_same_version_number_is_not_read_from_memory(
        vault: Vault) -> None:
    idx = NameIndex(vault.state)
    idx.sync()
    _answers(idx)
    version = idx._version
    idx.close()
    file = vault.state.path.with_name(namestore.FILE_NAME)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{file}{suffix}").unlink(missing_ok=True)
    _move_names(vault)
    idx.sync()          # a new file, built in one sync: its versions count from 0 again
    with idx.store.reading() as now:
        assert now == version
    assert _answers(idx) == _reference(vault)
    idx.close()


def test_small_memory_bounds_and_the_per_bigram_fallback_change_no_answer(
        vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = _reference(vault)
    monkeypatch.setattr(names, "MAX_KEPT", 3)           # kept answers emptied constantly
    monkeypatch.setattr(names, "GRAMS_PER_LENGTH", 2)   # no length's bigrams kept whole
    idx = NameIndex(vault.state)
    idx.sync()
    assert _answers(idx) == expected
    assert _answers(idx) == expected   # again, from what little was kept
    assert any(at is None for at in idx._grams_at.values())
    assert idx._by_key.size <= 3 and len(idx._by_key) <= 3 and len(idx._gram_n) <= 3
    idx.close()


def test_kept_answers_each_key_once_and_empties_past_its_limit() -> None:
    reads: list[list[int]] = []

    def square(keys: list[int]) -> dict[int, int]:
        reads.append(keys)
        return {k: k * k for k in keys}

    kept: Kept[int, int] = Kept(4)
    assert kept.get_many([3, 1, 3], square) == {3: 9, 1: 1}
    assert kept.get_many([1, 2], square) == {1: 1, 2: 4}
    assert reads == [[3, 1], [2]]
    assert kept.get_many([5, 6], square) == {5: 25, 6: 36}   # 5 > 4 kept: emptied first
    assert len(kept) == 2
    assert kept.get_many(range(10), square) == {k: k * k for k in range(10)}
    assert len(kept) <= 4
    # a tuple weighs its length (at least 1: a "none" answer is kept too, and counted)
    lists: Kept[int, tuple[int, ...]] = Kept(5)
    assert lists.get_many([3, 0], lambda ks: {k: tuple(range(k)) for k in ks}) == \
        {3: (0, 1, 2), 0: ()}
    assert lists.size == 4 and len(lists) == 2
    lists.get_many([2], lambda ks: {k: tuple(range(k)) for k in ks})   # 4 + 2 > 5
    assert lists.size == 2 and len(lists) == 1


def test_batched_reads_equal_one_read_per_item(vault: Vault,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """IN lists padded to powers of two and cut into chunks: no row lost or repeated."""
    monkeypatch.setattr(namestore, "_CHUNK", 10)   # chunks of 10 (pairs: 5), padded to 16 (8)
    store = namestore.NameStore(vault.state.path.with_name(namestore.FILE_NAME))
    idx = NameIndex(vault.state)
    idx.sync()
    idx.close()
    db = store._db
    keys = [k for (k,) in db.execute("SELECT key FROM keys")] + ["nosuchkey", "zz"]
    tokens = [t for (t,) in db.execute("SELECT token FROM token_counts")] + ["nosuchtoken"]
    eids = [e for (e,) in db.execute("SELECT eid FROM entries")]
    pairs = [(n, g) for n, g in db.execute("SELECT length, gram FROM gram_counts")]
    assert len(keys) > 5 and len(tokens) > 5 and len(pairs) > 5
    for size in (1, 2, 3, 5, 7, 9, len(keys)):
        wanted = keys[:size]
        one_by_one = sorted((e for k in wanted for e in store.entries_with_keys([k], 5)),
                            key=lambda e: e.eid)
        assert store.entries_with_keys(wanted, 5) == one_by_one
    assert store.token_counts(tokens) == {t: store.token_counts([t])[t] for t in tokens}
    assert store.postings(tokens) == {t: store.postings([t])[t] for t in tokens}
    # what token matches rely on: a token's count is the number of its postings
    assert {t: len(rows) for t, rows in store.postings(tokens).items()} == \
        store.token_counts(tokens)
    assert store.tokens_of(eids) == {e: store.tokens_of([e])[e] for e in eids}
    assert store.entries_by_eid(eids) == {e: store.entries_by_eid([e])[e] for e in eids}
    every = {(n, g): c for n, g, c in db.execute("SELECT length, gram, n FROM gram_counts")}
    lengths = sorted({n for n, _ in pairs})
    grams = sorted({g for _, g in pairs})
    assert store.gram_counts(lengths, [*grams, "qq"]) == every
    assert store.gram_counts(lengths[:1], grams[:3]) == {
        (n, g): c for (n, g), c in every.items() if n == lengths[0] and g in grams[:3]}
    together = store.keys_with_grams(pairs, 5)
    assert len(together) == len(set(together))   # the padding pair matches no key
    assert sorted(together) == sorted(r for p in pairs for r in store.keys_with_grams([p], 5))
    for n in lengths:
        assert store.grams_of_length(n, 10_000) == {g: c for (m, g), c in every.items()
                                                    if m == n}
    store.close()


def test_token_hits_in_numpy_equal_the_loop_to_the_last_bit() -> None:
    from array import array

    rng = random.Random(3)
    for _ in range(300):
        parts = []
        for _ in range(rng.randint(1, 5)):
            eids = sorted(rng.sample(range(60), rng.randint(1, 40)))
            # an entry's token count is the same in every posting of it
            parts.append(((array("q", eids), array("q", [1 + e % 5 for e in eids])),
                          rng.uniform(0.01, 9.0)))
        floor = rng.choice([0.0, rng.uniform(0.0, 5.0)])
        loop, arrays = names._hits(parts, floor), names._hits_numpy(parts, floor)
        assert loop == arrays and all(type(v) is float for v in arrays.values())
        assert list(map(float.hex, (loop[e] for e in sorted(loop)))) == \
            list(map(float.hex, (arrays[e] for e in sorted(arrays))))


def _old_spans(words: str, longest: int) -> list[tuple[int, int]]:
    """`names._spans` as it was: every start against every end."""
    n = len(words)
    starts = [s for s in range(n) if words[s] != " " and within_words(words, s, n)]
    ends = {e for e in range(1, n + 1) if words[e - 1] != " " and within_words(words, 0, e)}
    spans = [(s, e) for s in starts for e in range(s + 2, min(n, s + longest) + 1) if e in ends]
    spans.sort(key=lambda span: (span[1], span[0]))
    return spans


def test_query_spans_equal_the_start_by_end_definition() -> None:
    rng = random.Random(5)
    alphabet = ["a", "b", "7", " ", "熔", "断", "한", "𠀋", "ー", "z"]
    for _ in range(400):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24)))
        words = spaced(text)
        for longest in (2, 3, 5, 12, 300):
            assert names._spans(words, longest) == _old_spans(words, longest), (words, longest)
    assert is_cjk("𠀋")   # the astral range is exercised


def _old_asked(query: str, excluded: list[tuple[int, int]]) -> set[str]:
    """`asked_predicates` as it was: every cue looked up with `within_words`."""
    from reme_agent.recall.normalize import fold

    words = spaced(query)
    for start, end in excluded:
        words = words[:start] + " " * (end - start) + words[end:]
    folded = fold(query)
    out: set[str] = set()
    for english, chinese, predicates in LEXICON:
        hit = False
        for cue in english:
            start = words.find(cue)
            while start >= 0 and not hit:
                hit = within_words(words, start, start + len(cue))
                start = words.find(cue, start + 1)
        if hit or any(c in folded for c in chinese):
            out |= predicates
    return out


def test_relation_cues_are_found_as_before() -> None:
    rng = random.Random(9)
    cues = [c for english, chinese, _ in LEXICON for c in (*english, *chinese)]
    filler = ["the", "payment", "gateway", "owners", "rowned", "熔断", "是谁", "x", "in",
              "charge", "ownership", "用", "的", "-", ",", "Who", "OWNS"]
    queries = ["who owns the payment gateway", "owner:", "in charge of", "incharge",
               "mom's owner", "ownership", "订单数据库归谁管", "我用的电脑", "root  cause"]
    for _ in range(500):
        queries.append(" ".join(rng.choice(cues + filler * 2)
                                for _ in range(rng.randint(1, 6))))
    for q in queries:
        words = spaced(q)
        excluded = [] if len(words) < 4 else [(1, 3)]
        assert asked_predicates(q, excluded) == _old_asked(q, excluded), q
