"""Waiting for an observable condition instead of sleeping for a guessed time.

``wait_until`` polls a predicate quickly and returns its first truthy value, so a test goes on the
moment the state it needs is there, however fast or slow the machine.  The timeout only guards
against a hang; it is never what a test measures.
"""

from __future__ import annotations

import time
from typing import Callable, TypeVar, Union

T = TypeVar("T")

HANG_GUARD_S = 60.0


def wait_until(
    predicate: Callable[[], T],
    *,
    timeout: float = HANG_GUARD_S,
    message: Union[str, Callable[[], str]] = "",
) -> T:
    """Poll ``predicate`` until it returns something truthy and return that value.

    After ``timeout`` seconds without it, fail with ``message`` (a callable is evaluated then, so it
    can describe the state at that moment, e.g. a child process's stderr).  The first polls come a
    millisecond apart, later ones up to 50 ms apart, so a long wait does not steal the CPU from the
    work it waits for.
    """
    deadline = time.monotonic() + timeout
    interval = 0.001
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            detail = message() if callable(message) else message
            name = getattr(predicate, "__name__", repr(predicate))
            raise AssertionError(f"still waiting after {timeout:g} s for {detail or name}")
        time.sleep(interval)
        interval = min(0.05, interval * 1.5)
