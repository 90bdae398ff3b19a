"""Shielded steps: an item's deadline that comes due inside one is raised when the step ends."""

from __future__ import annotations

import inspect
import io
import os
import random
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

import pytest
from PIL import Image

from mmverify.core.decoding import DecodePool
from mmverify.core import interrupts
from mmverify.core.interrupts import shielded
from mmverify.pipelines.deadlines import _WATCHDOG, deadline
from mmverify.pipelines.execute import ItemTimeout
from tests.waiting import HANG_GUARD_S, wait_until



def _png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (30, 20)).save(buffer, "PNG")
    return buffer.getvalue()


PNG = _png()


def _armed_here(thread_id: int) -> bool:
    return any(thread == thread_id for _, thread in _WATCHDOG._armed.values())


def _comes_due_inside_the_step(item: Callable[[threading.Event], None]) -> int:
    """Run ``item`` in a thread of its own and, once it is inside its shielded step (it sets the
    event), deliver its timeout as the deadline watchdog does; the thread's id."""
    entered = threading.Event()
    thread = threading.Thread(target=item, args=(entered,))
    thread.start()
    assert entered.wait(HANG_GUARD_S)
    _send_timeout(thread.ident)  # type: ignore[arg-type]
    thread.join(HANG_GUARD_S)
    assert not thread.is_alive()
    return thread.ident  # type: ignore[return-value]


def test_a_deadline_due_inside_a_shielded_step_is_raised_when_the_step_ends():
    steps: list[str] = []

    def item(entered: threading.Event) -> None:
        try:
            with deadline(HANG_GUARD_S):
                with shielded():
                    entered.set()
                    wait_until(lambda: threading.get_ident() in interrupts._HELD, message="the timeout never came")
                    for _ in range(10_000):  # bytecodes enough for a delivered exception to land
                        pass
                    steps.append("step done")
                steps.append("after the step")
        except ItemTimeout:
            steps.append("timed out")

    _comes_due_inside_the_step(item)
    assert steps == ["step done", "timed out"]


class HostAlarm(BaseException):
    """A host's own interrupt (a trainer's alarm handler raising, say)."""


@pytest.mark.parametrize("failure, expected", [(ValueError, ItemTimeout), (HostAlarm, HostAlarm)])
def test_a_deadline_due_inside_a_step_that_then_fails_ends_as_a_timeout_unless_a_host_interrupted(failure, expected):
    outcome: list[BaseException] = []

    def item(entered: threading.Event) -> None:
        try:
            with deadline(HANG_GUARD_S):
                with shielded():
                    entered.set()
                    wait_until(lambda: threading.get_ident() in interrupts._HELD, message="the timeout never came")
                    raise failure("the step ended after its item's time was up")
        except BaseException as exc:  # noqa: BLE001
            outcome.append(exc)

    ident = _comes_due_inside_the_step(item)
    assert [type(exc) for exc in outcome] == [expected]
    assert ident not in interrupts._SENT and ident not in interrupts._HELD and not _armed_here(ident)


def test_a_deadline_leaves_nothing_of_its_thread_armed():
    stray = _WATCHDOG.arm(60.0)  # as an arming cut short by a host's signal handler leaves it: armed, its token lost
    try:
        with deadline(60.0):
            pass
        assert not _armed_here(threading.get_ident())
    finally:
        with _WATCHDOG._lock:  # never left to fire into the test process
            _WATCHDOG._armed.pop(stray, None)


@pytest.mark.parametrize("where", ["arming", "disarming"])
def test_a_timeout_landing_as_its_deadline_is_armed_or_disarmed_leaves_nothing_behind(where: str, monkeypatch: pytest.MonkeyPatch):
    """The timeout lands inside the deadline's own arming or ending: the block ends as a timeout,
    and nothing of it is held for the thread's next shielded step."""
    from mmverify.core import waits

    if where == "disarming":
        disarm = _WATCHDOG.disarm

        def hooked(token: int) -> bool:
            disarm(token)
            _a_timeout_lands_here()

        monkeypatch.setattr(_WATCHDOG, "disarm", hooked)
    else:
        set_due = waits.set_due

        def hooked(due: float | None) -> None:  # type: ignore[misc]
            set_due(due)
            if due is not None:
                _a_timeout_lands_here()

        monkeypatch.setattr(waits, "set_due", hooked)
    with pytest.raises(ItemTimeout):
        with deadline(60.0):
            pass
    monkeypatch.undo()
    _nothing_of_it_is_left()


