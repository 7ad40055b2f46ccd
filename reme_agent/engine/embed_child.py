"""The embedding process of a bulk index run: texts in on stdin, vectors out on stdout.

Why a process and not a thread (G6): chromadb's ``upsert`` holds the GIL for its whole Rust
call (about 1 ms per block), and the parser, tokenizer and SQLite writes are Python too, so
in one process every one of them stalls the embedder. A child process embeds on its own core
while the parent parses and writes; `engine/pipeline.py` starts it for large runs only.

Protocol (binary, in order, one answer per request)::

    child  -> parent   b"R" u32 dim u32 len <embedder id, utf-8>      once, when ready
    parent -> child    b"T" u32 len <JSON list of texts, utf-8>
    child  -> parent   b"V" u32 rows u32 dim <rows*dim float32>        or
                       b"E" u32 len <error message, utf-8>
    EOF on stdin: the child exits.

Run as ``python -m reme_agent.engine.embed_child KIND THREADS``.
"""

from __future__ import annotations

import json
import signal
import struct
import sys
from typing import BinaryIO

import numpy as np

__all__ = ["read_frame", "write_frame"]

_U32 = struct.Struct("<I")


def write_frame(out: BinaryIO, tag: bytes, *parts: bytes | int) -> None:
    """One frame: a tag byte, then each part as a u32 (ints) or raw bytes."""
    out.write(tag + b"".join(_U32.pack(p) if isinstance(p, int) else p for p in parts))
    out.flush()


def read_exact(src: BinaryIO, n: int) -> bytes:
    data = src.read(n)
    if data is None or len(data) != n:
        raise EOFError(f"the embedding process closed its pipe ({len(data or b'')}/{n} bytes)")
    return data


def read_u32(src: BinaryIO) -> int:
    return int(_U32.unpack(read_exact(src, 4))[0])


def read_frame(src: BinaryIO) -> tuple[bytes, object]:
    """(tag, payload): "R" -> (dim, id), "T" -> texts, "V" -> float32 array, "E" -> message."""
    tag = src.read(1)
    if not tag:
        raise EOFError("the embedding process closed its pipe")
    if tag == b"R":
        dim = read_u32(src)
        return tag, (dim, read_exact(src, read_u32(src)).decode("utf-8"))
    if tag == b"T":
        return tag, json.loads(read_exact(src, read_u32(src)).decode("utf-8"))
    if tag == b"V":
        rows, dim = read_u32(src), read_u32(src)
        raw = read_exact(src, rows * dim * 4)
        return tag, np.frombuffer(raw, dtype=np.float32).reshape(rows, dim)
    if tag == b"E":
        return tag, read_exact(src, read_u32(src)).decode("utf-8")
    raise ValueError(f"unknown frame tag {tag!r}")


def main(argv: list[str]) -> int:
    from reme_agent.engine.embedders import make_embedder

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's; its EOF ends us
    kind, threads = argv[0], argv[1]
    src, out = sys.stdin.buffer, sys.stdout.buffer
    embedder = make_embedder(kind, threads=threads if threads == "auto" else int(threads))  # type: ignore[arg-type]
    load = getattr(embedder, "load", None)
    if load is not None:
        load()
    ident = embedder.id.encode("utf-8")
    write_frame(out, b"R", int(embedder.dim), len(ident), ident)
    while True:
        try:
            tag, texts = read_frame(src)
        except EOFError:
            return 0
        if tag != b"T" or not isinstance(texts, list):
            return 2
        try:
            vecs = np.ascontiguousarray(embedder.embed_documents(texts), dtype=np.float32)
        except Exception as exc:  # reported to the parent, which fails the run with it
            msg = f"{type(exc).__name__}: {exc}".encode("utf-8", "replace")
            write_frame(out, b"E", len(msg), msg)
            continue
        write_frame(out, b"V", int(vecs.shape[0]), int(vecs.shape[1]), vecs.tobytes())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
