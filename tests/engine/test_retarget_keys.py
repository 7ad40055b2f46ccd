"""A plan checks only the notes whose links' keys its change touches (move speed, session 7).

`VaultView.after` derives the after-resolver from the view's own (`LinkResolver.derive`)
instead of building one over every file, and `retarget` skips a note that stays where it
is when none of its links or references has a key among `links.changed_keys`. Both are
guarded here against the whole computation they replace, on random vaults with the names
that make keys hard: folder notes, ``x.md.md``, ``[[../]]``, ``[[x/.]]``, aliases,
merge redirects, CJK, spaces, Markdown links and embeds.
"""

from __future__ import annotations

import posixpath
import random
from pathlib import Path

import pytest

from reme_agent.engine.links import LinkResolver, changed_keys, extract_links
from reme_agent.engine.retarget import _keeps_meaning, retarget
from reme_agent.engine.store import FileStore
from reme_agent.engine.transaction import Transaction
from reme_agent.engine.view import VaultView

NAMES = ["a", "A", "Old note", "笔记", "x.md", "k", "sub", "50% done", "img.png", "n2"]
FOLDERS = ["", "k", "k/sub", "sub", "x.md", "新 夹"]
EXT = (".md",)


def _state(r: LinkResolver) -> tuple:
    """What resolution depends on, comparable between two resolvers."""
    return (sorted(r._paths), {p: sorted(a) for p, a in r._aliases_of.items() if p in r},
            {p: k for p, k in r._redirects_of.items()},
            {k: sorted(v) for k, v in r._names.items()},
            {k: sorted(v) for k, v in r._alias_paths.items()},
            {k: sorted(v) for k, v in r._redirect_paths.items()},
            {k: sorted(v) for k, v in r._exact.items()})


def _random_vault(root: Path, rng: random.Random) -> list[str]:
    files = sorted({posixpath.join(rng.choice(FOLDERS), n if n.endswith((".png",)) else n + ".md")
                    for n in rng.sample(NAMES, 7)}
                   | {"k/k.md", "sub/sub.md", "notes/src.md", "notes/deep/other.md"})
    targets = [posixpath.splitext(f)[0] for f in files] + [
        "k", "sub", "../", "./", "x.md", "x/.", "k/.", "../k", "./a", "nick", "gone one",
        "Old Note", "a.md", "k/sub", "新 夹/笔记", "x.md/x.md"]
    for f in files:
        if f.endswith(".png"):
            (root / f).parent.mkdir(parents=True, exist_ok=True)
            (root / f).write_bytes(b"\x89PNG")
            continue
        fm = ""
        if rng.random() < 0.3:
            fm = f"---\naliases: [{rng.choice(['nick', 'Old Note', 'a', 'n2'])}]\n---\n"
        elif rng.random() < 0.15:
            fm = ("---\nmerged_from:\n  - path: old/gone one.md\n    title: gone one\n"
                  "    merged: 2026-01-01\n---\n")
        elif rng.random() < 0.3:   # links in properties (session 8): no edges, but moved
            fm = f'---\nrelated: "[[{rng.choice(targets)}]]"\n---\n'
        if rng.random() < 0.2:   # a reference definition
            links_def = f"\n\n[d]: {rng.choice(targets).replace(' ', '%20')}.md\n"
        else:
            links_def = ""
        links = []
        for t in rng.sample(targets, 6):
            enc = t.replace("%", "%25").replace(" ", "%20")
            links.append(rng.choice([f"[[{t}]]", f"![[{t}]]", f"[t]({enc}.md)", f"[t]({enc})",
                                     f"p:: [[{t}|s]]"]))
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        (root / f).write_text(fm + "\n\n".join(links) + "\n" + links_def, encoding="utf-8")
    return files


def _needs_check(view: VaultView, after: LinkResolver, path_map, forced) -> set[str]:
    """Notes the whole check says a change touches (the old `retarget` loop's test)."""
    out = set()
    for source, meta in view.notes.items():
        new = path_map.get(source, source)
        refs = view.refs(source)
        if not all(_keeps_meaning(x.target, source, new, view.resolver, after, path_map, forced)
                   for x in meta.links) or not all(
                _keeps_meaning(x.target, source, new, view.resolver, after, path_map, forced,
                               x.kind == "markdown") for x in refs) or not all(
                _keeps_meaning(x.target, source, new, view.resolver, after, path_map, forced)
                for x in view.props(source)):
            out.add(source)
    return out


