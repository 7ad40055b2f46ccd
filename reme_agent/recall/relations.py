"""Relation questions: "who owns X", "X 是谁负责的", "which ADR replaced X" (DESIGN §4, §7).

A predicate link (`owner:: [[王芳]]` in X's note, DESIGN §4) *is* the answer to a question
about X's owner; the answer note usually shares no word with the question. So when a query
names a note (`names.py`) and asks for a relation, the notes linked to it by a matching
predicate, in either direction (`X --owner--> 王芳`, or `王芳 --owns--> X`), are answers.

The lexicon below maps question words, in English and Chinese, to predicates. It is kept
small and general: families of predicates that hand-kept vaults and the jobs use (owner,
author, decided_by, depends_on, caused_by, supersedes, ...), not the names of any one vault.
Besides it, a query word that *is* a predicate on the named note's links (`algorithm`,
`severity`, "tech lead" for `tech_lead`) asks for that predicate.

Single Chinese characters (用, 的) are never cues: they are in every question.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from reme_agent.recall.names import NameMatch
from reme_agent.recall.normalize import fold, spaced, within_words

__all__ = ["LEXICON", "RelationHit", "asked_predicates", "follow", "links_of"]

# (English cue phrases, Chinese cue phrases, predicates they ask for)
LEXICON: tuple[tuple[tuple[str, ...], tuple[str, ...], frozenset[str]], ...] = (
    (("own", "owns", "owned", "owner", "responsible", "in charge", "maintain", "maintains",
      "maintained", "maintainer", "handle", "handles", "handled", "dri"),
     ("负责", "归谁", "谁管", "管理", "维护", "owner"),
     frozenset({"owner", "owned_by", "owns", "maintainer", "maintained_by", "maintains",
                "responsible", "dri", "assignee", "lead"})),
    (("wrote", "write", "written", "author", "authored", "drafted"),
     ("写的", "作者", "谁写", "起草", "撰写"),
     frozenset({"author", "authors", "written_by", "created_by", "creator", "by"})),
    (("decided", "decide", "decision", "approved", "approve", "approver", "signed off",
      "reviewed", "reviewer"),
     ("决定", "拍板", "批准", "审批", "评审", "审核"),
     frozenset({"decided_by", "decider", "decision_maker", "approver", "approved_by",
                "reviewer", "reviewed_by", "reviewers"})),
    (("commander", "incident commander", "led", "lead", "leads", "ran", "coordinated"),
     ("指挥", "牵头", "带头", "主导"),
     frozenset({"commander", "incident_commander", "ic", "lead", "leader", "tech_lead",
                "led_by"})),
    (("tech lead", "technical lead", "architect"),
     ("技术负责人", "架构师", "技术牵头"),
     frozenset({"tech_lead", "lead", "architect"})),
    (("vet", "veterinarian", "doctor", "physician", "dentist"),
     ("兽医", "医生", "大夫", "牙医"),
     frozenset({"vet", "doctor", "physician", "dentist"})),
    (("with", "together", "companion", "accompanied"),
     ("和谁", "跟谁", "同行", "一起"),
     frozenset({"with", "companion", "companions", "participants", "attendees", "members"})),
    (("whose", "from whom", "came from", "source", "origin"),
     ("谁的", "来自", "来源", "出自"),
     frozenset({"from", "source", "origin", "by", "author"})),
    (("depend", "depends", "dependency", "dependencies", "rely", "relies", "require",
      "requires", "built on", "use", "uses", "used"),
     ("依赖", "用什么", "用的", "基于", "用了"),
     frozenset({"depends_on", "uses", "requires", "built_on", "based_on", "dependency"})),
    (("cause", "caused", "causes", "root cause", "why did", "because of"),
     ("原因", "导致", "起因", "根因", "引起"),
     frozenset({"caused_by", "cause", "root_cause", "causes"})),
    (("affect", "affected", "affects", "impact", "impacted", "took down", "take down",
      "broke", "hit"),
     ("影响", "波及", "搞挂", "打挂"),
     frozenset({"affected", "affects", "impacted", "impacts", "affected_by"})),
    (("replace", "replaced", "replaces", "supersede", "superseded", "supersedes"),
     ("取代", "替代", "代替", "替换"),
     frozenset({"supersedes", "superseded_by", "replaces", "replaced_by"})),
    (("follow", "followed", "follows", "after", "came out of", "result of", "resulted"),
     ("之后", "后续", "跟进"),
     frozenset({"follows", "followed_by", "decided_in", "result_of"})),
    (("about", "concern", "concerns", "topic", "subject"),
     ("关于", "讲的是", "讲什么", "主题"),
     frozenset({"about", "topic", "subject", "concerns"})),
    (("team", "member", "members", "works on"),
     ("团队", "成员", "组里"),
     frozenset({"team", "member_of", "members", "works_on"})),
    (("report to", "reports to", "manager", "boss"),
     ("汇报", "上级", "老板", "经理"),
     frozenset({"reports_to", "manager"})),
)
INBOUND = 0.7     # strength of an answer that links *to* the named note
Links = tuple[list[tuple[str, "str | None"]], list[tuple[str, "str | None"]]]   # out, in
_PREDICATE_WORD = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*")


@dataclass(frozen=True)
class RelationHit:
    path: str          # the answer note
    subject: str       # the note the query names
    predicate: str
    direction: str     # "out": subject links the answer; "in": the answer links the subject
    strength: float    # the subject's name strength


def _has_phrase(words: str, phrase: str) -> bool:
    start = words.find(phrase)
    while start >= 0:
        if within_words(words, start, start + len(phrase)):
            return True
        start = words.find(phrase, start + 1)
    return False


def asked_predicates(query: str, excluded: Iterable[tuple[int, int]] = ()) -> set[str]:
    """Predicates the query's question words ask for (none when it asks no relation).

    `excluded` are spans of `spaced(query)` taken by names, whose words are not cues
    ("the *Owner* handbook" asks nothing).
    """
    words = spaced(query)
    for start, end in excluded:
        words = words[:start] + " " * (end - start) + words[end:]
    folded = fold(query)
    out: set[str] = set()
    for english, chinese, predicates in _CUES:
        if english.search(words) or chinese.search(folded):
            out |= predicates
    return out


def _cue_patterns() -> list[tuple[re.Pattern[str], re.Pattern[str], frozenset[str]]]:
    """Each lexicon row as two searches: its English cues on word boundaries (what
    `_has_phrase` checks: a space or an end on both sides; the cues are ASCII) and its
    Chinese cues anywhere."""
    out = []
    never = "(?!)"
    for english, chinese, predicates in LEXICON:
        if not all(cue.isascii() and cue == cue.strip() for cue in english):
            raise ValueError(f"English cues must be ASCII words: {english}")
        words = "|".join(re.escape(cue) for cue in english) or never
        phrases = "|".join(re.escape(cue) for cue in chinese) or never
        out.append((re.compile(f"(?<![^ ])(?:{words})(?![^ ])"), re.compile(phrases),
                    predicates))
    return out


_CUES = _cue_patterns()


def _literal(query_words: str, predicate: str) -> bool:
    """A predicate named in the query itself: `algorithm`, "tech lead" for tech_lead."""
    if not predicate or not _PREDICATE_WORD.fullmatch(predicate.lower()):
        return False
    return _has_phrase(query_words, predicate.lower().replace("_", " "))


def links_of(graph: Any, path: str, seen: dict[str, Links] | None = None) -> Links:
    """(outbound, inbound) links of a note, read once per query when `seen` is passed (a
    hub's inbound list is decoded and sorted on every graph call)."""
    got = seen.get(path) if seen is not None else None
    if got is None:
        got = (graph.outbound(path), graph.inbound(path))
        if seen is not None:
            seen[path] = got
    return got


def follow(graph: Any, subjects: dict[str, NameMatch], query: str, *,
           min_strength: float = 0.4, max_subjects: int = 3,
           seen: dict[str, Links] | None = None) -> dict[str, RelationHit]:
    """Answer notes of the relation the query asks about its named notes (best per path);
    `seen` keeps the links read (`links_of`) for the caller."""
    ranked = sorted((m for m in subjects.values() if m.strength >= min_strength),
                    key=lambda m: (-m.strength, m.path))[:max_subjects]
    if not ranked:
        return {}
    spans = [m.span for m in ranked if m.span is not None]
    asked = asked_predicates(query, spans)
    words = spaced(query)
    for start, end in spans:
        words = words[:start] + " " * (end - start) + words[end:]
    out: dict[str, RelationHit] = {}
    named = {m.path for m in ranked}
    for match in ranked:
        outbound, inbound = links_of(graph, match.path, seen)
        for direction, links in (("out", outbound), ("in", inbound)):
            for other, predicate in links:
                if not predicate or other in named or graph.is_dangling(other):
                    continue
                key = predicate.lower()
                if key not in asked and not _literal(words, key):
                    continue
                # A note's own links describe it ("what X depends on" = X's depends_on);
                # a link into X answers the converse question, less often asked.
                strength = match.strength * (1.0 if direction == "out" else INBOUND)
                old = out.get(other)
                if old is None or strength > old.strength:
                    out[other] = RelationHit(other, match.path, predicate, direction, strength)
    return out
