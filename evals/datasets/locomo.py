"""LoCoMo (snap-research/LoCoMo) as vaults: one per conversation, one daily note per session.

Why this layout: it is what the synchronizer would write for a chat history (a daily note per
session under `daily/<date>/session-<n>/`), built deterministically with no LLM. Each turn is
its own paragraph, so each turn is its own block, and the line `**Speaker** (D3:7): text`
carries the dia_id: a block hit is relevant at turn level when its lines hold a gold turn.
Shared images become `[image: <BLIP caption>]` after the text (some questions ask about them).

Ground truth: questions of categories 1-4 (5 is adversarial: no answer in the conversation).
Evidence strings are normalised with the data README's regex and replaced by the audit file's
`correct_evidence` where the audit has the question; ids that match no turn are dropped, and a
question left with no evidence is skipped. Session level = the daily notes holding the gold
turns; turn level = the gold dia_ids.

Optional (`observations=True`): the dataset's per-session `observation` facts become knowledge
notes (one per session and speaker, one fact per paragraph tagged with its dia_id, linking
back to the session). They count for the session they come from, and a fact block counts as
its dia_id at turn level: a test of a distilled knowledge layer that needs no LLM.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from evals.datasets import Dataset, Query, VaultSpec, data_dir, data_json, keyed_lines

FILE = "locomo_dev.json"
AUDIT = "locomo_dev_audit_errors.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
EVIDENCE_RE = re.compile(r"D:?(\d+):0*(\d+)")
TURN_RE = re.compile(r"\((D\d+:\d+)\)")
_SESSION_KEY = re.compile(r"^session_(\d+)$")


def normalise_evidence(items: list[Any], known: set[str]) -> list[str]:
    """Split on ';' and whitespace, apply the README regex, drop ids that match no turn."""
    out: list[str] = []
    for item in items:
        for part in re.split(r"[;\s]+", str(item)):
            for a, b in EVIDENCE_RE.findall(part):
                dia = f"D{int(a)}:{int(b)}"
                if dia in known and dia not in out:
                    out.append(dia)
    return out


def session_date(raw: str) -> datetime:
    return datetime.strptime(raw.strip(), "%I:%M %p on %d %B, %Y")


def _one_line(text: Any) -> str:
    return " ".join(str(text).split())


def _turn_line(turn: dict[str, Any]) -> str:
    line = f"**{turn['speaker']}** ({turn['dia_id']}): {_one_line(turn.get('text', ''))}"
    caption = turn.get("blip_caption")
    if caption:
        line += f" [image: {_one_line(caption)}]"
    return line


def _sessions(conv: dict[str, Any]) -> list[tuple[int, datetime, list[dict[str, Any]]]]:
    out = []
    for key, turns in conv.items():
        match = _SESSION_KEY.match(key)
        if match and isinstance(turns, list) and turns:
            n = int(match.group(1))
            out.append((n, session_date(conv[f"session_{n}_date_time"]), turns))
    return sorted(out)


def session_note(sample_id: str, n: int, when: datetime,
                 turns: list[dict[str, Any]]) -> tuple[str, str]:
    """(path, text) of one session's daily note."""
    from reme_agent.engine.parser import dump_note

    day = when.strftime("%Y-%m-%d")
    path = f"daily/{day}/session-{n}/session-{n}.md"
    title = f"Session {n} · {when.day} {when.strftime('%B %Y')}"
    frontmatter = {
        "title": title,
        "created": when.strftime("%Y-%m-%dT%H:%M:%S"),
        "lifecycle": "streaming", "scope": "instance", "source": "derived",
        "role": "observation", "status": "active",
        "tags": ["locomo", sample_id],
    }
    body = "\n\n".join(_turn_line(t) for t in turns) + "\n"
    return path, dump_note(frontmatter, body)


