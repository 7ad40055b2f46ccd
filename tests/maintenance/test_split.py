"""Split: D3 detection, K-means proposal, scripted naming, E-2/E-3 enforced before writing."""

from __future__ import annotations

import json

import pytest

from reme_agent.config import Settings
from reme_agent.engine.links import extract_links
from reme_agent.engine.parser import split_frontmatter
from reme_agent.jobs.followups import Wiring, drain
from reme_agent.jobs.maintainer_job import ModelSplitPlanner
from reme_agent.maintenance.split import estimate_tokens
from reme_agent.testing import ScriptedChatModel, TextBlock
from tests.maintenance.conftest import (
    NOW,
    VaultFactory,
    knowledge,
    maintainer,
    notes_snapshot,
    read_json,
)

SETTINGS = Settings(embedder={"name": "hash"}, index={"progress": False},
                    jobs={"split_token_threshold": 150})
P = "knowledge/notes/notes.md"
TOMATO, LINUX = "knowledge/tomato/tomato.md", "knowledge/linux/linux.md"
Q = "knowledge/reader/reader.md"
COOK = ["Simmer the tomato sauce slowly with garlic, olive oil and basil for the pasta.",
        "Boil the pasta in salted water until al dente, then toss it in the tomato sauce.",
        "Fresh basil and grated parmesan finish the pasta; add olive oil at the end.",
        "A slow tomato sauce needs ripe tomatoes, garlic, olive oil and a pinch of salt.",
        "Reserve a cup of pasta water to loosen the sauce and bind it to the pasta.",
        "Garlic should sizzle in olive oil before the tomatoes go into the sauce pan."]
K8S = ["Kubernetes schedules pods onto nodes in the cluster according to resource requests.",
       "A deployment keeps the desired number of pod replicas running in the cluster.",
       "Services give pods a stable network address inside the kubernetes cluster.",
       "Rolling updates replace pods of a deployment one node at a time without downtime.",
       "The kubelet on each node starts the containers of the pods the scheduler assigned.",
       "Resource limits stop one pod from starving other pods on the same cluster node."]


def two_topic_body() -> str:
    paras = []
    for i in range(6):
        paras.append(COOK[i] + (f" See [[{TOMATO}]]." if i == 0 else ""))
        paras.append(K8S[i] + (" It [runs_on:: [[linux]]]." if i == 1 else ""))
    return "\n\n".join(paras)


NOTES = {
    P: knowledge("Notes", two_topic_body(), aliases=["Mixed notes"], tags=["misc"]),
    TOMATO: knowledge("Tomato", "A red fruit."),
    LINUX: knowledge("Linux", "A kernel.", aliases=["Linux kernel"]),
    Q: knowledge("Reader", f"See [[Mixed notes]], part_of:: [[{P}|the notes]], and the "
                 "[[Linux kernel]]."),
}
PLAN = {"overview": "Two unrelated topics collected in one note: cooking and cluster ops.",
        "children": [{"title": "Tomato pasta", "slug": "tomato-pasta",
                      "description": "Cooking pasta with a slow tomato sauce.", "body": None},
                     {"title": "Kubernetes basics", "slug": "kubernetes-basics",
                      "description": "How kubernetes runs pods.", "body": None}]}
CHILDREN = ["knowledge/tomato-pasta/tomato-pasta.md",
            "knowledge/kubernetes-basics/kubernetes-basics.md"]


def answer(plan: dict) -> list:
    return [TextBlock(text=json.dumps(plan))]


def dropping(plan: dict = PLAN) -> dict:
    """The plan with a first child body that leaves out the tomato link."""
    bad = json.loads(json.dumps(plan))
    bad["children"][0]["body"] = "\n\n".join(COOK)
    return bad


def planner(vault, *plans: dict) -> tuple[ModelSplitPlanner, ScriptedChatModel]:
    model = ScriptedChatModel([answer(p) for p in plans])
    return ModelSplitPlanner(vault, model=model), model


def edges(vault, path: str, text: str | None = None) -> set[tuple[str, str | None]]:
    view = vault.view()
    body = split_frontmatter(text if text is not None else vault.store.read_text(path))[1]
    return {(view.resolver.resolve(link.target, path) or link.target, link.predicate)
            for link in extract_links(body)}


@pytest.fixture
def vault(make_vault: VaultFactory):
    return make_vault(NOTES, settings=SETTINGS)


def test_an_overloaded_two_topic_note_is_proposed_without_a_model(vault) -> None:
    before = notes_snapshot(vault)
    report = maintainer(vault).run(["split", "health"])
    split = report.step("split")
    assert [c["path"] for c in split.found["candidates"]] == [P]
    assert split.found["candidates"][0]["tokens"] == estimate_tokens(
        "\n".join(b.text for b in vault.state.blocks_of(P)))
    proposal = split.found["proposals"][0]
    assert proposal["k"] == 2 and proposal["sizes"] == [6, 6]
    assert "no model configured" in " ".join(split.warnings)
    assert report.step("health").found["D3"] == 1
    assert notes_snapshot(vault) == before


