"""A round's device thread with staged computations whose batches finish later, as on a GPU: it
launches the next ready batch before it lands the last, at most two at a time."""

from __future__ import annotations

import threading

import pytest

from mmverify.models.batching import MAX_STARTED, BatchRound, forward
from mmverify.models.compute_locks import computations_running
from mmverify.models.rows import Staged
from mmverify.pipelines.deadlines import deadline
from mmverify.pipelines.execute import ItemTimeout
from tests.models.test_batching import _finish, _members
from tests.waiting import wait_until


class _Handle:
    def __init__(self, number: int, batch: list, gate: threading.Event) -> None:
        self.number, self.batch, self.gate = number, batch, gate
        self.polls = 0  # how often the device thread asked

    def ready(self) -> bool:
        self.polls += 1
        return self.gate.is_set()


class FakeDevice:
    """A staged doubling model: each of its first ``held`` batches computes until the test opens
    its gate (later ones, the request-by-request reruns, finish at once); "bad" fails a finish."""

    def __init__(self, held: int) -> None:
        self.held = held
        self.log: list[str] = []
        self.gates: list[threading.Event] = []
        self.handles: list[_Handle] = []
        self.compute = Staged(self.launch, self.finish)

    def launch(self, batch: list) -> _Handle:
        gate = threading.Event()
        if len(self.gates) >= self.held:
            gate.set()
        self.gates.append(gate)
        self.handles.append(_Handle(len(self.gates) - 1, list(batch), gate))
        self.log.append(f"launch {len(self.gates) - 1}")
        return self.handles[-1]

    def finish(self, handle: _Handle) -> list:
        assert handle.gate.wait(60), "a batch was never let finish"
        self.log.append(f"finish {handle.number}")
        if "bad" in handle.batch:
            raise ValueError("bad input")
        return [2 * x for x in handle.batch]

    def open(self, number: int) -> None:
        wait_until(lambda: len(self.gates) > number, message=lambda: f"batch {number} never launched: {self.log}")
        self.gates[number].set()


def _start(batch_round: BatchRound, owner: object, device: FakeDevice, inputs: list, results: dict) -> list[threading.Thread]:
    """One member per input, asking for its double in batches of 2 (packed); all are members
    before any asks, so no batch starts half empty while others are still joining."""
    jobs = [(x, lambda x=x: forward(owner, "double", [x], device.compute, 2, by_content=False)) for x in inputs]
    return _members(batch_round, jobs, results, threading.Barrier(len(inputs)))


def test_the_next_full_batch_is_launched_before_the_last_lands_and_at_most_two_are_started():
    assert MAX_STARTED == 2
    running = computations_running()
    device, owner, results = FakeDevice(held=3), object(), {}
    batch_round = BatchRound(stall_s=None)
    threads = _start(batch_round, owner, device, [1, 2, 3, 4, 5, 6], results)
    wait_until(lambda: "launch 1" in device.log)
    device.open(0)  # the third batch can start only once the first has landed
    wait_until(lambda: "launch 2" in device.log)
    device.open(1)
    device.open(2)
    _finish(threads)
    batch_round.close()
    assert results == {x: [2 * x] for x in range(1, 7)}
    assert device.log == ["launch 0", "launch 1", "finish 0", "launch 2", "finish 1", "finish 2"]
    assert computations_running() == running


def test_a_partial_batch_waits_for_the_members_of_a_started_batch_to_come_back():
    device, owner, results = FakeDevice(held=2), object(), {}
    batch_round = BatchRound(stall_s=None)
    threads = _start(batch_round, owner, device, [1, 2, 3], results)
    wait_until(lambda: "launch 0" in device.log and batch_round.waiting == 3)
    # every member now waits, but two of them on the started batch: the lone third input is not
    # launched (half empty) before that batch lands and its members leave.  Two more looks at the
    # started batch mean the device thread has scheduled with all three waiting.
    polls = device.handles[0].polls
    wait_until(lambda: device.handles[0].polls >= polls + 2)
    device.open(0)
    device.open(1)
    _finish(threads)
    batch_round.close()
    assert results == {1: [2], 2: [4], 3: [6]}
    assert device.log == ["launch 0", "finish 0", "launch 1", "finish 1"]


def test_a_batch_that_fails_to_finish_is_run_again_request_by_request():
    running = computations_running()
    device, owner, results = FakeDevice(held=1), object(), {}
    batch_round = BatchRound(stall_s=None)
    threads = _start(batch_round, owner, device, [1, "bad"], results)
    device.open(0)
    _finish(threads)
    batch_round.close()
    assert results[1] == [2] and isinstance(results["bad"], ValueError)
    assert device.log[:2] == ["launch 0", "finish 0"] and len(device.log) == 6  # then each request's own batch
    assert computations_running() == running


def test_a_failing_launch_fails_only_the_request_whose_input_fails():
    device, owner, results = FakeDevice(held=0), object(), {}
    launch = device.launch

    def fragile(batch: list) -> _Handle:
        if "bad" in batch:
            raise ValueError("cannot launch")
        return launch(batch)

    device.compute = Staged(fragile, device.finish)
    batch_round = BatchRound(stall_s=None)
    _finish(_start(batch_round, owner, device, [3, "bad"], results))
    batch_round.close()
    assert results[3] == [6] and isinstance(results["bad"], ValueError)


