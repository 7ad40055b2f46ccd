"""A seeded, bilingual (zh + en) knowledge vault with ground-truth queries of known kinds.

Why synthetic on top of LoCoMo and CMRC: those two are monolingual and have no links, no
meta/ signals and no stale or archived notes, so they cannot show whether the graph and
maintenance factors earn their place. Here every query kind is built for one part of the
pipeline, and the ablation per kind shows whether that part delivers the lift (or not).

Vault (deterministic for a given seed and `now`): 9 topics, each a community with a hub
note; 48 concept notes (each written in en or zh, with a unique ticket code), 6 prerequisite
notes linked with `depends_on::`, 36 notes around ambiguous terms, 10 stale/fresh pairs,
10 archived/live pairs, 150 daily stand-up notes linking to concept notes (so in-degree
varies), and meta/communities.json, access_log.json, recency.json, archived.json. File
mtimes are set to each note's `updated` time and searches run at the fixed `now`.

Query kinds (what each exercises):
"""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

from evals.datasets import Dataset, Query, VaultSpec, round_robin
from evals.datasets.synthetic_bank import (
    AMBIGUOUS,
    ARCHIVED,
    CHAINS,
    CONCEPTS,
    DAILY_EN,
    DAILY_ZH,
    STALE_FRESH,
    TOPICS,
    WORKED_EN,
    WORKED_ZH,
)

KINDS: dict[str, str] = {
    "exact": "keyword leg (BM25): a unique ticket code only one note contains; vectors see "
             "little in a made-up code.",
    "paraphrase": "vector leg: same-language rewording with (almost) no shared content word.",
    "cross_language": "vector leg with a multilingual embedder: the note's title in the other "
                      "language; BM25 shares no token with the note.",
    "hub": "centrality: the topic name matches the hub and every leaf (leaves carry a "
           "`Topic:` link line); only in-degree separates the hub.",
    "community": "community factor: an ambiguous term used in two topics; the query's context "
                 "word puts the intended topic's notes in the top-3 seeds, and the other "
                 "relevant notes carry only the ambiguous term, as the distractors do.",
    "fresh": "recency: a stale and a current note on one subject; the stale one repeats the "
             "query words (text prefers it), the current one was updated and read recently.",
    "archived": "archive filter: an archived daily note matches best; the live note is the "
                "answer and the archived one must not show (leak@5).",
    "multi_hop": "link expansion: relevant = the matching note and the prerequisite it links "
                 "to with `depends_on::` (little shared text); scored by r@5+x.",
}
__doc__ = (__doc__ or "") + "".join(f"- {k}: {v}\n" for k, v in KINDS.items())

DEFAULT_NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
N_DAILY = 150


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _code(rng: random.Random, used: set[str]) -> str:
    while True:
        code = "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ") for _ in range(2))
        code += f"-{rng.randint(1000, 9999)}"
        if code not in used:
            used.add(code)
            return code


class _Builder:
    """Accumulates notes, their signals and the queries."""

    def __init__(self, seed: int, now: datetime) -> None:
        self.rng = random.Random(seed)
        self.now = now
        self.files: dict[str, str] = {}
        self.updated: dict[str, datetime] = {}
        self.community: dict[str, int] = {}
        self.reads: dict[str, tuple[datetime, int]] = {}
        self.archived: list[str] = []
        self.queries: list[Query] = []
        self.topic_ids = {t: i for i, t in enumerate(TOPICS)}

    def days_ago(self, lo: float, hi: float) -> datetime:
        return self.now - timedelta(days=self.rng.uniform(lo, hi))

    def note(self, path: str, title: str, body: str, *, topic: str, updated: datetime,
             layer: str = "knowledge", status: str | None = None, role: str = "concept") -> None:
        from reme_agent.engine.parser import dump_note

        fm: dict[str, object] = {"title": title,
                                 "created": _iso(updated - timedelta(days=3)),
                                 "updated": _iso(updated)}
        if layer == "daily":
            fm.update(lifecycle="streaming", scope="instance", source="auto",
                      role="observation", status=status or "active",
                      originSessionId=f"synthetic-{len(self.files)}")
        else:
            fm.update(lifecycle="evolving", scope="class", source="curated", role=role)
        fm["tags"] = [topic]
        self.files[path] = dump_note(fm, body.rstrip("\n") + "\n")
        self.updated[path] = updated
        self.community[path] = self.topic_ids[topic]

    def query(self, kind: str, text: str, relevant: list[str],
              forbidden: list[str] | None = None) -> None:
        qid = f"{kind}-{sum(q.kind == kind for q in self.queries) + 1:02d}"
        self.queries.append(Query(qid, text, frozenset(relevant), kind,
                                  forbidden=frozenset(forbidden or ())))

    def read(self, path: str, when: datetime, hits: int) -> None:
        self.reads[path] = (when, hits)


def hub_slug(topic: str) -> str:
    return f"{topic}-overview"


