"""Bad input: fuzzed notes, links and tool arguments, hostile paths, huge and deep notes,
invalid UTF-8, YAML bombs and link cycles.

The promise: nothing a file or a model can send crashes the engine or escapes the vault.
Tools answer with a ReMeError (one clear sentence) or succeed; the AgentScope Toolkit never
lets an exception out; indexing skips what it cannot use and says why. xfail(strict) tests
document bugs with their fixes (docs/reliability.md, "Known gaps").
"""

from __future__ import annotations

import inspect
import json
import os
import time
import types
import typing
import unicodedata
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reme_agent.engine.links import LinkResolver, extract_links
from reme_agent.engine.parser import normalize_eol, parse_note
from reme_agent.errors import ParseError, ReMeError
from reme_agent.recall.search import search, search_blocks
from reme_agent.toolkit.agentscope import build_toolkit
from reme_agent.toolkit.registry import BY_NAME, TOOLS
from reme_agent.toolkit.results import hints_of
from reme_agent.vault import Vault
from tests.reliability.conftest import (
    NOTES,
    call_toolkit,
    call_toolkit_raw,
    make_vault,
    tmp_files,
    write,
)

QUOKKA = "knowledge/quokka/quokka.md"
FAST = settings(deadline=None, database=None, derandomize=True,
                suppress_health_check=list(HealthCheck))


# -- parser and resolver fuzz ----------------------------------------------------------------
MD_PIECES = st.sampled_from([
    "---\n", "title: x\n", "aliases: [a, b]\n", "a: &x [1]\n", "b: *x\n", "...\n", "# H\n",
    "## 标题\n", "\n", "\n\n", "- item\n", "  - nested\n", "1. one\n", "> quote\n", "```\n",
    "~~~py\n", "    code\n", "[[a]]", "[[a|b]]", "[[a#h]]", "![[img.png]]", "[[", "]]", "|",
    "rel:: [[x]], [[y]]\n", "[p:: [[z]]]", "`[[code]]`", "\t", "\r\n", "\ufeff", "中文", "::",
    "[[../../etc/passwd]]", "[[/abs]]", "[[C:\\x]]", "\\", "#", "*", "`", "\x00", "\u2028",
])
MARKDOWN = st.lists(st.one_of(MD_PIECES, st.text(max_size=8)), max_size=60).map("".join)


@FAST
@given(MARKDOWN)
def test_parser_never_raises_and_spans_stay_in_the_file(text: str) -> None:
    note = parse_note("fuzz.md", text)
    n_lines = normalize_eol(text).count("\n") + 1
    last = 0
    for block in note.blocks:
        assert 1 <= block.start_line <= block.end_line <= n_lines
        assert block.start_line >= last
        last = block.start_line
        assert block.text.strip()
    for link in note.links:
        assert link.target.strip() and 1 <= link.line <= n_lines
    assert isinstance(note.frontmatter, dict)
    json.dumps(note.frontmatter)  # always JSON-able (it is stored in SQLite as JSON)


SEGMENT = st.lists(st.sampled_from(list("abAB-_ .é文") + ["..", "%2e"]), min_size=1,
                   max_size=4).map("".join).filter(lambda s: s.strip(". ") != "")
PATH = st.lists(SEGMENT, min_size=1, max_size=3).map(lambda xs: "/".join(xs) + ".md")


@FAST
@given(st.lists(PATH, min_size=1, max_size=8, unique=True),
       st.lists(st.text(max_size=12), max_size=4), st.randoms(use_true_random=False))
def test_link_resolution_stays_in_the_vault_and_ignores_file_order(
        paths: list[str], targets: list[str], rnd: Any) -> None:
    aliases = {p: [p.rsplit("/", 1)[-1][:2]] for p in paths}
    a = LinkResolver(paths, aliases)
    shuffled = list(paths)
    rnd.shuffle(shuffled)
    b = LinkResolver(shuffled, aliases)
    probes = [*targets, *paths, *(p.upper() for p in paths), *(f"../{p}" for p in paths),
              *(p.rsplit("/", 1)[-1].removesuffix(".md") for p in paths), "../../etc/passwd"]
    for target in probes:
        for source in (None, paths[0]):
            got = a.resolve(target, source)
            assert got is None or got in paths
            assert got == b.resolve(target, source), (target, source)