@pytest.mark.parametrize("seed", range(120))
def test_after_is_the_whole_rebuild_and_the_key_filter_misses_no_touched_note(tmp_path, seed):
    rng = random.Random(seed)
    root = tmp_path / "v"
    root.mkdir()
    files = _random_vault(root, rng)
    store = FileStore(root)
    view = VaultView(store, {}, EXT)
    notes = [f for f in files if f.endswith(".md")]
    kind = rng.choice(["move", "folder", "merge", "add", "remove", "aliases", "frontmatter"])
    path_map: dict[str, str] = {}
    kwargs: dict = {}
    forced: set[str] = set()
    if kind == "move":
        src = rng.choice(files)
        dst = posixpath.join(rng.choice(FOLDERS + ["moved"]),
                             rng.choice(["k", "a", "sub", "nick", "x.md", "新"])
                             + posixpath.splitext(src)[1])
        if dst in files:
            dst = "fresh/" + dst
        path_map = {src: dst}
    elif kind == "folder":   # a folder moved whole (a daily workspace and its materials)
        folder = rng.choice(["k", "k/sub", "sub", "notes"])
        to = rng.choice(["moved", "k/sub/deeper", "archive/k"])
        path_map = {f: to + f[len(folder):] for f in files if f.startswith(folder + "/")}
    elif kind == "merge":
        loser, winner = rng.sample(notes, 2)
        path_map = {loser: winner}
        forced = {loser}
        kwargs = {"frontmatters": {winner: {"aliases": ["Old Note"], "merged_from": [
            {"path": loser, "title": "gone one"}]}}}
    elif kind == "add":
        kwargs = {"added": {rng.choice(["k/new.md", "a.md", "sub/sub/sub.md", "nick.md"]):
                            [rng.choice(["a", "nick", "Old Note"])]}}
        kwargs["added"] = {p: a for p, a in kwargs["added"].items() if p not in files}
    elif kind == "remove":
        kwargs = {"removed": [rng.choice(files)]}
    elif kind == "aliases":
        kwargs = {"aliases": {rng.choice(notes): [rng.choice(["a", "k", "nick", "sub"])]}}
    else:
        kwargs = {"frontmatters": {rng.choice(notes): {"aliases": ["笔记", "x.md"]}}}

    after = view.after(path_map, **kwargs)
    assert _state(after) == _state(view.rebuilt_after(path_map, **kwargs)), (seed, kind)
    # The delta and the whole comparison name the same keys.
    whole = view.rebuilt_after(path_map, **kwargs)
    assert changed_keys(view.resolver, after) == changed_keys(view.resolver, whole)

    keys = changed_keys(view.resolver, after)
    for p in forced:
        keys |= view.resolver.keys_of(p)
    picked = {s for s in view.notes if path_map.get(s, s) != s or view.names_any(s, keys)}
    missed = _needs_check(view, after, path_map, forced) - picked
    assert not missed, (seed, kind, path_map, kwargs, missed)


def test_the_filter_picks_only_notes_naming_the_change(tmp_path):
    """The point of it: a move checks link by link only the notes naming the old or new
    name (here 3 of 30), and rewrites what the whole check would."""
    root = tmp_path / "v"
    for i in range(30):
        (root / f"n{i}").mkdir(parents=True)
        (root / f"n{i}" / f"n{i}.md").write_text(f"[[n{(i + 1) % 30}]] ![[n{(i + 2) % 30}]]\n")
    (root / "n5" / "n5.md").write_text("[see](../n7/n7.md)\n")
    view = VaultView(FileStore(root), {}, EXT)
    path_map = {"n7/n7.md": "m/seven.md"}
    after = view.after(path_map)
    keys = changed_keys(view.resolver, after)
    assert keys == {"n7", "seven"}
    assert {p for p in view.notes if view.names_any(p, keys)} == {"n5/n5.md", "n6/n6.md"}
    changed = retarget(Transaction(view.store), view, path_map, after)
    assert changed == {"n5/n5.md": 1, "n6/n6.md": 1}


def test_a_link_whose_key_no_name_says_is_always_checked(tmp_path):
    """`[[../]]` names the folder note of the folder above: no file name says that."""
    root = tmp_path / "v"
    (root / "k" / "sub").mkdir(parents=True)
    (root / "k" / "k.md").write_text("folder note\n")
    (root / "k" / "sub" / "n.md").write_text("up: [[../]] and [[k/.]]\n")
    view = VaultView(FileStore(root), {}, EXT)
    assert view.resolve("../", "k/sub/n.md") == "k/k.md"
    assert view.names_any("k/sub/n.md", {"unrelated"})
    tx = Transaction(view.store)
    changed = retarget(tx, view, {"k/k.md": "k/index.md"}, view.after({"k/k.md": "k/index.md"}))
    assert changed == {"k/sub/n.md": 2}
    body = tx.new_text("k/sub/n.md")
    assert [x.target for x in extract_links(body)] != ["../", "k/."]


def test_a_file_named_with_two_md_is_found_by_its_one_md_links(tmp_path):
    """`[[y.md]]` names `y.md.md` when no `y.md` exists (path + ".md"): its key is `y`."""
    root = tmp_path / "v"
    root.mkdir()
    (root / "y.md.md").write_text("double\n")
    (root / "n.md").write_text("see [[y.md]]\n")
    view = VaultView(FileStore(root), {}, EXT)
    assert view.resolve("y.md", "n.md") == "y.md.md"
    tx = Transaction(view.store)
    path_map = {"y.md.md": "z.md"}
    assert retarget(tx, view, path_map, view.after(path_map), alias_bare=False) == {"n.md": 1}
    assert view.after(path_map).resolve(extract_links(tx.new_text("n.md"))[0].target) == "z.md"
