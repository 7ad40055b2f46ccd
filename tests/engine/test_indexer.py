"""Incremental indexer over real files, real chromadb, real BM25 and a real graph."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from reme_agent.config import Settings
from reme_agent.engine.indexer import _FileLock
from reme_agent.errors import IndexLocked
from reme_agent.recall.search import search_blocks
from reme_agent.vault import Vault, open_vault

HASH = Settings(embedder={"name": "hash"})


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture
def vault(tmp_path: Path) -> Vault:
    root = tmp_path / "v"
    write(root, "knowledge/rrf/rrf.md",
          "---\ntitle: RRF\n---\n# RRF\n\nReciprocal rank fusion merges ranked lists.\n\n"
          "It adds weight over k plus rank.\n\nSee [[bm25]].\n")
    write(root, "knowledge/bm25/bm25.md",
          "---\ntitle: BM25\n---\n# BM25\n\nOkapi term frequency ranking with saturation.\n")
    write(root, "knowledge/分词/分词.md",
          "---\ntitle: 中文分词\n---\n# 中文分词\n\n中文检索之前需要用结巴进行分词处理。\n")
    v = open_vault(root, HASH)
    yield v
    v.close()


def test_first_index_embeds_every_block_and_noop_embeds_none(vault: Vault) -> None:
    first = vault.index()
    assert first.files == 3
    assert first.embedded == first.blocks > 0
    again = vault.index()
    assert again.embedded == 0 and again.deleted == 0 and again.changed_files == []


def test_editing_one_block_embeds_only_that_block(vault: Vault) -> None:
    vault.index()
    path = vault.root / "knowledge/rrf/rrf.md"
    path.write_text(path.read_text().replace("weight over k plus rank", "weight over sixty plus rank"))
    report = vault.index()
    assert report.changed_files == ["knowledge/rrf/rrf.md"]
    assert report.embedded == 1
    assert report.deleted == 1


def test_a_block_that_only_moves_lines_is_not_re_embedded(vault: Vault) -> None:
    vault.index()
    path = vault.root / "knowledge/bm25/bm25.md"
    path.write_text(path.read_text().replace("# BM25\n", "A new first paragraph.\n\n# BM25\n"))
    report = vault.index()
    assert report.embedded == 1  # only the new paragraph
    rows = vault.state.blocks_of("knowledge/bm25/bm25.md")
    okapi = next(r for r in rows if "Okapi" in r.text)
    assert okapi.start_line == 6  # moved down two lines, same id, not re-embedded


def test_deleted_file_disappears_from_search_and_graph(vault: Vault) -> None:
    vault.index()
    assert any(h.path == "knowledge/bm25/bm25.md" for h in search_blocks(vault, "Okapi saturation"))
    (vault.root / "knowledge/bm25/bm25.md").unlink()
    report = vault.index()
    assert report.deleted_files == ["knowledge/bm25/bm25.md"]
    assert all(h.path != "knowledge/bm25/bm25.md" for h in search_blocks(vault, "Okapi saturation"))
    assert vault.vector.count() == vault.state.counts()[1]
    # the link from rrf now dangles, and is kept as a dangling edge
    assert any(src == "knowledge/rrf/rrf.md" for src, _, _ in vault.graph.dangling_edges())


def test_new_note_resolves_an_old_dangling_link(vault: Vault) -> None:
    write(vault.root, "knowledge/a/a.md", "links to [[later]]\n")
    vault.index()
    assert vault.graph.outbound("knowledge/a/a.md") == [("later", None)]
    write(vault.root, "knowledge/later/later.md", "now I exist\n")
    vault.index()
    assert vault.graph.outbound("knowledge/a/a.md") == [("knowledge/later/later.md", None)]


def test_rebuild_after_deleting_the_index_gives_the_same_results(vault: Vault, tmp_path: Path) -> None:
    vault.index()
    queries = ["rank fusion", "term frequency", "结巴分词"]
    before = [[(h.path, h.start_line) for h in search_blocks(vault, q, 5)] for q in queries]
    root = vault.root
    vault.close()
    shutil.rmtree(root / ".reme")
    fresh = open_vault(root, HASH)
    report = fresh.index()
    assert report.embedded == report.blocks
    after = [[(h.path, h.start_line) for h in search_blocks(fresh, q, 5)] for q in queries]
    assert after == before
    fresh.close()


def test_lost_vector_store_is_detected_and_re_embedded(vault: Vault) -> None:
    vault.index()
    blocks = vault.state.counts()[1]
    vault.vector.reset()
    report = vault.index()
    assert report.embedded == blocks
    assert vault.vector.count() == blocks


def test_malformed_yaml_and_binary_files_do_not_stop_indexing(vault: Vault) -> None:
    write(vault.root, "knowledge/bad/bad.md", "---\ntitle: [unclosed\n---\nbody about quokkas\n")
    (vault.root / "knowledge/img.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00binary")
    (vault.root / "knowledge/latin.md").write_bytes("caf\xe9 au lait".encode("latin-1"))
    report = vault.index()
    assert report.files == 4
    assert {s["path"] for s in report.skipped} == {"knowledge/img.md", "knowledge/latin.md"}
    assert report.errors and report.errors[0]["path"] == "knowledge/bad/bad.md"
    assert "knowledge/bad/bad.md" in report.errors[0]["message"]
    assert search_blocks(vault, "quokkas")[0].path == "knowledge/bad/bad.md"


def test_huge_files_are_skipped_with_a_reason(tmp_path: Path) -> None:
    root = tmp_path / "v"
    write(root, "big.md", "word " * 5000)
    write(root, "small.md", "word")
    v = open_vault(root, Settings(embedder={"name": "hash"}, index={"max_file_bytes": 1000}))
    report = v.index()
    assert report.files == 1
    assert report.skipped[0]["path"] == "big.md" and "max_file_bytes" in report.skipped[0]["reason"]
    v.close()


def test_a_second_indexer_waits_and_then_reports_the_lock(vault: Vault) -> None:
    lock_path = vault.root / ".reme" / "index.lock"
    with _FileLock(lock_path, timeout=1), pytest.raises(IndexLocked), \
            _FileLock(lock_path, timeout=0.2):
        pass


def test_another_process_index_run_is_picked_up(vault: Vault) -> None:
    vault.index()
    other = open_vault(vault.root, HASH)
    write(vault.root, "knowledge/new/new.md", "platypus facts\n")
    other.index()
    other.close()
    assert search_blocks(vault, "platypus")[0].path == "knowledge/new/new.md"


@pytest.mark.slow
def test_use_embedder_finds_chinese_and_english_notes(tmp_path: Path) -> None:
    root = tmp_path / "v"
    write(root, "knowledge/zh/zh.md", "---\ntitle: 密钥轮换\n---\n我们每三十天轮换一次签名密钥,旧密钥再保留一天用于验证。\n")
    write(root, "knowledge/en/en.md", "---\ntitle: Team dinner\n---\nThe team dinner is at an Italian "
                                      "restaurant every Friday evening.\n")
    v = open_vault(root, Settings())
    v.index()
    assert search_blocks(v, "签名密钥多久轮换一次", 1)[0].path == "knowledge/zh/zh.md"
    assert search_blocks(v, "where does the team eat on Friday", 1)[0].path == "knowledge/en/en.md"
    # cross-language: the vector side carries it (vector only)
    assert search_blocks(v, "how often do we rotate signing keys", 1,
                         vector_weight=1.0)[0].path == "knowledge/zh/zh.md"
    v.close()


def test_links_to_existing_non_note_files_are_not_dangling(vault: Vault) -> None:
    write(vault.root, "knowledge/p/p.md", "see [[resource/paper.pdf]] and ![[img.png]]\n")
    vault.index()
    assert vault.graph.outbound("knowledge/p/p.md") == [("resource/paper.pdf", None)]
    assert vault.graph.is_dangling("resource/paper.pdf")
    (vault.root / "resource").mkdir()
    (vault.root / "resource/paper.pdf").write_bytes(b"%PDF-1.4 binary")
    vault.refresh(["resource/paper.pdf"])
    assert not vault.graph.is_dangling("resource/paper.pdf")


def test_index_runs_leave_the_vector_index_unloaded_and_a_search_warms_it(
        vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chroma loads a whole collection on its first call (1.4 GB at 100k notes): a process
    that only indexes must not load it for nothing (a frontmatter-only edit writes no
    vector; a full rebuild writes a new collection), while a search process starts early."""
    from reme_agent.engine.projections.vector import VectorProjection

    vault.index()
    warmed: list[str] = []
    real_warm = VectorProjection.warm

    def counting_warm(self: VectorProjection) -> None:
        warmed.append(self.name)
        real_warm(self)

    monkeypatch.setattr(VectorProjection, "warm", counting_warm)
    path = vault.root / "knowledge/bm25/bm25.md"
    path.write_text(path.read_text().replace("title: BM25", "title: BM25\nstatus: draft"))
    fresh = open_vault(vault.root, HASH)
    try:
        assert fresh.refresh(["knowledge/bm25/bm25.md"]).embedded == 0
        fresh.index()
        fresh.index(full=True)
        assert warmed == []
    finally:
        fresh.close()
    reader = open_vault(vault.root, HASH)
    try:
        assert search_blocks(reader, "Okapi term frequency", 1)[0].path == "knowledge/bm25/bm25.md"
        assert len(warmed) == 1
    finally:
        reader.close()


