"""The per-item deadline: delivered in any thread, and one per thread at a time."""

from __future__ import annotations

import gc
import threading
import time
import weakref
from typing import Callable, ContextManager

import pytest

from mmverify.pipelines.deadlines import _WATCHDOG, ItemTimeout, deadline
from tests.waiting import HANG_GUARD_S


def _spin() -> None:
    """Python bytecodes until a timeout arrives (failing after the hang guard instead of hanging)."""
    give_up = time.monotonic() + HANG_GUARD_S
    while time.monotonic() < give_up:
        pass
    raise AssertionError("no timeout arrived")


def test_a_deadline_interrupts_a_worker_thread_and_only_it():
    outcome: dict[str, str] = {}

    def worker() -> None:
        try:
            with deadline(0.01):
                _spin()
        except ItemTimeout:
            outcome["worker"] = "timed out"

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(HANG_GUARD_S)
    assert outcome == {"worker": "timed out"}
    with deadline(HANG_GUARD_S):  # the main thread's own deadline, far away, raises nothing
        outcome["main"] = "done"
    assert outcome["main"] == "done"


class _Marker:
    """Something a timed-out frame holds, whose life tells whether that frame was freed."""


@pytest.mark.parametrize("timer", ["watchdog", "alarm"])
def test_a_timeout_leaves_no_cycle_that_keeps_the_frames_it_passed_through(timer):
    """The frames a timeout passed through (and their locals: a decode's claim on a worker, say)
    are freed as soon as the exception is, without waiting for the garbage collector."""
    from mmverify.pipelines.execute import _alarm

    chosen = deadline if timer == "watchdog" else _alarm
    marker: list[weakref.ref] = []

    def work() -> None:
        held = _Marker()
        marker.append(weakref.ref(held))
        _spin()

    gc.disable()
    try:
        try:
            with chosen(0.01):
                work()
        except ItemTimeout:
            pass
        assert marker[0]() is None, gc.get_referrers(marker[0]())
    finally:
        gc.enable()


def _armed_here() -> int:
    return sum(thread == threading.get_ident() for _, thread in _WATCHDOG._armed.values())


def test_deadlines_do_not_nest_in_one_thread_and_the_outer_one_stays_armed():
    """A thread has one pending asynchronous exception, so an inner deadline could clear an outer
    one that fired meanwhile: nesting is refused, and the outer deadline stays armed."""
    with deadline(HANG_GUARD_S):
        with pytest.raises(RuntimeError, match="do not nest"):
            with deadline(0.01):
                pass
        assert _armed_here() == 1
    assert _armed_here() == 0
    with pytest.raises(ItemTimeout):  # the thread can run under a deadline again afterwards
        with deadline(0.01):
            _spin()


def test_no_deadline_nests_freely():
    with deadline(None), deadline(0):
        with deadline(HANG_GUARD_S):
            with deadline(None):
                pass


class HostAlarm(Exception):
    """A host's own exception (a trainer's alarm) leaving the block after the deadline fired."""


def _late_block(timer: Callable[[float], ContextManager[None]], seen: list[str], then: type[BaseException] | None = None) -> None:
    """Runs a block under ``timer(0.01)`` that drops the timeout it receives, as native code may
    (cffi prints and discards an exception raised in a callback, and soundfile reads a file object
    through callbacks), noting it in ``seen``; then ends normally or raises ``then``."""
    with timer(0.01):
        try:
            _spin()
        except ItemTimeout:
            seen.append("dropped")
        if then is not None:
            raise then()


@pytest.mark.parametrize("timer", ["watchdog", "alarm"])
def test_a_late_block_ends_as_a_timeout_unless_another_exception_leaves_it(timer):
    """The watchdog serves any thread; the main thread's alarm serves ``score --workers 1`` and a
    worker's lone item."""
    from mmverify.pipelines.execute import _alarm

    chosen = deadline if timer == "watchdog" else _alarm
    seen: list[str] = []
    with pytest.raises(ItemTimeout):
        _late_block(chosen, seen)
    with pytest.raises(HostAlarm):
        _late_block(chosen, seen, then=HostAlarm)
    assert seen == ["dropped", "dropped"]
    with chosen(HANG_GUARD_S):  # on time, and nothing left pending from the late blocks
        pass