def test_unicode_twin_file_names_resolve_the_same_whatever_the_order() -> None:
    nfc, nfd = "é.md", unicodedata.normalize("NFD", "é.md")
    assert nfc != nfd
    one, two = LinkResolver([nfc, nfd]), LinkResolver([nfd, nfc])
    for target in (nfc, nfd, "é", "É"):
        assert one.resolve(target) == two.resolve(target)


@pytest.fixture(scope="module")
def fuzz_vault(tmp_path_factory: pytest.TempPathFactory) -> Vault:
    v = make_vault(tmp_path_factory.mktemp("fuzz") / "vault")
    yield v
    v.close()


@settings(FAST, max_examples=25)
@given(MARKDOWN)
def test_indexer_and_search_survive_fuzzed_notes(fuzz_vault: Vault, text: str) -> None:
    path = fuzz_vault.root / "knowledge/fuzz/fuzz.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    report = fuzz_vault.refresh(["knowledge/fuzz/fuzz.md"])
    assert report.files >= len(NOTES)
    search_blocks(fuzz_vault, text[:40] or "x", 5)
    fuzz_vault.graph.traverse(["knowledge/fuzz/fuzz.md"], "both", 3)


# -- every tool's arguments -------------------------------------------------------------------
HOSTILE = ["..", "../x.md", "../../etc/passwd", "/etc/passwd", "C:\\Windows\\x.md",
           "..\\..\\x.md", "knowledge\\..\\..\\x.md", "%2e%2e/%2e%2e/x.md", "knowledge/../../x.md",
           "a\x00b.md", ".reme/index.sqlite", "~/x.md", "file:///etc/passwd", "./", "/", ""]
REAL = [*NOTES, "knowledge/bm25", "daily/2026-11-28/tuning", "knowledge/new/new.md",
        "daily", "knowledge", "meta/x.json", "resource/x.pdf", "2026-11-28"]
TEXT = st.one_of(st.sampled_from(HOSTILE + REAL), st.text(max_size=24),
                 st.sampled_from(["bm25", "[[bm25]]", "---\na: [1\n---\n", "*", "**/*.md", "[",
                                  "2026-13-45", "x" * 3000, "a" * 300]))
JSON = st.recursive(st.none() | st.booleans() | st.integers(-10**12, 10**12) |
                    st.floats(allow_nan=True, allow_infinity=True) | TEXT,
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(TEXT, c, max_size=3),
                    max_leaves=6)


def _for_hint(hint: Any) -> st.SearchStrategy[Any]:
    origin = get_origin(hint)
    if hint is str:
        return TEXT
    if hint is int:
        return st.one_of(st.integers(-3, 600), st.sampled_from([0, -1, 10**9, 2**63]))
    if hint is bool:
        return st.booleans()
    if hint is type(None):
        return st.none()
    if origin is Literal:
        return st.one_of(st.sampled_from(get_args(hint)), TEXT)
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*[_for_hint(a) for a in get_args(hint)])
    if origin is list:
        return st.lists(_for_hint(get_args(hint)[0]), max_size=4)
    if origin is dict:
        return st.dictionaries(TEXT, JSON, max_size=4)
    return JSON


PATHISH = st.one_of(st.sampled_from(REAL), st.sampled_from(REAL), TEXT)
PATH_PARAMS = {"path", "src", "dst", "folder", "dest", "seeds", "path_prefix"}


def _args(name: str) -> st.SearchStrategy[dict[str, Any]]:
    """Required arguments always present; values mostly well-typed, sometimes any JSON."""
    spec = BY_NAME[name]
    hints = hints_of(spec.fn)
    required: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for p in list(inspect.signature(spec.fn).parameters.values())[1:]:
        typed = _for_hint(hints[p.name])
        if p.name in PATH_PARAMS and hints[p.name] in (str, str | None):
            typed = PATHISH
        elif p.name == "seeds":
            typed = st.one_of(PATHISH, st.lists(PATHISH, max_size=3))
        value = st.one_of(typed, typed, typed, JSON)
        (required if p.default is inspect.Parameter.empty else optional)[p.name] = value
    return st.fixed_dictionaries(required, optional=optional)


