"""Per-backend computation locks, and a process-wide count of computations running.

A backend never computes in two threads at once: some models keep per-call state on shared
modules (openai-whisper's key-value cache hooks), and an item thread computing on its own may meet
a round's device thread on the same backend (see :mod:`.batching`).
"""

from __future__ import annotations

import threading
import weakref
from contextlib import contextmanager
from typing import Iterator

from ..core.waits import wait_s

_RUNNING = [0]  # computations running on device threads, process-wide (guarded by _OWNER_LOCKS_GUARD)
# per owner (a backend): weakly held, so a dropped hub's models can still be freed
# reentrant locks only for ``_is_owned``: a thread can tell whether it took one (see computing)
_OWNER_LOCKS: "weakref.WeakKeyDictionary[object, threading.RLock]" = weakref.WeakKeyDictionary()
_PLAIN_OWNER_LOCKS: dict[int, tuple[object, threading.RLock]] = {}  # owners without weak references (object())
_OWNER_LOCKS_GUARD = threading.Lock()


def computations_running() -> int:
    """How many batches device threads are computing now, in any round of this process; after a
    round's items are all done, one still running is stuck (a hang in native code)."""
    with _OWNER_LOCKS_GUARD:
        return _RUNNING[0]


def count_running(change: int) -> None:
    with _OWNER_LOCKS_GUARD:
        _RUNNING[0] += change


def owner_lock(owner: object) -> threading.RLock:
    """The lock every computation of ``owner`` (a backend) runs under."""
    with _OWNER_LOCKS_GUARD:
        try:
            lock = _OWNER_LOCKS.get(owner)
            if lock is None:
                lock = _OWNER_LOCKS[owner] = threading.RLock()
            return lock
        except TypeError:  # cannot be weakly referenced: kept (test stand-ins, bare objects)
            entry = _PLAIN_OWNER_LOCKS.get(id(owner))
            if entry is None or entry[0] is not owner:
                entry = _PLAIN_OWNER_LOCKS[id(owner)] = (owner, threading.RLock())
            return entry[1]


@contextmanager
def computing(owner: object) -> Iterator[None]:
    """Hold ``owner``'s lock; waits in steps (:mod:`~mmverify.core.waits`), so a deadline raised meanwhile is delivered."""
    lock = owner_lock(owner)
    try:
        while not lock.acquire(timeout=wait_s()):
            pass
        yield
    finally:
        # asked of the lock, not of a local: a deadline can land between acquire() returning and
        # any store of its result, and the lock must not stay taken for ever
        if lock._is_owned():  # type: ignore[attr-defined]
            lock.release()
