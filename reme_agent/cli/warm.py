"""A warm process: `reme-agent search` and `reme-agent hook` answered by a running one (G6).

A new process pays for imports, the snapshot and the embedding model before its first answer
(about 1.5 s at 10k notes on a quiet machine). `reme-agent serve`, `watch` and `mcp` keep all
of that loaded, so they also listen on a Unix socket in the vault's internal folder and run
the same two commands for other processes; the command line asks there first and runs
in-process when nobody answers quickly.

Security: the socket is ``<internal>/warm/serve.sock``; the ``warm`` folder is 0700 and the
socket 0600, so only the vault's user can reach it, and the server also checks the peer's uid
(``SO_PEERCRED``) on Linux. No network port is opened. A request is one of the two commands
with arguments validated as the command line validates them, for this vault, with the same
settings: the client sends its config files and ``REME_*`` variables, and the server refuses
(the client then runs in-process) unless they give exactly the settings it runs with. So a
request can do nothing the client could not do itself, and gets the same answer.

One server per vault: it holds ``warm/serve.lock`` (flock) while it serves. A socket left by
a killed server is stale: the next server (which gets the lock) removes it, and so does a
client whose connection is refused while nobody holds the lock.

Protocol: one JSON line each way, then a second answer line::

    client -> {"v": 1, "op": "search"|"hook", "root": ..., "configs": [...], "env": {...},
               "args": {...}}
    server -> {"accepted": true}            or {"accepted": false, "reason": "..."}
    server -> {"ok": true, "data": ..., "text": ...}   or {"ok": false, "error": "..."}

The first line comes at once, so a client can tell "nobody home" (fall back) from "working
on it" (wait: a hook that was accepted is never run twice).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import logging
import os
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reme_agent.vault import Vault

log = logging.getLogger("reme_agent.warm")

PROTOCOL = 1
WARM_DIR = "warm"
SOCKET_NAME = "serve.sock"
LOCK_NAME = "serve.lock"
CONNECT_TIMEOUT = 1.0
"""Seconds to connect and get the "accepted" line; past it the client runs in-process."""
SEARCH_TIMEOUT = 5.0
"""Seconds a search may take once accepted before the client gives up and runs it itself."""
HOOK_TIMEOUT = 900.0
"""Seconds an accepted hook may take (a model call included) before the client reports it
as failed; it is never run a second time."""
REQUEST_TIMEOUT = 10.0
"""Seconds the server waits for a connected client to send its request line."""
MAX_LINE = 64 * 1024 * 1024
"""Largest request line (a hook event may carry a long transcript)."""
ENV_SWITCH = "REME_WARM"
"""`REME_WARM=0` makes the command line never ask a warm process."""
_SUN_PATH_MAX = 100


# -- where ---------------------------------------------------------------------------------------


def warm_dir(internal: Path) -> Path:
    return internal / WARM_DIR


@contextlib.contextmanager
def _address(folder: Path) -> Iterator[str]:
    """The socket address for `folder`: the path itself, or, when it is too long for
    AF_UNIX (about 107 bytes), the same file reached through `/proc/self/fd/<dir fd>/`."""
    path = str(folder / SOCKET_NAME)
    if len(path.encode()) < _SUN_PATH_MAX:
        yield path
        return
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{SOCKET_NAME}"
    finally:
        os.close(fd)


def _peer_uid(conn: socket.socket) -> int | None:
    """The connecting process's uid (Linux SO_PEERCRED), None where it cannot be read."""
    opt = getattr(socket, "SO_PEERCRED", None)
    if opt is None:
        return None
    try:
        raw = conn.getsockopt(socket.SOL_SOCKET, opt, struct.calcsize("3i"))
    except OSError:
        return None
    return struct.unpack("3i", raw)[1]


def _try_lock(path: Path) -> int | None:
    """An exclusive, non-blocking flock on `path`: the fd, or None if another holds it."""
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


# -- client --------------------------------------------------------------------------------------


