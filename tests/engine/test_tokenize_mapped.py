"""Cutting with the memory-mapped jieba dictionary (G6) gives plain jieba's tokens.

The reference is a fresh ``jieba.Tokenizer`` loaded jieba's own way (its full FREQ dict);
the mapped one is the production ``_mapped_tokenizer`` over a file written by
``jieba_dict.write_cache``. Processes that must start without the full dictionary run as
subprocesses with their own ``REME_CACHE_DIR``.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evals.datasets import data_dir
from reme_agent.engine import jieba_dict
from reme_agent.engine import tokenize as tk

TEXTS = [
    "我们今天在公园里讨论了向量数据库的设计。",
    "小明硕士毕业于中国科学院计算所，后在日本京都大学深造",
    "他来到了网易杭研大厦",                      # 杭研: not in the dictionary (HMM)
    "李小福是创新办主任也是云计算方面的专家",
    "我們今天在公園裡討論了向量資料庫的設計。",    # traditional characters
    "版本 2.0.1 于 2024-05-01 发布，延迟下降 35.5%（p99：120ms）。",
    "用 C++ 和 C# 重写了 AT&T 的计费系统，性能提升3倍",
    "emoji 😀🎉 混在中文里👍，还有 café 和 naïve、Ünïcödé",
    "ｆｕｌｌ－ｗｉｄｔｈ：ＡＢＣ１２３，全角标点！？",
    "南京市长江大桥欢迎您。结婚的和尚未结婚的都来了",
    "工信处女干事每月经过下属科室都要亲口交代24口交换机等技术性器件的安装工作",
    "一一一一一一一一一一一一一一一一一一一一一一一一一一一一一一一一",
    "a-b_c.d+e#f&g%h 中-文_混.合+符#号&测%试",
    "\t\n  空白\r\n换行\u3000全角空格  ",
    "𠀀𠀁𪚥 扩展B区汉字和 \ud800 孤立代理",
    "한국어 텍스트와 日本語のテキスト、Русский текст",
    "",
]


@pytest.fixture(scope="module")
def reference() -> Any:
    """jieba's own full dictionary, in a Tokenizer of its own (not the module's)."""
    jieba = tk._jieba()
    ref = jieba.Tokenizer()
    ref.initialize()
    return ref


@pytest.fixture(scope="module")
def compact_file(reference: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("jieba") / "jieba.dict"
    assert jieba_dict.write_cache(reference.FREQ, reference.total, path)
    return path


@pytest.fixture(scope="module")
def mapped(compact_file: Path) -> Any:
    compact = jieba_dict.open_cached(compact_file)
    assert compact is not None
    return tk._mapped_tokenizer(compact)


def _same(mapped: Any, reference: Any, text: str) -> None:
    assert mapped.lcut(text, cut_all=False, HMM=True) == \
        reference.lcut(text, cut_all=False, HMM=True), text


def test_the_file_holds_jiebas_dictionary(compact_file: Path, reference: Any) -> None:
    compact = jieba_dict.open_cached(compact_file)
    assert compact is not None and compact.total == reference.total
    full = compact.full()
    assert full == reference.FREQ and list(full) == list(reference.FREQ)
    freq = jieba_dict.LazyFreq(compact)
    for word in ("数据库", "数据", "c++", "AT&T", "向量数据", "不存在的词语啊", "", "\ud800"):
        assert (word in freq) == (word in reference.FREQ), word
        assert freq.get(word) == reference.FREQ.get(word), word
        assert freq.get(word, 1) == reference.FREQ.get(word, 1), word


def test_hand_picked_texts_cut_the_same(mapped: Any, reference: Any) -> None:
    for text in TEXTS:
        _same(mapped, reference, text)
        _same(mapped, reference, text * 40)            # long strings


def _dictionary_words(reference: Any, n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words = [w for w, f in reference.FREQ.items() if f]
    return rng.sample(words, n)


def test_random_runs_of_dictionary_words_cut_the_same(mapped: Any, reference: Any) -> None:
    """Word sequences exercise the DAG and route; prefixes of words the prefix entries."""
    rng = random.Random(19)
    words = _dictionary_words(reference, 20_000, seed=19)
    for _ in range(2_000):
        parts = rng.sample(words, rng.randint(1, 12))
        parts = [p[: rng.randint(1, len(p))] if rng.random() < 0.2 else p for p in parts]
        sep = rng.choice(["", "", "", " ", "，", "a", "1"])
        _same(mapped, reference, sep.join(parts))


_CHARS = ("的一是了我不人在他有这个上们来到时大地为子中你说生国年着就那和要她出也得里后自以会"
          "杭研硕士毕业于京都龘靐齉爩鱻麤貔貅饕餮魑魅魍魉犇骉猋焱垚淼鑫們們裡資料庫設計")
_ALPHABET = _CHARS + "abcXYZ0189.%+#&-_ 　\n，。！？：“”（）😀🎉é𠀀"


@settings(max_examples=1500, deadline=None)
@given(st.text(alphabet=_ALPHABET, max_size=60))
def test_generated_mixed_text_cuts_the_same(mapped: Any, reference: Any, text: str) -> None:
    """Common and rare characters (rare ones go to the HMM), ASCII, digits, punctuation."""
    _same(mapped, reference, text)


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=40))
def test_any_unicode_cuts_the_same(mapped: Any, reference: Any, text: str) -> None:
    _same(mapped, reference, text)


def _real_texts() -> Iterator[str]:
    """CMRC paragraphs and questions, LoCoMo turns and questions."""
    cmrc = json.loads((data_dir() / "cmrc2018_dev_half.json").read_text(encoding="utf-8"))
    for article in cmrc["data"]:
        for para in article["paragraphs"]:
            yield para["context"]
            for qa in para["qas"]:
                yield qa["question"]
    locomo = json.loads((data_dir() / "locomo_dev.json").read_text(encoding="utf-8"))
    for sample in locomo:
        for qa in sample["qa"]:
            yield qa["question"]
        for key, session in sample["conversation"].items():
            if key.startswith("session_") and isinstance(session, list):
                for turn in session:
                    yield turn["text"]


@pytest.mark.skipif(not (data_dir() / "cmrc2018_dev_half.json").is_file()
                    or not (data_dir() / "locomo_dev.json").is_file(),
                    reason="CMRC / LoCoMo files not found ($REME_EVAL_DATA or ../shared/data)")
def test_cmrc_and_locomo_cut_the_same(mapped: Any, reference: Any) -> None:
    count = 0
    for text in _real_texts():
        _same(mapped, reference, text)
        count += 1
    assert count > 5_000


# -- the module's switch between the mapped and the full dictionary (subprocesses) ------------


def _run(cache: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "REME_CACHE_DIR": str(cache), **env}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=full_env, check=False)


_QUERY = "向量数据库的设计和小明的硕士论文"
_PROBE = ("import json, sys\n"
          "from reme_agent.engine import tokenize as tk\n"
          f"toks = tk.tokenize({_QUERY!r})\n"
          "dt = sys.modules['jieba'].dt\n"
          "print(json.dumps([toks, tk._lcut is None, dt.initialized, len(dt.FREQ)]))\n")


def _terms(reference: Any, text: str) -> list[str]:
    """tokenize()'s terms for `text`, cut by the reference tokenizer."""
    saved = tk._lcut
    tk._lcut = reference.lcut
    try:
        return tk._tokenize_jieba(text)
    finally:
        tk._lcut = saved


