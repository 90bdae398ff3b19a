"""Content hashing: canonical JSON and SHA-256 digests used for result keys and caches."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

_CHUNK = 1 << 20
DEFAULT_MAX_FILE_BYTES = 256 * 1024 * 1024  # the media loader's default byte limit
DEFAULT_MAX_DIGESTS = 8192
OVERSIZE_SCHEME = "mmverify-oversize-file/1"


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace: equal values give equal strings."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_file_bounded(path: str | os.PathLike[str], max_bytes: int) -> str | None:
    """SHA-256 of a file of at most ``max_bytes`` bytes; None (after reading at most one chunk past
    the limit) when it holds more -- a file that grows after its size was checked is caught too."""
    digest = hashlib.sha256()
    read = 0
    with open(path, "rb") as handle:
        while True:
            chunk = handle.read(min(_CHUNK, max_bytes - read + 1))
            if not chunk:
                return digest.hexdigest()
            read += len(chunk)
            if read > max_bytes:
                return None
            digest.update(chunk)


# A file changed less than this long before its stat was taken may change again within the same
# coarse timestamp tick and keep its stat: such a stat vouches for nothing, and no digest is kept by it.
RACY_WINDOW_NS = 2 * 10**9


def _now_ns() -> int:
    return time.time_ns()


def changed_recently(stat: os.stat_result) -> bool:
    """Whether ``stat`` is too young (see :data:`RACY_WINDOW_NS`) to stand for the file's content."""
    return _now_ns() - max(stat.st_mtime_ns, stat.st_ctime_ns) < RACY_WINDOW_NS


def oversize_digest(size: int) -> str:
    """Stands for the content of a file over the byte limit, which is never read: such a file can
    only be refused as too large, and that outcome depends on its size alone."""
    return sha256_bytes(f"{OVERSIZE_SCHEME}:{size}".encode("ascii"))


def digest_of(*parts: Any) -> str:
    """SHA-256 over the canonical JSON of ``parts`` (strings, numbers, lists, dicts)."""
    return sha256_bytes(canonical_json(list(parts)).encode("utf-8"))


class FileDigests:
    """Memoises file digests, keyed by path, size, mtime, inode, device and ctime, in a bounded LRU.

    ctime cannot be set back (a rewrite that restores size and mtime still changes it), and a file
    changed within :data:`RACY_WINDOW_NS` is hashed every time rather than memoised, so a file
    rewritten in place under a long-lived reward or server never keeps its old digest.

    Files over ``max_bytes`` are not read: their size is checked before hashing (and again while
    hashing), and they get :func:`oversize_digest`.  At most ``max_entries`` digests are kept; the
    least recently used go first.  Safe to share between threads.
    """

    def __init__(self, max_bytes: int = DEFAULT_MAX_FILE_BYTES, max_entries: int = DEFAULT_MAX_DIGESTS) -> None:
        if max_bytes < 1 or max_entries < 1:
            raise ValueError("max_bytes and max_entries must be positive")
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self._memo: OrderedDict[tuple[Any, ...], str] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._memo)

    def __getstate__(self) -> dict[str, Any]:  # picklable (rewards travel to worker processes)
        state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _cached(self, key: tuple[Any, ...]) -> str | None:
        with self._lock:
            digest = self._memo.get(key)
            if digest is not None:
                self._memo.move_to_end(key)
            return digest

    def _store(self, key: tuple[Any, ...], digest: str) -> None:
        with self._lock:
            self._memo[key] = digest
            self._memo.move_to_end(key)
            while len(self._memo) > self.max_entries:
                self._memo.popitem(last=False)

    def __call__(self, path: Path) -> str:
        stat = path.stat()
        key = (str(path), stat.st_size, stat.st_mtime_ns, stat.st_ino, stat.st_dev, stat.st_ctime_ns)
        digest = self._cached(key)
        if digest is None:
            if stat.st_size > self.max_bytes:
                digest = oversize_digest(stat.st_size)
            else:
                digest = sha256_file_bounded(path, self.max_bytes) or oversize_digest(self.max_bytes + 1)
            if not changed_recently(stat):
                self._store(key, digest)
        return digest
