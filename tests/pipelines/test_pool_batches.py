"""Worker processes (and Ray actors) score batches of model items together, and a failure inside a
batch costs only the item at fault: the rows a dying or killed worker already sent are kept, and its
unfinished items are scored again one by one.

The pool's bookkeeping is tested with scripted workers on a fake clock; real worker processes
then score test tasks that meet at a barrier (only items scored together can pass it), crash the
process, or hang in native code.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections import deque
from typing import Any, Callable

import pytest

from mmverify.core.types import Check, Instance
from mmverify.models.batching import forward
from mmverify.pipelines import execute, pool as pool_module
from mmverify.pipelines.execute import LocalExecutor
from mmverify.pipelines.plan import WorkItem
from mmverify.pipelines.pool import OrderedPool, WorkerDied
from mmverify.pipelines.process_executor import ProcessExecutor
from mmverify.pipelines.pool_worker import score_batch
from mmverify.tasks.base import Task
from mmverify.tasks.catalog import TASK_REGISTRY
from mmverify.tasks.response import Response

SAFETY_S = 60.0  # how long a test task waits for what should come; a failing test cannot hang
LIMIT_S = 3.0  # the item limit in the tests that need one: a stall of the shared machine must not reach it
WARMUP_S = 10 * LIMIT_S  # the warm-up budget in those tests: a fresh worker starts well within it, even on a loaded machine


# -- test tasks (registered in worker processes through the executors' initializer) ------------------
_MEETING: dict[str, threading.Barrier] = {}
_MEETING_LOCK = threading.Lock()


class Rendezvous(Task):
    """Scores 1 when ``parties`` items of this process meet at a barrier within ``wait_s``: only
    items scored at the same time can.  ``crash`` ends the process; ``hang`` blocks in native code."""

    id = "test_rendezvous"

    def score(self, instance: Instance, response: Response) -> Check:
        data = instance.data
        if data.get("crash"):
            os._exit(3)
        if data.get("hang"):
            time.sleep(SAFETY_S)  # one C call: no deadline inside the process can interrupt it
        if "forward" in data:  # a model forward, on the device thread when scored together;
            hang = data["forward"] == "hang"  # a hang there is one C call, as above
            forward(self, data["forward"], [0], lambda batch: (time.sleep(SAFETY_S) if hang else None) or batch, 1)
        parties = data.get("parties", 1)
        with _MEETING_LOCK:
            barrier = _MEETING.setdefault(f"{parties}", threading.Barrier(parties))
        try:
            barrier.wait(timeout=data.get("wait_s", SAFETY_S))
        except threading.BrokenBarrierError:
            with _MEETING_LOCK:
                _MEETING.pop(f"{parties}", None)
            return Check(score=0.0, components={"met": 0.0})
        return Check(score=1.0, components={"met": 1.0, "value": float(data.get("value", 0))})


TEST_TASKS = {"test_rendezvous": f"{__name__}:Rendezvous"}


def install() -> None:
    for task_id, target in TEST_TASKS.items():
        if task_id not in TASK_REGISTRY:
            TASK_REGISTRY.register(task_id, target)


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(TASK_REGISTRY, "_targets", {**TASK_REGISTRY._targets, **{f"task:{k}": v for k, v in TEST_TASKS.items()}})
    monkeypatch.setattr(TASK_REGISTRY, "_loaded", dict(TASK_REGISTRY._loaded))
    monkeypatch.setattr(execute, "_TASKS", {})


def item(index: int, task: str = "test_rendezvous", **data: Any) -> WorkItem:
    return WorkItem(
        task=task, instance=Instance(id=f"{task}/{index}", data=data), parts=(), instance_id=f"{task}/{index}",
        sample=0, model=None, line=index + 1, key=f"key-{index}", verifier=f"{task}@1:mmmg",
    )  # fmt: skip


def outcomes(rows: list[dict[str, Any]]) -> list[str]:
    return [row["status"] if row["status"] == "scored" else row["error"]["code"] for row in rows]


def processes(in_flight: int, timeout: float | None = None, warmup_timeout: float | None = None) -> ProcessExecutor:
    return ProcessExecutor(workers=2, timeout=timeout, warmup_timeout=warmup_timeout, initializer=install, in_flight=in_flight)


def only_the_hung_item_times_out(rows: list[dict]) -> None:
    """Rows of items 0..4 where item 2 hangs, scored under ``hung_pool()``."""
    found = outcomes(rows)
    assert found[:2] + found[3:] == ["scored"] * 4
    assert found[2] in ("timeout", "warmup_timeout")  # on a warm worker or a fresh one
    assert f"{(LIMIT_S if found[2] == 'timeout' else WARMUP_S):g} s" in rows[2]["error"]["message"]


def hung_pool() -> ProcessExecutor:
    """Batches of 4 under the item limit, with a warm-up budget: the item at fault, scored again
    alone on a fresh (cold) worker, is stopped there too rather than waiting out its hang."""
    return processes(in_flight=4, timeout=LIMIT_S, warmup_timeout=WARMUP_S)


# -- real worker processes ----------------------------------------------------------------------------
@pytest.mark.parametrize("in_flight, met", [(2, 1.0), (1, 0.0)])
def test_a_batch_is_scored_together_in_one_worker(registered, in_flight, met):
    # batches of 3 on two cold workers: each batch's first item warms its task up alone, and the
    # pair behind it can meet at the barrier only when the two are scored at the same time
    wait_s = SAFETY_S if met else 0.2  # a pair that can never meet gives up quickly
    items = [item(i, value=i) if i % 3 == 0 else item(i, parties=2, wait_s=wait_s, value=i) for i in range(6)]
    rows = list(processes(in_flight=3 if in_flight > 1 else 1).run(items))
    assert outcomes(rows) == ["scored"] * 6
    assert [row["components"]["met"] for row in rows] == [1.0, met, met, 1.0, met, met]
    assert [row["line"] for row in rows] == [1, 2, 3, 4, 5, 6]


def test_batched_rows_equal_rows_scored_one_by_one(registered):
    items = [item(i, value=i) for i in range(7)]
    assert list(processes(in_flight=3).run(items)) == list(LocalExecutor().run(items))


def test_a_crash_in_a_batch_costs_only_its_item(registered):
    items = [item(0)] + [item(i, crash=i == 3, value=i) for i in range(1, 6)]
    rows = list(processes(in_flight=5).run(items))
    assert outcomes(rows) == ["scored", "scored", "scored", "worker_crashed", "scored", "scored"]
    assert [row["line"] for row in rows] == list(range(1, 7))


def test_a_native_hang_in_a_batch_times_out_only_its_item(registered):
    items = [item(0)] + [item(i, hang=i == 2, value=i) for i in range(1, 5)]
    only_the_hung_item_times_out(list(hung_pool().run(items)))


def test_a_native_hang_in_a_batched_forward_times_out_only_its_item(registered):
    """The hang holds the worker's device thread: the neighbours run past their limit among the
    others, are scored again alone, and only the item at fault gets a timeout row."""
    items = [item(0)] + [item(i, forward="hang" if i == 2 else "quick", value=i) for i in range(1, 5)]
    only_the_hung_item_times_out(list(hung_pool().run(items)))


@pytest.mark.slow
def test_ray_actors_score_batches_and_isolate_a_crash(registered):
    pytest.importorskip("ray")
    from mmverify.pipelines.ray_executor import RayExecutor

    items = [item(i, parties=2 if i in (1, 2) else 1, crash=i == 4, value=i) for i in range(7)]
    executor = RayExecutor(workers=2, warmup_timeout=None, initializer=install, in_flight=3)
    rows = list(executor.run(items))
    # batches [0 1 2] [3 4 5] [6]: 1 and 2 meet; 4 crashes its actor, and 5 is then scored alone
    assert outcomes(rows) == ["scored"] * 4 + ["worker_crashed", "scored", "scored"]
    assert [row["components"]["met"] for row in rows if row["status"] == "scored"] == [1.0] * 6


# -- the pool's bookkeeping, with scripted workers on a fake clock ----------------------------------------
class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


Script = Callable[[list[tuple[int, WorkItem]]], list[Any]]  # a batch -> steps: event lists, "die" or "hang"


class ScriptedWorker:
    """Plays a script per batch: event lists, "die", "hang", or ("quiet", seconds) -- nothing to say
    for that long on the fake clock."""

    def __init__(self, script: Script, clock: FakeClock) -> None:
        self.script = script
        self.clock = clock
        self.job = None
        self.batches: list[list[int]] = []
        self.steps: deque[Any] = deque()
        self.killed_at: float | None = None
        self.since = 0.0

    def submit(self, batch: list[tuple[int, WorkItem]]) -> list[Any]:
        self.batches.append([seq for seq, _ in batch])
        self.steps, self.since = deque(self.script(batch)), self.clock.now
        return []

    def quiet_until(self) -> float | None:
        step = self.steps[0] if self.steps else None
        return self.since + step[1] if isinstance(step, tuple) and step[0] == "quiet" else None

    @property
    def ready(self) -> bool:
        until = self.quiet_until()
        if until is not None and self.clock.now >= until:
            self.steps.popleft()
            self.since = self.clock.now
        return bool(self.steps) and self.steps[0] != "hang" and self.quiet_until() is None

    def receive(self) -> list[Any]:
        step = self.steps.popleft()
        if step == "die":
            raise WorkerDied()
        return step

    @property
    def killed(self) -> bool:
        return self.killed_at is not None

    def kill(self) -> None:
        self.killed_at = self.clock.now

    def ask_to_stop(self) -> None:
        pass

    def stop(self) -> None:
        pass


def scripted_pool(monkeypatch: pytest.MonkeyPatch, script: Script, in_flight: int, timeout: float | None = 10.0):
    clock = FakeClock()
    monkeypatch.setattr(pool_module, "time", clock)
    workers: list[ScriptedWorker] = []

    def make() -> ScriptedWorker:
        workers.append(ScriptedWorker(script, clock))
        return workers[-1]

    def wait_ready(busy: list[Any], wait_for: float | None) -> list[Any]:
        ready = [w for w in busy if w.ready]
        if not ready:
            wakes = [t for t in (w.quiet_until() for w in busy) if t is not None]
            if wait_for is not None:
                wakes.append(clock.now + wait_for)
            assert wakes, "every worker hangs and nothing would ever end the wait"
            clock.now = min(wakes)
        return ready

    return OrderedPool(make, wait_ready, workers=2, timeout=timeout, warmup_timeout=100.0, in_flight=in_flight), workers


def scored(batch: list[tuple[int, WorkItem]], faults: dict[int, str] | None = None) -> list[Any]:
    """Warm at once, then one "rows" event per item; an item named in ``faults`` dies or hangs there."""
    steps: list[Any] = [[("started",)]]
    for seq, work in batch:
        fault = (faults or {}).get(work.instance.data.get("n"))
        if fault:
            steps.append(fault)
            return steps
        steps.append([("rows", [(seq, {"n": work.instance.data["n"], "alone": len(batch) == 1})], [])])
    return steps


def numbered(count: int) -> list[WorkItem]:
    return [item(i, n=i) for i in range(count)]


def test_model_items_go_in_batches_and_other_entries_alone(monkeypatch):
    entries: list[Any] = [
        item(0, task="i_object_attribute", n=0), item(1, task="i_object_attribute", n=1), {"n": "row"},
        item(3, task="i_object_attribute", n=3), item(4, task="i_format_border", n=4), item(5, task="i_object_attribute", n=5),
    ]  # fmt: skip
    pool, workers = scripted_pool(monkeypatch, scored, in_flight=3)
    rows = list(pool.run(entries))
    assert [row["n"] for row in rows] == [0, 1, "row", 3, 4, 5]
    # the program task (i_format_border) breaks the batch; the ready-made row passes through
    assert sorted(batch for w in workers for batch in w.batches) == [[0, 1, 3], [4], [5]]


@pytest.mark.parametrize("fault", ["die", "hang"])
def test_a_failed_batch_keeps_its_rows_and_retries_the_rest_one_by_one(monkeypatch, fault):
    pool, workers = scripted_pool(monkeypatch, lambda batch: scored(batch, {2: fault}), in_flight=4)
    rows = list(pool.run(numbered(6)))
    code = "worker_crashed" if fault == "die" else "timeout"
    assert [row.get("n", row.get("error", {}).get("code")) for row in rows] == [0, 1, code, 3, 4, 5]
    first = workers[0]
    assert first.batches == [[0, 1, 2, 3]] and first.killed
    retried = sorted(batch for w in workers[1:] for batch in w.batches if batch[0] in (2, 3))
    assert retried == [[2], [3]]  # the unfinished items went out alone
    assert rows[3]["alone"] is True and rows[0]["alone"] is False


def test_a_batch_is_killed_at_three_times_the_item_limit(monkeypatch):
    pool, workers = scripted_pool(monkeypatch, lambda batch: scored(batch, {1: "hang"}), in_flight=2, timeout=10.0)
    rows = list(pool.run(numbered(2)))
    # the batch's backstop at 30 s (past an item's limit among others and its second try alone);
    # then item 1, alone on a fresh worker, times out 10 s later
    assert [w.killed_at for w in workers if w.killed] == [30.0, 40.0]
    assert rows[1]["error"]["code"] == "timeout"


@pytest.mark.parametrize("start_up, expected_kill", [(60.0, 100.0), (0.0, 100.0)])
def test_worker_start_up_and_the_first_warm_up_share_one_budget(monkeypatch, start_up, expected_kill):
    def script(batch: list[tuple[int, WorkItem]]) -> list[Any]:
        [(seq, _)] = batch
        return [("quiet", start_up), [("warming", seq)], "hang"]  # a warm-up that never ends

    pool, workers = scripted_pool(monkeypatch, script, in_flight=1)
    rows = list(pool.run(numbered(1)))
    assert rows[0]["error"]["code"] == "warmup_timeout"
    assert workers[0].killed_at == expected_kill  # one 100 s budget from the hand-over, start-up included


def test_each_further_warm_up_of_a_batch_has_a_budget_of_its_own(monkeypatch):
    def script(batch: list[tuple[int, WorkItem]]) -> list[Any]:
        if len(batch) == 1:  # the retry of what the killed batch left
            return scored(batch)
        (first, _), (second, _) = batch[:2]
        return [[("warming", first)], ("quiet", 80.0), [("rows", [(first, {"n": first})], []), ("warming", second)], "hang"]

    pool, workers = scripted_pool(monkeypatch, script, in_flight=3)
    rows = list(pool.run(numbered(3)))
    assert workers[0].killed_at == 180.0
    assert [rows[0]["n"], rows[1]["error"]["code"], rows[2]["alone"]] == [0, "warmup_timeout", True]


def test_a_warm_up_past_its_budget_charges_the_item_it_was_on(monkeypatch):
    def script(batch: list[tuple[int, WorkItem]]) -> list[Any]:
        if len(batch) > 1:  # warming up on the batch's second item, which never ends
            return [[("warming", batch[1][0])], "hang"]
        return scored(batch)

    pool, workers = scripted_pool(monkeypatch, script, in_flight=3)
    rows = list(pool.run(numbered(3)))
    assert rows[1]["error"]["code"] == "warmup_timeout"
    assert [rows[0]["n"], rows[2]["n"]] == [0, 2] and rows[0]["alone"] and rows[2]["alone"]


class _NoReports:
    def new(self) -> list[dict[str, Any]]:
        return []


def test_a_worker_reports_a_start_only_for_items_left_after_the_warm_ups(registered):
    def kinds(batch: list[tuple[int, WorkItem]]) -> list[str]:
        return [event[0] for event in score_batch(batch, None, _NoReports())]  # type: ignore[arg-type]

    assert kinds([(0, item(0)), (1, item(1))]) == ["warming", "rows", "started", "rows"]  # cold, then warm
    assert kinds([(2, item(2))]) == ["started", "rows"]
    strict = dataclasses.replace(item(3), profile="strict")  # a task (and profile) new to this process
    assert kinds([(3, strict)]) == ["warming", "rows"]  # its warm-up row fitted: nothing left to start


def test_rows_made_while_planning_count_within_max_pending(monkeypatch):
    from mmverify.pipelines.pool import _Intake

    entries: list[Any] = [item(0, n=0), *({"n": f"row {k}"} for k in range(1000)), item(1001, n=1001)]
    done: dict[int, Any] = {}
    intake = _Intake(iter(entries), in_flight=1, max_pending=8, done=done)
    assert [seq for seq, _ in intake.batch()] == [0]
    assert intake.batch() == [] and len(done) == 8 and not intake.finished  # paused while item 0 is scored
    done.clear()  # item 0 finished: its row and the eight after it left in order
    assert intake.batch() == [] and len(done) == 8
    pool, _ = scripted_pool(monkeypatch, scored, in_flight=1)
    pool.max_pending = 8
    assert [row["n"] for row in pool.run(entries)] == [0, *(f"row {k}" for k in range(1000)), 1001]


def test_workers_ahead_of_a_lagging_batch_keep_scoring(monkeypatch):
    # three workers, batches of 128; the batch holding the earliest items takes 10 s, every other 1 s.
    # With room for two batches' rows (the floor alone), the two quick workers would stop after a
    # batch each and wait for the slow one (the run would end at 13 s); by default they score the
    # other nine batches meanwhile.
    def timed(batch: list[tuple[int, WorkItem]]) -> list[Any]:
        rows = [(seq, {"n": work.instance.data["n"]}) for seq, work in batch]
        return [[("started",)], ("quiet", 10.0 if batch[0][0] == 0 else 1.0), [("rows", rows, [])]]

    ends = {}
    for bound in (None, pool_module.PENDING_FLOOR):
        pool, workers = scripted_pool(monkeypatch, timed, in_flight=128)
        pool.workers, pool.max_pending = 3, bound
        assert [row["n"] for row in pool.run(numbered(1280))] == list(range(1280))
        ends[bound] = pool_module.time.monotonic()
        if bound is None:
            assert workers[0].batches == [list(range(128))]
    assert ends == {None: 10.0, pool_module.PENDING_FLOOR: 13.0}



def test_a_pending_bound_below_one_is_refused():
    with pytest.raises(ValueError, match="max_pending must be at least 1"):
        OrderedPool(lambda: None, lambda busy, wait: [], max_pending=0)  # type: ignore[arg-type, return-value]