def _cache_with_file(tmp_path: Path, compact_file: Path) -> Path:
    """A cache folder holding `compact_file` under this jieba's name."""
    cache = tmp_path / "cache"
    cache.mkdir()
    path = cache / jieba_dict.cache_path().name
    path.write_bytes(compact_file.read_bytes())
    return path


def test_a_query_is_cut_before_the_full_dictionary_exists(
        tmp_path: Path, compact_file: Path, reference: Any) -> None:
    """The lazy path is really taken: jieba's FREQ dict was never built in that process."""
    path = _cache_with_file(tmp_path, compact_file)
    proc = _run(path.parent, _PROBE)
    assert proc.returncode == 0, proc.stderr
    toks, full_not_loaded, initialized, freq_len = json.loads(proc.stdout)
    assert toks == _terms(reference, _QUERY) and toks
    assert full_not_loaded and not initialized and freq_len == 0


def test_bulk_text_switches_to_the_full_dictionary(
        tmp_path: Path, compact_file: Path, reference: Any) -> None:
    """Past the budget the full dict (rebuilt from the file) takes over; tokens do not change."""
    path = _cache_with_file(tmp_path, compact_file)
    texts = [t * 5 for t in TEXTS if t]
    code = ("import json, sys\n"
            "from reme_agent.engine import tokenize as tk\n"
            f"texts = {texts!r}\n"
            "first = tk.tokenize(texts[0])\n"
            "lazy = tk._lcut is None\n"
            "tk._lazy_left = 200\n"
            "out = [tk.tokenize(t) for t in texts]\n"
            "dt = sys.modules['jieba'].dt\n"
            "print(json.dumps([first, lazy, tk._lcut == dt.lcut, len(dt.FREQ), out]))\n")
    proc = _run(path.parent, code)
    assert proc.returncode == 0, proc.stderr
    first, lazy, full_now, freq_len, out = json.loads(proc.stdout)
    assert lazy and full_now and freq_len == len(reference.FREQ)
    assert first == _terms(reference, texts[0])
    assert out == [_terms(reference, t) for t in texts]


