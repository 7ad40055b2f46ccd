"""Dataset builders on tiny hand-made inputs: ground truth, line mapping, determinism."""

from __future__ import annotations

import json
from pathlib import Path

from evals.datasets import cmrc, locomo, synthetic


def _locomo_fixture(folder: Path) -> None:
    conv = {
        "speaker_a": "Ann", "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a puppy named Max."},
            {"speaker": "Bob", "dia_id": "D1:2", "text": "Nice!\nWhat breed?",
             "img_url": ["x"], "blip_caption": "a photo of a dog"},
        ],
        "session_2_date_time": "10:00 am on 20 June, 2023",
        "session_2": [
            {"speaker": "Ann", "dia_id": "D2:1", "text": "Max learned to sit."},
            {"speaker": "Bob", "dia_id": "D2:2", "text": "I started pottery classes."},
        ],
    }
    qa = [
        {"question": "What is the puppy called?", "evidence": ["D1:1"], "category": 4},
        {"question": "What did Max learn?", "evidence": ["D1:2"], "category": 2},   # audited
        {"question": "Adversarial?", "evidence": ["D2:2"], "category": 5},            # skipped
        {"question": "Pets and hobbies?", "evidence": ["D1:1; D:2:02", "D9:9"], "category": 1},
        {"question": "No evidence", "evidence": ["D7:1"], "category": 3},             # skipped
    ]
    observation = {"session_1_observation": {"Ann": [["Ann adopted a puppy named Max.", "D1:1"]]}}
    (folder / locomo.FILE).write_text(json.dumps([{"sample_id": "conv-x", "conversation": conv,
                                                   "qa": qa, "observation": observation}]))
    (folder / locomo.AUDIT).write_text(json.dumps([
        {"question_id": "locomo_0_qa1", "correct_evidence": ["D2:1"]}]))


def test_locomo_vault_and_ground_truth(tmp_path: Path) -> None:
    _locomo_fixture(tmp_path)
    ds = locomo.load(tmp_path)
    spec = ds.vaults[0]
    s1 = "daily/2023-05-08/session-1/session-1.md"
    s2 = "daily/2023-06-20/session-2/session-2.md"
    assert sorted(spec.files) == [s1, s2]
    lines = spec.files[s1].split("\n")
    # Every keyed line holds its turn; one turn per paragraph; captions kept on one line.
    for number, dia in spec.line_keys[s1].items():
        assert f"({dia}):" in lines[number - 1]
    assert lines[max(spec.line_keys[s1])] == ""  # paragraphs are separated by blank lines
    assert "Nice! What breed? [image: a photo of a dog]" in spec.files[s1]
    assert spec.block_key(s1, 1, 100) == "D1:1"
    q = {x.text: x for x in spec.queries}
    assert set(q) == {"What is the puppy called?", "What did Max learn?", "Pets and hobbies?"}
    assert q["What did Max learn?"].relevant == {s2}                    # audit applied
    assert q["What did Max learn?"].relevant_blocks == {"D2:1"}
    assert q["Pets and hobbies?"].relevant_blocks == {"D1:1", "D2:2"}   # D:2:02 normalised
    assert q["Pets and hobbies?"].relevant == {s1, s2}
    assert q["Pets and hobbies?"].kind == "multi-hop"
    assert ds.level_names == {"node": "session", "block": "turn"}


def test_locomo_observations_count_for_their_session(tmp_path: Path) -> None:
    _locomo_fixture(tmp_path)
    spec = locomo.load(tmp_path, observations=True).vaults[0]
    obs = [p for p in spec.files if p.startswith("knowledge/")]
    assert len(obs) == 1
    assert spec.node_key(obs[0]) == "daily/2023-05-08/session-1/session-1.md"
    assert "D1:1" in spec.line_keys[obs[0]].values()


def test_cmrc_chunks_and_gold(tmp_path: Path) -> None:
    context = "第一句话讲的是北京。" * 10 + "答案在这里：上海。" + "最后一句。" * 20
    start = context.index("上海")
    raw = {"version": "v1", "data": [{"id": "DEV_0", "title": "测试", "paragraphs": [{
        "id": "DEV_0", "context": context,
        "qas": [{"question": "答案是哪里？", "id": "DEV_0_QUERY_0",
                 "answers": [{"text": "上海", "answer_start": start}]}]}]}]}
    (tmp_path / cmrc.FILE).write_text(json.dumps(raw, ensure_ascii=False))
    spans = cmrc.sentence_windows(context)
    assert spans[0][0] == 0 and spans[-1][1] == len(context)
    assert all(e - s <= cmrc.CHUNK_CHARS for s, e in spans)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
    ds = cmrc.load(tmp_path, chunked=True)
    spec = ds.vaults[0]
    (path, text), = spec.files.items()
    query = spec.queries[0]
    assert query.relevant == {path}
    (gold,) = query.relevant_blocks
    line = next(n for n, key in spec.line_keys[path].items() if key == gold)
    assert "上海" in text.split("\n")[line - 1]
    plain = cmrc.load(tmp_path).vaults[0]
    assert len(plain.line_keys[next(iter(plain.files))]) == 1


def test_synthetic_is_deterministic_and_consistent() -> None:
    a, b = synthetic.build(seed=3), synthetic.build(seed=3)
    spec = a.vaults[0]
    assert spec.fingerprint() == b.vaults[0].fingerprint()
    assert spec.fingerprint() != synthetic.build(seed=4).vaults[0].fingerprint()
    kinds = {q.kind for q in spec.queries}
    assert kinds == set(synthetic.KINDS)
    notes = {p for p in spec.files if p.endswith(".md")}
    assert 250 <= len(notes) <= 400
    for q in spec.queries:
        assert q.relevant and q.relevant <= notes, q
        assert q.forbidden <= notes
    archived = json.loads(spec.files["meta/archived.json"])["archived"]
    assert set(archived) == {p for q in spec.queries for p in q.forbidden}
    assert set(spec.mtimes) == notes
    limited = synthetic.load(limit=16).vaults[0].queries
    assert len(limited) == 16 and {q.kind for q in limited} == kinds
