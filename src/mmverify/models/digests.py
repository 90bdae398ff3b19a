"""Content digests of checkpoints, the part of a backend's fingerprint that names its weights.

A multi-GB checkpoint is read once per change, not on every start: a large file's digest is
memoised per (path, stat) in this process and in the cache folder's ``file_digests.sqlite``.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Any

from ..core.hashing import changed_recently, sha256_file

_SMALL_FILE = 16 * 1024 * 1024  # files up to this size are read on every digest; larger ones memoised


def checkpoint_digest(path: str | Path) -> str:
    """A content-based fingerprint of a checkpoint file or folder (for cache keys).

    Every byte of every file counts.  Files up to 16 MiB are read into the digest on every call
    (as they always were: their digests are unchanged); a larger file contributes the SHA-256 of its
    whole content, memoised per (resolved path, size, mtime, inode, device, ctime) in this process
    and in ``<cache dir>/file_digests.sqlite`` (:func:`whole_file_sha256`), so a multi-GB checkpoint
    is read once per change rather than on every start, and an edit in place is always seen.
    """
    root = Path(path).expanduser()
    files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
    digest = hashlib.sha256()
    for file in files:
        size = file.stat().st_size
        digest.update(f"{file.relative_to(root) if root.is_dir() else file.name}:{size}".encode())
        if size <= _SMALL_FILE:
            with open(file, "rb") as handle:
                digest.update(handle.read())
        else:
            digest.update(f"sha256={whole_file_sha256(file)}".encode())
    return digest.hexdigest()[:16]


def _stat_key(path: Path) -> tuple[str, bool]:
    """What must be unchanged for a memoised digest of ``path`` to be trusted, and whether the file
    changed too recently for its stat to tell later changes apart (then nothing is memoised)."""
    stat = path.stat()
    racy = changed_recently(stat)
    return f"{stat.st_size}:{stat.st_mtime_ns}:{stat.st_ino}:{stat.st_dev}:{stat.st_ctime_ns}", racy


_WHOLE_FILE_MEMO: dict[tuple[str, str], str] = {}
_WHOLE_FILE_MEMO_LOCK = threading.Lock()
_DIGEST_STORES: dict[Path, Any] = {}


def _digest_store() -> Any:
    """The sidecar table of file digests in the cache folder (one object per folder and process)."""
    from ..core.settings import default_cache_dir
    from .cache import FileDigestStore

    path = default_cache_dir() / "file_digests.sqlite"
    with _WHOLE_FILE_MEMO_LOCK:
        if path not in _DIGEST_STORES:
            _DIGEST_STORES[path] = FileDigestStore(path)
        return _DIGEST_STORES[path]


def whole_file_sha256(file: str | Path) -> str:
    """SHA-256 of a file's whole content, memoised per (resolved path, stat).

    The memo (this process's, then the cache folder's ``file_digests.sqlite``) is used only while
    size, mtime_ns, inode, device and ctime_ns are all unchanged -- ctime cannot be set back by a
    copy that preserves mtime -- and a digest is stored only when the file's stat was the same
    before and after reading it, and the file had not changed in the last :data:`~mmverify.core.hashing.RACY_WINDOW_NS`
    (a later change within the same coarse timestamp tick would leave the stat as it was).
    """
    resolved = Path(file).expanduser().resolve()
    name = str(resolved)
    value = ""
    for _attempt in range(3):
        before, racy = _stat_key(resolved)
        if not racy:
            with _WHOLE_FILE_MEMO_LOCK:
                known = _WHOLE_FILE_MEMO.get((name, before))
            if known is not None:
                return known
            known = _digest_store().lookup(name, before)
            if known is not None:
                with _WHOLE_FILE_MEMO_LOCK:
                    _WHOLE_FILE_MEMO[(name, before)] = known
                return known
        value = sha256_file(resolved)
        if _stat_key(resolved)[0] == before:  # not written to while it was read
            if not racy:
                _digest_store().record(name, before, value)
                with _WHOLE_FILE_MEMO_LOCK:
                    _WHOLE_FILE_MEMO[(name, before)] = value
            return value
    return value  # a file that keeps changing: its latest digest, never memoised
