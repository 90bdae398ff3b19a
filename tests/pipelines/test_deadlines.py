"""The per-item deadline: delivered in any thread, and one per thread at a time."""

from __future__ import annotations

import gc
import threading
import time
import weakref
from typing import Callable, ContextManager

import pytest

from mmverify.core import waits
from mmverify.models import compute_locks
from mmverify.pipelines.deadlines import _WATCHDOG, ItemTimeout, deadline
from tests.waiting import HANG_GUARD_S, wait_until


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


def test_a_waiting_thread_wakes_in_time_for_its_own_deadline_and_rarely_without_one():
    assert waits.wait_s() == waits.IDLE_S  # no deadline: only the safety net
    with deadline(HANG_GUARD_S):
        assert 0 < waits._LOCAL.due - time.monotonic() <= HANG_GUARD_S  # the block's deadline is this thread's
        assert waits.wait_s() == waits.IDLE_S  # far away: no sooner than needed
    assert waits.wait_s() == waits.IDLE_S  # the block's deadline is gone with it
    try:
        waits.set_due(time.monotonic() + 0.1)
        assert waits.LATE_S <= waits.wait_s() <= 0.1 + waits.LATE_S  # just after it is due
        waits.set_due(time.monotonic() - 1.0)
        assert waits.wait_s() == waits.LATE_S  # past it: looks again soon, until the timeout comes
    finally:
        waits.set_due(None)


def test_a_deadline_blocked_in_a_lock_is_delivered():
    """A wait no longer wakes every few milliseconds: it must still end for its deadline."""
    held, outcome = threading.Lock(), {}
    held.acquire()

    def worker() -> None:
        try:
            with deadline(0.05), computing_under(held):
                pass
        except ItemTimeout:
            outcome["worker"] = "timed out"

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(HANG_GUARD_S)
    held.release()
    assert outcome == {"worker": "timed out"}


def computing_under(lock: threading.Lock) -> ContextManager[None]:
    """``compute_locks.computing`` for a stand-in owner whose lock is ``lock``."""
    owner = _Owner()
    compute_locks._OWNER_LOCKS[owner] = lock
    return compute_locks.computing(owner)


class _Owner:
    """A backend stand-in (weakly referenced, as a backend is)."""


def test_a_later_deadline_armed_while_the_watchdog_sleeps_for_an_earlier_one_still_fires():
    """Arming a deadline due after the one the watchdog sleeps for does not wake it; once the
    earlier one is gone, the watchdog sleeps for the later one and raises it."""
    earlier_armed, later_armed, outcome = threading.Event(), threading.Event(), {}
    notified = []
    notify = _WATCHDOG._cond.notify

    def counting_notify(n: int = 1) -> None:
        notified.append(n)
        notify(n)

    def earlier() -> None:
        with deadline(0.2):  # ends before it is due: nothing is raised
            earlier_armed.set()
            later_armed.wait(HANG_GUARD_S)

    def later() -> None:
        earlier_armed.wait(HANG_GUARD_S)
        try:
            with deadline(0.4):
                later_armed.set()
                _spin()
        except ItemTimeout:
            outcome["later"] = "timed out"

    _WATCHDOG._cond.notify = counting_notify  # type: ignore[method-assign]
    try:
        threads = [threading.Thread(target=earlier), threading.Thread(target=later)]
        threads[0].start()
        earlier_armed.wait(HANG_GUARD_S)
        wait_until(_sleeps_for_the_earliest)  # asleep until the earlier one is due
        woken = len(notified)
        threads[1].start()
        later_armed.wait(HANG_GUARD_S)
        assert len(notified) == woken  # the later deadline did not wake the watchdog
        for thread in threads:
            thread.join(HANG_GUARD_S)
    finally:
        del _WATCHDOG._cond.notify
    assert outcome == {"later": "timed out"}


def _sleeps_for_the_earliest() -> bool:
    with _WATCHDOG._lock:
        armed = [due for due, _ in _WATCHDOG._armed.values()]
        return bool(armed) and _WATCHDOG._sleeps_until == min(armed)
