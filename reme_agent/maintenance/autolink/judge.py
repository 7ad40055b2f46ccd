"""The three model decisions of auto-link, behind one small interface (DESIGN §9).

L1 ambiguous mentions (which candidate node, or none), L2 related-but-unlinked pairs (link or
not) and L3 bare links (which predicate, or none). The planners and writers never see a model:
they ask a `Judge` and check every answer (a target must be one of the candidates, a predicate
must be a valid id), so a wrong answer can only cause a skip, never a bad write. `JobJudge`
(in `jobs.autolink_job`) answers with the LLM job; tests use `ScriptedJudge` or the job over a
scripted chat model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from reme_agent.maintenance.autolink.names import Node

__all__ = ["Judge", "MentionQuestion", "PairQuestion", "PredicateQuestion", "ScriptedJudge"]


@dataclass(frozen=True)
class MentionQuestion:
    """L1: which node does `text` in `paragraph` of `note` mean, if any?

    `kind` says why L1 asks: "ambiguous" (an exact name several nodes carry), "variant" (the
    name in another form: "JWTs", "ＪＷＴ", "rate-limited", "go" for `Go`) or "near" (close
    to `name`, e.g. "rotation of JWT keys"; `score` is the embedding similarity). `start` is
    the mention's offset in the note body.
    """

    id: int
    note: str
    text: str
    paragraph: str
    candidates: tuple[Node, ...]
    kind: Literal["ambiguous", "variant", "near"] = "ambiguous"
    name: str = ""
    start: int = -1
    score: float | None = None


@dataclass(frozen=True)
class PairQuestion:
    """L2: should `source` say "See also" `target`? Both are knowledge nodes, unlinked."""

    id: int
    source: Node
    target: Node
    similarity: float
    same_community: bool | None


@dataclass(frozen=True)
class PredicateQuestion:
    """L3: what relation does the bare link to `target` on `line` of `source` express?"""

    id: int
    source: Node
    target: Node
    line: str


class Judge(Protocol):
    """Answers keyed by question id; a missing id means "no decision" (skip)."""

    def choose(self, questions: Sequence[MentionQuestion]) -> Mapping[int, str | None]: ...

    def related(self, questions: Sequence[PairQuestion]) -> Mapping[int, bool]: ...

    def predicate(self, questions: Sequence[PredicateQuestion]) -> Mapping[int, str | None]: ...


@dataclass
class ScriptedJudge:
    """A judge from fixed answers, for tests and dry runs: by mention text / pair / target."""

    choices: dict[str, str | None] = field(default_factory=dict)
    pairs: dict[tuple[str, str], bool] = field(default_factory=dict)
    predicates: dict[tuple[str, str], str | None] = field(default_factory=dict)
    asked: list[object] = field(default_factory=list)

    def choose(self, questions: Sequence[MentionQuestion]) -> Mapping[int, str | None]:
        self.asked.extend(questions)
        return {q.id: self.choices.get(q.text) for q in questions}

    def related(self, questions: Sequence[PairQuestion]) -> Mapping[int, bool]:
        self.asked.extend(questions)
        return {q.id: self.pairs.get((q.source.path, q.target.path), False) for q in questions}

    def predicate(self, questions: Sequence[PredicateQuestion]) -> Mapping[int, str | None]:
        self.asked.extend(questions)
        return {q.id: self.predicates.get((q.source.path, q.target.path)) for q in questions}
