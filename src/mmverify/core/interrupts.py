"""Exceptions raised in another thread (an item's deadline), and the steps they must not cut in two.

An exception set with ``PyThreadState_SetAsyncExc`` lands between any two bytecodes of the target
thread.  A few steps must not be cut there: starting a process (cut after the fork, its id is lost
and the process is never reaped) or forgetting one and ending it (cut in between, it runs on
unseen).  Inside :func:`shielded` such an exception is held back and raised when the step is done.

Nothing sent is ever taken back by setting none in its place: CPython 3.11 then keeps its
"asynchronous exception pending" flag raised, and from there on every call made under a profiler
or tracer (cProfile, coverage, a debugger) loops for ever.  Nor does it need taking back: CPython
raises a pending exception when a call of a C method returns (not after every builtin: ``len``
and ``isinstance`` are exempt), so one sent before a thread takes ``_LOCK`` is raised, as itself,
when the ``dict.pop`` that each of :func:`withdraw` and :func:`shielded` makes first under the
lock returns -- before anything of theirs changes -- and :func:`deliver` sends nothing while
another thread holds the lock.  (While the late thread is still inside native code, profiled
calls of other threads spin on 3.11 until it comes back, as long as the rest of that native
call: a CPython limitation.)
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
_SENT: dict[int, type[BaseException]] = {}  # thread id -> the exception set in it (pending while it runs native code)
_HELD: dict[int, type[BaseException]] = {}  # threads whose exception waits for their step to end


def _set_async_exc(thread_id: int, exc: type[BaseException] | None) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc else None)


def deliver(thread_id: int, exc: type[BaseException]) -> None:
    """Raise ``exc`` in the thread, at once or, inside a shielded step, when the step ends."""
    with _LOCK:
        if _DEPTH.get(thread_id):
            _HELD[thread_id] = exc
        else:
            _SENT[thread_id] = exc  # first: a process forked right after the send knows of it
            _set_async_exc(thread_id, exc)


def withdraw() -> None:
    """Forget what :func:`deliver` sent the calling thread (see the module docstring: nothing sent
    is left pending once this returns; one sent just before is raised here)."""
    me = threading.get_ident()
    with _LOCK:
        _SENT.pop(me, None)  # first, as in shielded()
        _HELD.pop(me, None)


@contextmanager
def shielded() -> Iterator[None]:
    """A step that an exception from another thread does not interrupt: one delivered meanwhile is
    raised when the step ends -- also in place of an ordinary exception of the step, as it would
    have landed inside the step first.  One sent just before is raised as the step begins, before
    any of it runs."""
    me = threading.get_ident()
    with _LOCK:
        _SENT.pop(me, None)  # first: one sent before is raised as this call returns, before the step counts
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


class _Lowered(BaseException):
    """Raised and caught in a forked child to lower CPython's pending flag (see :func:`_reset_after_fork`)."""


def _lower_pending_flag() -> None:
    try:
        _set_async_exc(threading.get_ident(), _Lowered)
        for _ in range(100):  # every turn is a point where a pending exception is raised
            pass
    except _Lowered:
        pass


def _reset_after_fork() -> None:
    global _LOCK
    _LOCK = threading.Lock()
    forking = threading.get_ident()
    sent_elsewhere = any(thread_id != forking for thread_id in _SENT)
    for table in (_DEPTH, _SENT, _HELD):  # only the forking thread goes on in the child
        for thread_id in [t for t in table if t != forking]:
            del table[thread_id]
    if sent_elsewhere:
        # a thread that does not exist here may have had an exception pending, and on 3.11 the
        # pending flag is the interpreter's: raising one of our own and catching it lowers it (a
        # timeout pending for the forking thread itself is replaced; its deadline, if it fired,
        # still ends the block as a timeout: see execute.end_if_late)
        _lower_pending_flag()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)
