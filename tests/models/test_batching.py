"""Fixed-shape model batches, merged across the threads of one BatchRound."""

from __future__ import annotations

import threading

import pytest

from mmverify.models.batching import BatchRound, compute_now, forward, outside_round
from mmverify.models.rows import content_digest
from mmverify.pipelines.deadlines import deadline
from mmverify.pipelines.execute import ItemTimeout
from tests.waiting import wait_until


class Recorder:
    """A model stand-in: doubles numbers, records every batch it is given, fails on "bad"."""

    def __init__(self) -> None:
        self.batches: list[list] = []

    def __call__(self, batch: list) -> list:
        self.batches.append(list(batch))
        if "bad" in batch:
            raise ValueError("bad input")
        return [2 * x for x in batch]


def slot(value, rows: int) -> int:
    return content_digest(value) % rows


def numbers_in_rows(rows: int, wanted: list[int], start: int = 1) -> list[int]:
    """The first numbers from ``start`` on whose rows (of ``rows``) are ``wanted``, in order."""
    found, n = [], start
    for row in wanted:
        while slot(n, rows) != row or n in found:
            n += 1
        found.append(n)
        n = start
    return found


def test_each_input_sits_in_the_row_its_content_picks_and_inputs_wanting_one_row_take_turns():
    a, b, c = numbers_in_rows(4, [1, 3, 1])  # a and c want the same row
    big = numbers_in_rows(4, [2], start=100)[0]
    model = Recorder()
    assert compute_now([a, big, b, c], model, 4, shape=lambda x: x >= 100) == [2 * a, 2 * big, 2 * b, 2 * c]
    # one shape at a time; free rows hold copies of the batch's first input
    assert model.batches == [[a, a, a, b], [c, c, c, c], [big, big, big, big]]
    assert forward(object(), "kind", [], model, 2) == []


def test_identical_inputs_share_one_row_and_each_gets_its_own_output():
    calls = []

    def model(batch):
        calls.append(list(batch))
        return [[x] for x in batch]  # a mutable output per row

    outputs = compute_now(["clip", "clip", "clip"], model, 2)
    assert len(calls) == 1 and outputs == [["clip"]] * 3
    outputs[0].append("changed")
    assert outputs[1] == ["clip"] and outputs[2] == ["clip"]  # copies, not one shared object


def test_an_output_does_not_depend_on_what_else_is_computed():
    """A model whose rounding depends on the row (some CPU kernels': see models/rows.py) gives an
    input the same output alone, beside any others, and in a round with other members."""

    def by_row(batch):
        return [x + row / 1000 for row, x in enumerate(batch)]

    alone = {x: compute_now([x], by_row, 4)[0] for x in range(1, 13)}
    assert len({round(alone[x] - x, 6) for x in alone}) > 1  # the inputs do use different rows
    assert compute_now(list(range(1, 13)), by_row, 4) == [alone[x] for x in range(1, 13)]
    assert compute_now(list(range(12, 0, -1)), by_row, 4) == [alone[x] for x in range(12, 0, -1)]
    owner, results = object(), {}
    batch_round = BatchRound(stall_s=None)
    start = threading.Barrier(12)
    jobs = [(x, lambda x=x: forward(owner, "rows", [x], by_row, 4)) for x in range(1, 13)]
    _finish(_members(batch_round, jobs, results, start))
    batch_round.close()
    assert results == {x: [alone[x]] for x in range(1, 13)}


def test_a_model_giving_the_wrong_number_of_outputs_is_an_error():
    with pytest.raises(RuntimeError, match="gave 1 outputs"):
        compute_now([1, 2], lambda batch: batch[:1], 2)


def _members(batch_round: BatchRound, jobs: list, results: dict, start: threading.Barrier | None = None) -> list[threading.Thread]:
    def run(name, job):
        with batch_round.member():
            if start is not None:
                start.wait()
            try:
                results[name] = job()
            except Exception as exc:  # noqa: BLE001
                results[name] = exc

    threads = [threading.Thread(target=run, args=(name, job), daemon=True) for name, job in jobs]
    for thread in threads:
        thread.start()
    return threads


def _finish(threads: list[threading.Thread], patience_s: float = 120.0) -> None:
    """Join ``threads``; a deadlock fails the test instead of hanging the suite."""
    for thread in threads:
        thread.join(patience_s)
        assert not thread.is_alive(), "the members never finished: the round is deadlocked"


