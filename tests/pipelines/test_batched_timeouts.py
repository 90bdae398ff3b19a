"""Time limits of items scored together: an item late among others is scored again alone before it
gets a ``timeout`` row, so a forward that holds the device thread delays its neighbours but never
fails them -- the rows are those of scoring one by one."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from mmverify.core.types import Check, Instance
from mmverify.models.batching import BatchRound, forward
from mmverify.models.compute_locks import owner_lock
from mmverify.pipelines import execute
from mmverify.pipelines.batch import score_together
from mmverify.pipelines.deadlines import deadline
from mmverify.pipelines.execute import ItemTimeout, is_warm, score_item, timeout_row, warm_up
from mmverify.pipelines.plan import WorkItem
from mmverify.tasks.base import Task
from mmverify.tasks.catalog import TASK_REGISTRY
from mmverify.tasks.response import Response

LIMIT_S = 8.0  # the item limit: a runaway forward meets it; everything else (the device thread starting it included) is far inside it, even on a busy machine
RELEASE = threading.Event()  # ends the runaway forward (a Python-level loop, like a decode to max tokens)
DECODER, EMBEDDER = object(), object()  # two backends: their requests never share a batch


def _runaway(batch: list) -> list:
    while not RELEASE.wait(0.01):
        pass
    return list(batch)


class Decodes(Task):
    """Its forward never ends on a ``runaway`` item (until the test releases it)."""

    id = "test_decodes"

    def score(self, instance: Instance, response: Response) -> Check:
        compute = _runaway if instance.data.get("runaway") else list
        return Check(score=float(forward(DECODER, "decode", [1.0], compute, 1)[0]))


class Embeds(Task):
    id = "test_embeds"

    def score(self, instance: Instance, response: Response) -> Check:
        return Check(score=float(forward(EMBEDDER, "embed", [0.5], list, 1)[0]))


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch):
    tasks = {"test_decodes": f"{__name__}:Decodes", "test_embeds": f"{__name__}:Embeds"}
    monkeypatch.setattr(TASK_REGISTRY, "_targets", {**TASK_REGISTRY._targets, **{f"task:{k}": v for k, v in tasks.items()}})
    monkeypatch.setattr(TASK_REGISTRY, "_loaded", dict(TASK_REGISTRY._loaded))
    monkeypatch.setattr(execute, "_TASKS", {})
    RELEASE.clear()
    yield
    RELEASE.set()  # the device thread of a round may still run the runaway forward


def _item(index: int, task: str, **data: Any) -> WorkItem:
    return WorkItem(
        task=task, instance=Instance(id=f"{task}/{index}", data=data), parts=(), instance_id=f"{task}/{index}",
        sample=0, model=None, line=index + 1, key=f"key-{index}", verifier=f"{task}@1:mmmg",
    )  # fmt: skip


def _alone(item: WorkItem) -> dict[str, Any]:
    """Scoring one item as the Reward API does: the first use of a task warms it up."""
    if not is_warm(item):
        return warm_up(item)[0]
    try:
        with deadline(LIMIT_S):
            return score_item(item)
    except ItemTimeout:
        return timeout_row(item, LIMIT_S)


def _outcomes(rows: list[dict[str, Any]]) -> list[str]:
    return [row["status"] if row["status"] == "scored" else row["error"]["code"] for row in rows]


def _wait_for_backend(owner: object) -> None:
    """Until the device thread of a finished round has left ``owner``'s computation."""
    lock = owner_lock(owner)
    assert lock.acquire(timeout=60), "the runaway computation never ended"
    lock.release()


def test_each_item_thread_is_a_member_from_before_its_start_to_its_end(registered, monkeypatch):
    """score_together counts an item's thread as a member of the round before starting it (so no
    partial batch runs in between), and the thread leaves once: the count never drops below zero
    and is zero when the rows are out."""
    join, rounds, counts = BatchRound._join, set(), []

    def recorded(self: BatchRound, count: int) -> None:
        join(self, count)
        rounds.add(self)
        counts.append(self._members)

    monkeypatch.setattr(BatchRound, "_join", recorded)
    items = [_item(i, "test_embeds") for i in range(6)]  # the first is its task's first use: alone
    rows = list(score_together(items, _alone, in_flight=3, timeout=LIMIT_S))
    assert _outcomes(rows) == ["scored"] * 6
    assert len(rounds) == 1 and min(counts) >= 0 and next(iter(rounds))._members == 0
    assert max(counts) <= 3  # in_flight


def test_a_forward_holding_the_device_thread_times_out_only_its_own_item(registered):
    warm = [_item(0, "test_decodes"), _item(1, "test_embeds")]  # first uses: scored alone
    items = warm + [_item(2, "test_decodes", runaway=True), _item(3, "test_embeds")]
    together = list(score_together(items, _alone, in_flight=4, timeout=LIMIT_S))
    # the embedding waited behind the runaway decode on the device thread past its limit, then was
    # scored alone; the runaway item, whose own computation was running, timed out once
    assert _outcomes(together) == ["scored", "scored", "timeout", "scored"]
    assert f"{LIMIT_S:g} s" in together[2]["error"]["message"]
    RELEASE.set()
    _wait_for_backend(DECODER)
    RELEASE.clear()
    one_by_one = [_alone(item) for item in items]
    assert together == one_by_one


def test_a_computation_running_when_its_item_times_out_is_never_started_again(registered, monkeypatch):
    """Nothing can stop a computation on the device thread: scoring its item again alone would run
    it twice at once (and hold the caller for both).  Its item's row is its timeout."""
    calls, runaway = [], _runaway

    def counted_runaway(batch: list) -> list:
        calls.append(threading.get_ident())
        return runaway(batch)

    monkeypatch.setitem(globals(), "_runaway", counted_runaway)
    items = [_item(0, "test_decodes"), _item(1, "test_decodes", runaway=True)]
    rows = list(score_together(items, _alone, in_flight=2, timeout=LIMIT_S))
    assert _outcomes(rows) == ["scored", "timeout"]
    assert len(calls) == 1


def test_a_backend_never_computes_in_two_threads_at_once(registered):
    """An item scored again alone meets the device thread on the same backend: it waits its turn."""
    inside, most = [0], [0]
    guard = threading.Lock()
    release_first = threading.Event()

    def tracked(batch: list, hold: bool) -> list:
        with guard:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        try:
            if hold:
                release_first.wait(60)
            return list(batch)
        finally:
            with guard:
                inside[0] -= 1

    owner = object()
    results: dict[str, Any] = {}
    batch_round = BatchRound(stall_s=None)

    def member() -> None:  # its computation holds the backend on the device thread
        with batch_round.member():
            results["member"] = forward(owner, "k", [1], lambda b: tracked(b, True), 1)

    def alone() -> None:  # the same backend, computed in its own thread
        results["alone"] = forward(owner, "k", [2], lambda b: tracked(b, False), 1)

    first = threading.Thread(target=member)
    first.start()
    while inside[0] == 0 and first.is_alive():
        first.join(0.01)
    second = threading.Thread(target=alone)
    second.start()
    second.join(0.2)  # it cannot finish while the member's computation runs ...
    assert second.is_alive() and "alone" not in results
    release_first.set()
    for thread in (first, second):
        thread.join(60)
        assert not thread.is_alive()
    batch_round.close()
    assert results == {"member": [1], "alone": [2]} and most[0] == 1