def test_a_shielded_step_inside_a_deadline_that_never_comes_due_changes_nothing():
    me = threading.get_ident()
    with deadline(60.0):
        with shielded():
            with shielded():  # steps nest
                assert interrupts._DEPTH[me] == 2
            assert interrupts._DEPTH[me] == 1
        assert me not in interrupts._DEPTH  # the steps ended: nothing shields the thread any more
    _nothing_of_it_is_left()
    with pytest.raises(ItemTimeout):  # so a later deadline still interrupts it
        with deadline(0.05):
            wait_until(lambda: False, timeout=60)
    _nothing_of_it_is_left()


def _send_timeout(thread_id: int) -> None:
    """Deliver a timeout into the thread from another one, as the deadline watchdog does."""
    watchdog = threading.Thread(target=interrupts.deliver, args=(thread_id, ItemTimeout))
    watchdog.start()
    watchdog.join(60)


def _a_timeout_lands_here() -> None:
    _send_timeout(threading.get_ident())
    for _ in range(10_000):  # bytecodes enough for it to land here
        pass
    raise AssertionError("the timeout was never delivered")


def _nothing_of_it_is_left() -> None:
    """Nothing of the calling thread's ended deadline is armed, held or on record."""
    me = threading.get_ident()
    assert not _armed_here(me)
    with shielded():  # outside any deadline: nothing to raise
        pass
    assert me not in interrupts._SENT and me not in interrupts._HELD


def _zombie_children() -> set[int]:
    """Process ids of this process's children that exited and were never waited for."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z" and int(fields[1]) == os.getpid():
            found.add(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_deadlines_landing_while_workers_start_leave_no_process_unreaped():
    """Deadlines of a few milliseconds, many of them due while a decoding process is being started
    (a process cut off after its fork was never reaped): afterwards no child of this process is a
    zombie."""
    before = _zombie_children()
    pool = DecodePool(2)

    def impatient(seed: int) -> None:
        draw = random.Random(seed)
        for _ in range(60):
            try:
                with deadline(draw.uniform(0.0005, 0.03)):
                    pool.image(PNG)
            except ItemTimeout:
                pass

    threads = [threading.Thread(target=impatient, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    pool.close()
    assert _zombie_children() - before == set()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forks")
def test_a_child_forked_while_a_pool_s_lock_is_held_can_take_it():
    pool = DecodePool(1)
    try:
        with pool._lock:  # as another thread would hold it at the moment of a fork
            child = os.fork()
            if child == 0:  # the child: exit status 0 when it can take its own copy of the lock
                os._exit(0 if pool._lock.acquire(timeout=5) else 1)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        pool.close()


def test_a_timeout_landing_while_a_media_file_is_opened_leaks_no_descriptor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The timeout is sent just after ``os.open`` returned inside the file opener, before a file
    object owns the descriptor: unshielded, it landed there and the descriptor leaked."""
    from mmverify.core import media

    clip = tmp_path / "clip.wav"
    clip.write_bytes(b"RIFF")
    opened, sent = threading.Event(), threading.Event()

    def open_then_wait(name: str, flags: int) -> int:
        fd = os.open(name, flags)
        opened.set()
        assert sent.wait(60)
        for _ in range(10_000):  # bytecodes enough for a delivered exception to land here
            pass
        return fd

    monkeypatch.setattr(media, "os", SimpleNamespace(**{**vars(os), "open": open_then_wait}))
    outcome: list[BaseException] = []
    ident: list[int] = []

    def item() -> None:
        ident.append(threading.get_ident())
        try:
            with deadline(60.0):
                media.read_bytes(clip)
        except BaseException as exc:  # noqa: BLE001
            outcome.append(exc)

    thread = threading.Thread(target=item)
    thread.start()
    assert opened.wait(60)
    _send_timeout(ident[0])
    sent.set()
    thread.join(60)
    assert [type(exc) for exc in outcome] == [ItemTimeout]
    assert str(clip) not in _open_files()  # other tests' threads may open files meanwhile: only this one counts


