"""Deterministic generated vaults for benchmarks: N bilingual notes, ~5 blocks each, with links.

Two kinds of text (`generate_vault(..., text=...)`):
- `vocab` (the default of `generate_vault`, kept for the tests and the scale benches): words
  drawn from a fixed ~75-word vocabulary, so BM25 and embeddings see heavy term overlap;
- `real` (`real_text.py`, the default of the search benches): notes cut from LoCoMo chat turns
  and CMRC 2018 paragraphs, so a quality figure (Hit@5 of queries built from a note's own
  phrases) means something.

Each note links to 2-6 others (preferential attachment, so there are hubs).
"""

from __future__ import annotations

import os
import random
from pathlib import Path

EN_WORDS = ["search", "index", "vector", "graph", "memory", "note", "agent", "token", "embedding", "query", "ranking", "fusion", "cache", "latency", "budget", "schema", "link", "community", "decay", "archive", "merge", "split", "daily", "knowledge", "resource", "session", "user", "project", "review", "deploy", "server", "client", "database", "migration", "test", "release", "design", "security", "key", "rotation", "backup", "restore", "monitor", "alert", "metric", "dashboard", "team", "meeting", "decision", "plan", "progress", "finding", "contract", "invoice", "budget", "travel", "hotel", "flight", "family", "dinner", "music", "python", "rust", "java", "kernel", "network", "packet", "router", "config", "model", "prompt", "tool", "workflow", "pipeline"]
ZH_WORDS = ["检索", "索引", "向量", "图谱", "记忆", "笔记", "智能体", "分词", "嵌入", "查询", "排序", "融合", "缓存", "延迟", "预算", "模式", "链接", "社区", "衰减", "归档", "合并", "拆分", "日志", "知识", "资源", "会话", "用户", "项目", "评审", "部署", "服务器", "客户端", "数据库", "迁移", "测试", "发布", "设计", "安全", "密钥", "轮换", "备份", "恢复", "监控", "告警", "指标", "团队", "会议", "决策", "计划", "进展", "发现"]


def _sentence(rng: random.Random, zh: bool) -> str:
    if zh:
        return "".join(rng.choice(ZH_WORDS) for _ in range(rng.randint(8, 20))) + "。"
    words = [rng.choice(EN_WORDS) for _ in range(rng.randint(10, 24))]
    return " ".join(words).capitalize() + "."


def note_text(i: int, rng: random.Random, targets: list[str]) -> str:
    zh = i % 3 == 0
    title = f"主题 {i}" if zh else f"Topic {i}"
    paras = []
    for b in range(rng.randint(3, 6)):
        body = " ".join(_sentence(rng, zh) for _ in range(rng.randint(2, 4)))
        paras.append(f"## Part {b}\n\n{body}" if b and b % 2 == 0 else body)
    links = ", ".join(f"[[{t}]]" for t in targets)
    return (f"---\ntitle: {title}\ndescription: generated note {i}\nlifecycle: evolving\n"
            f"scope: class\nsource: derived\nrole: concept\ntags: [t{i % 20}]\n---\n"
            f"# {title}\n\n" + "\n\n".join(paras) + f"\n\nrelated:: {links}\n")


def note_path(i: int) -> str:
    return f"knowledge/n{i:06d}/n{i:06d}.md"


def _pick_targets(i: int, notes: int, rng: random.Random, bag: list[int],
                  paths: list[str]) -> list[str]:
    """2-6 link targets of note i by preferential attachment (`bag` holds node ids repeated by
    degree, so uniform picks from it favour hubs); updates `bag`."""
    k = rng.randint(2, 6)
    pool = [rng.choice(bag) if bag and rng.random() < 0.7 else rng.randrange(notes)
            for _ in range(k)]
    bag.extend(pool)
    bag.append(i)
    return sorted({paths[j] for j in pool if j != i})


def generate_vault(root: Path, notes: int, seed: int = 7, *, text: str = "vocab",
                   data: str | os.PathLike[str] | None = None) -> list[str]:
    """Write `notes` notes under root/knowledge; returns their vault-relative paths.

    `text="real"` cuts the notes from LoCoMo and CMRC (`real_text.py`; `data` is the folder
    holding them, default $REME_EVAL_DATA or ../shared/data); "vocab" uses the word lists.
    """
    if text == "real":
        from real_text import generate_real_vault

        return [n.path for n in generate_real_vault(root, notes, seed, data=data)]
    if text != "vocab":
        raise ValueError(f"unknown text kind {text!r} (use 'real' or 'vocab')")
    rng = random.Random(seed)
    paths = [note_path(i) for i in range(notes)]
    bag: list[int] = []
    for i in range(notes):
        targets = _pick_targets(i, notes, rng, bag, paths)
        file = root / paths[i]
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(note_text(i, rng, targets), encoding="utf-8")
    return paths