CALLS = st.sampled_from([s.name for s in TOOLS]).flatmap(
    lambda n: st.tuples(st.just(n), _args(n)))


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in _strings(k) + _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _assert_vault_sane(vault: Vault, outside: Path, outside_before: list[str]) -> None:
    """Nothing outside the vault changed, no temp files, every note still decodes."""
    assert sorted(str(p) for p in outside.rglob("*")) == outside_before
    assert tmp_files(vault.root) == []
    for p in vault.root.rglob("*.md"):
        if ".reme" not in p.parts and p.is_file():
            p.read_bytes().decode("utf-8")


@pytest.fixture(scope="module")
def tool_vault(tmp_path_factory: pytest.TempPathFactory) -> tuple[Vault, Path, list[str]]:
    base = tmp_path_factory.mktemp("tools")
    outside = base / "outside"
    write(outside, "secret.md", "top secret\n")
    v = make_vault(base / "vault")
    yield v, outside, sorted(str(p) for p in outside.rglob("*"))
    v.close()


@settings(FAST, max_examples=200)
@given(CALLS)
def test_every_tool_raises_only_clear_errors_on_random_arguments(
        tool_vault: tuple[Vault, Path, list[str]], call: tuple[str, dict[str, Any]]) -> None:
    vault, outside, before = tool_vault
    name, args = call
    try:
        BY_NAME[name].fn(vault, **args)
    except ReMeError as exc:
        assert str(exc).strip()
    _assert_vault_sane(vault, outside, before)


@settings(FAST, max_examples=60)
@given(CALLS)
def test_no_exception_escapes_the_agentscope_toolkit(
        tool_vault: tuple[Vault, Path, list[str]], call: tuple[str, dict[str, Any]]) -> None:
    vault, outside, before = tool_vault
    name, args = call
    state, text = call_toolkit_raw(build_toolkit(vault, only=[name]), name,
                                   json.dumps(args, default=str))
    assert state in ("success", "error") and text.strip()
    _assert_vault_sane(vault, outside, before)


@pytest.mark.parametrize("raw", ["", "{", "[]", "null", '"path"', '{"path": }', "{" * 5000,
                                 '{"path": "' + "x" * 100_000 + '"}', '{"path": 1e999}'])
def test_malformed_tool_call_json_is_an_error_result(vault: Vault, raw: str) -> None:
    state, text = call_toolkit_raw(build_toolkit(vault, only=["read"]), "read", raw)
    assert state == "error" and text.strip()


@pytest.mark.parametrize("name,args", [
    ("read", {"path": "knowledge/\ud800.md"}),
    ("read", {"path": "knowledge/" + "a" * 300 + ".md"}),
    ("write", {"path": "knowledge/s/s.md", "body": "bad \ud800 text"}),
    ("property_update", {"path": QUOKKA, "properties": {"k": "\udcff"}}),
    ("list", {"folder": "a" * 300}),
    ("delete", {"path": "\ud800.md"}),
])
def test_unencodable_text_and_overlong_names_are_clear_errors(
        vault: Vault, name: str, args: dict[str, Any]) -> None:
    with pytest.raises(ReMeError) as info:
        BY_NAME[name].fn(vault, **args)
    message = str(info.value)
    message.encode("utf-8")  # the model (and a JSON log) can take it
    assert str(vault.root) not in message


# -- path traversal ---------------------------------------------------------------------------
TRAVERSAL = ["../secret.md", "../../secret.md", "knowledge/../../secret.md", "/etc/passwd",
             "C:\\secret.md", "C:/secret.md", "..\\secret.md", "knowledge\\..\\..\\secret.md",
             "%2e%2e/secret.md", "%2e%2e%2fsecret.md", "..%2fsecret.md", "./../secret.md",
             "knowledge/./../../secret.md", "\\\\server\\share\\x.md", "link-out/secret.md",
             "file-out.md", ".reme/index.sqlite", "~/../secret.md", "knowledge/\x00.md"]


