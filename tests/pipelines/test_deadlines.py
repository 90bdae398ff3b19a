"""The per-item deadline: delivered in any thread, and one per thread at a time."""

from __future__ import annotations

import gc
import os
import threading
import time
import warnings
import weakref
from typing import Callable, ContextManager

import pytest

from mmverify.core import waits
from mmverify.models import compute_locks
from mmverify.pipelines.deadlines import _WATCHDOG, ItemTimeout, _Watchdog, deadline
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


def test_the_main_threads_alarm_is_the_threads_deadline_while_it_runs():
    """A lone item is timed by the main thread's alarm: its waits, and a question it sends another
    process, keep to that deadline as to the watchdog's."""
    from mmverify.pipelines.execute import _alarm

    before = time.monotonic()
    with _alarm(HANG_GUARD_S):
        due = waits.current_due()
        assert due is not None and before + HANG_GUARD_S <= due <= time.monotonic() + HANG_GUARD_S
        assert waits.shared_due() is not None
    assert waits.current_due() is None and waits.shared_due() is None


def test_an_alarm_that_lands_as_it_is_disarmed_leaves_no_deadline_behind(monkeypatch):
    """The alarm of an item that ends just as it is due can raise while it is being disarmed; the
    thread's deadline and the signal's handler are put back all the same."""
    import signal

    from mmverify.pipelines import execute

    setitimer, landed = signal.setitimer, []

    def lands_at_disarm(which: int, seconds: float, *interval: float) -> object:
        if seconds == 0 and not landed:
            landed.append(True)
            setitimer(which, 0)
            raise ItemTimeout()  # as the alarm's handler does, at this very call
        return setitimer(which, seconds, *interval)

    monkeypatch.setattr(execute.signal, "setitimer", lands_at_disarm)
    handler = signal.getsignal(signal.SIGALRM)
    with pytest.raises(ItemTimeout):
        with execute._alarm(HANG_GUARD_S):
            pass
    assert landed and waits.current_due() is None and signal.getsignal(signal.SIGALRM) is handler


def test_a_waiting_thread_wakes_in_time_for_its_own_deadline_and_rarely_without_one():
    assert waits.wait_s() == waits.IDLE_S  # no deadline: only the safety net
    with deadline(HANG_GUARD_S):
        assert 0 < waits._LOCAL.due - time.monotonic() <= HANG_GUARD_S  # the block's deadline is this thread's
        assert waits.wait_s() == waits.IDLE_S  # far away: no sooner than needed
    assert waits.wait_s() == waits.IDLE_S  # the block's deadline is gone with it
    try:
        waits.set_due(time.monotonic() + 0.1)
        assert 0 < waits.wait_s() <= 0.1 + waits.LATE_S  # just after it is due
        waits.set_due(time.monotonic() - 1.0)
        assert waits.wait_s() == waits.PAST_DUE_S  # past it: looks again now and then, until the timeout comes
    finally:
        waits.set_due(None)


def test_a_deadline_blocked_in_a_lock_is_delivered():
    """A wait no longer wakes every few milliseconds: it must still end for its deadline."""
    held, outcome = threading.RLock(), {}
    held.acquire()  # by this thread: the worker's computing() waits for it

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


def computing_under(lock: object) -> ContextManager[None]:
    """``compute_locks.computing`` for a stand-in owner whose lock is ``lock``."""
    owner = _Owner()
    compute_locks._OWNER_LOCKS[owner] = lock
    return compute_locks.computing(owner)


class _Owner:
    """A backend stand-in (weakly referenced, as a backend is)."""


def test_arming_wakes_the_watchdog_only_for_a_deadline_due_before_the_one_it_sleeps_for():
    watchdog, notified = _Watchdog(), []
    notify = watchdog._cond.notify
    watchdog._cond.notify = lambda n=1: (notified.append(n), notify(n))  # type: ignore[method-assign]
    far = watchdog.arm(HANG_GUARD_S * 100)  # never due during the test
    wait_until(lambda: _sleeps_for_the_earliest(watchdog))
    woken = len(notified)
    later = watchdog.arm(HANG_GUARD_S * 200)
    assert len(notified) == woken  # found when the watchdog wakes for the earlier one
    earlier = watchdog.arm(HANG_GUARD_S * 50)
    assert len(notified) == woken + 1  # it must sleep less now
    for token in (far, later, earlier):
        assert not watchdog.disarm(token)


