"""Merge: candidates without a model, a judged merge with full retargeting, rollback, cooldowns."""

from __future__ import annotations

import numpy as np
import pytest

from reme_agent.config import Settings
from reme_agent.engine.parser import split_frontmatter
from reme_agent.errors import WriteConflict
from reme_agent.jobs.maintainer_job import ModelMergeJudge
from reme_agent.maintenance.merge import apply_merge
from reme_agent.maintenance.similarity import similar_pairs
from reme_agent.testing import ScriptedChatModel, TextBlock, tool_call
from tests.maintenance.conftest import (
    NOW,
    VaultFactory,
    knowledge,
    maintainer,
    notes_snapshot,
    read_json,
)

SETTINGS = Settings(embedder={"name": "hash"}, index={"progress": False},
                    maintain={"merge_similarity": 0.9})
A = "knowledge/large-language-model/large-language-model.md"   # older: the winner on a tie
B = "knowledge/llm/llm.md"
T = "knowledge/transformer/transformer.md"
ATT = "knowledge/attention/attention.md"
X, Y, Z = "knowledge/x/x.md", "knowledge/y/y.md", "knowledge/z/z.md"
DESC = "A neural network trained on text to predict the next token."
NOTES = {
    A: knowledge("Large language model", f"Predicts tokens with [[{T}|transformers]] and "
                 f"[[{ATT}|attention]].",
                 description=DESC, created="2024-01-01"),
    B: knowledge("Large language models", f"Trained on a lot of text by [[{T}]].\n\n"
                 f"related:: [[{ATT}]]\nAlso see [[no-such-paper]] and [[large-language-model]].",
                 description=DESC, created="2025-01-01", aliases=["LLM"]),
    T: knowledge("Transformer", "The attention architecture, used_by:: [[large-language-model]].",
                 description="The architecture behind modern sequence models."),
    ATT: knowledge("Attention", f"Weights tokens. Part of [[{T}]].",
                   description="A mechanism weighting tokens by relevance."),
    X: knowledge("Chat apps", f"rel:: [[{B}|the LLM]] powers them; see [[{T}]], [[{ATT}]].",
                 description="Applications for chatting."),
    Y: knowledge("Coding assistants", f"They run on an [[llm]]; see [[{T}]], [[{ATT}]].",
                 description="Tools that write code."),
    Z: knowledge("Evaluation", f"- based_on:: [[{A}]]\n- [[{T}]]\n- [[{ATT}]]",
                 description="How we score models."),
    **{f"knowledge/{n}/{n}.md": knowledge(n.title(), " ".join(
        f"[[{m}]]" for m in ("pasta", "tomato", "basil") if m != n),
        description=f"A kitchen note about {n}.") for n in ("pasta", "tomato", "basil")},
}


def merge_judge(vault, *answers: str) -> tuple[ModelMergeJudge, ScriptedChatModel]:
    model = ScriptedChatModel([[TextBlock(text=a)] for a in answers])
    return ModelMergeJudge(vault, model=model), model


def outbound(vault, path: str) -> set[tuple[str, str | None]]:
    return set(vault.graph.outbound(path))


@pytest.fixture
def vault(make_vault: VaultFactory):
    return make_vault(NOTES, settings=SETTINGS)


def test_without_a_model_duplicates_are_only_reported(vault) -> None:
    before = notes_snapshot(vault)
    report = maintainer(vault).run(["communities", "merge"])
    merge = report.step("merge")
    assert [g["members"] for g in merge.found["candidates"]] == [[A, B]]
    assert "no model configured" in " ".join(merge.warnings)
    assert notes_snapshot(vault) == before
    text = vault.store.read_text(f"audit/{NOW.astimezone().date()}/duplicates.md")
    assert A in text and B in text and "[[" not in text   # reports never become graph edges
    again = maintainer(vault).run(["communities", "merge"])
    assert vault.store.read_text(f"audit/{NOW.astimezone().date()}/duplicates.md") == text
    assert again.step("merge").changed == []


def test_a_confirmed_merge_keeps_every_link_and_retargets_every_inbound_one(vault) -> None:
    old_out = outbound(vault, A) | outbound(vault, B)
    judge, model = merge_judge(vault, '{"merge": true, "reasons": "Singular and plural of '
                                      'one concept."}')
    report = maintainer(vault, merge_judge=judge).run(["communities", "merge"])
    comm = vault.signals.communities()
    assert comm[A] == comm[B]
    action = report.step("merge").actions[0]
    assert action["action"] == "merged" and action["winner"] == A and action["losers"] == [B]
    assert model.remaining == 0

    assert not vault.store.exists(B)
    fm, body = split_frontmatter(vault.store.read_text(A))[:2]
    assert fm["aliases"] == ["Large language models", "LLM"]
    assert fm["merged_from"] == [{"path": B, "title": "Large language models",
                                  "aliases": ["LLM"], "date": NOW.astimezone().date().isoformat()}]
    assert "## Large language models" in body and "Trained on a lot of text by" in body
    # No outbound link lost: B's links now leave from A (B -> A became A -> A).
    new_out = outbound(vault, A)
    for target, predicate in old_out:
        assert (A if target == B else target, predicate) in new_out
    # Every inbound link of the loser now lands on the winner, alias and predicate kept.
    assert f"rel:: [[{A}|the LLM]]" in vault.store.read_text(X)
    assert "an [[large-language-model|llm]];" in vault.store.read_text(Y)  # short stays short
    assert f"- based_on:: [[{A}]]" in vault.store.read_text(Z)
    sources = {s for s, _ in vault.graph.inbound(A)}
    assert {X, Y, Z, T} <= sources
    assert not [e for e in vault.graph.dangling_edges() if e[1] != "no-such-paper"]
    cooldowns = read_json(vault, "meta/cooldowns.json")["entries"]
    assert cooldowns[A]["action"] == "merge"
    decisions = vault.store.read_text(f"audit/{NOW.astimezone().date()}/duplicates.md")
    assert "MERGE" in decisions and "Singular and plural" in decisions