def test_packed_rows_fill_every_row_in_order_and_identical_inputs_still_share_one():
    model = Recorder()
    assert compute_now([5, 6, 5, 7, 8, 9], model, 4, by_content=False) == [10, 12, 10, 14, 16, 18]
    assert model.batches == [[5, 6, 7, 8], [9, 9, 9, 9]]
    owner, results = object(), {}
    batch_round = BatchRound(stall_s=None)
    start = threading.Barrier(3)
    jobs = [(n, lambda n=n: forward(owner, "double", [n], model, 4, by_content=False)) for n in (1, 2, 3)]
    _finish(_members(batch_round, jobs, results, start))
    batch_round.close()
    assert results == {1: [2], 2: [4], 3: [6]}
    assert sorted(model.batches[-1][:3]) == [1, 2, 3] and len(model.batches) == 3  # one batch, rows 0..2


def test_a_request_that_can_give_the_device_thread_no_work_does_not_wake_it():
    """Items in flight ask one at a time; waking the device thread for each, to find nothing to
    run, would only make it compete for the interpreter lock."""
    model, owner, results = Recorder(), object(), {}
    batch_round = BatchRound(stall_s=None)
    wakes: list[int] = []
    notify_all = batch_round._cond.notify_all
    batch_round._cond.notify_all = lambda: (wakes.append(1), notify_all())  # type: ignore[method-assign]
    start, go = threading.Barrier(3), {name: threading.Event() for name in ("second", "third")}

    def asks(name: str, value: int):
        if name in go:
            go[name].wait()
        return forward(owner, "double", [value], model, 4, by_content=False)

    jobs = [(name, lambda name=name, value=value: asks(name, value)) for name, value in (("first", 1), ("second", 2), ("third", 3))]
    threads = _members(batch_round, jobs, results, start)
    wait_until(lambda: batch_round.waiting == 1)
    after_first = len(wakes)
    assert after_first >= 1  # the first input of a kind starts its clock
    go["second"].set()
    wait_until(lambda: batch_round.waiting == 2)
    assert len(wakes) == after_first  # a half-empty batch, a member still working: nothing to run
    go["third"].set()  # now every member waits: the partial batch runs
    _finish(threads)
    batch_round.close()
    assert results == {"first": [2], "second": [4], "third": [6]}
    assert len(model.batches) == 1 and sorted(model.batches[0][:3]) == [1, 2, 3]


def test_requests_of_all_members_share_one_batch():
    model, owner, results = Recorder(), object(), {}
    batch_round = BatchRound(stall_s=None)  # only "every member waits" may run the partial batch
    start = threading.Barrier(3)  # all three are members before any asks: one round, one batch
    jobs = [(n, lambda n=n: forward(owner, "double", [n], model, 8)) for n in (1, 2, 3)]
    for thread in _members(batch_round, jobs, results, start):
        thread.join()
    batch_round.close()
    assert results == {1: [2], 2: [4], 3: [6]}
    assert len(model.batches) == 1 and len(model.batches[0]) == 8
    assert all(model.batches[0][slot(n, 8)] == n for n in (1, 2, 3))


def test_a_failing_input_fails_only_its_own_request():
    model, owner, results = Recorder(), object(), {}
    batch_round = BatchRound()
    start = threading.Barrier(2)
    jobs = [("good", lambda: forward(owner, "double", [5], model, 4)), ("bad", lambda: forward(owner, "double", ["bad"], model, 4))]
    for thread in _members(batch_round, jobs, results, start):
        thread.join()
    batch_round.close()
    assert results["good"] == [10]
    assert isinstance(results["bad"], ValueError)


def test_a_full_batch_runs_while_another_member_is_still_working():
    model, owner, results = Recorder(), object(), {}
    batch_round = BatchRound()
    release = threading.Event()

    def slow():
        release.wait()  # still preparing its input
        return forward(owner, "double", [7], model, 2)

    low, high = numbers_in_rows(2, [0, 1])  # together they fill both rows
    threads = _members(batch_round, [("slow", slow), ("full", lambda: forward(owner, "double", [high, low], model, 2))], results)
    try:
        threads[1].join()  # served although the other member never asked
        assert results["full"] == [2 * high, 2 * low] and "slow" not in results
    finally:
        release.set()
    threads[0].join()
    batch_round.close()
    assert results["slow"] == [14] and model.batches == [[low, high], [7, 7]]