def test_a_word_only_the_description_holds_finds_the_note(tmp_path: Path) -> None:
    root = tmp_path / "v"
    write(root, "knowledge/bm25/bm25.md", "---\ntitle: BM25\ndescription: Okapi ranking with "
          "saturation.\n---\n# BM25\n\nTerm frequency scoring.\n\nA second paragraph.\n")
    write(root, "knowledge/rrf/rrf.md", "---\ntitle: RRF\n---\n# RRF\n\nRank fusion.\n")
    with open_vault(root, HASH) as v:
        v.index()
        hits = search_blocks(v, "Okapi", 3)
        assert [h.path for h in hits][:1] == ["knowledge/bm25/bm25.md"]
        assert hits[0].keyword and hits[0].start_line == 5   # BM25 found it in the first block


def test_editing_the_description_re_embeds_only_the_first_block(tmp_path: Path) -> None:
    root = tmp_path / "v"
    write(root, "knowledge/bm25/bm25.md", "---\ntitle: BM25\ndescription: Okapi ranking.\n---\n"
          "# BM25\n\nTerm frequency scoring.\n\nA second paragraph.\n")
    with open_vault(root, HASH) as v:
        first = v.index()
        path = root / "knowledge/bm25/bm25.md"
        path.write_text(path.read_text().replace("Okapi ranking.", "Saturated ranking."))
        report = v.index()
        assert first.blocks == 2 and (report.embedded, report.deleted) == (1, 1)
        assert search_blocks(v, "Saturated", 1)[0].path == "knowledge/bm25/bm25.md"
        assert not [h for h in search_blocks(v, "Okapi", 3) if h.keyword]


