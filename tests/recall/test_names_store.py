"""The persisted name index (`recall/names.py` over `recall/namestore.py`) answers exactly as the
in-memory index it replaced (`names_reference.py`), through edits, renames and deletions, in
this process and in another one that opens the same file; a broken or old file is rebuilt."""

from __future__ import annotations

import random
import shutil
import sqlite3
from pathlib import Path

import pytest

from reme_agent.engine.tokenize import tokenize
from reme_agent.recall import names, namestore
from reme_agent.recall.names import NameIndex, index_for
from reme_agent.recall.normalize import compact, spaced
from reme_agent.vault import Vault, open_vault
from tests.recall.conftest import SETTINGS, note
from tests.recall.names_reference import ReferenceNameIndex

EN = ["circuit", "breaker", "payment", "gateway", "refund", "duplicate", "rollout", "canary",
      "vector", "index", "latency", "owner", "deploy", "blue", "green", "storm", "bucket",
      "queue", "retry", "budget", "review", "incident", "priya", "natarajan", "kafka",
      "timeline", "overview", "steps", "drill", "questions", "next", "open"]
ZH = ["熔断", "背景", "决策", "记录", "支付", "网关", "退款", "重复", "灰度", "发布", "向量",
      "索引", "延迟", "负责人", "部署", "蓝绿", "风暴", "队列", "重试", "预算", "复盘", "事故", "云南", "自驾", "行程"]
SHARED_HEADINGS = ["Overview", "Next steps", "背景", "Failover drill", "Open questions",
                   "决策记录", "Timeline", "Budget review", "Retry budget", "Queue latency",
                   "Open drill", "背景资料", "复盘记录", "Canary rollout"]
FILLER = ["what is the", "who owns the", "tell me about", "", "how does", "的负责人是谁"]


def _phrase(rng: random.Random, words: int) -> str:
    if rng.random() < 0.4:
        return "".join(rng.sample(ZH, words))
    text = " ".join(rng.sample(EN, words))
    return text.title() if rng.random() < 0.5 else text


def _note_text(rng: random.Random, n: int) -> tuple[str, str]:
    """(path, text) of one generated note: title, aliases, headings (some shared), a body."""
    title = _phrase(rng, rng.randint(1, 3))
    slug = compact(title) if rng.random() < 0.3 else "-".join(spaced(title).split())
    path = rng.choice(["knowledge/{s}/{s}.md", "{s}.md", "notes/{s}.md", "people/{s}.md"]) \
        .format(s=f"{slug}-{n}" if rng.random() < 0.5 else slug)
    heads = [rng.choice(SHARED_HEADINGS) if rng.random() < 0.5 else _phrase(rng, 2)
             for _ in range(rng.randint(0, 3))]
    body = "\n\n".join(f"## {h}\n\n{_phrase(rng, 3)} text." for h in heads) or "Plain text."
    fm: dict[str, object] = {}
    if rng.random() < 0.6:
        fm["title"] = title
    if rng.random() < 0.5:
        fm["aliases"] = [_phrase(rng, rng.randint(1, 2)) for _ in range(rng.randint(1, 2))]
    if "title" not in fm and rng.random() < 0.5:
        body = f"# {title}\n\n{body}"
    return path, note(body, **fm)


def _typo(rng: random.Random, text: str) -> str:
    chars = list(text)
    for _ in range(rng.randint(1, 2)):
        i = rng.randrange(len(chars))
        op = rng.randrange(3)
        if op == 0:
            chars[i] = rng.choice("abcxyz主题")
        elif op == 1 and len(chars) > 1:
            del chars[i]
        elif i + 1 < len(chars):
            chars[i], chars[i + 1] = chars[i + 1], chars[i]
    return "".join(chars)


def _queries(rng: random.Random, names: list[str]) -> list[str]:
    out = []
    for name in rng.sample(names, min(40, len(names))):
        out += [name, name.upper(), _typo(rng, name),
                f"{rng.choice(FILLER)} {name} {rng.choice(['threshold', '是什么', '', 'owner'])}",
                " ".join(reversed(spaced(name).split()))]
    out += [_phrase(rng, rng.randint(1, 4)) for _ in range(20)]
    out += [" ".join(rng.sample(names, 2)) for _ in range(10)]
    return out


def _write(root: Path, path: str, text: str) -> None:
    file = root / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text, encoding="utf-8")


