"""Auto-link L1 batch benchmark: a generated vault, thousands of node names, no LLM.

    .venv/bin/python bench/bench_autolink.py [--notes 10000] [--names 5000] [--no-fuzzy]
        [--judge] [--embedder hash|use]

The vault comes from `generate.generate_vault` (bilingual notes with links). Then `--names` of
its notes get distinct titles and aliases (English "amber falcon", Chinese "红色凤凰"), words
that the generator never writes, and every note gets a paragraph mentioning a few of those
names (some inside code or a URL, which must stay unlinked), one more in a variant form
("amber falcons", "红色 凤凰") and one reordered ("falcon amber", "凤凰红色"), which only fuzzy
matching finds (the reordered ones are near windows, embedded and scored). `--no-fuzzy` measures exact L1
alone (auto-link before G5); by default fuzzy proposals are only reported (no model), and
`--judge` adds a judge that accepts every proposal, so the proposals are linked too. Measured: the whole L1 batch
(name index + resolver from an unindexed vault, matching, additive proof, CAS writes with
fsync), then a rerun that must add nothing. The issue's target is < 60 s for 10,000 notes
and 5,000 names. Prints JSON; asserts only that the run is correct.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from generate import generate_vault, note_path  # noqa: E402

from reme_agent.config import Settings  # noqa: E402
from reme_agent.maintenance.autolink.runner import AutoLinker  # noqa: E402
from reme_agent.vault import open_vault  # noqa: E402

EN_ADJ = ["amber", "azure", "bold", "brisk", "calm", "coral", "crimson", "dusky", "eager", "fabled", "gilded", "hollow", "ivory", "jade", "keen", "lunar", "misty", "noble", "onyx", "pale", "quiet", "rapid", "rustic", "scarlet", "silent", "silver", "solar", "stark", "stormy", "sunny", "tawny", "tidal", "umber", "velvet", "vivid", "wild", "windy", "wise", "young", "zesty", "arctic", "cobalt", "copper", "dappled", "frosty", "golden", "hazel", "indigo", "lilac", "mossy"]
EN_NOUN = ["falcon", "harbor", "meadow", "lantern", "compass", "glacier", "orchard", "beacon", "canyon", "citadel", "comet", "delta", "ember", "fjord", "grove", "heron", "island", "jaguar", "kestrel", "lagoon", "marsh", "nebula", "oasis", "prairie", "quarry", "raven", "summit", "thicket", "tundra", "valley", "willow", "zephyr", "anchor", "badger", "cedar", "dune", "estuary", "ferry", "garnet", "hamlet", "iris", "juniper", "kiln", "lotus", "mesa", "nectar", "otter", "pebble", "quill", "reef"]
ZH_ADJ = list("红橙黄绿青蓝紫黑白灰金银铜铁玉石木火水土风云雷电霜雪冰晨暮春夏秋冬东南西北远近高低深浅明暗甲乙丙丁戊己庚辛壬癸")
ZH_NOUN = ["凤凰", "麒麟", "白鹤", "苍鹰", "游鱼", "松柏", "梅花", "竹林", "山峰", "江河", "湖泊",
           "海岛", "星辰", "月光", "朝阳", "晚霞", "烟雨", "雷霆", "峡谷", "草原", "沙漠", "森林",
           "城堡", "灯塔", "码头", "桥梁", "宫殿", "庭院", "楼阁", "古琴", "长笛", "铜镜", "玉佩",
           "宝剑", "战鼓", "锦旗", "罗盘", "沙漏", "风铃", "纸鸢", "灯笼", "茶壶", "砚台", "书卷",
           "画屏", "棋盘", "钟楼", "石碑", "瀑布", "溪流"]
_TITLE_RE = re.compile(r"^title: .*$", re.M)


def make_names(n: int, rng: random.Random) -> list[tuple[str, str]]:
    """n distinct (title, alias) pairs, half English and half Chinese."""
    en = [(f"{a.capitalize()} {b.capitalize()}", f"{a}-{b} system") for a in EN_ADJ for b in EN_NOUN]
    zh = [(f"{a}色{b}" if len(a) == 1 else f"{a}{b}", f"{a}{b}项目") for a in ZH_ADJ for b in ZH_NOUN]
    rng.shuffle(en)
    rng.shuffle(zh)
    half = n // 2
    if half > len(en) or n - half > len(zh):
        raise SystemExit(f"at most {2 * min(len(en), len(zh))} names")
    return en[:half] + zh[:n - half]


def prepare(root: Path, notes: int, names: int, seed: int = 11) -> dict[str, int]:
    """Generate the vault, give `names` notes distinct names and mention them elsewhere."""
    generate_vault(root, notes)
    rng = random.Random(seed)
    named = rng.sample(range(notes), names)
    pairs = make_names(names, rng)
    owner = dict(zip(named, pairs, strict=True))
    mentions = 0
    for i in range(notes):
        path = root / note_path(i)
        text = path.read_text(encoding="utf-8")
        if i in owner:
            title, alias = owner[i]
            text = _TITLE_RE.sub(f"title: {title}\naliases: [\"{alias}\"]", text, count=1)
        picks = [pairs[j] for j in rng.sample(range(names), 5)]
        shown = [t if rng.random() < 0.7 else a for t, a in picks]
        extra, other = pairs[rng.randrange(names)][0], pairs[rng.randrange(names)][0]
        variant = f"{extra.lower()}s" if extra.isascii() else f"{extra[:2]} {extra[2:]}"
        near = " ".join(reversed(other.split())) if other.isascii() else other[2:] + other[:2]
        para = (f"Context: we compared {shown[0]} with {shown[1]}; 另外 {shown[2]} 依赖 "
                f"{shown[3]}, and {shown[4]} came up again. Code `{shown[0]}` and "
                f"https://example.com/{shown[1].replace(' ', '-')} stay plain. "
                f"Later: {variant}. Also the {near}.")
        mentions += 7
        path.write_text(text.rstrip("\n") + "\n\n" + para + "\n", encoding="utf-8")
    return {"named_notes": names, "mentions_written": mentions}


class _YesJudge:
    """Accepts every proposal (its first candidate): the cost of linking them all."""

    def choose(self, questions: list) -> dict:
        return {q.id: q.candidates[0].path for q in questions}

    def related(self, questions: list) -> dict:
        return {q.id: False for q in questions}

    def predicate(self, questions: list) -> dict:
        return {q.id: None for q in questions}


def _by_kind(changed: list[dict]) -> dict[str, int]:
    kinds: dict[str, int] = {}
    for r in changed:
        for x in r["links"]:
            kinds[x["kind"]] = kinds.get(x["kind"], 0) + 1
    return kinds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", type=int, default=10_000)
    ap.add_argument("--names", type=int, default=5_000)
    ap.add_argument("--out", default="bench/out")
    ap.add_argument("--no-fuzzy", action="store_true", help="Exact names only (L1 before G5).")
    ap.add_argument("--judge", action="store_true", help="Accept every fuzzy proposal.")
    ap.add_argument("--embedder", default="hash", choices=("hash", "use"))
    args = ap.parse_args()

    root = Path(args.out) / f"autolink-{args.notes}"
    if root.exists():
        shutil.rmtree(root)
    t = time.perf_counter()
    prep = prepare(root, args.notes, args.names)
    gen_s = time.perf_counter() - t

    settings = Settings(embedder={"name": args.embedder}, index={"progress": False},
                        autolink={"fuzzy": not args.no_fuzzy})
    vault = open_vault(root, settings, create=True)
    linker = AutoLinker(vault, judge=_YesJudge() if args.judge else None)
    t = time.perf_counter()
    ctx = linker.context()
    ctx_s = time.perf_counter() - t
    t = time.perf_counter()
    first = linker.run_l1(ctx=ctx, refresh=False)
    l1_s = time.perf_counter() - t
    t = time.perf_counter()
    again = linker.run("L1", refresh=False)
    rerun_s = time.perf_counter() - t
    vault.close()

    sample = next((r for r in first["changed"] if r["links"]), None)
    text = (root / sample["path"]).read_text(encoding="utf-8") if sample else ""
    assert "`[[" not in text and "https://example.com/[[" not in text, "linked inside code/URL"
    assert again.l1["links_added"] == 0, "a rerun must add nothing"
    out = {
        "notes": args.notes, "names_in_text": args.names, **prep,
        "generate_s": round(gen_s, 2),
        "index_nodes": first["nodes"], "index_name_keys": first["names"],
        "context_s": round(ctx_s, 2), "l1_pass_s": round(l1_s, 2),
        "l1_batch_total_s": round(ctx_s + l1_s, 2),
        "notes_scanned": first["notes_scanned"], "notes_changed": first["notes_changed"],
        "fuzzy": not args.no_fuzzy, "judge": args.judge, "embedder": args.embedder,
        "links_added": first["links_added"], "ambiguous_left": len(first["ambiguous"]),
        "fuzzy_proposals_left": len(first["proposals"]),
        "links_by_kind": _by_kind(first["changed"]),
        "near_texts_embedded": linker.similarity.embedded if not args.no_fuzzy else 0,
        "refused": len(first["refused"]),
        "rerun_s": round(rerun_s, 2), "rerun_links_added": again.l1["links_added"],
        "target_s": 60, "ok": ctx_s + l1_s < 60,
    }
    print(json.dumps(out, ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()