def test_the_first_process_writes_the_file_for_the_next(tmp_path: Path, reference: Any) -> None:
    cache = tmp_path / "cache"
    first = _run(cache, _PROBE)
    assert first.returncode == 0 and first.stderr == "", first.stderr
    toks, full_not_loaded, initialized, _ = json.loads(first.stdout)
    assert toks == _terms(reference, _QUERY) and not full_not_loaded and initialized
    files = list(cache.glob("jieba-*.dict"))
    assert len(files) == 1 and not list(cache.glob(".jieba-*"))
    compact = jieba_dict.open_cached(files[0])
    assert compact is not None and compact.full() == reference.FREQ
    second = json.loads(_run(cache, _PROBE).stdout)
    assert second[0] == toks and second[1] and not second[2]


@pytest.mark.parametrize("damage", ["flip", "truncate", "format", "empty"])
def test_a_damaged_file_is_not_trusted_and_is_rewritten(
        tmp_path: Path, compact_file: Path, reference: Any, damage: str) -> None:
    path = _cache_with_file(tmp_path, compact_file)
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0x01                 # one bit in the hash table
    elif damage == "truncate":
        data = data[: len(data) - 7]
    elif damage == "format":
        data[8] += 1                                 # another format number, CRC and all
    else:
        data = bytearray()
    path.write_bytes(bytes(data))
    assert jieba_dict.open_cached(path) is None
    proc = _run(path.parent, _PROBE)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    toks, full_not_loaded, initialized, _ = json.loads(proc.stdout)
    assert toks == _terms(reference, _QUERY) and not full_not_loaded and initialized
    assert jieba_dict.open_cached(path) is not None  # rewritten by that process


def test_another_jiebas_file_has_another_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """The name carries jieba's version (and dict.txt's size and mtime): a new jieba never
    reads the old file."""
    jieba = tk._jieba()
    name = jieba_dict.cache_path().name
    monkeypatch.setattr(jieba, "__version__", "0.43.0")
    assert jieba_dict.cache_path().name != name


def test_an_unwritable_cache_falls_back_silently(tmp_path: Path, reference: Any) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the cache folder should be")
    proc = _run(blocker / "cache", _PROBE)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    toks, _, initialized, _ = json.loads(proc.stdout)
    assert toks == _terms(reference, _QUERY) and initialized


