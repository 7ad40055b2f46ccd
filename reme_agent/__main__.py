"""`python -m reme_agent` = the `reme-agent` command."""

import sys

from reme_agent.cli import main

sys.exit(main())
