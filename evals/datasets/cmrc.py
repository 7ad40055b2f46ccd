"""CMRC 2018 (Chinese, SQuAD format) as a vault: one knowledge note per paragraph.

Why two variants:
- `cmrc` (paragraph): the note body is the paragraph, one block. 424 topically distinct
  Wikipedia paragraphs with questions written from them; it mostly checks that Chinese
  tokenisation and the Chinese side of the embedder work (near-saturated by design).
- `cmrc-chunk`: the same notes, each paragraph cut at sentence ends into windows of at most
  150 characters, one block each (what a vault with short paragraphs looks like). The gold
  block is the chunk overlapping the first answer span; the gold note is unchanged, so this
  variant reports both note level (max over chunks) and block level (the harder task that
  separates embedders, design/notes/embedder_quality.md "CMRC chunk").
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from evals.datasets import Dataset, Query, VaultSpec, data_json, slugify

FILE = "cmrc2018_dev_half.json"
CHUNK_CHARS = 150
_SENTENCE_END = re.compile(r"(?<=[。！？；!?;])")


def sentence_windows(text: str, max_chars: int = CHUNK_CHARS) -> list[tuple[int, int]]:
    """Character spans covering `text`: sentences packed greedily into windows <= max_chars."""
    spans: list[tuple[int, int]] = []
    cur: tuple[int, int] | None = None
    pos = 0
    for piece in _SENTENCE_END.split(text):
        start, end = pos, pos + len(piece)
        pos = end
        for s in range(start, end, max_chars):   # a very long sentence is hard-cut
            e = min(end, s + max_chars)
            if cur is not None and e - cur[0] <= max_chars:
                cur = (cur[0], e)
            else:
                if cur is not None:
                    spans.append(cur)
                cur = (s, e)
    if cur is not None:
        spans.append(cur)
    return [(s, e) for s, e in spans if text[s:e].strip()]


def _safe_line(text: str) -> str:
    """One Markdown paragraph line that the parser will not read as a heading/fence/quote."""
    line = " ".join(text.split())
    if line and (line[0] in "#>`-*+|=" or line[:3] == "---"):
        line = "\\" + line
    return line


def _answer_span(context: str, answer: dict[str, Any]) -> tuple[int, int] | None:
    text = str(answer.get("text", ""))
    start = int(answer.get("answer_start", -1))
    if not text:
        return None
    if start >= 0 and context[start:start + len(text)] == text:
        return start, start + len(text)
    hits = [m.start() for m in re.finditer(re.escape(text), context)]
    if not hits:
        return None
    best = min(hits, key=lambda h: abs(h - start))
    return best, best + len(text)


def load(data: str | Path | None = None, *, limit: int | None = None,
         chunked: bool = False) -> Dataset:
    """The CMRC dataset (paragraph or chunk variant); `limit` caps queries, corpus kept whole."""
    from reme_agent.engine.parser import dump_note

    raw = data_json(FILE, data, lambda d: isinstance(d, dict) and isinstance(d.get("data"), list)
                    and all(isinstance(x, dict) for x in d["data"]),
                    'a JSON object {"data": [{"title", "paragraphs": [...]}, ...]} (SQuAD style)')
    files: dict[str, str] = {}
    line_keys: dict[str, dict[int, str]] = {}
    queries: list[Query] = []
    budget = limit if limit is not None else 10**9
    for doc in raw["data"]:
        title = str(doc.get("title", "")).strip()
        for para in doc.get("paragraphs", []):
            pid = str(para["id"])
            context = str(para["context"])
            slug = f"{slugify(title, 40)}-{pid.lower().replace('_', '-')}"
            path = f"knowledge/{slug}/{slug}.md"
            frontmatter = {"title": title or pid, "lifecycle": "evolving", "scope": "instance",
                           "source": "curated", "role": "reference", "tags": ["cmrc"]}
            spans = sentence_windows(context) if chunked else [(0, len(context))]
            body = "\n\n".join(_safe_line(context[s:e]) for s, e in spans) + "\n"
            text = dump_note(frontmatter, body)
            files[path] = text
            body_start = text.count("\n") - body.count("\n") + 1
            line_keys[path] = {body_start + 2 * j: f"{pid}#c{j}" for j in range(len(spans))}
            for qa in para.get("qas", []):
                if budget <= 0:
                    break
                gold_chunks: set[str] = set()
                span = _answer_span(context, (qa.get("answers") or [{}])[0])
                if span is not None:
                    gold_chunks = {f"{pid}#c{j}" for j, (s, e) in enumerate(spans)
                                   if s < span[1] and span[0] < e}
                queries.append(Query(qid=str(qa["id"]), text=str(qa["question"]),
                                     relevant=frozenset({path}), kind="question",
                                     relevant_blocks=frozenset(gold_chunks)))
                budget -= 1
    name = "cmrc-chunk" if chunked else "cmrc"
    notes = ["424 Wikipedia paragraphs (zh), one note each, note title = article title."]
    if chunked:
        notes.append(f"Paragraphs cut at sentence ends into <= {CHUNK_CHARS}-char blocks; "
                     "gold block = the chunk overlapping the first answer span.")
    return Dataset(name=name, vaults=[VaultSpec(name, files, queries, line_keys)],
                   kinds={"question": "CMRC question about one paragraph"},
                   levels=("node", "block") if chunked else ("node",),
                   level_names={"node": "paragraph", "block": "chunk"}, notes=notes)