def test_two_processes_writing_at_once_leave_one_sound_file(tmp_path: Path,
                                                            reference: Any) -> None:
    cache = tmp_path / "cache"
    env = {**os.environ, "REME_CACHE_DIR": str(cache)}
    procs = [subprocess.Popen([sys.executable, "-c", _PROBE], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert all(json.loads(out)[0] == _terms(reference, _QUERY) for out, _ in outs)
    files = list(cache.glob("jieba-*.dict"))
    assert len(files) == 1 and not list(cache.glob(".jieba-*"))
    compact = jieba_dict.open_cached(files[0])
    assert compact is not None and compact.full() == reference.FREQ


def test_words_added_to_jieba_are_respected(tmp_path: Path, compact_file: Path) -> None:
    """Anything that changes jieba's FREQ first loads it: the mapped copy is then unused."""
    path = _cache_with_file(tmp_path, compact_file)
    code = ("import json, sys\n"
            "from reme_agent.engine import tokenize as tk\n"
            "tk._jieba().add_word('向量数据库的设计')\n"
            f"print(json.dumps([tk.tokenize({_QUERY!r}), tk._quick_lcut() is None]))\n")
    proc = _run(path.parent, code)
    assert proc.returncode == 0, proc.stderr
    toks, no_quick = json.loads(proc.stdout)
    assert toks[0] == "向量数据库的设计" and no_quick


def test_another_dictionary_given_to_jieba_is_respected(tmp_path: Path,
                                                        compact_file: Path) -> None:
    path = _cache_with_file(tmp_path, compact_file)
    small = tmp_path / "small.txt"
    small.write_text("向量 10\n数据库的设计 50\n", encoding="utf-8")
    code = ("import json, sys\n"
            "from reme_agent.engine import tokenize as tk\n"
            f"j = tk._jieba(); j.dt.tmp_dir = {str(tmp_path)!r}; j.set_dictionary({str(small)!r})\n"
            f"print(json.dumps([tk.tokenize('向量数据库的设计'), tk._quick_lcut() is None]))\n")
    proc = _run(path.parent, code)
    assert proc.returncode == 0, proc.stderr
    toks, no_quick = json.loads(proc.stdout)
    assert toks == ["向量", "数据库的设计"] and no_quick


def test_threads_cutting_while_the_full_dictionary_loads_get_the_same_tokens(
        tmp_path: Path, compact_file: Path, reference: Any) -> None:
    """The switch from the mapped to the full dictionary mid-stream changes no token."""
    path = _cache_with_file(tmp_path, compact_file)
    texts = [t for t in TEXTS if t] * 30
    code = ("import json, threading\n"
            "from concurrent.futures import ThreadPoolExecutor\n"
            "from reme_agent.engine import tokenize as tk\n"
            f"texts = {texts!r}\n"
            "threading.Thread(target=tk.warm_up).start()\n"
            "with ThreadPoolExecutor(4) as pool:\n"
            "    out = list(pool.map(tk.tokenize, texts))\n"
            "tk.warm_up()\n"
            "print(json.dumps([out, tk._lazy_left < tk.LAZY_BUDGET]))\n")
    proc = _run(path.parent, code)
    assert proc.returncode == 0, proc.stderr
    out, some_mapped = json.loads(proc.stdout)
    assert out == [_terms(reference, t) for t in texts]
    assert some_mapped  # the first texts were cut before the full dictionary was there


_VAULT_PROBE = (
    "import json, sys, time\n"
    "import reme_agent.vault as V\n"
    "from reme_agent.config import Settings\n"
    "from reme_agent.recall.search import search\n"
    "V.JIEBA_WARM_DELAY = float(sys.argv[2])\n"
    "v = V.open_vault(sys.argv[1], Settings(embedder={'name': 'hash'}, index={'progress': False}))\n"
    f"hits = [r.path for r in search(v, {_QUERY!r}, limit=3, log_access=False).results]\n"
    "loaded_at_answer = sys.modules['jieba'].dt.initialized\n"
    "time.sleep(float(sys.argv[3]))\n"
    "print(json.dumps([hits, loaded_at_answer, sys.modules['jieba'].dt.initialized]))\n"
    "v.close()\n")


@pytest.mark.parametrize(("delay", "linger", "loaded_later"), [(60.0, 0.0, False),
                                                               (0.2, 3.0, True)])
def test_the_warm_up_loads_the_full_dictionary_only_after_the_first_answer(
        tmp_path: Path, compact_file: Path, delay: float, linger: float,
        loaded_later: bool) -> None:
    """G6 cold start: a one-shot search answers without jieba's full dictionary (its load
    held the GIL while the search ran); a process that stays loads it a little later."""
    path = _cache_with_file(tmp_path, compact_file)
    vault = tmp_path / "v"
    (vault / "knowledge").mkdir(parents=True)
    (vault / "knowledge" / "向量.md").write_text("# 向量数据库\n\n向量数据库的设计\n",
                                                 encoding="utf-8")
    index = ("from reme_agent.config import Settings\nfrom reme_agent.vault import open_vault\n"
             f"v = open_vault({str(vault)!r}, Settings(embedder={{'name': 'hash'}}, "
             "index={'progress': False}))\nv.index()\nv.close()\n")
    assert _run(path.parent, index).returncode == 0
    proc = subprocess.run([sys.executable, "-c", _VAULT_PROBE, str(vault), str(delay),
                           str(linger)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "REME_CACHE_DIR": str(path.parent)}, check=False)
    assert proc.returncode == 0, proc.stderr
    hits, at_answer, later = json.loads(proc.stdout.strip().splitlines()[-1])
    assert hits == ["knowledge/向量.md"]
    assert at_answer is False and later is loaded_later


def test_writing_a_dictionary_removes_other_installs_unused_ones(
        tmp_path: Path, reference: Any) -> None:
    """Each jieba install (venv, upgrade) names its own ~50 MB file: a new one removes the
    others unused for two weeks and keeps only the most recently used few."""
    now = time.time()
    ages_days = [0.5, 1, 2, 3, 4, 5, 20, 40]   # 6 recent (2 beyond the cap) + 2 unused
    others = []
    for i, age in enumerate(ages_days):
        other = tmp_path / f"jieba-0.42.1-{i:08x}.dict"
        other.write_bytes(b"another install")
        os.utime(other, (now - age * 86400, now - age * 86400))
        others.append(other)
    unrelated = tmp_path / "names-cache.bin"
    unrelated.write_bytes(b"not ours to remove")
    os.utime(unrelated, (now - 90 * 86400, now - 90 * 86400))
    written = tmp_path / "jieba-0.42.1-ffffffff.dict"
    assert jieba_dict.write_cache(reference.FREQ, reference.total, written)
    kept = [p for p in others if p.exists()]
    assert kept == others[:jieba_dict.KEEP_OTHERS]
    assert written.exists() and unrelated.exists()


def test_opening_a_dictionary_marks_it_used(tmp_path: Path, compact_file: Path) -> None:
    copy = tmp_path / "jieba-0.42.1-00000001.dict"
    copy.write_bytes(compact_file.read_bytes())
    old = time.time() - 10 * 86400
    os.utime(copy, (old, old))
    assert jieba_dict.open_cached(copy) is not None
    assert time.time() - copy.stat().st_mtime < 60
