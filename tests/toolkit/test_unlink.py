"""G5: `link_remove` removes exactly the named links, with a reason, and audits it; CLI
`--force` overwrites without a read only for a person, and audits that too."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys

import pytest

from reme_agent.engine.links import extract_links
from reme_agent.errors import ConservationViolation, InvalidArgument, StampChanged
from reme_agent.toolkit.actor import acting_as
from reme_agent.toolkit.notes import write_note
from reme_agent.toolkit.unlink import link_remove

HYBRID = "knowledge/hybrid-search/hybrid-search.md"
BM25 = "knowledge/bm25/bm25.md"


def edges(vault, path: str) -> set[tuple[str, str | None]]:
    view = vault.view()
    text = (vault.root / path).read_text(encoding="utf-8")
    return {(view.resolver.resolve(link.target, path) or link.target, link.predicate)
            for link in extract_links(text)}


def audit_text(vault) -> str:
    path = vault.root / "audit" / dt.date.today().isoformat() / "unlinked.md"
    return path.read_text(encoding="utf-8")


def test_it_removes_exactly_the_named_links_and_audits_why_and_who(vault) -> None:
    before = edges(vault, HYBRID)
    assert (BM25, "uses") in before
    with acting_as("mcp"):
        got = link_remove(vault, HYBRID, ["uses:: [[bm25]]"], reason="BM25 is not used here")
    after = edges(vault, HYBRID)
    assert before - after == {(BM25, "uses")} and after <= before
    assert len(got.data["removed"]) == 1 and got.data["removed"][0].startswith("uses:: [[")
    audit = audit_text(vault)
    assert "BM25 is not used here" in audit and "by: mcp" in audit and HYBRID in audit
    assert not [x for x in extract_links(audit)]  # the audit quotes links; it adds no edges


def test_a_link_the_note_does_not_have_changes_nothing(vault) -> None:
    text = vault.store.read_text(HYBRID)
    with pytest.raises(InvalidArgument, match="has no link") as err:
        link_remove(vault, HYBRID, ["[[bm25]]", "[[nowhere]]"], reason="cleanup")
    assert "Its links:" in str(err.value)
    assert vault.store.read_text(HYBRID) == text
    with pytest.raises(InvalidArgument, match="reason"):
        link_remove(vault, HYBRID, ["uses:: [[bm25]]"], reason="  ")


def test_a_stale_stamp_is_refused(vault) -> None:
    with pytest.raises(StampChanged):
        link_remove(vault, HYBRID, ["uses:: [[bm25]]"], reason="x", stamp="0" * 64)


def test_write_still_refuses_to_drop_links(vault) -> None:
    """Removal is only through the audited tool; an ordinary rewrite stays under E-1."""
    with pytest.raises(ConservationViolation):
        write_note(vault, HYBRID, body="# Hybrid search\n\nno links\n", overwrite=True,
                   stamp=vault.store.stamp(HYBRID))


def _cli(vault, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, REME_EMBEDDER__NAME="hash")
    return subprocess.run([sys.executable, "-m", "reme_agent", "tool", *args, "--vault",
                           str(vault.root), "--json"], capture_output=True, text=True,
                          env=env, timeout=120)


def test_cli_force_overwrites_without_a_read_and_is_audited(vault) -> None:
    body = "---\ntitle: BM25\n---\n# BM25\n\npart_of:: [[knowledge/hybrid-search/hybrid-search.md|hybrid search]]\n"
    refused = _cli(vault, "write", "--path", BM25, "--text", body, "--overwrite")
    assert refused.returncode == 1 and "without its stamp" in refused.stderr
    forced = _cli(vault, "write", "--path", BM25, "--text", body, "--force")
    assert forced.returncode == 0, forced.stderr
    assert json.loads(forced.stdout)["path"] == BM25
    assert vault.store.read_text(BM25) == body
    audit = (vault.root / "audit" / dt.date.today().isoformat() / "forced.md").read_text()
    assert "--force" in audit and BM25 in audit
