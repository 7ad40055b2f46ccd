"""The index agrees with the mover on link forms: an HTML comment holds no edge, an embed or a
Markdown link is no edge, and an index built when comments held edges is re-read once."""

from __future__ import annotations

from pathlib import Path

import pytest

from reme_agent.config import Settings
from reme_agent.vault import open_vault

HASH = Settings(embedder={"name": "hash"}, index={"progress": False})
HUB = "[[a]] <!-- [[gone]] --> ![[a]] [md](a.md) %% [[b]] %%\n"


def write(root: Path, rel: str, text: str) -> None:
    f = root / rel
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(text, encoding="utf-8")


def test_the_graph_holds_wikilinks_only_and_none_from_html_comments(tmp_path: Path) -> None:
    root = tmp_path / "v"
    for rel, text in {"hub.md": HUB, "a.md": "# A\n", "b.md": "# B\n"}.items():
        write(root, rel, text)
    with open_vault(root, HASH, create=True) as v:
        v.index()
        assert sorted(v.graph.outbound("hub.md")) == [("a.md", None), ("b.md", None)]


def test_an_index_whose_comments_held_links_is_brought_up_to_date_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from reme_agent.engine import indexer as indexer_mod
    from reme_agent.engine import parser as parser_mod

    root = tmp_path / "v"
    for rel, text in {"hub.md": HUB, "a.md": "# A\n", "b.md": "# B\n"}.items():
        write(root, rel, text)
    real = parser_mod.extract_links

    def as_before(body: str, offset: int = 1, **kw):   # the old parser: comments held links
        return real(body.replace("<!--", "<!!-"), offset, **kw)

    monkeypatch.setattr(parser_mod, "extract_links", as_before)
    with open_vault(root, HASH, create=True) as v:
        v.index()
        assert ("gone", None) in v.graph.outbound("hub.md")
        v.state.set_meta(indexer_mod.DOCUMENTS_KEY, "2")
    monkeypatch.setattr(parser_mod, "extract_links", real)
    before = {p: p.read_bytes() for p in root.rglob("*.md")}
    with open_vault(root, HASH) as v:
        report = v.index()
        assert report.embedded == 0   # re-read, nothing re-embedded
        assert sorted(v.graph.outbound("hub.md")) == [("a.md", None), ("b.md", None)]
        assert v.index().changed_files == []   # once
    assert {p: p.read_bytes() for p in root.rglob("*.md")} == before
    with open_vault(root, HASH) as cold:   # a new process opens from the snapshot
        cold.ready()
        assert sorted(cold.graph.outbound("hub.md")) == [("a.md", None), ("b.md", None)]


def test_read_listed_reads_a_listed_note_and_resolves_anything_else(tmp_path: Path) -> None:
    from reme_agent.errors import PathEscape

    root = tmp_path / "v"
    write(root, "a.md", "# A\n")
    (tmp_path / "outside.md").write_text("secret\n", encoding="utf-8")
    with open_vault(root, HASH, create=True) as v:
        assert v.store.read_listed("a.md") == b"# A\n"
        assert v.store.read_listed("gone.md") is None
        with pytest.raises(PathEscape):
            v.store.read_listed("../outside.md")


REFS = {
    "hub.md": "![[a]] [md](sub/b.md)\n\n[r]: c.md\n",
    "props.md": '---\nrelated: "[[d]]"\nlist: ["[[../]]"]\n---\n[[e]]\n',
    "plain.md": "[[a]] only a wikilink\n",
}


def test_the_index_keeps_the_keys_of_references_that_are_no_edges(tmp_path: Path) -> None:
    """Embeds, Markdown links, reference definitions and property links are no edges, but a
    new file can take them over: their keys are kept for the create's cheap check."""
    root = tmp_path / "v"
    for rel, text in REFS.items():
        write(root, rel, text)
    with open_vault(root, HASH, create=True) as v:
        v.index()
        assert v.state.ref_sources(["a"]) == {"hub.md"}
        assert v.state.ref_sources(["b", "c", "d", "e"]) == {"hub.md", "props.md"}
        assert v.state.ref_sources(["e"]) == set()   # a wikilink: the link-key index has it
        assert v.indexer.sources_naming("x/d.md") == {"props.md"}   # [[../]]: any new file
        assert v.indexer.sources_naming("x/zzz.md") == {"props.md"}
        write(root, "hub.md", "no references now\n")
        v.refresh(["hub.md"])
        assert v.state.ref_sources(["a", "b", "c"]) == set()
        (root / "props.md").unlink()
        v.refresh(["props.md"])
        assert v.indexer.sources_naming("x/d.md") == set()


def test_an_index_without_reference_keys_gets_them_on_the_next_whole_run(
        tmp_path: Path) -> None:
    from reme_agent.engine import indexer as indexer_mod

    root = tmp_path / "v"
    for rel, text in REFS.items():
        write(root, rel, text)
    with open_vault(root, HASH, create=True) as v:
        v.index()
        v.state._db.execute("DELETE FROM refkeys")   # as an index built before version 4
        v.state._db.commit()
        v.state.set_meta(indexer_mod.DOCUMENTS_KEY, "3")
    with open_vault(root, HASH) as v:
        assert v.state.ref_sources(["a"]) == set()
        report = v.index()
        assert report.embedded == 0   # re-read, nothing re-embedded
        assert v.state.ref_sources(["a", "d"]) == {"hub.md", "props.md"}
        assert v.index().changed_files == []   # once
