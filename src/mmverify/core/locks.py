"""An advisory lock on a folder, shared by every process that uses it the same way."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``folder`` (POSIX).  Where the folder cannot be opened, or
    the platform has no ``flock``, the body runs unlocked: the lock only saves repeated work or
    orders repairs, and callers stay correct without it."""
    try:
        import fcntl

        descriptor = os.open(folder, os.O_RDONLY)
    except (ImportError, OSError):
        yield
        return
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # closing releases the lock