def observation_notes(sample_id: str, sample: dict[str, Any], session_paths: dict[int, str],
                      known: set[str]) -> dict[str, tuple[str, int]]:
    """path -> (text, session) for the optional knowledge notes built from `observation`."""
    from reme_agent.engine.parser import dump_note

    out: dict[str, tuple[str, int]] = {}
    for key, per_speaker in (sample.get("observation") or {}).items():
        match = re.match(r"session_(\d+)_observation", key)
        if not match or int(match.group(1)) not in session_paths:
            continue
        n = int(match.group(1))
        for speaker, facts in per_speaker.items():
            lines = []
            for fact in facts:
                text, dia = (fact[0], fact[1]) if isinstance(fact, list) and len(fact) > 1 else (fact, "")
                dias = normalise_evidence([dia], known)
                tag = f" ({dias[0]})" if dias else ""
                lines.append(f"- {_one_line(text)}{tag}")
            if not lines:
                continue
            slug = f"{sample_id}-s{n}-{speaker.lower()}"
            path = f"knowledge/{slug}/{slug}.md"
            frontmatter = {
                "title": f"{speaker} in session {n}",
                "lifecycle": "evolving", "scope": "instance", "source": "derived",
                "role": "profile", "tags": ["locomo", sample_id],
            }
            body = "\n\n".join(lines) + f"\n\nsource:: [[{session_paths[n]}]]\n"
            out[path] = (dump_note(frontmatter, body), n)
    return out


def load_audit(path: Path) -> dict[str, list[str]]:
    if not path.is_file():
        return {}
    rows = json.loads(path.read_text(encoding="utf-8"))
    return {r["question_id"]: r["correct_evidence"] for r in rows
            if isinstance(r, dict) and r.get("correct_evidence")}


def load(data: str | Path | None = None, *, limit: int | None = None,
         conversations: int | None = None, observations: bool = False,
         use_audit: bool = True) -> Dataset:
    """The LoCoMo dataset; `limit` caps the number of queries (whole conversations are kept)."""
    root = data_dir(data)
    samples = data_json(FILE, data, lambda d: isinstance(d, list) and all(
        isinstance(x, dict) and isinstance(x.get("conversation"), dict) for x in d),
        'a JSON list of {"sample_id", "conversation", "qa"} objects')
    audit = load_audit(root / AUDIT) if use_audit else {}
    vaults: list[VaultSpec] = []
    budget = limit if limit is not None else 10**9
    for index, sample in enumerate(samples):
        if conversations is not None and index >= conversations:
            break
        if budget <= 0:
            break
        sample_id = sample.get("sample_id", f"conv-{index}")
        files: dict[str, str] = {}
        line_keys: dict[str, dict[int, str]] = {}
        node_keys: dict[str, str] = {}
        session_paths: dict[int, str] = {}
        turn_session: dict[str, int] = {}
        mtimes: dict[str, float] = {}
        sessions = _sessions(sample["conversation"])
        for n, when, turns in sessions:
            path, text = session_note(sample_id, n, when, turns)
            files[path] = text
            mtimes[path] = when.replace(tzinfo=UTC).timestamp()
            line_keys[path] = keyed_lines(text, TURN_RE)
            session_paths[n] = path
            for t in turns:
                turn_session[t["dia_id"]] = n
        known = set(turn_session)
        if observations:
            for path, (text, n) in observation_notes(sample_id, sample, session_paths, known).items():
                files[path] = text
                line_keys[path] = keyed_lines(text, TURN_RE)
                node_keys[path] = session_paths[n]
                mtimes[path] = mtimes[session_paths[n]]
        queries: list[Query] = []
        for qi, qa in enumerate(sample.get("qa", [])):
            category = qa.get("category")
            if category not in CATEGORIES or budget <= 0:
                continue
            evidence = audit.get(f"locomo_{index}_qa{qi}", qa.get("evidence", []))
            gold = normalise_evidence(evidence, known)
            if not gold:
                continue
            gold_notes = frozenset(session_paths[turn_session[d]] for d in gold)
            queries.append(Query(qid=f"{sample_id}/qa{qi}", text=str(qa["question"]),
                                 relevant=gold_notes, kind=CATEGORIES[category],
                                 relevant_blocks=frozenset(gold)))
            budget -= 1
        if queries:
            # The synchronizer writes a session's note when it happens, and the questions
            # come a day after the last session: mtimes and the search clock say so.
            now = max(w for _, w, _ in sessions).replace(tzinfo=UTC) + timedelta(days=1)
            vaults.append(VaultSpec(sample_id, files, queries, line_keys, node_keys,
                                    mtimes=mtimes, now=now))
    name = "locomo+obs" if observations else "locomo"
    return Dataset(
        name=name, vaults=vaults,
        kinds={c: f"LoCoMo category {k} ({c})" for k, c in CATEGORIES.items()},
        levels=("node", "block"), level_names={"node": "session", "block": "turn"},
        notes=[
            "One vault per conversation; a daily note per session, one block per turn.",
            "Evidence: README normalisation + audit corrections"
            + ("" if use_audit else " (audit OFF)") + "; category 5 excluded.",
            "Most questions have one gold session, so session P@5 is capped near 0.27.",
        ])
