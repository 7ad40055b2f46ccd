"""Turn ids and the ledger of synced turns (jobs/turns.py): stable ids, claims that never overlap."""

from __future__ import annotations

import threading

from reme_agent.jobs.turns import TurnLedger, number_turns, session_key
from tests.jobs.conftest import vault as vault  # noqa: F401  (the fixture)


def turns(*texts: str) -> list[dict[str, str]]:
    roles = ("user", "assistant")
    return [{"role": roles[i % 2], "name": roles[i % 2], "text": t} for i, t in enumerate(texts)]


def test_ids_ignore_whitespace_and_names_but_not_role_repetition_or_session() -> None:
    a = number_turns("s", turns("Rotate  the keys\n", "ok", "ok"))
    b = number_turns("s", [{"role": "user", "name": "alice", "text": "Rotate the keys"}])
    assert a[0].id == b[0].id  # same role and text, whitespace and speaker name aside
    assert a[1].id != a[2].id  # "ok" by the assistant, then by the user: different roles
    again = number_turns("s", turns("ok", "x", "ok"))
    assert again[0].id != again[2].id  # the same text twice is two turns
    assert number_turns("other", turns("ok"))[0].id != again[0].id


def test_seen_counts_continue_a_conversation_given_one_reply_at_a_time() -> None:
    whole = number_turns("s", turns("ok", "done", "ok", "done"))
    first = number_turns("s", turns("ok", "done"))
    seen = {t.base: 1 for t in first}
    second = number_turns("s", turns("ok", "done"), seen)
    assert [t.id for t in first + second] == [t.id for t in whole]


def test_a_conversation_without_a_session_id_is_named_by_its_first_turn() -> None:
    assert session_key("s-1", turns("hi")) == "s-1"
    assert session_key(None, turns("hi", "x")) == session_key(None, turns("hi", "y"))
    assert session_key(None, turns("hi")) != session_key(None, turns("hello"))


def test_concurrent_claims_never_give_a_turn_twice(vault) -> None:
    batch = number_turns("s-c", turns(*[f"turn {i}" for i in range(40)]))
    got: list[list[str]] = []
    start = threading.Barrier(6)

    def claim() -> None:
        start.wait()
        got.append([t.id for t in TurnLedger(vault, "s-c").claim(batch)])

    threads = [threading.Thread(target=claim) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    claimed = [tid for ids in got for tid in ids]
    assert sorted(claimed) == sorted(t.id for t in batch)  # each exactly once


def test_claims_are_released_committed_or_expire(vault) -> None:
    batch = number_turns("s-l", turns("a", "b"))
    ledger = TurnLedger(vault, "s-l")
    assert ledger.claim(batch) == batch and ledger.claim(batch) == []
    ledger.release(batch[1:])
    assert ledger.claim(batch) == batch[1:]
    ledger.commit(batch[:1], ["daily/x.md"])
    assert ledger.synced() == {batch[0].id}
    later = TurnLedger(vault, "s-l", lease=-1)  # a claim left by a killed sync expires
    assert later.claim(batch) == batch[1:]  # a synced turn never does
    assert (vault.internal / later.name).is_file()
