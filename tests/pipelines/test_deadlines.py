"""The per-item deadline: delivered in any thread, and one per thread at a time."""

from __future__ import annotations

import threading
import time

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


def test_a_timeout_dropped_inside_the_block_still_ends_it_as_a_timeout():
    """cffi prints and discards an exception raised in a callback (soundfile reads a file object
    through callbacks): the late block then carries on, and must still end as a timeout."""
    dropped = threading.Event()
    with pytest.raises(ItemTimeout):
        with deadline(0.01):
            try:
                _spin()
            except ItemTimeout:  # what a callback that drops exceptions does
                dropped.set()
    assert dropped.is_set()
    with deadline(HANG_GUARD_S):  # nothing is left pending for the thread's next deadline
        pass


class HostAlarm(Exception):
    """A host's own exception (a trainer's alarm) leaving the block after the deadline fired."""


def test_another_exception_leaving_a_late_block_stands():
    with pytest.raises(HostAlarm):
        with deadline(0.01):
            try:
                _spin()
            except ItemTimeout:
                raise HostAlarm() from None


def test_the_main_threads_alarm_ends_a_late_block_as_a_timeout_too():
    """What ``score --workers 1`` and a worker's lone item run under."""
    from mmverify.pipelines.execute import _alarm

    dropped = threading.Event()
    with pytest.raises(ItemTimeout):
        with _alarm(0.01):
            try:
                _spin()
            except ItemTimeout:  # what a callback that drops exceptions does
                dropped.set()
    assert dropped.is_set()
    with pytest.raises(HostAlarm):
        with _alarm(0.01):
            try:
                _spin()
            except ItemTimeout:
                raise HostAlarm() from None
    with _alarm(HANG_GUARD_S):  # on time: nothing raised
        pass