def test_a_member_past_its_deadline_leaves_and_its_inputs_are_never_computed():
    model, owner, results = Recorder(), object(), {}
    batch_round = BatchRound(stall_s=None)  # the waiting input may not run on a stall
    release = threading.Event()

    def late():
        with deadline(0.05):
            return forward(owner, "double", [100], model, 4)  # waits: the other member is still working

    def other():
        release.wait()
        return forward(owner, "double", [3], model, 4)

    start = threading.Barrier(2)  # both are members before the late one asks
    threads = _members(batch_round, [("late", late), ("other", other)], results, start)
    try:
        threads[0].join()
        assert isinstance(results["late"], ItemTimeout) and model.batches == []
    finally:
        release.set()
    threads[1].join()
    batch_round.close()
    assert results["other"] == [6] and model.batches == [[3, 3, 3, 3]]


def test_a_fault_outside_the_model_call_still_answers_every_waiting_request(monkeypatch):
    model, owner, results = Recorder(), object(), {}
    batch_round = BatchRound()

    def broken_run(group, chunk):
        raise KeyError("bookkeeping bug")

    monkeypatch.setattr(batch_round, "_run", broken_run)
    for thread in _members(batch_round, [("a", lambda: forward(owner, "double", [1], model, 2))], results):
        thread.join()
    batch_round.close()
    assert isinstance(results["a"], KeyError)


def test_a_stalled_round_runs_its_partial_batch():
    """A member that waits on something other than a model (here: on the answer another member is
    waiting for) cannot hold that member's partial batch for ever."""
    model, owner, results = Recorder(), object(), {}
    batch_round = BatchRound(stall_s=0.05)
    answered = threading.Event()

    def asks():
        outputs = forward(owner, "double", [4], model, 8)
        answered.set()
        return outputs

    def waits_for_the_answer():
        answered.wait()
        return forward(owner, "double", [5], model, 8)

    start = threading.Barrier(2)  # both are members before either asks
    _finish(_members(batch_round, [("asks", asks), ("waits", waits_for_the_answer)], results, start))
    batch_round.close()
    assert results == {"asks": [8], "waits": [10]}
    assert model.batches == [[4] * 8, [5] * 8]


