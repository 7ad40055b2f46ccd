"""A compact, memory-mapped copy of jieba's prefix dictionary, so one query is cut without it.

``jieba.initialize()`` builds its prefix dictionary (``FREQ``: ~500k words and word prefixes
with their counts, plus ``total``) by a ``marshal.load`` of a 9 MB cache: 0.2-0.8 s on a quiet
machine, 2-2.6 s under load, holding the GIL all along, only to cut a query of a few words
(G6). This module keeps the same pairs once per user, under the user cache
(:func:`reme_agent.engine.workdir.cache_root`), in one file named after the jieba version
and its ``dict.txt`` (size and mtime):

- a header (magic, format, counts, ``total``, a CRC-32 of everything else);
- an open-addressing hash table of ``uint32`` slots (CRC-32 of the word's UTF-8, linear
  probing, at most half full) pointing at entries;
- per entry its offset in the word blob and its count (``uint32`` arrays, in ``FREQ``'s order);
- the blob: every word in UTF-8, each followed by ``\\n`` (no word contains one; checked).

:class:`LazyFreq` answers jieba's ``in``/``[]``/``get`` from the mapped file, so a
``jieba.Tokenizer`` given it as ``FREQ`` runs its own ``cut`` (DAG, route, HMM) unchanged and
touches a few pages. :meth:`CompactDict.full` rebuilds the whole ``dict`` in chunks that
let other threads run between them, the same pairs as jieba's. A file that is missing, of
another jieba or format, truncated or damaged (CRC) is not used: callers fall back to
jieba's own load. No pickle or marshal: plain arrays and UTF-8.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import struct
import sys
import time
import zlib
from array import array
from collections.abc import Iterator, Mapping
from pathlib import Path

from reme_agent.engine.atomic import replaced

__all__ = ["CompactDict", "LazyFreq", "cache_path", "open_cached", "write_cache"]

log = logging.getLogger(__name__)

FORMAT = 1
"""Bump when the layout below changes."""
MAGIC = b"REMEJIEB"
_HEADER = struct.Struct("=8sIIIIQI4x")  # magic, format, words, slots, blob bytes, total, crc
_CRC_AT = struct.calcsize("=8sIIIIQ")     # the crc covers every byte but its own four
_U32 = 0xFFFFFFFF
_CHUNK = 16_384                       # entries per step of `full` (~5 ms, one switch interval)
_STALE_TEMP = 3600.0                  # seconds after which another writer's temp file is junk
KEEP_OTHERS = 4
"""Other installs' dictionaries kept beside this one (each ~50 MB): the most recently used."""
UNUSED_SECONDS = 14 * 86400.0
"""Another install's dictionary not opened for this long is removed when a new one is written."""
_TOUCH_EVERY = 86400.0                # an open marks its file used at most once a day


def cache_path() -> Path:
    """Where this jieba's compact dictionary lives: named after its version, its ``dict.txt``
    (size, mtime) and this machine's byte order, so another jieba never reads it."""
    import jieba  # type: ignore[import-untyped]  # the caller imported it (quietly)

    from reme_agent.engine.workdir import cache_root

    source = Path(jieba.__file__).parent / "dict.txt"
    st = source.stat()
    version = getattr(jieba, "__version__", "unknown")
    parts = [version, str(FORMAT), str(st.st_size), str(st.st_mtime_ns), sys.byteorder]
    return cache_root() / f"jieba-{version}-{zlib.crc32(' '.join(parts).encode()):08x}.dict"


