"""An advisory lock on a folder, shared by every process that uses it the same way."""

from __future__ import annotations

import contextlib
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from .waits import wait_s

POLL_S = 0.05  # the longest pause between two tries of a lock another process holds

_pause = time.sleep


@contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``folder`` (POSIX).  Where the folder cannot be opened, the
    file system refuses ``flock`` (as NFS can for a folder) or the platform has none, the body runs
    unlocked: the lock only saves repeated work or orders repairs, and callers stay correct
    without it.  The lock is tried in steps, so that a deadline raised in the waiting thread lands."""
    try:
        import fcntl

        descriptor = os.open(folder, os.O_RDONLY)
    except (ImportError, OSError):
        yield
        return
    try:
        locked = _take(fcntl, descriptor)
    except BaseException:  # a deadline's timeout, raised between two tries
        os.close(descriptor)
        raise
    try:
        yield
    finally:
        if locked:
            with contextlib.suppress(OSError):
                fcntl.flock(descriptor, fcntl.LOCK_UN)  # before the close: a forked child shares the description
        os.close(descriptor)


def _take(fcntl: Any, descriptor: int) -> bool:
    """Wait for the lock on ``descriptor``: True once held, False where it cannot be had at all."""
    while True:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:  # held elsewhere
            _pause(min(wait_s(), POLL_S))
        except OSError:
            return False
