"""What every command shares: `--vault/--json/--config`, the merged context, JSON/text output.

The three options are accepted before the command (`reme-agent --vault V search ...`) and
after it (`reme-agent search ... --vault V`); `common` merges both into one `Ctx` and passes it
as the callback's first argument. Settings are read here and nowhere below (STYLE §1:
the CLI is a composition root). Nothing heavy is imported at module level.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from reme_agent.config import Settings
    from reme_agent.engine.progress import Progress
    from reme_agent.engine.stop import StopRequest
    from reme_agent.vault import Vault

log = logging.getLogger("reme_agent.cli")

# The shared options, declared once: used as decorators (`common`, the root group) and as
# click.Option objects (the `tool` subcommands built from the registry).
_VAULT = (("--vault", "vault"), {"default": None, "metavar": "PATH",
                                 "help": "Vault folder (default: $REME_VAULT or ./vault)."})
_JSON = (("--json", "as_json"), {"is_flag": True, "help": "Print JSON."})
_CONFIG = (("--config", "configs"), {"multiple": True, "metavar": "FILE",
                                     "help": "YAML config file(s), e.g. configs/default.yaml."})
_COMMON = (_VAULT, _JSON, _CONFIG)


class Ctx:
    """The merged `--vault/--json/--config` of the group and the command."""

    def __init__(self, vault: str | None = None, configs: tuple[str, ...] = (),
                 as_json: bool = False) -> None:
        self.vault_arg = vault
        self.configs = [Path(c) for c in configs]
        self.as_json = as_json

    def merged(self, vault: str | None, as_json: bool, configs: tuple[str, ...]) -> Ctx:
        """The command's own options win; config files add up (group's first)."""
        return Ctx(vault or self.vault_arg, (*map(str, self.configs), *configs),
                   as_json or self.as_json)

    @property
    def vault_path(self) -> Path:
        return Path(self.vault_arg or os.environ.get("REME_VAULT") or "./vault")

    def settings(self, **overrides: Any) -> Settings:
        from reme_agent.config import load_settings

        return load_settings(self.configs, vault=self.vault_path, overrides=overrides)

    def open(self, create: bool = False, **overrides: Any) -> Vault:
        from reme_agent.vault import open_vault

        return open_vault(self.vault_path, self.settings(**overrides), create=create)

    def progress(self, no_progress: bool, settings: Settings) -> Progress:
        """Bars on stderr for long runs: only on a terminal, never with --json or
        --no-progress (or `index.progress: false`), so piped output stays clean."""
        from reme_agent.engine.progress import SILENT, auto

        return SILENT if no_progress or self.as_json else auto(settings.index.progress)

    def emit(self, data: Any, text: str | None = None) -> None:
        """JSON with --json (or when there is no text form), else the text."""
        if self.as_json or text is None:
            click.echo(json.dumps(data, ensure_ascii=False, indent=2, default=str))
        else:
            click.echo(text)


def current() -> Ctx:
    """The group's Ctx (a bare one when a command runs without the root group)."""
    return click.get_current_context().find_object(Ctx) or Ctx()


def with_ctx(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Replace the three shared keyword arguments by one merged `Ctx` as first argument."""
    @functools.wraps(fn)
    def run(*args: Any, vault: str | None, as_json: bool, configs: tuple[str, ...],
            **kwargs: Any) -> Any:
        return fn(current().merged(vault, as_json, configs), *args, **kwargs)
    return run


def common(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator: --vault/--json/--config on this command; the callback gets `c: Ctx` first."""
    return shared_options(with_ctx(fn))


def shared_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add the three shared options to a command or group callback (as keyword arguments)."""
    for decls, attrs in reversed(_COMMON):
        fn = click.option(*decls, **attrs)(fn)
    return fn


def shared_option_objects() -> list[click.Option]:
    """The three shared options as click.Option objects, for commands built at run time."""
    return [click.Option(list(decls), **attrs) for decls, attrs in _COMMON]


json_option = click.option(*_JSON[0], **_JSON[1])
no_progress_option = click.option(
    "--no-progress", is_flag=True,
    help="No progress bar (bars show on a terminal only, never with --json).")
warm_option = click.option(
    "--warm/--no-warm", default=True, show_default=True,
    help="Answer `reme-agent search` and `hook` of other processes from this one (a Unix "
         "socket in the vault's internal folder, this user only).")


@contextlib.contextmanager
def sigterm_winds_down(stop: StopRequest, what: str) -> Iterator[None]:
    """The first SIGTERM asks `what` to stop at its next safe point (`stop` is set and the
    log says so); a second one stops it at once, as Ctrl-C does (KeyboardInterrupt: the
    transaction in progress rolls back, `finally` blocks run). For work that is safe to
    kill but worth finishing: a maintenance run's completed actions stay done."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def wind_down(signum: int, frame: object) -> None:
        if stop.is_set():
            log.warning("second SIGTERM: stopping %s now", what)
            raise KeyboardInterrupt
        stop.request("SIGTERM")
        log.warning("SIGTERM: %s stops after the action in progress (a second SIGTERM "
                    "stops it at once)", what)

    previous = signal.signal(signal.SIGTERM, wind_down)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def sigterm_stops() -> Iterator[None]:
    """SIGTERM (a service manager's stop, `kill PID`) ends a long-running command the way
    Ctrl-C does: as KeyboardInterrupt, so its `finally` blocks run (the warm socket is
    removed, the vault closed and its snapshot written) instead of the process dying where
    it stands. The previous handler is put back on the way out."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
