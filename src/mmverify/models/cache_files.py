"""Broken SQLite cache files: what an error says about the file, and how a corrupt file is set aside.

:class:`~mmverify.models.cache.SQLiteStore` decides what to do about a file it cannot use; this
module supplies the file-level pieces it decides with: classifying an SQLite or OS error, telling
whether the file was replaced (by identity), and moving a corrupt file aside together with its
side files.  The lock every repairing process takes is :func:`mmverify.core.locks.folder_lock`.
"""

from __future__ import annotations

import time
from pathlib import Path

_SIDECARS = ("-wal", "-shm", "-journal")  # an SQLite file's side files: they move with it

_CORRUPT_CODES = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB
_FULL_CODES = {13}  # SQLITE_FULL
_READ_ONLY_CODES = {8}  # SQLITE_READONLY


def failure_kind(exc: BaseException) -> str:
    """``corrupt``, ``full``, ``read_only`` or ``other`` for an SQLite or OS error."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        primary = code & 0xFF  # extended codes carry the primary code in their low byte
        if primary in _CORRUPT_CODES:
            return "corrupt"
        if primary in _FULL_CODES:
            return "full"
        if primary in _READ_ONLY_CODES:
            return "read_only"
    text = str(exc).lower()
    if "malformed" in text or "not a database" in text:
        return "corrupt"
    if "disk is full" in text or isinstance(exc, OSError) and exc.errno == 28:  # ENOSPC
        return "full"
    if "readonly" in text or "read-only" in text:
        return "read_only"
    return "other"


def file_identity(path: Path) -> tuple[int, int] | None:
    """``(device, inode)`` of ``path``, or None when there is no file: a change means another
    process replaced the file."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_dev, stat.st_ino)


def _aside_path(path: Path) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    candidate = path.with_name(f"{path.name}.corrupt-{stamp}")
    counter = 1
    while candidate.exists() or any(Path(f"{candidate}{s}").exists() for s in _SIDECARS):
        candidate = path.with_name(f"{path.name}.corrupt-{stamp}-{counter}")
        counter += 1
    return candidate


def move_aside(path: Path) -> Path:
    """Rename ``path`` (and its SQLite side files) to ``<name>.corrupt-<UTC time>``; the new path.

    Side files go first: a process that opens ``path`` meanwhile then meets either the old file
    (and waits for the repair) or none (and creates the fresh one) -- never a mixed pair.
    """
    target = _aside_path(path)
    for suffix in _SIDECARS:
        sidecar = Path(f"{path}{suffix}")
        if sidecar.exists():
            sidecar.rename(Path(f"{target}{suffix}"))
    path.rename(target)
    return target