class FakeClock:
    """The round's clock, advanced by the test: stall decisions without waiting real time."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_stall_counts_from_the_end_of_its_kinds_last_batch():
    """An input that waited while a batch of its kind computed does not run at once in a partial
    batch when that batch ends: the member it answered comes back with its next input, which takes
    the free row."""
    clock, owner, results, batches = FakeClock(), object(), {}, []
    batch_round = BatchRound(stall_s=1.0, clock=clock)
    computing, finish_first = threading.Event(), threading.Event()

    def model(batch):
        batches.append(list(batch))
        if len(batches) == 1:
            computing.set()
            finish_first.wait()
        return [2 * x for x in batch]

    def asks_twice():
        return forward(owner, "double", [1], model, 2, by_content=False) + forward(owner, "double", [3], model, 2, by_content=False)

    threads = _members(batch_round, [("a", asks_twice)], results)  # alone: its batch runs at once
    assert computing.wait(120)
    threads += _members(batch_round, [("x", lambda: forward(owner, "double", [2], model, 2, by_content=False))], results)
    wait_until(lambda: batch_round.waiting == 2)  # "a" in the running batch, "x" queued behind it
    clock.now += 5.0  # "x" has waited five stall times, all of them while its kind computed
    finish_first.set()
    _finish(threads)
    assert results == {"a": [2, 6], "x": [4]}
    assert batches == [[1, 1], [2, 3]]
    clock.now += 1.0  # a stall time after the last batch, its emptied group is dropped
    with batch_round.member():  # any change in the round wakes the device thread
        pass
    wait_until(lambda: not batch_round._groups)
    batch_round.close()


def test_a_batch_that_answers_nobody_does_not_restart_the_stall_clock():
    """The inputs of one request that want one row take turns; with nobody to come back to fill
    the rows (the other member is busy elsewhere), they run one after another once stalled, not a
    stall time apart."""
    clock, owner, results = FakeClock(), object(), {}
    model, answered = Recorder(), threading.Event()
    batch_round = BatchRound(stall_s=1.0, clock=clock)
    same_row = numbers_in_rows(2, [1, 1, 1])

    def asks():
        outputs = forward(owner, "double", same_row, model, 2)
        answered.set()
        return outputs

    def busy():  # a judge call, say: it never asks a model before the answer has come
        answered.wait()
        return "done"

    start = threading.Barrier(2)
    threads = _members(batch_round, [("asks", asks), ("busy", busy)], results, start)
    wait_until(lambda: batch_round.waiting == 1)
    clock.now += 1.0  # the inputs have stalled; the clock stands still from here on
    with batch_round._lock:  # wake the device thread, so it looks at the moved clock now
        batch_round._changed()
    wait_until(lambda: len(model.batches) == 3, timeout=30, message="the later turns ran without waiting another stall")
    _finish(threads)
    batch_round.close()
    assert results == {"asks": [2 * x for x in same_row], "busy": "done"}


def test_a_reserved_member_counts_before_its_thread_joins():
    """A member whose thread is starting (``reserve``) holds the partial batch of those waiting,
    so its input joins that batch."""
    model, owner, results = Recorder(), object(), {}
    batch_round = BatchRound(stall_s=None)
    batch_round.reserve()
    threads = _members(batch_round, [("a", lambda: forward(owner, "double", [1], model, 2, by_content=False))], results)
    wait_until(lambda: batch_round.waiting == 1)

    def reserved():
        with batch_round.member(reserved=True):
            results["b"] = forward(owner, "double", [2], model, 2, by_content=False)

    threads.append(threading.Thread(target=reserved, daemon=True))
    threads[-1].start()
    _finish(threads)
    batch_round.close()
    assert results == {"a": [2], "b": [4]}
    assert model.batches == [[1, 2]]


def test_work_outside_the_round_is_computed_at_once_in_its_own_thread():
    """Bulk work under a lock other members wait on (a reference index being built) cannot wait for
    their requests: it runs in its own thread, and the round serves the others once it is done."""
    threads_seen: list[str] = []

    def model(batch):
        threads_seen.append(threading.current_thread().name)
        return [2 * x for x in batch]

    owner, results, index_lock = object(), {}, threading.Lock()
    batch_round = BatchRound(stall_s=None)  # no stall rule: only outside_round can avoid the deadlock
    start = threading.Barrier(2)
    builder_has_lock = threading.Event()

    def builds_the_index():
        with index_lock:
            builder_has_lock.set()
            with outside_round():
                return forward(owner, "double", [1, 2, 3], model, 4)

    def needs_the_index():
        builder_has_lock.wait()
        with index_lock:
            return forward(owner, "double", [7], model, 4)

    _finish(_members(batch_round, [("builder", builds_the_index), ("other", needs_the_index)], results, start))
    batch_round.close()
    assert results == {"builder": [2, 4, 6], "other": [14]}
    assert threads_seen[0] != "mmverify-device" and threads_seen[1] == "mmverify-device"
    assert batch_round.batches_run == 1  # only the other member's request went through the round


def test_only_a_member_can_step_out_of_its_round():
    batch_round = BatchRound(stall_s=None)
    with pytest.raises(RuntimeError, match="only a member"):
        with batch_round.away():
            pass
    with batch_round.member():
        with batch_round.away():
            assert forward(object(), "double", [3], Recorder(), 2) == [6]  # computed here, not by the round
    batch_round.close()
    assert batch_round.batches_run == 0


def test_an_input_that_waited_the_stall_time_runs_however_busy_the_round_is():
    """Members keep joining and leaving while another is busy elsewhere: the waiting input still
    runs once it has waited ``stall_s``."""
    model, owner, results = Recorder(), object(), {}
    batch_round = BatchRound(stall_s=0.05)
    answered, busy_elsewhere = threading.Event(), threading.Event()

    def asks():
        outputs = forward(owner, "double", [4], model, 8)
        answered.set()
        return outputs

    def busy():  # a member that never asks a model before the answer has come (a judge call, say)
        busy_elsewhere.set()
        answered.wait()
        return "done"

    def churn():  # items of the round starting and finishing meanwhile
        busy_elsewhere.wait()
        while not answered.is_set():
            with batch_round.member():
                pass
        return "done"

    start = threading.Barrier(2)
    threads = _members(batch_round, [("asks", asks), ("busy", busy)], results, start)
    churning = threading.Thread(target=lambda: results.setdefault("churn", churn()), daemon=True)
    churning.start()
    _finish(threads + [churning])
    batch_round.close()
    assert results == {"asks": [8], "busy": "done", "churn": "done"}


def test_groups_are_dropped_once_answered():
    """A run sees a new clip length -- a new group -- per item: the round keeps none it answered."""
    model, owner, results = Recorder(), object(), {}
    batch_round = BatchRound(stall_s=None)
    jobs = [(n, lambda n=n: forward(owner, "double", [n] * n, model, 4, shape=lambda x: x)) for n in range(1, 6)]
    _finish(_members(batch_round, jobs, results))
    assert results == {n: [2 * n] * n for n in range(1, 6)}
    assert batch_round._groups == {}
    batch_round.close()


def test_identical_inputs_of_several_members_share_one_row_and_each_gets_its_own_copy():
    calls: list[list] = []

    def model(batch):
        calls.append(list(batch))
        return [[x] for x in batch]

    owner, results = object(), {}
    batch_round = BatchRound(stall_s=None)
    start = threading.Barrier(3)
    jobs = [(name, lambda: forward(owner, "wrap", ["clip"], model, 4)) for name in ("a", "b", "c")]
    _finish(_members(batch_round, jobs, results, start))
    batch_round.close()
    assert results == {"a": [["clip"]], "b": [["clip"]], "c": [["clip"]]} and len(calls) == 1
    results["a"][0].append("changed")
    assert results["b"] == [["clip"]] and results["c"] == [["clip"]]


def test_a_request_whose_inputs_want_one_row_is_answered_over_several_batches_in_order():
    a, b, c = numbers_in_rows(4, [2, 2, 2])
    other = numbers_in_rows(4, [0], start=50)[0]
    model, owner, results = Recorder(), object(), {}
    batch_round = BatchRound(stall_s=None)
    start = threading.Barrier(2)
    jobs = [("three", lambda: forward(owner, "double", [c, a, b], model, 4)), ("one", lambda: forward(owner, "double", [other], model, 4))]
    _finish(_members(batch_round, jobs, results, start))
    batch_round.close()
    assert results == {"three": [2 * c, 2 * a, 2 * b], "one": [2 * other]}
    assert len(model.batches) == 3 and all(batch[2] in (a, b, c) for batch in model.batches)


def test_a_failing_batch_reruns_each_request_alone_and_a_shared_row_serves_the_healthy_one():
    model, owner, results = Recorder(), object(), {}
    batch_round = BatchRound(stall_s=None)
    start = threading.Barrier(2)
    jobs = [("bad", lambda: forward(owner, "double", [3, "bad"], model, 4)), ("good", lambda: forward(owner, "double", [3], model, 4))]
    _finish(_members(batch_round, jobs, results, start))
    batch_round.close()
    assert isinstance(results["bad"], ValueError) and results["good"] == [6]


def test_a_batch_of_one_request_that_fails_is_not_run_twice():
    model = Recorder()
    batch_round = BatchRound(stall_s=None)
    results = {}
    _finish(_members(batch_round, [("bad", lambda: forward(object(), "double", ["bad"], model, 2))], results))
    batch_round.close()
    assert isinstance(results["bad"], ValueError) and len(model.batches) == 1


def test_a_fault_in_scheduling_answers_the_waiting_members_and_the_round_goes_on(monkeypatch):
    model, owner, results = Recorder(), object(), {}
    batch_round = BatchRound(stall_s=None)
    real_take, faults = batch_round._take, [KeyError("scheduling bug")]

    def take_once_broken(now, eager=True):
        if faults and batch_round._groups:
            raise faults.pop()
        return real_take(now, eager)

    monkeypatch.setattr(batch_round, "_take", take_once_broken)
    _finish(_members(batch_round, [("first", lambda: forward(owner, "double", [1], model, 2))], results))
    _finish(_members(batch_round, [("second", lambda: forward(owner, "double", [2], model, 2))], results))
    batch_round.close()
    assert isinstance(results["first"], KeyError) and results["second"] == [4]
