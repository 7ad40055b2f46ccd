"""Child process for the kill-point tests: one multi-file change on a vault, then report.

    python -m tests.reliability.tx_child <vault> move|mixed|open

`move`: the `move` tool moves the hub note (every inbound link rewritten); `mixed`: a
merge/split-shaped transaction (creates, rewrites, deletes, inbound retargeting); `open`:
just open the vault (which rolls what a killed process left). With REME_TX_KILL_AT=k the
transaction's k-th checkpoint SIGKILLs this process; otherwise it prints the number of
checkpoints it passed, as JSON.
"""

from __future__ import annotations

import json
import sys

from reme_agent.config import Settings
from reme_agent.engine import transaction
from reme_agent.engine.retarget import retarget
from reme_agent.engine.transaction import Transaction
from reme_agent.vault import open_vault

SETTINGS = Settings(embedder={"name": "hash"}, index={"progress": False})
HUB = "knowledge/hub/hub.md"
HUB_NEW = "knowledge/center/center.md"
WINNER = "knowledge/winner/winner.md"
LOSER = "knowledge/loser/loser.md"
CHILDREN = ("knowledge/child-a/child-a.md", "knowledge/child-b/child-b.md")


def mixed(store_vault) -> None:
    """Merge LOSER into WINNER and split two children off it, in one transaction."""
    def build(tx: Transaction) -> None:
        view = store_vault.view()
        path_map = {LOSER: WINNER}
        loser = tx.read(LOSER).split("---\n", 2)[2]
        tx.write(WINNER, tx.read(WINNER) + "\n## From the loser\n\n" + loser)
        for child in CHILDREN:
            name = child.split("/")[1]
            tx.create(child, f"---\ntitle: {name}\n---\n# {name}\n\npart_of:: [[{WINNER}]]\n")
        tx.delete(LOSER)
        after = view.after(path_map, added={c: [] for c in CHILDREN})
        retarget(tx, view, path_map, after, force=[LOSER], exclude={WINNER, LOSER})

    Transaction.run(store_vault.store, build)


def main() -> None:
    root, scenario = sys.argv[1], sys.argv[2]
    vault = open_vault(root, SETTINGS)
    if scenario == "move":
        from reme_agent.toolkit.files import move

        move(vault, HUB, HUB_NEW)
    elif scenario == "mixed":
        mixed(vault)
    print(json.dumps({"checkpoints": transaction.checkpoints()}))


if __name__ == "__main__":
    main()