def _topic_line(topic: str, lang: str) -> str:
    en, zh = TOPICS[topic]
    return (f"Topic: [[{hub_slug(topic)}|{en}]]." if lang == "en"
            else f"主题：[[{hub_slug(topic)}|{zh}]]。")


def build(seed: int = 7, now: datetime = DEFAULT_NOW, n_daily: int = N_DAILY) -> Dataset:
    """Generate the vault and its queries (same seed and `now` -> same bytes)."""
    b = _Builder(seed, now)
    rng = b.rng
    codes: set[str] = set()
    concept_info: dict[str, tuple[str, str, str, str]] = {}   # slug -> (path, lang, en, zh)

    # -- concept notes (+ multi-hop prerequisites) ----------------------------------------
    for topic, concepts in CONCEPTS.items():
        slugs = [c[0] for c in concepts]
        for slug, en_title, en_body, zh_title, zh_body, para_en, para_zh in concepts:
            lang = rng.choice(("en", "zh"))
            path = f"knowledge/{slug}/{slug}.md"
            code = _code(rng, codes)
            concept_info[slug] = (path, lang, en_title, zh_title)
            siblings = rng.sample([s for s in slugs if s != slug], 2)
            title, text = (en_title, en_body) if lang == "en" else (zh_title, zh_body)
            code_line = f"Tracked as {code}." if lang == "en" else f"跟踪编号：{code}。"
            links = [_topic_line(topic, lang)]
            sib = [(s, next(c for c in concepts if c[0] == s)) for s in siblings]
            if lang == "en":
                links.append("See also " + ", ".join(f"[[{s}|{c[1]}]]" for s, c in sib) + ".")
            else:
                links.append("另见" + "、".join(f"[[{s}|{c[3]}]]" for s, c in sib) + "。")
            chain = CHAINS.get(slug)
            if chain:
                links.append(f"{chain[0]}:: [[{chain[1]}|{chain[2]}]]")
            body = f"{text}\n\n{code_line}\n\n" + "\n".join(links)
            b.note(path, title, body, topic=topic, updated=b.days_ago(20, 365))
            if rng.random() < 0.5:
                b.read(path, b.days_ago(0, 45), rng.randint(1, 6))
            b.query("exact", f"what is {code}" if lang == "en" else f"{code} 是什么", [path])
            b.query("paraphrase", para_en if lang == "en" else para_zh, [path])
            b.query("cross_language", zh_title if lang == "en" else en_title, [path])
            if chain:
                _, bslug, btitle, btext, q_en, q_zh = chain
                bpath = f"knowledge/{bslug}/{bslug}.md"
                b.note(bpath, btitle, f"{btext}\n\n{_topic_line(topic, 'en')}", topic=topic,
                       updated=b.days_ago(60, 300))
                b.query("multi_hop", q_en if lang == "en" else q_zh, [path, bpath])

    # -- hubs -------------------------------------------------------------------------------
    for topic, (en, zh) in TOPICS.items():
        path = f"knowledge/{hub_slug(topic)}/{hub_slug(topic)}.md"
        items = []
        for c in CONCEPTS.get(topic, []):
            cpath, lang, en_title, zh_title = concept_info[c[0]]
            items.append(f"- [[{c[0]}|{en_title if lang == 'en' else zh_title}]]")
        intro = f"Map of the notes on {en}. {zh}相关笔记的总览。"
        body = intro + ("\n\n" + "\n".join(items) if items else "")
        b.note(path, f"{en.capitalize()} overview · {zh}总览", body, topic=topic,
               updated=b.days_ago(5, 30), role="reference")
        b.read(path, b.days_ago(0, 3), 12)
        if topic != "office":
            b.query("hub", en, [path])
            b.query("hub", zh, [path])

    # -- ambiguous terms (community) ------------------------------------------------------
    for gi, (query, lang, topic_a, topic_b, notes_a, notes_b) in enumerate(AMBIGUOUS, 1):
        same_day = b.days_ago(80, 100)
        relevant = []
        for side, topic, notes in (("a", topic_a, notes_a), ("b", topic_b, notes_b)):
            for i, (title, text) in enumerate(notes, 1):
                path = f"knowledge/amb{gi}-{side}{i}/amb{gi}-{side}{i}.md"
                b.note(path, title, f"{text}\n\n{_topic_line(topic, lang)}", topic=topic,
                       updated=same_day)
                if side == "a":
                    relevant.append(path)
        b.query("community", query, relevant)

    # -- stale vs fresh (recency) -----------------------------------------------------------
    for i, (lang, query, (s_title, s_text), (f_title, f_text)) in enumerate(STALE_FRESH, 1):
        stale = f"knowledge/office-sf{i}-old/office-sf{i}-old.md"
        fresh = f"knowledge/office-sf{i}/office-sf{i}.md"
        line = _topic_line("office", lang)
        b.note(stale, s_title, f"{s_text}\n\n{line}", topic="office", updated=b.days_ago(400, 600))
        b.note(fresh, f_title, f"{f_text}\n\n{line}", topic="office", updated=b.days_ago(2, 20))
        b.read(fresh, b.days_ago(0, 5), rng.randint(3, 9))
        b.query("fresh", query, [fresh])

    # -- archived vs live (archive filter) --------------------------------------------------
    for i, (lang, query, (a_title, a_text), (l_title, l_text)) in enumerate(ARCHIVED, 1):
        when = b.days_ago(300, 700)
        day = when.strftime("%Y-%m-%d")
        old = f"daily/{day}/office-note-{i}/office-note-{i}.md"
        live = f"knowledge/office-live-{i}/office-live-{i}.md"
        line = _topic_line("office", lang)
        b.note(old, a_title, f"{a_text}\n\n{line}", topic="office", updated=when,
               layer="daily", status="archived")
        b.note(live, l_title, f"{l_text}\n\n{line}", topic="office", updated=b.days_ago(10, 60))
        b.archived.append(old)
        b.query("archived", query, [live], forbidden=[old])

    # -- daily stand-ups (in-degree for concepts, noise for everything) ----------------------
    slugs = sorted(concept_info)
    weights = [1.0 / (1 + r) ** 0.8 for r in range(len(slugs))]
    rng.shuffle(weights)
    for i in range(n_daily):
        when = now - timedelta(days=i + 1, hours=rng.uniform(-4, 4))
        day = when.strftime("%Y-%m-%d")
        lang = rng.choice(("en", "zh"))
        picked = list(dict.fromkeys(rng.choices(slugs, weights, k=rng.randint(1, 3))))
        lines = []
        for slug in picked:
            _, _, en_title, zh_title = concept_info[slug]
            template = rng.choice(WORKED_EN if lang == "en" else WORKED_ZH)
            lines.append("- " + template.format(
                link=f"[[{slug}|{en_title if lang == 'en' else zh_title}]]"))
        for filler in rng.sample(DAILY_EN if lang == "en" else DAILY_ZH, rng.randint(1, 2)):
            lines.append(f"- {filler}")
        first_topic = next(t for t, cs in CONCEPTS.items() if any(c[0] == picked[0] for c in cs))
        title = f"Standup {day}" if lang == "en" else f"站会 {day}"
        b.note(f"daily/{day}/standup/standup.md", title, "\n".join(lines), topic=first_topic,
               updated=when, layer="daily")

    files = dict(b.files)
    files.update(_meta_files(b))
    spec = VaultSpec("synthetic", files, b.queries,
                     mtimes={p: t.timestamp() for p, t in b.updated.items()}, now=now)
    return Dataset(
        name="synthetic", vaults=[spec], kinds=dict(KINDS), levels=("node",),
        level_names={"node": "note"},
        notes=[f"seed {seed}, now {_iso(now)}: {sum(p.endswith('.md') for p in files)} notes, "
               f"{len(b.queries)} queries.",
               "Small kinds (4-20 queries) are mechanism checks: read their CIs."])