@pytest.fixture
def jailed(tmp_path: Path) -> tuple[Vault, Path]:
    """A vault next to an `outside` folder, with symlinks from inside pointing out."""
    outside = tmp_path / "outside"
    write(outside, "secret.md", "top secret: the launch code\n")
    vault = make_vault(tmp_path / "vault", index=False)
    (vault.root / "link-out").symlink_to(outside, target_is_directory=True)
    (vault.root / "file-out.md").symlink_to(outside / "secret.md")
    (vault.root / "knowledge/inside-link.md").symlink_to(vault.root / QUOKKA)
    vault.index()
    return vault, outside


def _snapshot(outside: Path) -> dict[str, bytes]:
    """Every file next to the vault (the `outside` folder and anything created beside it)."""
    return {str(p): p.read_bytes() for p in sorted(outside.parent.rglob("*"))
            if p.is_file() and not p.is_symlink() and p.parent != outside.parent
            and outside.parent / "vault" not in p.parents}


@pytest.mark.parametrize("path", TRAVERSAL)
def test_traversal_attempts_never_leave_the_vault(jailed: tuple[Vault, Path], path: str) -> None:
    vault, outside = jailed
    toolkit = build_toolkit(vault)
    before = _snapshot(outside)
    calls = [("read", {"path": path}), ("stat", {"path": path}),
             ("property_read", {"path": path}), ("list", {"folder": path}),
             ("write", {"path": path, "body": "pwned"}),
             ("write", {"path": path, "text": "pwned", "overwrite": True}),
             ("property_update", {"path": path, "properties": {"pwned": True}}),
             ("copy", {"src": path, "dst": "knowledge/stolen/stolen.md"}),
             ("copy", {"src": QUOKKA, "dst": path}), ("move", {"src": QUOKKA, "dst": path}),
             ("delete", {"path": path}), ("daily_read", {"path": path}),
             ("graph_traverse", {"seeds": [path]}), ("search", {"query": "x", "path_prefix": path}),
             ("lint_dangling", {"folder": path}), ("tags_list", {"folder": path})]
    for name, args in calls:
        state, text = call_toolkit(toolkit, name, **args)
        assert "launch code" not in text, (name, path)
        if state == "success" and name in ("write", "copy", "move"):
            # Accepted only as an odd but harmless name inside the vault (e.g. '%2e%2e').
            written = [p for p in vault.root.rglob("*") if "%2" in p.name or "pwned" in str(p)]
            assert all(vault.root in p.resolve().parents for p in written), (name, path)
    assert _snapshot(outside) == before
    assert (outside / "secret.md").read_text() == "top secret: the launch code\n"


def test_symlinks_out_of_the_vault_are_never_indexed_or_read(
        jailed: tuple[Vault, Path]) -> None:
    vault, _ = jailed
    assert "knowledge/inside-link.md" in vault.store.list()  # a link that stays inside is fine
    assert not any(p.startswith(("link-out", "file-out")) for p in vault.state.files())
    assert "launch code" not in json.dumps([h.text for h in search_blocks(vault, "launch code")])


def test_one_symlink_out_of_the_vault_does_not_break_the_listing_tools(
        jailed: tuple[Vault, Path]) -> None:
    vault, _ = jailed
    assert "file-out.md" not in vault.store.list()
    toolkit = build_toolkit(vault)
    for name, args in [("list", {}), ("lint_dangling", {}), ("tags_list", {}),
                       ("stat", {"path": QUOKKA})]:
        state, text = call_toolkit(toolkit, name, **args)
        assert state == "success", (name, text)


