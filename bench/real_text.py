"""The real-text bench vault: notes cut from LoCoMo chat turns and CMRC 2018 paragraphs.

Why: a vault drawn from a ~75-word vocabulary makes every block look alike, so latency is
measured on a text distribution no one has, and no quality figure can be printed beside it.
Here the text is real (English chat, Chinese encyclopaedia prose), re-cut to any note count:

- a note is English (LoCoMo) or Chinese (CMRC), one in three Chinese as in the vocab vault,
  and one in ten also holds a block of the other language;
- each block is its own window of the source: 2-4 consecutive turns of the note's
  conversation (English), or 1-3 consecutive sentences of a CMRC paragraph (Chinese: the
  note's own paragraph for the first blocks, other paragraphs after). The sources hold ~7.5k
  units, so a 10k-note vault reuses each unit ~25 times, but a note's *combination* of
  windows is its own;
- titles are phrases of the note (or its CMRC article title), made unique; one in five notes
  has an alias; some blocks get a `##` heading (the session date, the article title); each
  note links to 2-6 others by preferential attachment (hubs), as in the vocab vault.

Queries (`phrase_queries`, half English, half Chinese) join two short phrases taken from two
different blocks of one note, verbatim (no query twice). The relevant notes are every note whose text holds
both phrases (usually one; pairs more than 3 notes hold are drawn again), so Hit@5 and MRR
are exact. Everything is deterministic by seed; the data folder is
`--data`, else $REME_EVAL_DATA, else ../shared/data (the evals' rule), and a missing file is a
ConfigError that says so.
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from generate import _pick_targets, note_path  # noqa: E402

LOCOMO = "locomo_dev.json"
CMRC = "cmrc2018_dev_half.json"
_SESSION = re.compile(r"^session_(\d+)$")
_ZH_SENTENCE = re.compile(r"(?<=[。！？])")
_ZH_SPAN = re.compile(r"[\u4e00-\u9fff0-9A-Za-z]{4,}")
_EN_WORD = re.compile(r"^[A-Za-z][A-Za-z'-]*$")
MAX_RELEVANT = 3


@dataclass(frozen=True)
class Turn:
    speaker: str
    text: str
    date: str          # ISO date of its session


@dataclass
class Corpus:
    """The units notes are cut from: LoCoMo conversations and CMRC articles."""

    conversations: list[list[Turn]]
    articles: list[tuple[str, list[str]]]      # (title, sentences)


@dataclass
class GenNote:
    """One generated note: its path, language, title and block texts (for the queries)."""

    path: str
    lang: str
    title: str
    blocks: list[str] = field(default_factory=list)
    text: str = ""


@dataclass(frozen=True)
class PhraseQuery:
    text: str
    source: str                 # the note its phrases came from
    relevant: frozenset[str]    # every note holding both phrases
    lang: str


def data_file(name: str, data: str | os.PathLike[str] | None = None) -> Path:
    """A data file of the evals' data folder (same rule, same clear error when absent)."""
    from evals.datasets import data_file as eval_data_file

    return eval_data_file(name, data)


def load_corpus(data: str | os.PathLike[str] | None = None) -> Corpus:
    """LoCoMo turns (sessions in order, per conversation) and CMRC sentences (per article)."""
    samples = json.loads(data_file(LOCOMO, data).read_text(encoding="utf-8"))
    conversations = []
    for sample in samples:
        conv = sample["conversation"]
        sessions = sorted(int(m.group(1)) for k in conv if (m := _SESSION.match(k)))
        turns: list[Turn] = []
        for n in sessions:
            raw = conv.get(f"session_{n}_date_time", "")
            try:
                date = datetime.strptime(raw.strip(), "%I:%M %p on %d %B, %Y").date().isoformat()
            except ValueError:
                date = ""
            for t in conv[f"session_{n}"] or []:
                text = " ".join(str(t.get("text", "")).split())
                if t.get("blip_caption"):
                    text += f" [image: {' '.join(str(t['blip_caption']).split())}]"
                if text:
                    turns.append(Turn(str(t.get("speaker", "?")), text, date))
        if turns:
            conversations.append(turns)
    cmrc = json.loads(data_file(CMRC, data).read_text(encoding="utf-8"))
    articles = []
    for doc in cmrc["data"]:
        for para in doc.get("paragraphs", []):
            sentences = [s.strip() for s in _ZH_SENTENCE.split(para.get("context", ""))
                         if s.strip()]
            if sentences:
                articles.append((str(doc.get("title") or "").strip(), sentences))
    if not conversations or not articles:
        raise ValueError("the LoCoMo / CMRC files hold no text")
    return Corpus(conversations, articles)


# -- notes ------------------------------------------------------------------------------------