def settings_inputs(configs: list[Path]) -> dict[str, Any]:
    """What decides the client's Settings besides the vault: config files and REME_* vars."""
    env = {k: v for k, v in os.environ.items() if k.startswith("REME_") and "__" in k}
    return {"configs": [str(Path(c).resolve()) for c in configs], "env": env}


def ask(root: Path, op: str, args: dict[str, Any], configs: list[Path], *,
        answer_timeout: float | None) -> dict[str, Any] | None:
    """Run `op` in the vault's warm process: its answer, or None to run in-process.

    None when no server runs, it refuses (other settings), or it does not accept within
    CONNECT_TIMEOUT. Once accepted, waits `answer_timeout` seconds (None: as long as it
    takes) and returns {"ok": ..., "data"/"error": ...}; a search that times out returns None
    (running it again is harmless), a hook gets {"ok": False, "error": ...} instead.
    """
    if os.environ.get(ENV_SWITCH, "1") in ("0", "false", "no", "off"):
        return None
    from reme_agent.engine.workdir import INTERNAL_DIR

    root = Path(root).expanduser().resolve()   # as open_vault names it
    folder = warm_dir(root / INTERNAL_DIR)
    if not (folder / SOCKET_NAME).exists():
        folder = _cache_warm_dir(root)
        if folder is None or not (folder / SOCKET_NAME).exists():
            return None
    request = {"v": PROTOCOL, "op": op, "root": str(root), "args": args,
               **settings_inputs(configs)}
    try:
        sock = _connect(folder)
    except OSError as exc:
        if exc.errno in (errno.ECONNREFUSED, errno.ENOENT):
            _remove_stale(folder)
        log.debug("no warm process for %s: %s", root, exc)
        return None
    with sock, sock.makefile("rb") as reader:
        try:
            sock.sendall(json.dumps(request, ensure_ascii=False).encode() + b"\n")
            first = json.loads(reader.readline() or b"null")
        except (OSError, ValueError) as exc:
            log.debug("the warm process did not accept: %s", exc)
            return None
        if not isinstance(first, dict) or not first.get("accepted"):
            log.debug("the warm process refused: %s", (first or {}).get("reason"))
            return None
        sock.settimeout(answer_timeout)
        try:
            answer = json.loads(reader.readline() or b"null")
        except (OSError, ValueError) as exc:
            answer = None
            log.debug("no answer from the warm process: %s", exc)
        if isinstance(answer, dict) and "ok" in answer:
            return answer
        if op == "search":
            return None
        return {"ok": False, "error": "the warm process stopped or timed out before answering"}


