"""Exceptions raised in another thread (an item's deadline), and the steps they must not cut in two.

An exception set with ``PyThreadState_SetAsyncExc`` lands between any two bytecodes of the target
thread.  A few steps must not be cut there: starting a process (cut after the fork, its id is lost
and the process is never reaped) or forgetting one and ending it (cut in between, it runs on
unseen).  Inside :func:`shielded` such an exception is held back and raised when the step is done.

An exception sent and not raised yet is never taken back by setting none in its place: CPython
(3.11) then keeps its "asynchronous exception pending" flag raised, and from there on every call
made under a profiler or tracer (cProfile, coverage, a debugger) loops for ever.  A private
exception takes its place instead and is raised and caught at once, which lowers the flag.
"""

from __future__ import annotations

import ctypes
import os
import threading
from contextlib import contextmanager
from typing import Iterator


class Interrupt(Exception):
    """An exception raised into a thread from another (an item's timeout): code that turns the
    failures of what it calls into typed errors lets it through."""


_LOCK = threading.Lock()
_DEPTH: dict[int, int] = {}  # thread id -> shielded steps it is inside
_SENT: dict[int, type[BaseException]] = {}  # thread id -> the exception set in it, maybe not delivered yet
_HELD: dict[int, type[BaseException]] = {}  # threads whose exception waits for their step to end


def _set_async_exc(thread_id: int, exc: type[BaseException] | None) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc else None)


def deliver(thread_id: int, exc: type[BaseException]) -> None:
    """Raise ``exc`` in the thread, at once or, inside a shielded step, when the step ends."""
    with _LOCK:
        if _DEPTH.get(thread_id):
            _HELD[thread_id] = exc
        else:
            _set_async_exc(thread_id, exc)
            _SENT[thread_id] = exc


class _TakenBack(BaseException):
    """Stands in for an exception taken back from the calling thread (see the module docstring)."""


_LANDING_CHECKS = 100  # loop turns, each a point where CPython raises a pending exception (the first does)


def _take_back() -> None:
    """Drop the exception sent to the calling thread and not raised in it yet, if any (lock held)."""
    try:
        _set_async_exc(threading.get_ident(), _TakenBack)
        for _ in range(_LANDING_CHECKS):
            pass
    except _TakenBack:
        return
    _set_async_exc(threading.get_ident(), None)  # not raised (an interpreter that checks less often): drop it at least


def withdraw() -> None:
    """Drop what :func:`deliver` sent the calling thread and it has not received yet."""
    me = threading.get_ident()
    with _LOCK:
        if _SENT.pop(me, None) is not None:
            _take_back()
        _HELD.pop(me, None)


@contextmanager
def shielded() -> Iterator[None]:
    """A step that an exception from another thread does not interrupt: one delivered meanwhile
    (or sent just before, not received yet) is raised when the step ends -- also in place of an
    ordinary exception of the step, as it would have landed inside the step first."""
    me = threading.get_ident()
    with _LOCK:
        sent = _SENT.pop(me, None)
        if sent is not None:  # perhaps still pending: held back instead
            _take_back()
            _HELD.setdefault(me, sent)
        _DEPTH[me] = _DEPTH.get(me, 0) + 1
    failure: BaseException | None = None
    try:
        yield
    except BaseException as exc:
        failure = exc
        raise
    finally:
        with _LOCK:
            _DEPTH[me] -= 1
            late = None
            if not _DEPTH[me]:
                del _DEPTH[me]
                late = _HELD.pop(me, None)
        # it follows the step's end, or replaces an ordinary failure of the step (it would have
        # landed inside the step first); an interrupt of another kind or a host's own stands
        replaces = failure is None or (isinstance(failure, Exception) and not isinstance(failure, Interrupt))
        failure = None  # no cycle through this frame
        if late is not None and replaces:
            raise late


def _reset_after_fork() -> None:
    global _LOCK
    _LOCK = threading.Lock()
    forking = threading.get_ident()
    for table in (_DEPTH, _SENT, _HELD):  # only the forking thread goes on in the child
        for thread_id in [t for t in table if t != forking]:
            del table[thread_id]


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)