def _meta_files(b: _Builder) -> dict[str, str]:
    from reme_agent.recall.signals import (
        AccessEntry,
        AccessLogSignal,
        ArchivedSignal,
        CommunitiesSignal,
        RecencySignal,
        dump_signal,
    )

    entries = {}
    for path, (when, hits) in sorted(b.reads.items()):
        days = sorted({(when - timedelta(days=2 * k)).strftime("%Y-%m-%d") for k in range(hits)})
        recent = sum(1 for d in days
                     if datetime.fromisoformat(d).replace(tzinfo=UTC) > b.now - timedelta(days=30))
        entries[path] = AccessEntry(last_read=_iso(when), hit_days=days, hits_30d=recent)
    recency = {}
    for path, updated in sorted(b.updated.items()):
        last = max(updated, b.reads.get(path, (updated, 0))[0])
        recency[path] = round(math.exp(-(b.now - last).total_seconds() / 86400 / 60.0), 6)
    sizes: dict[int, int] = {}
    for cid in b.community.values():
        sizes[cid] = sizes.get(cid, 0) + 1
    return {
        "meta/communities.json": dump_signal(CommunitiesSignal(
            computed_at=b.now, algorithm="synthetic-topics", resolution=1.0,
            communities=dict(sorted(b.community.items())),
            stats={"count": len(sizes), "sizes": {str(k): v for k, v in sorted(sizes.items())}})),
        "meta/access_log.json": dump_signal(AccessLogSignal(computed_at=b.now, entries=entries)),
        "meta/recency.json": dump_signal(RecencySignal(computed_at=b.now, scores=recency)),
        "meta/archived.json": dump_signal(ArchivedSignal(computed_at=b.now, threshold=1.0,
                                                         archived=sorted(b.archived))),
    }


def load(data: object = None, *, limit: int | None = None, seed: int = 7,
         now: datetime = DEFAULT_NOW) -> Dataset:
    """The synthetic dataset (`data` is ignored: it is generated)."""
    ds = build(seed=seed, now=now)
    ds.vaults[0].queries = round_robin(ds.vaults[0].queries, limit)
    return ds
