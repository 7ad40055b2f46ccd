"""Health: seeded D1 / D3 / D10 problems are found and reported once per day."""

from __future__ import annotations

from reme_agent.config import Settings
from tests.maintenance.conftest import NOW, VaultFactory, knowledge, maintainer

SETTINGS = Settings(embedder={"name": "hash"}, index={"progress": False},
                    jobs={"split_token_threshold": 60})
SRC = "knowledge/src/src.md"
BIG = "knowledge/big/big.md"
HEALTH = f"audit/{NOW.astimezone().date()}/health.md"


def test_health_finds_seeded_problems_and_reports_them_once(make_vault: VaultFactory) -> None:
    vault = make_vault({
        SRC: knowledge("Src", "Dangling [[no-such-note]].\n\n"
                       "from:: [[daily/2020-01-01/gone/gone.md]], [[resource/missing.pdf]]\n\n"
                       "Fine: [[resource/paper.pdf]], [[big]]."),
        BIG: knowledge("Big", " ".join(["A long paragraph about many things."] * 20)),
        "resource/paper.pdf": "%PDF-1.4 not really\n",
    }, settings=SETTINGS)
    report = maintainer(vault).run(["health"])
    found = report.step("health").found
    assert found["D1"] == 1 and found["dangling"][0]["target"] == "no-such-note"
    assert found["D10"] == 2
    assert {d["target"] for d in found["broken_provenance"]} == {
        "daily/2020-01-01/gone/gone.md", "resource/missing.pdf"}
    assert {d["predicate"] for d in found["broken_provenance"]} == {"from"}
    assert found["D3"] == 1 and found["overloaded"][0]["path"] == BIG
    text = vault.store.read_text(HEALTH)
    assert "D1 dangling links: 1" in text and "`[[no-such-note]]`" in text
    assert "D10 broken provenance" in text and "gone.md" in text
    assert "D3 overloaded nodes (split candidates): 1" in text and BIG in text
    again = maintainer(vault).run(["health"])
    assert again.step("health").changed == []
    assert vault.store.read_text(HEALTH) == text


def test_a_healthy_vault_reports_zero_problems(make_vault: VaultFactory) -> None:
    vault = make_vault({SRC: knowledge("Src", "Links to [[big]]."),
                        BIG: knowledge("Big", "Short.")})
    found = maintainer(vault).run(["health"]).step("health").found
    assert (found["D1"], found["D3"], found["D10"]) == (0, 0, 0)


def test_a_step_report_lists_values_without_making_links() -> None:
    from reme_agent.engine.links import extract_links
    from reme_agent.maintenance.report import StepResult

    # what the merge step lists: candidate groups with their pairs (lists in lists)
    groups = [{"members": ["a.md", "b.md"], "pairs": [["a.md", "b.md", 0.93]]},
              {"members": ["c``d.md", "e.md"], "pairs": [["c``d.md", "e.md", 1.0]]}]
    body = StepResult("merge", found={"candidates": groups},
                      actions=[{"action": "ask", "members": [["a.md", "b.md"]]}]).markdown()
    assert '[["a.md", "b.md", 0.93]]' in body
    assert extract_links(body, refs=True) == []