def test_an_index_built_without_descriptions_is_brought_up_to_date_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An index from before descriptions were indexed: the next whole-vault run re-reads every
    note once and embeds only the first blocks whose document changed; no file is touched."""
    from reme_agent.engine import indexer as indexer_mod

    root = tmp_path / "v"
    write(root, "knowledge/a/a.md", "---\ntitle: A\ndescription: Okapi notes.\n---\n# A\n\n"
          "First.\n\nSecond.\n")
    write(root, "knowledge/b/b.md", "---\ntitle: B\n---\n# B\n\nPlain.\n")
    real = indexer_mod.block_document
    monkeypatch.setattr(indexer_mod, "block_document",
                        lambda title, text, description="": real(title, text))
    with open_vault(root, HASH) as v:
        v.index()
        v.state.set_meta(indexer_mod.DOCUMENTS_KEY, "1")
        assert not [h for h in search_blocks(v, "Okapi", 3) if h.keyword]
    monkeypatch.setattr(indexer_mod, "block_document", real)
    before = {p: p.read_bytes() for p in root.rglob("*.md")}
    with open_vault(root, HASH) as v:
        report = v.index()
        assert (report.embedded, report.deleted) == (1, 1)
        assert search_blocks(v, "Okapi", 1)[0].path == "knowledge/a/a.md"
        assert v.index().changed_files == []   # once
    assert {p: p.read_bytes() for p in root.rglob("*.md")} == before
    with open_vault(root, HASH) as cold:   # a new process opens from the snapshot
        hits = search_blocks(cold, "Okapi", 1)
        assert hits[0].path == "knowledge/a/a.md" and hits[0].keyword