class CompactDict:
    """The mapped file: word -> count lookups, and the whole ``dict`` on demand."""

    def __init__(self, path: Path) -> None:
        """Map and check `path`; ValueError if it is not a whole, undamaged file of ours."""
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < _HEADER.size:
                raise ValueError("shorter than its header")
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        magic, fmt, words, slots, blob, total, crc = _HEADER.unpack_from(self._map, 0)
        if magic != MAGIC or fmt != FORMAT:
            raise ValueError(f"not a format-{FORMAT} compact jieba dictionary")
        if slots & (slots - 1) or slots < 2 * words or total <= 0:
            raise ValueError("inconsistent header")
        if size != _HEADER.size + 4 * (slots + 2 * words + 1) + blob:
            raise ValueError(f"{size} bytes, not what the header says")
        view = memoryview(self._map)
        if zlib.crc32(view[_CRC_AT + 4:], zlib.crc32(view[:_CRC_AT])) != crc:
            raise ValueError("CRC mismatch (damaged file)")
        at = _HEADER.size
        self._slots = view[at:at + 4 * slots].cast("I")
        at += 4 * slots
        self._offsets = view[at:at + 4 * (words + 1)].cast("I")
        at += 4 * (words + 1)
        self._counts = view[at:at + 4 * words].cast("I")
        at += 4 * words
        self._blob = view[at:at + blob]
        self._mask = slots - 1
        self.words = words
        self.total: int = total

    def count(self, word: str) -> int:
        """The word's count in jieba's FREQ (0 for a prefix-only entry), -1 if absent."""
        key = word.encode("utf-8", "surrogatepass")  # a lone surrogate never matches a word
        slots, offsets, blob, mask = self._slots, self._offsets, self._blob, self._mask
        h = zlib.crc32(key) & mask
        while entry := slots[h]:
            entry -= 1
            start = offsets[entry]
            if blob[start:offsets[entry + 1] - 1] == key:
                return self._counts[entry]
            h = (h + 1) & mask
        return -1

    def chunks(self) -> Iterator[tuple[list[str], memoryview]]:
        """Words and counts, ``_CHUNK`` entries at a time, in FREQ's order."""
        offsets = self._offsets
        for lo in range(0, self.words, _CHUNK):
            hi = min(lo + _CHUNK, self.words)
            text = str(self._blob[offsets[lo]:offsets[hi] - 1], "utf-8")
            yield text.split("\n"), self._counts[lo:hi]

    def full(self) -> dict[str, int]:
        """The whole FREQ dict. Chunked, so a thread doing this lets the others run: one
        ``marshal.load`` of jieba's cache holds the GIL for 0.2-2.6 s."""
        freq: dict[str, int] = {}
        for words, counts in self.chunks():
            freq.update(zip(words, counts.tolist(), strict=True))
        return freq


class LazyFreq:
    """Read-only stand-in for jieba's ``FREQ``: ``in``, ``[]`` and ``get``, from the file.

    Answers are remembered, since jieba's DAG asks ``in`` then ``[]`` for the same fragment.
    Only for short texts: a dict lookup is still ~10x faster (callers switch to the full
    dict for bulk work)."""

    __slots__ = ("_compact", "_seen")

    def __init__(self, compact: CompactDict) -> None:
        self._compact = compact
        self._seen: dict[str, int] = {}

    def _count(self, word: str) -> int:
        found = self._seen.get(word)
        if found is None:
            found = self._seen[word] = self._compact.count(word)
        return found

    def __contains__(self, word: object) -> bool:
        return isinstance(word, str) and self._count(word) >= 0

    def __getitem__(self, word: str) -> int:
        found = self._count(word)
        if found < 0:
            raise KeyError(word)
        return found

    def get(self, word: str, default: int | None = None) -> int | None:
        found = self._count(word)
        return default if found < 0 else found

    def __len__(self) -> int:
        return self._compact.words


def open_cached(path: Path | None = None) -> CompactDict | None:
    """The compact dictionary if a sound one is there, else None (a damaged one is said in
    the debug log and left for the next `write_cache` to replace)."""
    try:
        path = path or cache_path()
        if not path.is_file():
            return None
        compact = CompactDict(path)
        _mark_used(path)
        return compact
    except (OSError, ValueError) as exc:
        log.debug("not using the compact jieba dictionary (%s: %s)", type(exc).__name__, exc)
        return None


