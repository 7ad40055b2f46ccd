"""A merge keeps embeds and Markdown links pointing at the kept note (real files on disk)."""

from __future__ import annotations

from reme_agent.maintenance.merge import apply_merge
from tests.maintenance.conftest import NOW, VaultFactory, knowledge

W = "knowledge/llm/llm.md"
L = "archive/Large language model.md"
NOTES = {
    W: knowledge("LLM", "Predicts the next token.\n\n## Training\n\nOn text."),
    L: knowledge("Large language model", "Same thing.\n\n## Scaling\n\nBigger is better. ^s1\n\n"
                 "Figure: ![chart](../assets/chart.png)"),
    "assets/chart.png": "not really a png\n",
    "notes/a.md": (f"[[{W}]] and [[llm]].\n\n"
                   "![[Large language model#Scaling]]\n\n"
                   "![[archive/Large language model#^s1|the claim]]\n\n"
                   "[md](../archive/Large%20language%20model.md#Scaling) "
                   "<!-- [[Large language model]] -->\n"),
    "notes/b.md": "See [[llm]].\n",
}


def test_a_merge_rewrites_embeds_and_markdown_links_to_the_kept_note(
        make_vault: VaultFactory) -> None:
    vault = make_vault(NOTES)
    outcome = apply_merge(vault, [W, L], now=NOW)
    assert outcome.winner == W and not vault.store.exists(L)
    a = vault.store.read_text("notes/a.md")
    assert a == (f"[[{W}]] and [[llm]].\n\n"
                 "![[llm#Scaling]]\n\n"
                 "![[knowledge/llm/llm#^s1|the claim]]\n\n"
                 "[md](../knowledge/llm/llm.md#Scaling) "
                 "<!-- [[Large language model]] -->\n")   # an HTML comment is left as written
    # the loser's relative image now sits in the winner's folder, and still finds its file
    assert "Figure: ![chart](../../assets/chart.png)" in vault.store.read_text(W)


def test_a_merge_rewrites_reference_definitions_to_the_kept_note(
        make_vault: VaultFactory) -> None:
    vault = make_vault({**NOTES, "notes/c.md": (
        "Per [the model][m] and [the web][w].\n\n"
        "[m]: ../archive/Large%20language%20model.md#Scaling \"LLM\"\n"
        "[w]: https://example.com/archive/Large%20language%20model.md\n")})
    apply_merge(vault, [W, L], now=NOW)
    assert vault.store.read_text("notes/c.md") == (
        "Per [the model][m] and [the web][w].\n\n"
        "[m]: ../knowledge/llm/llm.md#Scaling \"LLM\"\n"
        "[w]: https://example.com/archive/Large%20language%20model.md\n")


def test_a_merge_rewrites_property_links_to_the_kept_note(make_vault: VaultFactory) -> None:
    vault = make_vault({**NOTES, "notes/p.md": (
        '---\nrelated: "[[Large language model]]"   # mine\n'
        "see:\n  - '[[archive/Large language model#Scaling|scaling]]'\n---\n# P\n")})
    apply_merge(vault, [W, L], now=NOW)
    assert vault.store.read_text("notes/p.md") == (
        '---\nrelated: "[[llm|Large language model]]"   # mine\n'
        "see:\n  - '[[knowledge/llm/llm#Scaling|scaling]]'\n---\n# P\n")
