"""Compact id maps (G6): over a sorted base they answer exactly as plain dicts and lists do."""

from __future__ import annotations

import random

import numpy as np
import pytest

from reme_agent.engine.idmap import BlockPaths, SlotIds, SlotIndex, SortedIds, encode_ids


def _ids(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"{rng.getrandbits(96):024x}" for _ in range(n)] + ["é-unicode", "x"]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_block_paths_over_a_base_behave_like_a_dict(seed: int) -> None:
    rng = random.Random(seed)
    ids = _ids(300, seed)
    paths = [f"notes/n{i}.md" for i in range(40)]
    model = {i: rng.choice(paths) for i in ids}
    table = list(dict.fromkeys(model.values()))
    raw = encode_ids(ids)
    bp = BlockPaths(SortedIds.build(raw),
                    np.array([table.index(model[i]) for i in ids], dtype=np.int32), table)
    pool = ids + [f"new{i}" for i in range(50)]
    for _ in range(600):
        key = rng.choice(pool)
        action = rng.random()
        if action < 0.35:
            assert bp.pop(key, None) == model.pop(key, None)
        elif action < 0.7:
            model[key] = bp[key] = rng.choice(paths)
        elif action < 0.8 and key in model:
            del bp[key]
            del model[key]
        else:
            assert (key in bp) == (key in model) and bp.get(key) == model.get(key)
        assert len(bp) == len(model)
    assert dict(bp) == model
    assert sorted(bp.values()) == sorted(model.values())
    probe = encode_ids(pool)
    assert bp.paths_of(probe) == [model.get(i) for i in pool]
    wanted = set(rng.sample(paths, 5))
    assert sorted(bp.ids_of_paths(wanted)) == sorted(i for i, p in model.items() if p in wanted)
    with pytest.raises(KeyError):
        del bp["never-there"]


def test_slot_index_and_slot_ids_follow_removals_and_reuse() -> None:
    ids = _ids(50, 9)
    raw = encode_ids(ids)
    index, names = SlotIndex(SortedIds.build(raw)), SlotIds(raw)
    model_index = {i: s for s, i in enumerate(ids)}
    model_names: list[str | None] = list(ids)
    rng = random.Random(4)
    for step in range(300):
        key = rng.choice(ids + [f"n{step % 30}"])
        slot = index.pop(key)
        assert slot == model_index.pop(key, None)
        if slot is not None:
            names[slot] = model_names[slot] = None
        if rng.random() < 0.6:   # re-add: a freed slot or a new one at the end
            free = [s for s, v in enumerate(model_names) if v is None]
            new = rng.choice(free) if free and rng.random() < 0.5 else len(model_names)
            if new == len(model_names):
                names.append(None)
                model_names.append(None)
            index[key] = model_index[key] = new
            names[new] = model_names[new] = key
        assert len(index) == len(model_index) and len(names) == len(model_names)
    assert {k: index.get(k) for k in model_index} == model_index
    assert set(index) == set(model_index)
    assert sorted(index.values()) == sorted(model_index.values())
    assert [names[s] for s in range(len(names))] == model_names


def test_ids_ending_in_nul_are_refused() -> None:
    with pytest.raises(ValueError):
        encode_ids(["ok", "bad\x00"])


def test_remembered_lookups_stay_right_when_the_memo_fills_and_clears(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`SortedIds.find` remembers answers (hits and misses) in a bounded memo: whatever it
    holds or has dropped, every answer equals the position the ids were given in."""
    from reme_agent.engine import idmap

    monkeypatch.setattr(idmap, "MEMO_SIZE", 16)
    rng = random.Random(5)
    ids = [f"{rng.getrandbits(64):016x}" for _ in range(200)]
    base = SortedIds.build(encode_ids(ids))
    slot = {i: n for n, i in enumerate(ids)}
    asked = [rng.choice(ids) if rng.random() < 0.8 else f"{rng.getrandbits(64):016x}"
             for _ in range(2000)]
    assert [base.find(k) for k in asked] == [slot.get(k, -1) for k in asked]
    assert len(base._memo) <= 16
