"""Face 3: the `reme-agent` command line (console script `reme_agent.cli:main`).

One module per command family; `main.py` holds the root group, the one table of commands
(`COMMANDS`) and the exit codes. The CLI is a composition root: it reads Settings and calls the
API; it holds no memory logic of its own.

    context.py     --vault/--json/--config, the merged Ctx, output
    vault_cmds.py  init, index, watch (--worker), demo, config
    search.py      search
    tools.py       tools, read, traverse, lint, tool <name>
    jobs.py        sync, distill, hook
    maintain.py    maintain
    autolink.py    autolink
    worker.py      worker  (drains the follow-up queue)
    mcp.py         mcp
    bench.py       bench   (bench/ of the source checkout, loaded by path)
    evals.py       eval    (evals/ of the source checkout, loaded by path; checkout.py)
"""

from reme_agent.cli.main import COMMANDS, cli, main

__all__ = ["COMMANDS", "cli", "main"]
