"""A scripted LLM server on loopback that speaks two provider wire formats, for tests.

`ScriptedLLMServer(turns)` listens on 127.0.0.1 (a free port, a thread in the test process)
and answers, turn by turn from a script, exactly as a provider would over HTTP:

- OpenAI chat completions, `POST /v1/chat/completions`: a `chat.completion` JSON body, or
  with `"stream": true` Server-Sent Events of `chat.completion.chunk` objects -- the role
  first, text in pieces, each tool call opened with its id and name and its JSON arguments
  cut across several chunks (`delta.tool_calls[i].index`), a last chunk carrying the
  `finish_reason`, a usage chunk with empty `choices` when `stream_options.include_usage`
  asked for it, then `data: [DONE]`.
- Ollama chat, `POST /api/chat`: one JSON object, or with `"stream": true` newline-delimited
  JSON (text in pieces, tool calls whole with their arguments as an object, then a
  `"done": true` line with the token counts).

Only the model's decisions are scripted; the client, its formatter, the tool schemas it sends
and its parsing of the answers are the real ones. A turn is a reply (a `str` of final text,
or a sequence of `Call` and text) or a callable that receives every request body so far and
returns a reply, so a script can echo what a tool answered (a stamp), or a `Status` to answer
with an HTTP error (a rate limit, an overloaded server). Every request is kept
(`server.requests`, `server.bodies`) for the test to assert on what the client sent.

A callable turn that raises, an exhausted script or an unknown path is answered with HTTP 400
(not 5xx: the SDKs retry those) and recorded in `server.errors`; leaving the `with` block
raises `AssertionError` naming them, so a broken script cannot pass unnoticed.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Call", "Request", "ScriptedLLMServer", "Status", "call", "tool_messages"]


@dataclass(frozen=True)
class Call:
    """One tool call the scripted model makes; `arguments` is the raw JSON text it sends."""

    name: str
    arguments: str
    id: str = ""


def call(name: str, /, **args: Any) -> Call:
    """A tool call whose arguments are `args` as JSON (non-ASCII kept, as providers send it)."""
    return Call(name, json.dumps(args, ensure_ascii=False))


@dataclass(frozen=True)
class Status:
    """A turn answered with an HTTP error, as a provider under load answers (429, 500, 503)."""

    code: int
    message: str = "scripted provider error"


Reply = str | Sequence[Call | str]
Turn = Reply | Status | Callable[[list[dict[str, Any]]], Reply]


@dataclass
class Request:
    """One HTTP request the server received."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class _Answer:
    text: str
    calls: list[Call] = field(default_factory=list)