def _same(ref: ReferenceNameIndex, idx: NameIndex, queries: list[str], paths: list[str]) -> int:
    """Every lookup equal, part by part and whole; returns how many queries named a note."""
    with idx.store.reading():   # the postings behind idf: entries per token
        stored = dict(idx.store._db.execute("SELECT token, n FROM token_counts"))
    assert stored == {t: len(eids) for t, eids in ref._by_token.items() if eids}
    named = 0
    for q in queries:
        toks = tokenize(q)
        key, words = compact(q), spaced(q)
        with idx.store.reading() as version:
            idx._fresh(version)
            assert idx._fuzzy(key) == ref._fuzzy(key), q
            assert idx._contained(words, key) == ref._contained(words, key), q
            assert idx._token_matches(toks) == ref._token_matches(toks), q
        got = idx.match(q, toks)
        assert list(got.items()) == list(ref.match(q, toks).items()), q
        named += bool(got)
    for path in paths:
        assert idx.names_of(path) == ref.names_of(path), path
    return named


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_stored_index_answers_as_the_in_memory_one_through_edits(
        tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    if seed == 2:   # syncs read notes and write rows a few at a time, as at 100k notes
        monkeypatch.setattr(names, "SYNC_CHUNK", 7)
        monkeypatch.setattr(namestore, "BATCH", 5)
    if seed == 3:   # what queries keep is emptied all the time; IN lists cut small
        monkeypatch.setattr(names, "MAX_KEPT", 7)
        monkeypatch.setattr(names, "GRAMS_PER_LENGTH", 3)
        monkeypatch.setattr(names, "NUMPY_POSTINGS", 1)   # token matches summed in numpy
        monkeypatch.setattr(namestore, "_CHUNK", 6)
    rng = random.Random(seed)
    root = tmp_path / "vault"
    notes: dict[str, str] = {}
    for n in range(70):
        path, text = _note_text(rng, n)
        notes[path] = text
        _write(root, path, text)
    vault = open_vault(root, SETTINGS, create=True)
    vault.index()
    ref, idx = ReferenceNameIndex(vault.state), NameIndex(vault.state)
    named = 0
    try:
        for round_ in range(6):
            ref.sync()
            idx.sync()
            all_names = [n for p in notes for n in ref.names_of(p)]
            named += _same(ref, idx, _queries(rng, all_names), rng.sample(sorted(notes), 10))
            touched = []
            for _ in range(rng.randint(3, 8)):
                action = rng.random()
                path = rng.choice(sorted(notes))
                if action < 0.3:     # an edit: new title, aliases, headings
                    _, text = _note_text(rng, round_ * 100)
                    notes[path] = text
                    _write(root, path, text)
                    touched.append(path)
                elif action < 0.5:   # a deletion
                    del notes[path]
                    (root / path).unlink()
                    touched.append(path)
                elif action < 0.7:   # a rename: same text, another stem
                    new = path.replace(".md", f"-moved{round_}.md")
                    notes[new] = notes.pop(path)
                    (root / path).rename(root / new)
                    touched += [path, new]
                else:                # a new note
                    new, text = _note_text(rng, 1000 + round_ * 10)
                    if new not in notes:
                        notes[new] = text
                        _write(root, new, text)
                        touched.append(new)
            if round_ % 2:
                vault.refresh(touched)
            else:
                vault.index()
        # another process opens the same file: nothing to build, the same answers
        other = NameIndex(vault.state)
        other.sync()
        ref.sync()
        all_names = [n for p in notes for n in ref.names_of(p)]
        named += _same(ref, other, _queries(rng, all_names), sorted(notes)[:10])
        other.close()
        # the kept store against one built from nothing: the same notes, kinds and strengths
        # (which of a note's equally strong names is shown follows the order names were read)
        scratch = ReferenceNameIndex(vault.state)
        scratch.sync()
        for q in _queries(rng, all_names):
            toks = tokenize(q)
            assert {p: (m.kind, m.strength) for p, m in idx.match(q, toks).items()} == \
                {p: (m.kind, m.strength) for p, m in scratch.match(q, toks).items()}, q
        idx.close()
        # from scratch: a new file equals a new in-memory index
        for suffix in ("", "-wal", "-shm"):
            Path(f"{vault.state.path.with_name(namestore.FILE_NAME)}{suffix}").unlink(
                missing_ok=True)
        fresh, fresh_ref = NameIndex(vault.state), ReferenceNameIndex(vault.state)
        fresh.sync()
        fresh_ref.sync()
        named += _same(fresh_ref, fresh, _queries(rng, all_names), sorted(notes)[:10])
        fresh.close()
    finally:
        vault.close()
    assert named > 100   # the queries did name notes, in every kind of match


@pytest.fixture
def small_vault(tmp_path: Path):
    root = tmp_path / "small"
    _write(root, "熔断.md", note("下游失败时暂停调用。", aliases=["circuit breaker"]))
    _write(root, "people/Priya Natarajan.md", note("Owns auth."))
    vault = open_vault(root, SETTINGS, create=True)
    vault.index()
    yield vault
    vault.close()


def _store_file(vault: Vault) -> Path:
    return vault.state.path.with_name(namestore.FILE_NAME)


def test_a_new_process_reads_the_store_without_building(small_vault: Vault,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    assert "熔断.md" in index_for(small_vault).match("circuit breaker")
    assert _store_file(small_vault).exists()
    calls = []
    monkeypatch.setattr(type(small_vault.state), "name_sources",
                        lambda self, paths=None: calls.append(paths) or {})
    other = NameIndex(small_vault.state)
    other.sync()
    assert "熔断.md" in other.match("circuit breaker") and calls == []
    other.close()


def test_an_edit_rereads_only_that_note(small_vault: Vault,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    idx = index_for(small_vault)
    _write(small_vault.root, "熔断.md", note("下游失败时暂停调用。", aliases=["断路器"]))
    small_vault.refresh(["熔断.md"])
    state_type = type(small_vault.state)
    real = state_type.name_sources
    asked: list[list[str]] = []
    monkeypatch.setattr(state_type, "name_sources",
                        lambda self, paths=None: asked.append(list(paths or [])) or
                        real(self, paths))
    idx.sync()
    assert asked == [["熔断.md"]]
    assert "熔断.md" in idx.match("断路器") and "熔断.md" not in idx.match("circuit breaker")


@pytest.mark.parametrize("damage", ["garbage", "old format", "other state"])
def test_a_broken_old_or_foreign_store_is_rebuilt(small_vault: Vault, damage: str,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    index_for(small_vault).close()
    path = _store_file(small_vault)
    if damage == "garbage":
        for suffix in ("-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        path.write_bytes(b"not a database" * 1000)
    elif damage == "old format":
        with sqlite3.connect(path) as db:
            db.execute("UPDATE meta SET value='names-0' WHERE key='format'")
            db.execute("DELETE FROM entries")
    else:   # a store synced from another state file at the same generation: must not be trusted
        store = namestore.NameStore(path)
        with store.writing() as w:
            w.remove("熔断.md")
            w.set_stamp("熔断.md", "other")
            w.finish(small_vault.state.generation(), "0:0")
        store.close()
    idx = NameIndex(small_vault.state)
    idx.sync()
    assert "熔断.md" in idx.match("circuit breaker")
    assert "people/Priya Natarajan.md" in idx.match("Priya Natarjan")
    if damage == "garbage":
        assert "corrupt" in caplog.text
    idx.close()


def test_an_unwritable_store_falls_back_to_memory(small_vault: Vault, tmp_path: Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    index_for(small_vault).close()
    path = _store_file(small_vault)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.mkdir()   # a folder where the file should be: it cannot be opened
    try:
        idx = NameIndex(small_vault.state)
        idx.sync()
        assert "熔断.md" in idx.match("circuit breaker")
        assert "in memory" in caplog.text
        idx.close()
    finally:
        shutil.rmtree(path)


def test_caches_kept_between_queries_are_bounded_and_change_nothing(
        small_vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    idx = index_for(small_vault)
    expected = [idx.match(q) for q in ("Priya Natarajan owns", "circuit breaker 熔断")]
    monkeypatch.setattr(names, "MAX_CACHED", 1)   # every query empties them
    fresh = NameIndex(small_vault.state)
    fresh.sync()
    assert [fresh.match(q) for q in ("Priya Natarajan owns", "circuit breaker 熔断")] == expected
    assert len(fresh._totals) <= 2 and fresh._posted <= 2
    fresh.close()


def test_a_store_found_corrupt_while_reading_is_rebuilt(small_vault: Vault,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    idx = index_for(small_vault)
    store_type = namestore.NameStore
    real = store_type.entries_with_keys
    calls = []

    def damaged(self, keys, max_notes):
        calls.append(1)
        if len(calls) == 1:
            raise sqlite3.DatabaseError("database disk image is malformed")
        return real(self, keys, max_notes)

    monkeypatch.setattr(store_type, "entries_with_keys", damaged)
    assert "熔断.md" in idx.match("circuit breaker")
    assert "corrupt" in caplog.text and len(calls) > 1