def _open_files() -> set[str]:
    names = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            names.add(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # closed meanwhile
            pass
    return names


_PROFILED_AFTER = """
import os, sys, threading, time
from mmverify.core import interrupts
from mmverify.core.interrupts import shielded
from mmverify.pipelines.deadlines import deadline
from mmverify.pipelines.execute import ItemTimeout

def send_timeout(thread_id):  # from another thread, as the watchdog does
    sender = threading.Thread(target=interrupts.deliver, args=(thread_id, ItemTimeout))
    sender.start()
    sender.join()

scenario = sys.argv[1]
if scenario == "a deadline that never came due":
    with deadline(60.0):
        pass
elif scenario == "a deadline that came due":
    try:
        with deadline(0.01):
            while True:
                time.sleep(0.001)
    except ItemTimeout:
        pass
elif scenario == "a timeout held by a shielded step":
    try:
        with deadline(60.0):
            with shielded():
                send_timeout(threading.get_ident())
                assert threading.get_ident() in interrupts._HELD
                for _ in range(10_000):  # bytecodes where it would land, were it not held
                    pass
            raise AssertionError("the held timeout was not raised at the end of the step")
    except ItemTimeout:
        pass
elif scenario == "a timeout sent, raised, then withdrawn":
    try:
        send_timeout(threading.get_ident())
        assert threading.get_ident() in interrupts._SENT
        for _ in range(10_000):
            pass
        raise AssertionError("the timeout was never raised")
    except ItemTimeout:
        pass
    interrupts.withdraw()
    assert threading.get_ident() not in interrupts._SENT
elif scenario == "a fork while another thread's timeout is pending":
    blocked = threading.Lock()
    blocked.acquire()
    inside, outcome = threading.Event(), []

    def late():
        try:
            inside.set()
            blocked.acquire()  # native code: a timeout sent now stays pending until it returns
            outcome.append("not interrupted")
        except ItemTimeout:
            outcome.append("timed out")

    worker = threading.Thread(target=late)
    worker.start()
    inside.wait()
    acquiring = late.__code__.co_firstlineno + 3
    while True:  # until it waits inside acquire()
        frame = sys._current_frames()[worker.ident]
        if frame.f_code is late.__code__ and frame.f_lineno == acquiring:
            break
        time.sleep(0.001)
    interrupts.deliver(worker.ident, ItemTimeout)
    child = os.fork()
    if child == 0:  # the child checks its own profiled and traced calls below, the parent waits
        import signal
        signal.alarm(150)  # a hanging child must not outlive the test
    else:
        _, status = os.waitpid(child, 0)
        blocked.release()
        worker.join()
        assert outcome == ["timed out"], outcome  # raised in the parent once the thread came back
        os._exit(os.waitstatus_to_exitcode(status))

def call():
    return "returned"

sys.setprofile(lambda *args: None)  # cProfile's way in
print("profiled", call())
sys.setprofile(None)
tracer = lambda *args: tracer  # a debugger's or coverage's
sys.settrace(tracer)
print("traced", call())
sys.settrace(None)
"""


@pytest.mark.parametrize(
    "scenario",
    [
        "a deadline that never came due", "a deadline that came due", "a timeout held by a shielded step",
        "a timeout sent, raised, then withdrawn",
        pytest.param(
            "a fork while another thread's timeout is pending", marks=pytest.mark.skipif(not hasattr(os, "fork"), reason="forks")
        ),
    ],
)
def test_calls_made_under_a_profiler_or_tracer_return_after(scenario: str):
    """Taking back a pending exception by setting none in its place left CPython 3.11's pending flag
    raised, and every later profiled or traced call looped for ever (scoring under cProfile,
    coverage or a debugger hung after its first deadline); so did a forked child whose parent had
    a timeout pending in another thread."""
    import subprocess

    try:
        done = subprocess.run(
            [sys.executable, "-c", _PROFILED_AFTER, scenario], capture_output=True, text=True, timeout=120,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"a profiled call never returned after {scenario}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["profiled", "returned", "traced", "returned"]


def test_a_timeout_sent_while_a_thread_waits_to_enter_a_step_is_raised_before_the_step_counts():
    """The timeout lands as the first call under the lock returns: the step neither runs nor stays
    counted (a counted step would shield its thread from every later deadline)."""
    outcome: list[str] = []

    def item() -> None:
        try:
            with shielded():
                outcome.append("the step ran")
        except ItemTimeout:
            outcome.append("timed out")

    source, first = inspect.getsourcelines(interrupts.shielded.__wrapped__)
    locking = first + next(i for i, line in enumerate(source) if "with _LOCK:" in line)
    with interrupts._LOCK:
        thread = threading.Thread(target=item)
        thread.start()
        wait_until(lambda: _waiting_at(thread, "shielded", locking), message="the thread never waited for the lock")
        interrupts._set_async_exc(thread.ident, ItemTimeout)  # as deliver() would, had it the lock
    thread.join(60)
    assert outcome == ["timed out"]
    assert thread.ident not in interrupts._DEPTH and thread.ident not in interrupts._SENT


def _waiting_at(thread: threading.Thread, function: str, line: int) -> bool:
    frame = sys._current_frames().get(thread.ident)  # type: ignore[arg-type]
    return frame is not None and frame.f_code.co_name == function and frame.f_lineno == line
