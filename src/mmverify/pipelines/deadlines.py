"""A per-item deadline that works on any thread.

SIGALRM only reaches the main thread and would clobber a trainer's own alarm (verl times its reward
calls with one), so one watchdog thread holds every armed deadline and raises
:class:`~mmverify.pipelines.execute.ItemTimeout` in the late thread.  Like a signal, the exception
is delivered between Python bytecodes: a long native call finishes first.

A deadline that fired ends its block as a timeout whatever the block did next
(:func:`~mmverify.pipelines.execute.end_if_late`), as the main thread's alarm does.

Steps that must not be cut in two -- starting or ending a decoding process -- run shielded
(:func:`mmverify.core.interrupts.shielded`): a deadline due inside one is raised when it ends.

Deadlines do not nest in one thread: a thread has one pending asynchronous exception and one
record of it, so an inner deadline's timeout and an outer one's could not be told apart.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from contextlib import contextmanager
from typing import Iterator

from ..core import interrupts, waits
from .execute import ItemTimeout, end_if_late

class _Watchdog:
    """One daemon thread holding every armed deadline (a timer thread per item would cost more
    than scoring a cheap item)."""

    def __init__(self) -> None:
        # arm/disarm take the plain lock: its ``with`` runs no Python code between taking it and
        # the block, so an exception arriving in that thread cannot leave it taken (a Condition's can)
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._armed: dict[int, tuple[float, int]] = {}  # token -> (due time, thread id)
        self._tokens = itertools.count()
        self._sleeps_until = float("inf")  # when the watchdog wakes next by itself
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float) -> int:
        with self._lock:
            token = next(self._tokens)
            due = time.monotonic() + seconds
            self._armed[token] = (due, threading.get_ident())
            if self._thread is None or not self._thread.is_alive():
                self._start()
            if due < self._sleeps_until:  # a later one is found when the watchdog wakes for the earlier
                self._cond.notify()
            return token

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="mmverify-deadlines", daemon=True)
        self._thread.start()

    def after_fork_in_child(self) -> None:
        """A forked child has no watchdog thread, and the parent's sleeping one (a waiter its
        condition still lists) and deadlines mean nothing there -- except those of the thread that
        forked, which goes on in the child."""
        forking = threading.get_ident()
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._armed = {token: entry for token, entry in self._armed.items() if entry[1] == forking}
        self._sleeps_until = float("inf")
        self._thread = None
        if self._armed:
            self._start()

    def disarm(self, token: int) -> bool:
        """Forget a deadline; True when it had already fired."""
        with self._lock:
            return self._armed.pop(token, None) is None

    def disarm_thread(self, thread_id: int) -> None:
        """Forget every deadline of a thread (one cut short while arming or disarming, by a host's
        own signal handler, say, was never disarmed by its token)."""
        with self._lock:
            for token in [t for t, (_, thread) in self._armed.items() if thread == thread_id]:
                del self._armed[token]

    def _run(self) -> None:
        with self._cond:
            while True:
                if not self._armed:
                    self._sleeps_until = float("inf")
                    self._cond.wait()
                    continue
                token, (due, thread_id) = min(self._armed.items(), key=lambda entry: entry[1][0])
                wait = due - time.monotonic()
                if wait > 0:
                    self._sleeps_until = due
                    self._cond.wait(wait)
                    continue
                del self._armed[token]
                interrupts.deliver(thread_id, ItemTimeout)  # held back while the thread is in a shielded step


_WATCHDOG = _Watchdog()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_WATCHDOG.after_fork_in_child)
_LOCAL = threading.local()


@contextmanager
def deadline(seconds: float | None) -> Iterator[None]:
    """Raise :class:`ItemTimeout` in the calling thread after ``seconds``."""
    if not seconds:
        yield
        return
    if getattr(_LOCAL, "armed", False):
        raise RuntimeError("deadlines do not nest: this thread already runs under one")
    target = threading.get_ident()
    _LOCAL.armed = True
    token: int | None = None
    escaping: BaseException | None = None
    try:
        try:
            token = _WATCHDOG.arm(seconds)
            waits.set_due(time.monotonic() + seconds)  # this thread's waits end in time to take the timeout
            yield
        except BaseException as exc:
            escaping = exc
            raise
        finally:
            fired = False
            try:
                # not armed (cut short while arming): nothing to disarm; whatever fired is in flight already
                fired = token is not None and _WATCHDOG.disarm(token)
                if fired:
                    interrupts.withdraw()  # raises it here if it has not landed yet, and forgets it
            except ItemTimeout:
                fired = True  # delivered just now
            try:
                end_if_late(fired, escaping)  # fired, whether it landed or native code dropped it: late
            finally:
                escaping = None  # no cycle through this frame (see end_if_late)
    finally:
        _LOCAL.armed = False
        waits.set_due(None)
        _forget(target)


def _forget(target: int) -> None:
    """Nothing of a deadline that has ended stays armed, pending or on record for the thread (or a
    later thread of its id), whichever way the deadline ended: a later shielded step must not raise it."""
    for _ in range(3):  # a timeout lands at most once: the second try finds nothing pending
        try:
            _WATCHDOG.disarm_thread(target)
            interrupts.withdraw()
            return
        except ItemTimeout:  # it was pending and landed as the forgetting began
            continue