def tool_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The `role: tool` messages (tool results sent back) in one request body, in order."""
    return [m for m in body.get("messages", []) if m.get("role") == "tool"]


class ScriptedLLMServer:
    """Replays `turns` over HTTP (OpenAI and Ollama chat formats); see the module docstring."""

    def __init__(self, turns: Sequence[Turn], *, chunk_chars: int = 7,
                 model: str = "wire-model") -> None:
        self._turns = list(turns)
        self.chunk_chars = chunk_chars  # streamed text and arguments are cut into pieces this long
        self.model = model
        self.requests: list[Request] = []
        self.errors: list[str] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------
    def __enter__(self) -> ScriptedLLMServer:
        handler = type("Handler", (_Handler,), {"script": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._httpd is not None and self._thread is not None
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)
        if self.errors and exc[0] is None:
            raise AssertionError("scripted LLM server errors:\n" + "\n".join(self.errors))

    @property
    def url(self) -> str:
        """`http://127.0.0.1:<port>` (OpenAI base_url is this + "/v1"; Ollama host is this)."""
        assert self._httpd is not None, "use the server inside `with`"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests]

    @property
    def remaining(self) -> int:
        return len(self._turns)

    # -- one request ------------------------------------------------------------------------
    def answer(self, path: str, headers: dict[str, str],
               body: dict[str, Any]) -> _Answer | Status:
        """Record the request and compute the next scripted reply (raises ValueError on misuse)."""
        with self._lock:
            self.requests.append(Request(path, headers, body))
            if not self._turns:
                raise ValueError(f"script exhausted after {len(self.requests) - 1} requests")
            turn = self._turns.pop(0)
            if isinstance(turn, Status):
                return turn
            reply = turn(self.bodies) if callable(turn) else turn
            if isinstance(reply, str):
                return _Answer(reply)
            text = "".join(r for r in reply if isinstance(r, str))
            calls = [c if c.id else Call(c.name, c.arguments, f"call_{next(self._ids)}")
                     for c in reply if isinstance(c, Call)]
            return _Answer(text, calls)

    def fail(self, message: str) -> None:
        with self._lock:
            self.errors.append(message)


def _pieces(text: str, size: int) -> Iterator[str]:
    for i in range(0, len(text), size):
        yield text[i:i + size]


# -- OpenAI chat completions ---------------------------------------------------------------
def openai_completion(answer: _Answer, model: str, n: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.text or None,
                               "refusal": None}
    if answer.calls:
        message["tool_calls"] = [{"id": c.id, "type": "function",
                                  "function": {"name": c.name, "arguments": c.arguments}}
                                 for c in answer.calls]
    return {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": _epoch(),
            "model": model, "system_fingerprint": None,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": "tool_calls" if answer.calls else "stop"}],
            "usage": _openai_usage(answer)}


def openai_chunks(answer: _Answer, model: str, n: int, size: int,
                  include_usage: bool) -> Iterator[dict[str, Any]]:
    """The chat.completion.chunk objects OpenAI streams for one answer, in order."""
    base = {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "created": _epoch(),
            "model": model, "system_fingerprint": None}
    if include_usage:
        base["usage"] = None  # every chunk carries usage: null until the last one

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                     "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": "" if answer.text else None, "refusal": None})
    for piece in _pieces(answer.text, size):
        yield chunk({"content": piece})
    for i, c in enumerate(answer.calls):
        yield chunk({"tool_calls": [{"index": i, "id": c.id, "type": "function",
                                     "function": {"name": c.name, "arguments": ""}}]})
        for piece in _pieces(c.arguments, size):
            yield chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
    yield chunk({}, "tool_calls" if answer.calls else "stop")
    if include_usage:
        yield {**base, "choices": [], "usage": _openai_usage(answer)}


def _openai_usage(answer: _Answer) -> dict[str, int]:
    out = len(answer.text) + sum(len(c.arguments) for c in answer.calls)
    return {"prompt_tokens": 100, "completion_tokens": out, "total_tokens": 100 + out}


# -- Ollama chat ---------------------------------------------------------------------------
def ollama_message(answer: _Answer) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": answer.text}
    if answer.calls:  # Ollama sends arguments as a JSON object, not as text
        message["tool_calls"] = [{"function": {"name": c.name,
                                               "arguments": json.loads(c.arguments)}}
                                 for c in answer.calls]
    return message


def ollama_done(model: str, message: dict[str, Any]) -> dict[str, Any]:
    return {"model": model, "created_at": _iso(), "message": message, "done": True,
            "done_reason": "stop", "total_duration": 1_000_000, "load_duration": 10_000,
            "prompt_eval_count": 100, "prompt_eval_duration": 100_000, "eval_count": 20,
            "eval_duration": 200_000}


def ollama_lines(answer: _Answer, model: str, size: int) -> Iterator[dict[str, Any]]:
    """The NDJSON objects Ollama streams: text pieces, tool calls whole, then `done`."""
    for piece in _pieces(answer.text, size):
        yield {"model": model, "created_at": _iso(), "done": False,
               "message": {"role": "assistant", "content": piece}}
    if answer.calls:
        yield {"model": model, "created_at": _iso(), "done": False,
               "message": ollama_message(_Answer("", answer.calls))}
    yield ollama_done(model, {"role": "assistant", "content": ""})


def _epoch() -> int:
    return int(dt.datetime.now(dt.UTC).timestamp())


def _iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat().replace("+00:00", "Z")


# -- HTTP ----------------------------------------------------------------------------------
class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked bodies, as the SDKs expect
    timeout = 30  # an idle keep-alive connection ends its thread
    script: ScriptedLLMServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet test output
        pass

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = self.path.split("?", 1)[0]
        try:
            body = json.loads(raw or b"{}")
            if path not in ("/v1/chat/completions", "/api/chat"):
                raise ValueError(f"unknown path {path}")
            answer = self.script.answer(path, {k.lower(): v for k, v in self.headers.items()},
                                        body)
        except Exception as exc:  # a failing script turn: the test must see it
            self.script.fail(f"{path}: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
            self._json(400, {"error": {"message": f"scripted server: {exc}",
                                       "type": "invalid_request_error"}})
            return
        if isinstance(answer, Status):
            self._json(answer.code, {"error": {"message": answer.message, "type": "server_error"}})
            return
        n = len(self.script.requests)
        model = body.get("model") or self.script.model
        size = self.script.chunk_chars
        if path == "/api/chat":
            if body.get("stream", True):  # Ollama streams unless told not to
                self._stream("application/x-ndjson",
                             (json.dumps(o) + "\n" for o in ollama_lines(answer, model, size)))
            else:
                self._json(200, ollama_done(model, ollama_message(answer)))
        elif body.get("stream"):
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            events = (f"data: {json.dumps(c)}\n\n"
                      for c in openai_chunks(answer, model, n, size, usage))
            self._stream("text/event-stream", itertools.chain(events, ["data: [DONE]\n\n"]))
        else:
            self._json(200, openai_completion(answer, model, n))

    def _json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, content_type: str, parts: Iterator[str]) -> None:
        """Chunked transfer encoding, one HTTP chunk per event, flushed as it goes."""
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for part in parts:
            data = part.encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