def test_the_judge_sees_the_notes_and_may_use_read_tools(vault) -> None:
    model = ScriptedChatModel([[tool_call("c1", "read", path=B)],
                               [TextBlock(text='```json\n{"merge": false, "reasons": "no"}\n```')]])
    judge = ModelMergeJudge(vault, model=model)
    report = maintainer(vault, merge_judge=judge).run(["communities", "merge"])
    assert report.step("merge").actions[0]["action"] == "kept-apart"
    offered = model.calls[0]["tool_names"]
    assert "read" in offered and "write" not in offered and "delete" not in offered
    prompt = model.calls[0]["messages"][-1].get_text_content()
    assert A in prompt and "Predicts tokens" in prompt


def test_a_rejected_group_cools_down_and_is_not_asked_again(vault) -> None:
    before = notes_snapshot(vault)
    judge, model = merge_judge(vault, '{"merge": false, "reasons": "different scope"}')
    maintainer(vault, merge_judge=judge).run(["communities", "merge"])
    assert notes_snapshot(vault) == before
    entries = read_json(vault, "meta/cooldowns.json")["entries"]
    assert entries[A]["action"] == entries[B]["action"] == "merge-rejected"
    again = maintainer(vault, merge_judge=judge).run(["merge"])
    assert again.step("merge").found["candidates"] == [] and again.step("merge").found["cooling"] == 2


def test_an_unparsable_answer_changes_nothing(vault) -> None:
    before = notes_snapshot(vault)
    judge, _ = merge_judge(vault, "I think they are the same.")
    report = maintainer(vault, merge_judge=judge).run(["communities", "merge"])
    assert report.step("merge").actions == []
    assert "no JSON" in " ".join(report.step("merge").warnings)
    assert notes_snapshot(vault) == before


def test_a_file_changing_mid_merge_rolls_back_and_the_merge_is_redone(
        vault, monkeypatch: pytest.MonkeyPatch) -> None:
    real = vault.store.write_if_unchanged
    interfered: list[int] = []

    def racing(path: str, text: str, stamp: str | None) -> str:
        if not interfered:                     # someone edits Z while the merge writes
            interfered.append(1)
            vault.store.write(Z, vault.store.read_text(Z) + "A concurrent line.\n")
        return real(path, text, stamp)

    monkeypatch.setattr(vault.store, "write_if_unchanged", racing)
    outcome = apply_merge(vault, [A, B], now=NOW)
    assert interfered and outcome.winner == A
    z = vault.store.read_text(Z)
    assert "A concurrent line." in z and f"based_on:: [[{A}]]" in z   # no lost update
    assert not vault.store.exists(B)


def test_a_file_that_keeps_changing_leaves_every_file_as_it_was(
        vault, monkeypatch: pytest.MonkeyPatch) -> None:
    raw = {p: (vault.root / p).read_bytes() for p in (A, B, X, Y, T)}
    real = vault.store.write_if_unchanged

    def racing(path: str, text: str, stamp: str | None) -> str:
        if path == Y:                          # Y changes under every attempt
            vault.store.write(Y, vault.store.read_text(Y) + "edit\n")
            raw[Y] = (vault.root / Y).read_bytes()
        return real(path, text, stamp)

    monkeypatch.setattr(vault.store, "write_if_unchanged", racing)
    with pytest.raises(WriteConflict, match="kept changing"):
        apply_merge(vault, [A, B], now=NOW)
    for path, data in raw.items():
        assert (vault.root / path).read_bytes() == data, path   # rolled back byte for byte


def test_similar_pairs_match_brute_force_and_respect_the_gate() -> None:
    rng = np.random.default_rng(0)
    base = rng.normal(size=(6, 16))
    mat = np.vstack([base, base + rng.normal(0, 0.05, base.shape)])
    mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    sims = mat @ mat.T
    brute = {(i, j) for i in range(12) for j in range(i + 1, 12) if sims[i, j] >= 0.9}
    got = similar_pairs(mat, 0.9, block=5)
    assert {(i, j) for i, j, _ in got} == brute and len(brute) >= 6
    groups = np.array([0, 0, 0, 1, 1, 1] * 2)
    gated = similar_pairs(mat, 0.9, groups=groups, block=5)
    assert all(groups[i] == groups[j] for i, j, _ in gated)
    free = np.zeros(12, dtype=bool)
    free[0] = True
    assert len(similar_pairs(mat, 0.9, groups=groups + np.arange(12) * 10, free=free)) >= 1