def test_a_split_creates_children_and_an_overview_and_conserves_every_link(vault) -> None:
    old_parent = edges(vault, P)
    q_before = vault.store.read_text(Q)
    plan, model = planner(vault, PLAN)
    report = maintainer(vault, split_planner=plan).run(["split"])
    action = report.step("split").actions[0]
    assert action["action"] == "split" and action["children"] == CHILDREN
    assert model.remaining == 0

    parent = vault.store.read_text(P)
    fm, body = split_frontmatter(parent)[:2]
    assert fm["title"] == "Notes" and fm["aliases"] == ["Mixed notes"]   # E-3: names kept
    assert body.startswith("# Notes\n\nTwo unrelated topics")
    for child in CHILDREN:
        text = vault.store.read_text(child)
        cfm = split_frontmatter(text)[0]
        assert cfm["split_from"] == P and cfm["lifecycle"] == "evolving"
        # links in the vault's (shortest) link style
        assert "part_of:: [[notes|Notes]]" in text
        assert f"has_part:: [[{child.rsplit('/', 1)[1][:-3]}|{cfm['title']}]]" in parent
    cooking = vault.store.read_text(CHILDREN[0])
    assert all(s in cooking for s in COOK) and not any(s in cooking for s in K8S)
    # E-2: parent_new ∪ children ⊇ parent_old
    new = edges(vault, P) | edges(vault, CHILDREN[0]) | edges(vault, CHILDREN[1])
    assert old_parent <= new and (TOMATO, None) in old_parent and (LINUX, "runs_on") in old_parent
    # E-3: inbound links to the parent unchanged, and they still land on it
    assert vault.store.read_text(Q) == q_before
    assert {s for s, _ in vault.graph.inbound(P)} >= {Q, *CHILDREN}
    assert read_json(vault, "meta/cooldowns.json")["entries"][P]["action"] == "split"
    assert maintainer(vault, split_planner=plan).run(["split"]).step("split").actions == []


def test_a_plan_that_drops_a_link_is_retried_once_then_refused(vault) -> None:
    before = notes_snapshot(vault)
    plan, model = planner(vault, dropping(), dropping())
    report = maintainer(vault, split_planner=plan).run(["split"])
    action = report.step("split").actions[0]
    assert action["action"] == "refused" and TOMATO in action["error"]
    assert notes_snapshot(vault) == before                         # nothing written
    retry = model.calls[1]["messages"][-1].get_text_content()
    assert TOMATO in retry                                         # told what it dropped
    refused = vault.store.read_text(f"audit/{NOW.astimezone().date()}/refused.md")
    assert P in refused and TOMATO in refused
    entry = read_json(vault, "meta/cooldowns.json")["entries"][P]
    assert entry["action"] == "split-refused"


def test_a_plan_fixed_on_the_retry_is_written(vault) -> None:
    plan, _ = planner(vault, dropping(), PLAN)
    report = maintainer(vault, split_planner=plan).run(["split"])
    assert report.step("split").actions[0]["action"] == "split"
    assert all(vault.store.exists(c) for c in CHILDREN)


def test_a_child_name_that_would_capture_another_notes_link_is_refused(vault) -> None:
    capture = json.loads(json.dumps(PLAN))
    capture["children"][1]["title"] = "Linux kernel"       # an alias of the linux note
    plan, model = planner(vault, capture, capture)
    before = notes_snapshot(vault)
    report = maintainer(vault, split_planner=plan).run(["split"])
    action = report.step("split").actions[0]
    assert action["action"] == "refused" and "E-3" in action["error"]
    assert notes_snapshot(vault) == before


def test_a_queued_split_runs_through_the_wiring_and_queues_auto_link_for_its_notes(vault) -> None:
    vault.queue.enqueue("split", P, reason="overloaded (D3)", source="distiller")
    wiring = Wiring(vault, model=ScriptedChatModel([answer(PLAN)]))
    report = drain(vault, wiring, max_items=1)
    assert [(i.kind, i.status, i.error) for i in report.ran] == [("split", "done", None)]
    assert all(vault.store.exists(c) for c in CHILDREN)
    assert set(report.changed) >= {P, *CHILDREN}
    # seed auto_link §1.4: the parent and each new child get an auto-link L1 item
    queued = vault.queue.pending("autolink")
    assert sorted(i.path for i in queued) == sorted([P, *CHILDREN])
    assert {(i.source, i.payload["level"]) for i in queued} == {("split", "L1")}


def test_without_a_model_split_items_wait_and_are_reported(vault) -> None:
    before = notes_snapshot(vault)
    vault.queue.enqueue("split", P, reason="overloaded (D3)", source="distiller")
    report = drain(vault, Wiring(vault, use_model=False))
    assert report.ran == [] and report.waiting == {"split": 1}
    assert "no model configured" in report.render()
    assert [i.status for i in vault.queue.items()] == ["pending"]
    assert notes_snapshot(vault) == before


def test_the_queue_drained_inside_a_running_job_loop_still_splits(vault) -> None:
    import asyncio

    vault.queue.enqueue("split", P, reason="overloaded (D3)", source="distiller")
    wiring = Wiring(vault, model=ScriptedChatModel([answer(PLAN)]))

    async def job() -> list:
        return drain(vault, wiring, max_items=1).ran   # a drainer called from async code

    ran = asyncio.run(job())
    assert [(i.status, i.error) for i in ran] == [("done", None)]
    assert all(vault.store.exists(c) for c in CHILDREN)