def test_closing_the_round_lands_what_is_started_before_the_device_thread_ends():
    device, owner, results = FakeDevice(held=1), object(), {}
    batch_round = BatchRound(stall_s=None)
    threads = _start(batch_round, owner, device, [7], results)
    wait_until(lambda: "launch 0" in device.log)
    batch_round.close()
    device.open(0)
    _finish(threads)
    batch_round._device.join(60)
    assert not batch_round._device.is_alive() and results == {7: [14]}


def test_batches_ready_at_once_land_before_the_next_launch_as_on_a_cpu():
    device, owner, results = FakeDevice(held=0), object(), {}
    batch_round = BatchRound(stall_s=None)
    _finish(_start(batch_round, owner, device, [1, 2, 3, 4], results))
    batch_round.close()
    assert results == {x: [2 * x] for x in (1, 2, 3, 4)}
    assert device.log == ["launch 0", "finish 0", "launch 1", "finish 1"]


def test_a_device_error_seen_while_waiting_still_answers_every_request():
    running = computations_running()
    device, owner, results = FakeDevice(held=1), object(), {}
    broken = threading.Event()
    launch, finish = device.launch, device.finish

    def sticky_launch(batch: list) -> _Handle:
        handle = launch(batch)
        if broken.is_set():
            handle.gate.set()
        return handle

    def sticky_finish(handle: _Handle) -> list:
        if broken.is_set():
            raise RuntimeError("device error")  # as CUDA reports an illegal access from then on
        return finish(handle)

    def failing_ready(self: _Handle) -> bool:
        if broken.is_set():
            raise RuntimeError("device error")
        return self.gate.is_set()

    device.compute = Staged(sticky_launch, sticky_finish)
    _Handle.ready, original = failing_ready, _Handle.ready
    try:
        batch_round = BatchRound(stall_s=None)
        threads = _start(batch_round, owner, device, [1, 2], results)
        wait_until(lambda: "launch 0" in device.log)
        broken.set()
        _finish(threads)
    finally:
        _Handle.ready = original
    assert batch_round._device.is_alive()  # the error failed the batch, not the device thread
    batch_round.close()
    assert all(isinstance(results[x], RuntimeError) and "device error" in str(results[x]) for x in (1, 2)), results
    assert computations_running() == running


def test_an_item_timing_out_while_its_batch_is_in_flight_leaves_it_and_its_neighbour_is_answered():
    running = computations_running()
    device, owner, results = FakeDevice(held=1), object(), {}
    batch_round = BatchRound(stall_s=None)

    def late() -> list:
        with deadline(0.05):
            return forward(owner, "double", [5], device.compute, 2, by_content=False)

    def patient() -> list:
        return forward(owner, "double", [6], device.compute, 2, by_content=False)

    threads = _members(batch_round, [("late", late), ("patient", patient)], results, threading.Barrier(2))
    threads[0].join(60)
    assert isinstance(results["late"], ItemTimeout)  # its batch was still computing: the gate is shut
    device.open(0)
    _finish(threads)
    batch_round.close()
    assert results["patient"] == [12] and device.log == ["launch 0", "finish 0"]
    wait_until(lambda: computations_running() == running)


def test_a_stalled_partial_batch_starts_while_another_is_in_flight():
    now = [0.0]
    device, owner, results = FakeDevice(held=2), object(), {}
    batch_round = BatchRound(stall_s=1.0, clock=lambda: now[0])
    threads = _start(batch_round, owner, device, [1, 2, 3], results)
    wait_until(lambda: "launch 0" in device.log and batch_round.waiting == 3)
    now[0] = 5.0  # the lone third input has now waited past the stall time
    wait_until(lambda: "launch 1" in device.log)
    device.open(0)
    device.open(1)
    _finish(threads)
    batch_round.close()
    assert results == {1: [2], 2: [4], 3: [6]}
    assert device.log == ["launch 0", "launch 1", "finish 0", "finish 1"]


class _Abort(BaseException):
    """Something no ``except Exception`` catches, delivered to the device thread."""


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_device_thread_that_dies_answers_what_it_held_and_the_round_takes_no_more():
    running = computations_running()
    device, owner, results = FakeDevice(held=1), object(), {}
    batch_round = BatchRound(stall_s=None)
    threads = _start(batch_round, owner, device, [1, 2], results)
    wait_until(lambda: "launch 0" in device.log)

    def dying(now: float, eager: bool = True) -> list:
        raise _Abort()

    batch_round._take = dying  # the device thread meets it at its next look (it polls while a batch is in flight)
    _finish(threads)
    batch_round._device.join(60)
    assert not batch_round._device.is_alive()
    assert all(isinstance(results[x], RuntimeError) and "_Abort" in str(results[x]) for x in (1, 2)), results
    assert computations_running() == running
    with pytest.raises(RuntimeError, match="closed"), batch_round.member():
        forward(owner, "double", [3], device.compute, 2, by_content=False)
