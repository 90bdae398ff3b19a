"""Item threads of items scored together: kept for the next items instead of one thread per item,
with nothing of an item's state left over for the next one on the same thread."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from mmverify.core.types import Check, Instance
from mmverify.models import batching
from mmverify.models.batching import BatchRound, forward, left_a_queue
from mmverify.pipelines import execute
from mmverify.pipelines.batch import _ItemThreads, score_together
from mmverify.pipelines.execute import is_warm, score_item, warm_up
from mmverify.pipelines.plan import WorkItem
from mmverify.tasks.base import Task
from mmverify.tasks.catalog import TASK_REGISTRY
from mmverify.tasks.response import Response

WAIT_S = 60.0  # a bound for waits that end at once unless something is broken
EMBEDDER = object()
SEEN: list[threading.Thread] = []


TOGETHER: list[threading.Barrier] = []  # set: items scored in item threads meet there before scoring on


class Embeds(Task):
    """Notes the thread that scores each item."""

    id = "test_thread_embeds"

    def score(self, instance: Instance, response: Response) -> Check:
        SEEN.append(threading.current_thread())
        if TOGETHER and threading.current_thread().name == "mmverify-item":
            TOGETHER[0].wait(WAIT_S)
        return Check(score=float(forward(EMBEDDER, "embed", [0.5], list, 1)[0]))


class Unprintable(Exception):
    def __str__(self) -> str:
        raise ValueError("no text")


class Raises(Task):
    """A scorer bug whose exception cannot even be printed."""

    id = "test_thread_raises"

    def score(self, instance: Instance, response: Response) -> Check:
        raise Unprintable()


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch):
    targets = {f"task:{Embeds.id}": f"{__name__}:Embeds", f"task:{Raises.id}": f"{__name__}:Raises"}
    monkeypatch.setattr(TASK_REGISTRY, "_targets", {**TASK_REGISTRY._targets, **targets})
    monkeypatch.setattr(TASK_REGISTRY, "_loaded", dict(TASK_REGISTRY._loaded))
    monkeypatch.setattr(execute, "_TASKS", {})
    SEEN.clear()


def _item(index: int) -> WorkItem:
    return WorkItem(
        task=Embeds.id, instance=Instance(id=f"i{index}", data={}), parts=(), instance_id=f"i{index}", sample=0, model=None,
        line=index + 1, key=f"key-{index}", verifier=f"{Embeds.id}@1:mmmg",
    )  # fmt: skip


def _alone(item: WorkItem) -> dict[str, Any]:
    return warm_up(item)[0] if not is_warm(item) else score_item(item)


def test_items_scored_together_share_in_flight_threads(registered, monkeypatch):
    """Three items at a time meet at a barrier (fewer at once would wait there in vain), on three
    threads kept for the next items: a thread per item would be 12 distinct threads."""
    monkeypatch.setattr(f"{__name__}.TOGETHER", [threading.Barrier(3)])
    rows = list(score_together([_item(i) for i in range(13)], _alone, in_flight=3))
    assert [row["status"] for row in rows] == ["scored"] * 13
    together = SEEN[1:]  # the first item is its task's first use, scored alone in this thread
    assert len(together) == 12 and all(thread.name == "mmverify-item" for thread in together)
    assert len(set(together)) == 3


def test_a_job_goes_to_a_thread_that_is_free_and_waits_when_none_is():
    threads = _ItemThreads(2)
    release, ran, done = threading.Event(), [], [threading.Event() for _ in range(4)]

    def job(index: int, block: bool) -> None:
        ran.append((index, threading.current_thread()))
        if block:
            release.wait(WAIT_S)
        done[index].set()

    try:
        threads.submit(job, 0, False)
        assert done[0].wait(WAIT_S)
        threads.submit(job, 1, True)  # the thread of job 0 takes it, or a second one starts
        threads.submit(job, 2, True)
        threads.submit(job, 3, False)  # both threads are busy: it waits for one of them
        release.set()
        assert all(event.wait(WAIT_S) for event in done)
        assert len({thread for _, thread in ran}) == 2  # never more threads than the size
    finally:
        release.set()
        threads.close()
    for _, thread in ran:
        thread.join(WAIT_S)
        assert not thread.is_alive()  # close() lets idle threads end


def test_a_job_that_raises_is_reported_and_its_thread_takes_the_next_job(monkeypatch: pytest.MonkeyPatch):
    reported: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: reported.append(args.exc_value))
    threads, done = _ItemThreads(1), threading.Event()

    def broken() -> None:
        raise RuntimeError("a job that breaks its contract")

    try:
        threads.submit(broken)
        threads.submit(done.set)  # the one thread must still be there for it
        assert done.wait(WAIT_S)
    finally:
        threads.close()
    assert [type(exc) for exc in reported] == [RuntimeError]


def test_an_item_whose_exception_cannot_be_printed_still_gets_its_error_row(registered, monkeypatch: pytest.MonkeyPatch):
    def fails(item: WorkItem, decoder: Any = None) -> dict[str, Any]:
        raise Unprintable()

    rows = list(score_together([_item(0)], _alone, in_flight=2))  # warms the task up
    monkeypatch.setattr("mmverify.pipelines.batch.score_item", fails)
    rows = list(score_together([_item(1), _item(2)], _alone, in_flight=2))
    assert [row["status"] for row in rows] == ["error", "error"]
    assert all(row["error"]["code"] == "internal_error" and "Unprintable" in row["error"]["message"] for row in rows)


def test_a_scorer_bug_whose_exception_cannot_be_printed_is_one_error_row(registered):
    item = _item(0)
    row = score_item(WorkItem(**{**item.__dict__, "task": Raises.id, "verifier": f"{Raises.id}@1:mmmg"}))
    assert row["status"] == "error" and row["error"]["code"] == "internal_error"
    assert row["error"]["message"].startswith("Unprintable (at ")


def test_a_round_member_starts_without_the_left_queue_mark_of_the_thread_s_last_item():
    batching._LOCAL.left_queued = True  # as an earlier item that gave up a queued request left it
    batch_round = BatchRound()
    try:
        with batch_round.member():
            assert not left_a_queue()
    finally:
        batching._LOCAL.left_queued = False
        batch_round.close()
