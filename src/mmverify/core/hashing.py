"""Content hashing: canonical JSON and SHA-256 digests used for result keys and caches."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

_CHUNK = 1 << 20


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


def digest_of(*parts: Any) -> str:
    """SHA-256 over the canonical JSON of ``parts`` (strings, numbers, lists, dicts)."""
    return sha256_bytes(canonical_json(list(parts)).encode("utf-8"))


class FileDigests:
    """Memoises file digests within a run, keyed by path, size and modification time."""

    def __init__(self) -> None:
        self._memo: dict[tuple[str, int, int], str] = {}

    def __call__(self, path: Path) -> str:
        stat = path.stat()
        key = (str(path), stat.st_size, stat.st_mtime_ns)
        if key not in self._memo:
            self._memo[key] = sha256_file(path)
        return self._memo[key]