def _en_block(rng: random.Random, turns: list[Turn], anchor: int) -> tuple[str, str]:
    """(text, session date) of 2-4 consecutive turns near `anchor`."""
    size = rng.randint(2, 4)
    start = min(max(0, anchor + rng.randint(-40, 40)), max(0, len(turns) - size))
    window = turns[start:start + size]
    return "\n".join(f"{t.speaker}: {t.text}" for t in window), window[0].date


def _zh_block(rng: random.Random, sentences: list[str]) -> str:
    size = min(len(sentences), rng.randint(1, 3))
    start = rng.randrange(len(sentences) - size + 1)
    return "".join(sentences[start:start + size])


def _en_phrase(rng: random.Random, text: str, lo: int, hi: int) -> str:
    """A run of lo..hi words of one turn (no speaker label), edges stripped of punctuation."""
    line = rng.choice(text.split("\n")).split(": ", 1)[-1]
    words = [w.strip(".,!?;:\"()[]") for w in line.split()]
    words = [w for w in words if w]
    if len(words) <= lo:
        return " ".join(words)
    size = rng.randint(lo, min(hi, len(words)))
    start = rng.randrange(len(words) - size + 1)
    return " ".join(words[start:start + size])


def _zh_phrase(rng: random.Random, text: str, lo: int, hi: int) -> str:
    """lo..hi characters of one punctuation-free run of the text."""
    runs = _ZH_SPAN.findall(text) or [text]
    run = rng.choice(runs)
    size = min(len(run), rng.randint(lo, hi))
    start = rng.randrange(len(run) - size + 1)
    return run[start:start + size]


def _key(title: str) -> str:
    return re.sub(r"\W+", "", title.casefold())


def _unique(title: str, used: dict[str, int]) -> str:
    key = _key(title)
    n = used.get(key, 0) + 1
    used[key] = n
    return title if n == 1 else f"{title} ({n})"


def _yaml_str(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)   # a JSON string is a YAML string


def build_note(i: int, rng: random.Random, corpus: Corpus, targets: list[str],
               titles: dict[str, int]) -> GenNote:
    zh = i % 3 == 0
    n_blocks = rng.randint(3, 6)
    blocks: list[tuple[str | None, str]] = []     # (heading, text)
    created = ""
    if zh:
        title, sentences = rng.choice(corpus.articles)
        for b in range(n_blocks):
            if b < 2:
                blocks.append((None, _zh_block(rng, sentences)))
            else:
                other, other_sentences = rng.choice(corpus.articles)
                heading = other if other and rng.random() < 0.4 else None
                blocks.append((heading, _zh_block(rng, other_sentences)))
        base_title = title or _zh_phrase(rng, blocks[0][1], 4, 8)
        if _key(base_title) in titles:   # the article's second note: name it by a phrase
            base_title = f"{base_title} · {_zh_phrase(rng, blocks[0][1], 2, 6)}"
        description = _zh_phrase(rng, blocks[0][1], 8, 20)
    else:
        turns = rng.choice(corpus.conversations)
        anchor = rng.randrange(len(turns))
        for _ in range(n_blocks):
            text, date = _en_block(rng, turns, anchor)
            heading = date if rng.random() < 0.25 else None
            blocks.append((heading, text))
            created = created or date
        base_title = _en_phrase(rng, blocks[0][1], 3, 6)
        base_title = base_title[:1].upper() + base_title[1:]
        description = _en_phrase(rng, blocks[0][1], 6, 12)
    if rng.random() < 0.1:   # a block in the other language
        if zh:
            text, _ = _en_block(rng, rng.choice(corpus.conversations), 0)
        else:
            text = _zh_block(rng, rng.choice(corpus.articles)[1])
        blocks.insert(rng.randrange(1, len(blocks) + 1), (None, text))
    seen: set[str] = set()
    blocks = [(h, t) for h, t in blocks if not (t in seen or seen.add(t))]  # type: ignore[func-returns-value]
    title = _unique(base_title or f"Note {i}", titles)
    fm = [f"title: {_yaml_str(title)}", f"description: {_yaml_str(description)}",
          "lifecycle: evolving", "scope: class", "source: derived", "role: concept",
          f"tags: [{'zh' if zh else 'en'}, t{i % 20}]"]
    if created:
        fm.append(f"created: {created}")
    if rng.random() < 0.2 and len(blocks) > 1:
        later = rng.choice(blocks[1:])[1]
        alias = _zh_phrase(rng, later, 4, 6) if zh else _en_phrase(rng, later, 2, 4)
        if alias:
            fm.append(f"aliases: [{_yaml_str(alias)}]")
    body = []
    for heading, text in blocks:
        body.append(f"## {heading}\n\n{text}" if heading else text)
    links = ", ".join(f"[[{t}]]" for t in targets)
    text = ("---\n" + "\n".join(fm) + "\n---\n" + f"# {title}\n\n" + "\n\n".join(body)
            + f"\n\nrelated:: {links}\n")
    return GenNote(note_path(i), "zh" if zh else "en", title, [t for _, t in blocks], text)


