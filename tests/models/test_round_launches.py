"""A round's device thread with staged computations whose batches finish later, as on a GPU: it
launches the next ready batch before it lands the last, at most two at a time."""

from __future__ import annotations

import threading

from mmverify.models.batching import MAX_STARTED, BatchRound, forward
from mmverify.models.compute_locks import computations_running
from mmverify.models.rows import Staged
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
    assert computations_running() == 0


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
    device, owner, results = FakeDevice(held=1), object(), {}
    batch_round = BatchRound(stall_s=None)
    threads = _start(batch_round, owner, device, [1, "bad"], results)
    device.open(0)
    _finish(threads)
    batch_round.close()
    assert results[1] == [2] and isinstance(results["bad"], ValueError)
    assert device.log[:2] == ["launch 0", "finish 0"] and len(device.log) == 6  # then each request's own batch
    assert computations_running() == 0


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