def test_a_later_deadline_armed_while_the_watchdog_sleeps_for_an_earlier_one_still_fires():
    """Once the earlier deadline is gone, the watchdog sleeps for the later one and raises it."""
    earlier_armed, later_armed, outcome = threading.Event(), threading.Event(), {}

    def earlier() -> None:
        try:
            with deadline(0.2):  # normally over before it is due
                earlier_armed.set()
                later_armed.wait(HANG_GUARD_S)
        except ItemTimeout:
            pass  # a machine that stalled past it: the later one must still fire

    def later() -> None:
        earlier_armed.wait(HANG_GUARD_S)
        try:
            with deadline(0.4):
                later_armed.set()
                _spin()
        except ItemTimeout:
            outcome["later"] = "timed out"

    threads = [threading.Thread(target=earlier), threading.Thread(target=later)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(HANG_GUARD_S)
    assert outcome == {"later": "timed out"}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_gets_its_own_watchdog():
    """The child inherits a condition that still lists the parent's sleeping watchdog: a deadline
    armed there must wake the child's own watchdog, not that ghost."""
    with deadline(HANG_GUARD_S):  # the parent's watchdog runs and sleeps for this
        wait_until(lambda: _sleeps_for_the_earliest(_WATCHDOG))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # forking with threads running
            pid = os.fork()
        if pid == 0:  # the child: exit status 0 only if its short deadline fired
            code = 1
            try:
                release, armed = threading.Event(), threading.Event()

                def far() -> None:
                    with deadline(HANG_GUARD_S * 100):
                        armed.set()
                        release.wait(HANG_GUARD_S)

                def short() -> None:  # in a thread of its own: this one forked under a deadline
                    nonlocal code
                    try:
                        with deadline(0.05):  # due before the far one: arming it must wake the watchdog
                            _spin()
                    except ItemTimeout:
                        code = 0

                holder = threading.Thread(target=far)
                holder.start()
                armed.wait(HANG_GUARD_S)
                timed = threading.Thread(target=short)
                timed.start()
                timed.join(HANG_GUARD_S)
                release.set()
                holder.join(HANG_GUARD_S)
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child's deadline did not fire"


def _sleeps_for_the_earliest(watchdog: _Watchdog) -> bool:
    with watchdog._lock:
        armed = [due for due, _ in watchdog._armed.values()]
        return bool(armed) and watchdog._sleeps_until == min(armed)


def test_a_deadline_landing_just_after_a_backend_lock_is_taken_leaves_it_free():
    """The timeout can arrive between ``acquire()`` returning and its result being stored."""
    real = threading.RLock()

    class TakenThenLate:
        def acquire(self, timeout: float = -1) -> bool:
            real.acquire(timeout=timeout)
            raise ItemTimeout()  # delivered right after the lock was taken

        def _is_owned(self) -> bool:
            return real._is_owned()  # type: ignore[attr-defined]

        def release(self) -> None:
            real.release()

    with pytest.raises(ItemTimeout), computing_under(TakenThenLate()):
        pass
    assert not real._is_owned()  # type: ignore[attr-defined]


@pytest.mark.parametrize("limit", [float("inf"), float("nan"), 1e10, -1.0, 0.0, True, "60"])
def test_a_time_limit_the_deadlines_cannot_hold_is_refused_where_it_is_configured(limit, tmp_path):
    """Before, ``--timeout inf`` (or 1e10) reached ``setitimer`` and the watchdog's waits, which
    overflow: a traceback in one process, ``worker_crashed`` rows with workers."""
    from mmverify.pipelines.reward import Reward
    from mmverify.pipelines.score import ScoreConfig
    from mmverify.pipelines.server_limits import ServerConfig

    for make in (
        lambda: Reward("i_format_border", timeout=limit),
        lambda: Reward("i_format_border", warmup_timeout=limit),
        lambda: ScoreConfig(manifest=tmp_path / "m.jsonl", out=tmp_path / "out", timeout=limit),
        lambda: ScoreConfig(manifest=tmp_path / "m.jsonl", out=tmp_path / "out", warmup_timeout=limit),
        lambda: ServerConfig(item_timeout=limit),
    ):
        with pytest.raises(ValueError, match=r"seconds above 0 and at most 1,000,000 \(None for no limit\)"):
            make()


SCORE = ["score", "m.jsonl", "--out", "out"]


@pytest.mark.parametrize("command, option", [(SCORE, "--timeout"), (SCORE, "--warmup-timeout"), (["serve"], "--timeout")])
def test_the_commands_refuse_such_a_limit_naming_their_option(command, option, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from mmverify.cli import app

    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.jsonl").write_text("")
    result = CliRunner().invoke(app, [*command, option, "inf"])
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and f"{option} must be a number of seconds above 0 and at most 1,000,000 (0 for no limit); got inf" in text, text


@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")  # the watchdog must not die
def test_the_longest_time_limit_allowed_is_one_the_deadlines_hold():
    """MAX_TIME_LIMIT_S arms the main thread's alarm and the watchdog without overflowing, and an
    item scores under it on either."""
    import numpy as np

    from mmverify.pipelines.execute import MAX_TIME_LIMIT_S
    from mmverify.pipelines.reward import Reward

    image = np.zeros((64, 64, 3), np.uint8)
    image[:6] = image[-6:] = image[:, :6] = image[:, -6:] = (0, 128, 0)
    reward = Reward("i_format_border", timeout=MAX_TIME_LIMIT_S, warmup_timeout=MAX_TIME_LIMIT_S)
    scores: list = []
    scores += reward([({"color": "green"}, [image])]).scores  # the main thread: its alarm
    worker = threading.Thread(target=lambda: scores.extend(reward([({"color": "green"}, [image])]).scores))
    worker.start()  # another thread: the watchdog
    worker.join(HANG_GUARD_S)
    assert scores == [1.0, 1.0]