def generate_real_notes(notes: int, seed: int = 7,
                        data: str | os.PathLike[str] | None = None) -> list[GenNote]:
    """The notes of a real-text vault, in memory (deterministic by `seed`)."""
    corpus = load_corpus(data)
    rng = random.Random(seed)
    paths = [note_path(i) for i in range(notes)]
    bag: list[int] = []
    titles: dict[str, int] = {}
    return [build_note(i, rng, corpus, _pick_targets(i, notes, rng, bag, paths), titles)
            for i in range(notes)]


def generate_real_vault(root: Path, notes: int, seed: int = 7,
                        data: str | os.PathLike[str] | None = None) -> list[GenNote]:
    """Write a real-text vault of `notes` notes under root/knowledge; returns the notes."""
    out = generate_real_notes(notes, seed, data)
    for note in out:
        file = root / note.path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(note.text, encoding="utf-8")
    return out


def read_real_notes(root: Path, notes: int) -> list[GenNote]:
    """The generated notes back from disk (a reused bench vault): path, text and blocks."""
    out = []
    for i in range(notes):
        path = note_path(i)
        text = (root / path).read_text(encoding="utf-8")
        body = text.split("\n---\n", 1)[-1]
        paras = [p for p in body.split("\n\n") if p.strip()]
        blocks = [p for p in paras if not p.startswith(("# ", "## ", "related:: "))]
        title = paras[0][2:] if paras and paras[0].startswith("# ") else path
        out.append(GenNote(path, "zh" if i % 3 == 0 else "en", title, blocks, text))
    return out


# -- queries ----------------------------------------------------------------------------------


class _TextIndex:
    """Which notes hold a string: a token -> notes index narrows the notes, `in` checks them
    (a `find` over the whole 20 MB vault text took 20-90 ms per phrase)."""

    _TOKEN = re.compile(r"[a-z0-9']+|[^\x00-\x7f]")

    def __init__(self, notes: list[GenNote]) -> None:
        self.paths = [n.path for n in notes]
        self.texts = [n.text for n in notes]
        self.by_token: dict[str, set[int]] = {}
        for k, text in enumerate(self.texts):
            for tok in set(self._TOKEN.findall(text.lower())):
                self.by_token.setdefault(tok, set()).add(k)

    def holding(self, phrase: str) -> set[int]:
        tokens = set(self._TOKEN.findall(phrase.lower()))
        groups = sorted((self.by_token.get(t, set()) for t in tokens), key=len)
        if not groups:
            return {k for k, text in enumerate(self.texts) if phrase in text}
        found = set(groups[0]).intersection(*groups[1:])
        return {k for k in found if phrase in self.texts[k]}


def phrase_queries(notes: list[GenNote], n: int, seed: int = 3,
                   max_relevant: int = MAX_RELEVANT) -> list[PhraseQuery]:
    """`n` queries, each two phrases from two different blocks of one note (verbatim).

    A pair of phrases more than `max_relevant` notes hold ("you hang in there", "I've got")
    does not point at a note, and makes Hit@5 free: such pairs are drawn again.
    """
    rng = random.Random(seed)
    index = _TextIndex(notes)
    by_lang = {lang: [x for x in notes if x.lang == lang and len(x.blocks) >= 2]
               for lang in ("en", "zh")}
    out: list[PhraseQuery] = []
    seen: set[str] = set()
    tries = 0
    while len(out) < n and tries < 50 * n:
        tries += 1
        pool = by_lang["zh" if len(out) % 2 else "en"] or by_lang["en"] or by_lang["zh"]
        if not pool:
            break
        note = pool[rng.randrange(len(pool))]
        a, b = rng.sample(note.blocks, 2)
        if note.lang == "zh":
            spans = [_zh_phrase(rng, a, 4, 7), _zh_phrase(rng, b, 3, 6)]
        else:
            spans = [_en_phrase(rng, a, 3, 5), _en_phrase(rng, b, 2, 4)]
        if any(len(s) < 3 for s in spans) or (note.lang == "en" and not all(
                any(len(w) >= 4 and _EN_WORD.match(w) for w in s.split()) for s in spans)):
            continue
        holders = index.holding(spans[0]) & index.holding(spans[1])
        relevant = frozenset(index.paths[k] for k in holders)
        text = " ".join(spans)
        if note.path not in relevant or len(relevant) > max_relevant or text in seen:
            continue
        seen.add(text)
        out.append(PhraseQuery(text, note.path, relevant, note.lang))
    return out