def write_cache(freq: Mapping[str, int], total: int, path: Path | None = None) -> bool:
    """Write `freq`/`total` (jieba's loaded FREQ) as a compact file, atomically: a temp file
    renamed over the final name, so two processes writing at once leave one whole file.
    Best effort: False (and a debug log line) when the folder is read-only or full, or the
    dictionary does not fit the format."""
    try:
        path = path or cache_path()
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        _remove_stale_temps(path.parent)
        # the temp file first: a read-only cache costs no encoding (0.4 s)
        with replaced(path, prefix=".jieba-", suffix=".tmp") as f:
            f.write(_encode(freq, total))
        _remove_unused_dicts(path)
        return True
    except (OSError, ValueError) as exc:
        log.debug("could not write the compact jieba dictionary (%s: %s)",
                  type(exc).__name__, exc)
        return False


def _encode(freq: Mapping[str, int], total: int) -> bytes:
    """The file's bytes (module docstring); ValueError if a word or count does not fit."""
    encoded = [word.encode("utf-8") for word in freq]
    words = len(encoded)
    if not 0 < total <= 0xFFFFFFFFFFFFFFFF or words >= _U32:
        raise ValueError("total or word count out of range")
    slots_n = 1 << max(4, (2 * words - 1).bit_length())
    mask = slots_n - 1
    slots = array("I", bytes(4 * slots_n))
    offsets = array("I")
    at = 0
    for i, key in enumerate(encoded):
        if b"\n" in key:
            raise ValueError(f"a word contains a newline: {key!r}")
        offsets.append(at)
        at += len(key) + 1
        h = zlib.crc32(key) & mask
        while slots[h]:
            h = (h + 1) & mask
        slots[h] = i + 1
    offsets.append(at)
    if at > _U32:
        raise ValueError("word blob too large")
    counts = array("I")
    for count in freq.values():
        if not isinstance(count, int) or not 0 <= count <= _U32:
            raise ValueError(f"count out of range: {count!r}")
        counts.append(count)
    blob = b"\n".join(encoded) + b"\n" if encoded else b""
    body = slots.tobytes() + offsets.tobytes() + counts.tobytes() + blob
    head = _HEADER.pack(MAGIC, FORMAT, words, slots_n, len(blob), total, 0)
    crc = zlib.crc32(body, zlib.crc32(head[_CRC_AT + 4:], zlib.crc32(head[:_CRC_AT])))
    return head[:_CRC_AT] + struct.pack("=I", crc) + head[_CRC_AT + 4:] + body


def _mark_used(path: Path) -> None:
    """Stamp the file as used (its mtime), at most once a day: what `_remove_unused_dicts`
    of another install goes by."""
    with contextlib.suppress(OSError):
        if time.time() - path.stat().st_mtime > _TOUCH_EVERY:
            os.utime(path)


def _remove_unused_dicts(written: Path) -> None:
    """Remove other installs' dictionaries once a new one is written: those unused for
    `UNUSED_SECONDS`, and all but the `KEEP_OTHERS` most recently used.

    Why: the name follows ``dict.txt``'s mtime, so every new environment that installs
    jieba (a venv, an upgrade, a CI run) writes its own ~50 MB file; without this a
    developer's cache held 40 of them (2.1 GB). A file removed while another process maps
    it stays readable to that process (POSIX), and an install whose file went writes it
    again on its next start."""
    others = []
    for other in written.parent.glob("jieba-*.dict"):
        if other.name == written.name:
            continue
        with contextlib.suppress(OSError):
            others.append((other.stat().st_mtime, other))
    others.sort(reverse=True)
    now = time.time()
    for rank, (mtime, other) in enumerate(others):
        if rank >= KEEP_OTHERS or now - mtime > UNUSED_SECONDS:
            with contextlib.suppress(OSError):
                other.unlink()


def _remove_stale_temps(folder: Path) -> None:
    """Temp files of writers that died (a process ends while its daemon writer runs)."""
    now = time.time()
    for tmp in folder.glob(".jieba-*.tmp"):
        with contextlib.suppress(OSError):
            if now - tmp.stat().st_mtime > _STALE_TEMP:
                tmp.unlink()