def _connect(folder: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(CONNECT_TIMEOUT)
    try:
        with _address(folder) as address:
            sock.connect(address)
    except OSError:
        sock.close()
        raise
    return sock


def _cache_warm_dir(root: Path) -> Path | None:
    """For a read-only vault (internal folder in the user cache), its warm folder if any.
    Only looks: asking must never create an internal folder (`--vault /` would make
    `/.reme` before the vault is refused)."""
    from reme_agent.engine.workdir import INTERNAL_DIR, cache_dir_of

    resolved = Path(root).resolve()
    if (resolved / INTERNAL_DIR).is_dir() or not resolved.is_dir():
        return None
    folder = warm_dir(cache_dir_of(resolved))
    return folder if folder.is_dir() else None


def _remove_stale(folder: Path) -> None:
    """Remove a socket nobody serves (its server was killed): only while holding the lock."""
    try:
        fd = _try_lock(folder / LOCK_NAME)
    except OSError:
        return
    if fd is None:
        return  # a server holds the lock: it is starting or busy, not gone
    try:
        with contextlib.suppress(FileNotFoundError):
            (folder / SOCKET_NAME).unlink()
    finally:
        os.close(fd)


# -- server --------------------------------------------------------------------------------------

Handler = Callable[["Vault", dict[str, Any]], tuple[Any, str | None]]


class WarmServer:
    """Answers `search` and `hook` requests for one open vault on its Unix socket."""

    def __init__(self, vault: Vault, configs: list[Path], handlers: dict[str, Handler]) -> None:
        self.vault = vault
        self.configs = [Path(c).resolve() for c in configs]
        self.handlers = handlers
        self.folder = warm_dir(vault.internal)
        self.address = ""
        self._lock_fd: int | None = None
        self._sock: socket.socket | None = None
        self._inode: tuple[int, int] | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._writes = threading.Lock()   # hooks write: one at a time
        self.served = 0                      # requests answered (accepted and run)
        self._count = threading.Lock()
        self._requests: list[threading.Thread] = []

    def start(self) -> bool:
        """Listen in a background thread; False if another process already serves the vault
        (or the socket cannot be made, e.g. a platform without AF_UNIX)."""
        if not hasattr(socket, "AF_UNIX"):
            return False
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.folder, 0o700)
        fd = _try_lock(self.folder / LOCK_NAME)
        if fd is None:
            log.info("another process already serves %s warm", self.vault.root)
            return False
        path = self.folder / SOCKET_NAME
        try:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # stale: its server released the lock we now hold
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            with _address(self.folder) as address:
                sock.bind(address)
            os.chmod(path, 0o600)
            sock.listen(16)
        except OSError as exc:
            log.warning("cannot serve %s warm: %s", self.vault.root, exc)
            os.close(fd)
            return False
        st = path.stat()
        self._inode = (st.st_dev, st.st_ino)
        self._lock_fd, self._sock, self.address = fd, sock, str(path)
        self._thread = threading.Thread(target=self._accept_loop, name="reme-warm",
                                        daemon=True)
        self._thread.start()
        return True

    def close(self) -> None:
        """Stop listening, remove the socket (if it is still ours) and release the lock."""
        self._stop.set()
        sock, self._sock = self._sock, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        with self._count:
            running, self._requests = self._requests, []
        for worker in running:   # let answers in progress finish before the vault closes
            worker.join(timeout=SEARCH_TIMEOUT + 5)
        if self._inode is not None:
            path = self.folder / SOCKET_NAME
            with contextlib.suppress(OSError):
                st = path.stat()
                if (st.st_dev, st.st_ino) == self._inode:
                    path.unlink()
            self._inode = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> WarmServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- serving ---------------------------------------------------------------------------
    def _accept_loop(self) -> None:
        while not self._stop.is_set() and self._sock is not None:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                if self._stop.is_set():
                    return
                continue
            worker = threading.Thread(target=self._serve_one, args=(conn,),
                                      name="reme-warm-request", daemon=True)
            with self._count:
                self._requests = [t for t in self._requests if t.is_alive()] + [worker]
            worker.start()

    def _serve_one(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as reader:
            try:
                uid = _peer_uid(conn)
                if uid is not None and uid != os.getuid():
                    self._send(conn, {"accepted": False, "reason": "another user"})
                    return
                conn.settimeout(REQUEST_TIMEOUT)
                line = reader.readline(MAX_LINE + 1)
                conn.settimeout(None)
                if len(line) > MAX_LINE:
                    self._send(conn, {"accepted": False, "reason": "request too large"})
                    return
                request = json.loads(line or b"null")
                reason = self._refusal(request)
                if reason:
                    self._send(conn, {"accepted": False, "reason": reason})
                    return
                self._send(conn, {"accepted": True})
                answer = self._run(request)
                with self._count:
                    self.served += 1
                self._send(conn, answer)
            except (OSError, ValueError) as exc:  # a client gone or talking nonsense
                log.debug("warm request failed: %s", exc)

    @staticmethod
    def _send(conn: socket.socket, message: dict[str, Any]) -> None:
        conn.sendall(json.dumps(message, ensure_ascii=False, default=str).encode() + b"\n")

    def _refusal(self, request: Any) -> str | None:
        """Why this request must run in the client's own process (None: serve it)."""
        if not isinstance(request, dict) or request.get("v") != PROTOCOL:
            return "unknown protocol"
        if request.get("op") not in self.handlers:
            return f"unknown operation {request.get('op')!r}"
        if not isinstance(request.get("args"), dict):
            return "bad arguments"
        if request.get("root") != str(self.vault.root):
            return "another vault"
        try:
            return self._settings_differ(request)
        except Exception as exc:  # a config the client could not load either
            return f"settings: {exc}"

    def _settings_differ(self, request: dict[str, Any]) -> str | None:
        from reme_agent.config import load_settings

        env = request.get("env") or {}
        configs = request.get("configs") or []
        if not isinstance(env, dict) or not isinstance(configs, list):
            return "bad settings inputs"
        theirs = load_settings([Path(c) for c in configs], vault=self.vault.root,
                               environ={str(k): str(v) for k, v in env.items()})
        if theirs.model_dump() != self.vault.settings.model_dump():
            return "other settings"
        key_env = theirs.model.api_key_env
        if key_env and _digest(env.get(key_env)) != _digest(os.environ.get(key_env)):
            return "another API key"
        return None

    def _run(self, request: dict[str, Any]) -> dict[str, Any]:
        from reme_agent.errors import ReMeError

        handler = self.handlers[request["op"]]
        try:
            if request["op"] == "search":
                data, text = handler(self.vault, request["args"])
            else:
                with self._writes:
                    data, text = handler(self.vault, request["args"])
        except ReMeError as exc:
            return {"ok": False, "error": str(exc), "kind": "ReMeError",
                    "type": type(exc).__name__}
        except Exception as exc:
            return {"ok": False, "error": str(exc), "kind": "internal",
                    "type": type(exc).__name__}
        return {"ok": True, "data": data, "text": text}


def _digest(value: str | None) -> str:
    return hashlib.sha256((value or "").encode()).hexdigest() if value else ""


# -- the two commands, as the command line runs them -----------------------------------------


def run_search_request(vault: Vault, args: dict[str, Any]) -> tuple[Any, str | None]:
    """`reme-agent search`: the search tool's own parameters (validated by its type hints)
    plus `log_access`; the answer is the tool's (data, text)."""
    import inspect

    from pydantic import TypeAdapter, ValidationError

    from reme_agent.errors import InvalidArgument
    from reme_agent.toolkit.results import hints_of
    from reme_agent.toolkit.retrieve import run_search, search

    args = dict(args)
    log_access = args.pop("log_access", True)
    names = list(inspect.signature(search).parameters)[1:]
    unknown = sorted(set(args) - set(names))
    if unknown or not isinstance(log_access, bool) or "query" not in args:
        raise InvalidArgument(f"Bad search request: unknown {unknown or 'log_access'}.")
    hints = hints_of(search)
    try:
        checked = {k: TypeAdapter(hints[k]).validate_python(v) for k, v in args.items()}
    except ValidationError as exc:
        raise InvalidArgument(f"Bad search argument: {exc.errors()[0]['msg']}.") from None
    result = run_search(vault, **checked, log_access=log_access)
    if log_access:
        vault.access_log.flush()  # as the command's own close() would
    return dict(result), result.text


def run_hook_request(vault: Vault, args: dict[str, Any]) -> tuple[Any, str | None]:
    """`reme-agent hook NAME`: the event and --mode, exactly as `hook_cmd` passes them."""
    from reme_agent.errors import InvalidArgument
    from reme_agent.hooks import HOOK_NAMES, run_hook

    name, mode, event = args.get("name"), args.get("mode"), args.get("event")
    if name not in HOOK_NAMES or mode not in ("auto", "llm", "transcript") \
            or not isinstance(event, dict):
        raise InvalidArgument("Bad hook request.")
    kwargs: dict[str, Any] = {} if name == "stop" else {"mode": mode}
    return run_hook(name, vault, event, **kwargs), None


HANDLERS: dict[str, Handler] = {"search": run_search_request, "hook": run_hook_request}


def start_server(vault: Vault, configs: list[Path], echo: Callable[[str], None] | None = None
                 ) -> WarmServer | None:
    """Serve `vault` warm from this process (None if another process already does)."""
    server = WarmServer(vault, configs, HANDLERS)
    if not server.start():
        return None
    if echo is not None:
        echo(f"serving search and hooks warm on {server.address}")
    return server