# -- huge, deep and malformed notes ------------------------------------------------------------
def test_a_50_mb_note_is_skipped_by_the_indexer_with_a_reason(vault: Vault) -> None:
    big = vault.root / "knowledge/big/big.md"
    big.parent.mkdir(parents=True)
    line = "fifty megabytes of words " * 3 + "\n"
    big.write_text("# Big\n\n" + line * (50_000_000 // len(line)), encoding="utf-8")
    started = time.monotonic()
    report = vault.index()
    assert time.monotonic() - started < 30
    (skip,) = report.skipped
    assert skip["path"] == "knowledge/big/big.md" and "max_file_bytes" in skip["reason"]
    assert report.files == len(NOTES)
    state, text = call_toolkit(build_toolkit(vault), "read", path="knowledge/big/big.md",
                               start_line=3, end_line=4)
    assert state == "success" and len(text) < 1000  # a line range of it reads fine


def test_reading_a_50_mb_note_is_paged_or_refused(vault: Vault) -> None:
    big = vault.root / "knowledge/big/big.md"
    big.parent.mkdir(parents=True)
    line = "fifty megabytes of words " * 3 + "\n"
    big.write_text("# Big\n\n" + line * (50_000_000 // len(line)), encoding="utf-8")
    state, text = call_toolkit(build_toolkit(vault), "read", path="knowledge/big/big.md")
    assert len(text) < 1_000_000
    assert "start_line" in text or state == "error"


def test_ten_thousand_nested_list_levels_parse_and_index(vault: Vault) -> None:
    # Indented nesting is quadratic in bytes: 10k levels are 100 MB, so parse that directly
    # (linear, no recursion) and index a 2k-level version that fits index.max_file_bytes.
    def nested(levels: int) -> str:
        deep = "".join("  " * i + f"- level {i}\n" for i in range(levels))
        one_line = "- " * 10_000 + "one-line nesting\n"
        quotes = ">" * 10_000 + " deep quote [[bm25]]\n"
        brackets = "[" * 10_000 + "x" + "]" * 10_000 + "\n"
        return f"# Deep\n\n{deep}\n{one_line}\n{quotes}\n{brackets}\nnested wombat marker\n"

    started = time.monotonic()
    note = parse_note("deep.md", nested(10_000))
    assert time.monotonic() - started < 15
    assert note.blocks and note.blocks[-1].text.endswith("nested wombat marker")
    write(vault.root, "knowledge/deep/deep.md", nested(2_000))
    report = vault.index()
    assert report.changed_files == ["knowledge/deep/deep.md"] and not report.skipped
    assert search_blocks(vault, "nested wombat marker", 1)[0].path == "knowledge/deep/deep.md"


def test_invalid_utf8_content_is_skipped_and_read_says_why(vault: Vault) -> None:
    bad = vault.root / "knowledge/latin1/latin1.md"
    bad.parent.mkdir(parents=True)
    bad.write_bytes("# Café\n\nCrème brûlée\n".encode("latin-1") + b"\xff\xfe\x80")
    report = vault.index()
    (skip,) = report.skipped
    assert skip["path"] == "knowledge/latin1/latin1.md" and "UTF-8" in skip["reason"]
    assert report.files == len(NOTES)
    state, text = call_toolkit(build_toolkit(vault), "read", path="knowledge/latin1/latin1.md")
    assert state == "error" and "not valid UTF-8" in text


def test_a_file_name_that_is_not_utf8_is_skipped_not_fatal(vault: Vault) -> None:
    folder = os.path.join(os.fsencode(vault.root), b"knowledge", b"caf\xe9")
    os.makedirs(folder)
    with open(os.path.join(folder, b"n\xff.md"), "wb") as fh:
        fh.write(b"# Platypus\n\nplatypus note with a latin-1 name\n")
    write(vault.root, "knowledge/ok/ok.md", "# Ok\n\nechidna note\n")
    report = vault.index()
    assert "knowledge/ok/ok.md" in report.changed_files
    assert any("UTF-8" in s["reason"] for s in report.skipped)


BILLION_LAUGHS = "---\n" + "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n"
    for p, c in zip("abcdefgh", "bcdefghi", strict=True)) + "---\n# Bomb\n\nbody text kaboom\n"
QUADRATIC = "---\nk: &k " + "x" * 60_000 + "\n" + "".join(
    f"k{i}: *k\n" for i in range(90)) + "---\n# Quad\n\nbody\n"
DEEP_YAML = "---\nk: " + "[" * 5000 + "]" * 5000 + "\n---\n# Deep\n\nbody\n"
BIG_YAML = "---\n" + "".join(f"key{i}: {'v' * 50}\n" for i in range(3000)) + "---\nbody\n"
RECURSIVE = "---\na: &a [*a]\n---\nbody\n"
PYTHON_TAG = "---\nx: !!python/object/apply:os.system ['echo pwned']\n---\nbody\n"


@pytest.mark.parametrize("text", [BILLION_LAUGHS, DEEP_YAML, BIG_YAML, RECURSIVE, PYTHON_TAG],
                         ids=["billion-laughs", "deep", "over-64kb", "recursive", "python-tag"])
def test_yaml_bombs_are_refused_fast_and_the_note_stays_searchable(vault: Vault,
                                                                   text: str) -> None:
    started = time.monotonic()
    note = parse_note("bomb.md", text)
    assert time.monotonic() - started < 10.0  # an unguarded bomb takes minutes
    assert isinstance(note.error, ParseError) and note.frontmatter == {}
    write(vault.root, "knowledge/bomb/bomb.md", text)
    report = vault.index()
    assert [e["path"] for e in report.errors] == ["knowledge/bomb/bomb.md"]
    state, msg = call_toolkit(build_toolkit(vault), "property_read", path="knowledge/bomb/bomb.md")
    assert state == "error" and "frontmatter" in msg.lower()


def test_alias_amplification_below_the_limits_is_bounded_and_fast() -> None:
    """90 aliases of a 60 KB string load (no bomb), but grow at most MAX_YAML_ALIASES-fold."""
    from reme_agent.engine.parser import MAX_FRONTMATTER_BYTES, MAX_YAML_ALIASES

    started = time.monotonic()
    note = parse_note("quad.md", QUADRATIC)
    assert time.monotonic() - started < 10.0  # an unguarded bomb takes minutes
    size = len(json.dumps(note.frontmatter))
    assert note.error is not None or size <= MAX_YAML_ALIASES * MAX_FRONTMATTER_BYTES


CYCLE = {
    "knowledge/a/a.md": "# A\n\ncycle alpha links [[b]] and itself [[a]].\n",
    "knowledge/b/b.md": "# B\n\ncycle beta links [[c]].\n",
    "knowledge/c/c.md": "# C\n\ncycle gamma links back to [[a]] and [[b]].\n",
    **{f"knowledge/r{i}/r{i}.md": f"# R{i}\n\nring node {i} [[r{(i + 1) % 200}]]\n"
       for i in range(200)},
}


def test_link_cycles_terminate_in_traverse_and_search_expansion(tmp_path: Path) -> None:
    vault = make_vault(tmp_path / "v", CYCLE)
    toolkit = build_toolkit(vault)
    started = time.monotonic()
    for seeds, direction in [(["knowledge/a/a.md"], "both"), (["knowledge/r0/r0.md"], "out"),
                             (["knowledge/r5/r5.md", "knowledge/b/b.md"], "in")]:
        state, text = call_toolkit(toolkit, "graph_traverse", seeds=seeds, direction=direction,
                                   depth=5, max_nodes=500)
        assert state == "success", text
    edges = vault.graph.traverse(["knowledge/a/a.md"], "both", 50)
    assert len(edges) == len({(e["source"], e["target"]) for e in edges})  # each edge once
    response = search(vault, "cycle alpha", limit=5, expand_depth=3, log_access=False)
    assert response.results and len(response.expansion) <= 30
    ring = search(vault, "ring node", limit=10, expand_depth=3, log_access=False)
    assert len({e["path"] for e in ring.expansion}) == len(ring.expansion)
    assert time.monotonic() - started < 20
    assert {lk.target for lk in extract_links(CYCLE["knowledge/a/a.md"])} == {"a", "b"}
    vault.close()
