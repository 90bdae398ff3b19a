"""How long a thread may block at a time: until just after its own deadline.

A deadline (:mod:`mmverify.pipelines.deadlines`) raises its timeout in the late thread between
Python bytecodes, so a thread blocked in a lock, queue or select must wake to take it.  Waking
every few milliseconds whatever the deadline would have every waiting item thread take the
interpreter lock many times a second, away from the device thread; instead each wait lasts until
the thread's deadline is due (then a little longer: the watchdog raises it), and at most
:data:`IDLE_S`.  A thread without a deadline needs no wake for one; the bound is only a safety net
(a signal reaches the main thread's waits by itself).
"""

from __future__ import annotations

import threading
import time

IDLE_S = 0.5  # the longest single wait
LATE_S = 0.005  # how long after its deadline a wait ends (the watchdog raises the timeout at it)
PAST_DUE_S = 0.05  # once the deadline has passed: how often to look whether the timeout has come
OWN_TIMEOUT_GRACE_S = 1.0  # how long past its deadline a thread waits for its own timeout to land

_LOCAL = threading.local()


def set_due(due: float | None) -> None:
    """The calling thread's deadline, on :func:`time.monotonic`'s clock (None: it has none)."""
    _LOCAL.due = due


def current_due() -> float | None:
    """The calling thread's deadline, as :func:`set_due` last set it."""
    return getattr(_LOCAL, "due", None)


def shared_clock() -> float:
    """Seconds on POSIX's ``CLOCK_MONOTONIC``: one clock for every process of this machine, which
    :func:`time.monotonic` does not promise (it is that clock on Linux)."""
    return time.clock_gettime(time.CLOCK_MONOTONIC) if hasattr(time, "CLOCK_MONOTONIC") else time.monotonic()


def shared_due() -> float | None:
    """The calling thread's deadline on :func:`shared_clock` (None: it has none), for another
    process of this machine to keep to."""
    due = current_due()
    return None if due is None else shared_clock() + (due - time.monotonic())


def await_own_timeout() -> None:
    """Wait, in steps, for the calling thread's deadline to raise its timeout here -- after an
    answer saying that deadline has passed, which another process can give before the thread's own
    timeout lands.  Returns at once without a deadline, and :data:`OWN_TIMEOUT_GRACE_S` after it
    when no timeout came."""
    due = current_due()
    if due is None:
        return
    while time.monotonic() < due + OWN_TIMEOUT_GRACE_S:
        time.sleep(wait_s())


def wait_s() -> float:
    """Seconds the calling thread may block in one wait."""
    due = current_due()
    if due is None:
        return IDLE_S
    left = due - time.monotonic()
    return PAST_DUE_S if left <= 0 else min(IDLE_S, left + LATE_S)
