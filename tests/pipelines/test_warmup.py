"""Warm-up has its own budget: worker start-up, building a task and the lazy loading of its first use
are not charged to items, a hang inside an item still times out, and a warm-up that never ends
becomes a ``warmup_timeout`` row.

The tasks below block on files the test creates, so nothing depends on how fast this machine is:
the test releases a blocked warm-up only after more than the item limit has passed.  Worker
processes (and Ray actors) learn these tasks through the executors' ``initializer``.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from mmverify.core.types import Check, Instance
from mmverify.pipelines import execute
from mmverify.pipelines.execute import LocalExecutor
from mmverify.pipelines.plan import WorkItem
from mmverify.pipelines.process_executor import ProcessExecutor
from mmverify.tasks.base import Task
from mmverify.tasks.catalog import TASK_REGISTRY
from mmverify.tasks.response import Response

ITEM_LIMIT = 3.0  # seconds; every blocked warm-up below lasts longer than this, and no stall of a shared machine should
SAFETY_S = 120.0  # a blocked task gives up after this long, so a failing test cannot hang
_CONTROL: dict[str, Path] = {}
_FIRST_SCORE_DONE: dict[str, bool] = {}


def _block_until(path: Path) -> None:
    deadline = time.monotonic() + SAFETY_S
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.005)


def _mark(name: str) -> None:
    (_CONTROL["dir"] / f"{name}-{os.getpid()}").touch()


class SlowBuild(Task):
    """Building blocks until ``release`` exists; an item with ``hang`` never finishes."""

    id = "test_slow_build"

    def __init__(self) -> None:
        _mark("building")
        _block_until(_CONTROL["dir"] / "release")

    def score(self, instance: Instance, response: Response) -> Check:
        if instance.data.get("hang"):
            _mark("hanging")
            _block_until(_CONTROL["dir"] / "never")
        return Check(score=1.0)


class SlowFirstScore(Task):
    """Builds at once; the first item scored in a process blocks until ``release`` exists (as lazy
    imports and model loading do)."""

    id = "test_slow_first_score"

    def score(self, instance: Instance, response: Response) -> Check:
        if not _FIRST_SCORE_DONE.get("done"):
            _mark("first")
            _block_until(_CONTROL["dir"] / "release")
            _FIRST_SCORE_DONE["done"] = True
        return Check(score=1.0)


TEST_TASKS = {
    "test_slow_build": f"{__name__}:SlowBuild",
    "test_slow_first_score": f"{__name__}:SlowFirstScore",
}


def install(control_dir: str) -> None:
    """Worker initializer: register the test tasks in this (fresh) process."""
    _CONTROL["dir"] = Path(control_dir)
    for task_id, target in TEST_TASKS.items():
        if task_id not in TASK_REGISTRY:
            TASK_REGISTRY.register(task_id, target)


@pytest.fixture
def control(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The control folder; the test tasks registered in this process too, with nothing built yet."""
    monkeypatch.setattr(TASK_REGISTRY, "_targets", {**TASK_REGISTRY._targets, **{f"task:{k}": v for k, v in TEST_TASKS.items()}})
    monkeypatch.setattr(TASK_REGISTRY, "_loaded", dict(TASK_REGISTRY._loaded))
    monkeypatch.setattr(execute, "_TASKS", {})
    monkeypatch.setitem(_CONTROL, "dir", tmp_path)
    monkeypatch.setattr(f"{__name__}._FIRST_SCORE_DONE", {})
    return tmp_path


def items(task: str, count: int, hang: int | None = None) -> list[WorkItem]:
    return [
        WorkItem(
            task=task,
            instance=Instance(id=f"{task}/{i}", data={"hang": i == hang}),
            parts=(),
            instance_id=f"{task}/{i}",
            sample=0,
            model=None,
            line=i + 1,
            key=f"key-{i}",
            verifier=f"{task}@1:mmmg",
        )
        for i in range(count)
    ]


def _markers(control: Path, name: str) -> int:
    return len(list(control.glob(f"{name}-*")))


def release_later(control: Path, marker: str, count: int) -> threading.Thread:
    """Create ``release`` once ``count`` processes are blocked at ``marker`` and more than the item
    limit has passed since."""

    def release() -> None:
        deadline = time.monotonic() + SAFETY_S
        while _markers(control, marker) < count and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(1.5 * ITEM_LIMIT)
        (control / "release").touch()

    thread = threading.Thread(target=release, daemon=True)
    thread.start()
    return thread


Executor = Callable[[Path, float | None], Any]


def _local(control: Path, warmup: float | None) -> LocalExecutor:
    return LocalExecutor(timeout=ITEM_LIMIT, warmup_timeout=warmup)


def _processes(control: Path, warmup: float | None) -> ProcessExecutor:
    return ProcessExecutor(workers=2, timeout=ITEM_LIMIT, warmup_timeout=warmup, initializer=install, initargs=(str(control),))


EXECUTORS: dict[str, tuple[Executor, int]] = {"local": (_local, 1), "processes": (_processes, 2)}  # kind -> (factory, workers)


def outcomes(rows: Iterator[dict[str, Any]]) -> list[str]:
    return [row["status"] if row["status"] == "scored" else row["error"]["code"] for row in rows]


@pytest.mark.parametrize("kind", EXECUTORS)
def test_items_after_a_slow_build_are_scored_and_a_hang_still_times_out(control, kind):
    factory, workers = EXECUTORS[kind]
    releaser = release_later(control, "building", workers)
    rows = list(factory(control, None).run(items("test_slow_build", 8, hang=4)))
    releaser.join()
    assert outcomes(iter(rows)) == ["scored"] * 4 + ["timeout"] + ["scored"] * 3
    assert _markers(control, "hanging") == 1  # the hang happened inside the item, on a warm worker
    assert f"{ITEM_LIMIT:g} s" in rows[4]["error"]["message"]
    assert [row["line"] for row in rows] == list(range(1, 9))


@pytest.mark.parametrize("kind", EXECUTORS)
def test_lazy_loading_on_first_use_is_not_charged_to_the_item(control, kind):
    factory, workers = EXECUTORS[kind]
    releaser = release_later(control, "first", workers)
    rows = list(factory(control, None).run(items("test_slow_first_score", 6)))
    releaser.join()
    assert outcomes(iter(rows)) == ["scored"] * 6
    assert _markers(control, "first") == workers


@pytest.mark.parametrize("kind", EXECUTORS)
def test_a_warm_up_past_its_budget_is_a_warmup_timeout(control, kind):
    factory, _workers = EXECUTORS[kind]
    rows = list(factory(control, 0.5).run(items("test_slow_build", 3)))  # nothing ever releases the build
    assert outcomes(iter(rows)) == ["warmup_timeout"] * 3
    message = rows[0]["error"]["message"]
    assert "warm-up took longer than 0.5 s" in message and "test_slow_build" in message


@pytest.fixture
def scored_items(monkeypatch) -> list[str]:
    """The instance ids that execute.score_item is called with, in order."""
    calls: list[str] = []
    real = execute.score_item

    def counting(item: WorkItem) -> dict[str, Any]:
        calls.append(item.instance_id)
        return real(item)

    monkeypatch.setattr(execute, "score_item", counting)
    return calls


def test_a_first_use_slower_than_the_item_limit_is_scored_again_warm(control, scored_items):
    calls = scored_items
    releaser = release_later(control, "first", 1)
    rows = list(LocalExecutor(timeout=ITEM_LIMIT, warmup_timeout=None).run(items("test_slow_first_score", 2)))
    releaser.join()
    assert outcomes(iter(rows)) == ["scored", "scored"]
    # the first use took longer than the item limit, so its item was scored again, warm
    assert calls == ["test_slow_first_score/0", "test_slow_first_score/0", "test_slow_first_score/1"]


def test_a_fast_first_use_keeps_its_row(control, scored_items):
    calls = scored_items
    (control / "release").touch()
    rows = list(LocalExecutor(timeout=60.0).run(items("test_slow_first_score", 2)))
    assert outcomes(iter(rows)) == ["scored", "scored"]
    assert calls == ["test_slow_first_score/0", "test_slow_first_score/1"]


@pytest.mark.slow
def test_ray_actors_warm_up_apart_from_the_item_clock(control):
    pytest.importorskip("ray")
    from mmverify.pipelines.ray_executor import RayExecutor

    releaser = release_later(control, "building", 2)
    # each item's clock runs from its submission, through Ray's scheduling and object store: a larger limit
    executor = RayExecutor(workers=2, timeout=5 * ITEM_LIMIT, warmup_timeout=None, initializer=install, initargs=(str(control),))
    rows = list(executor.run(items("test_slow_build", 8, hang=4)))
    releaser.join()
    assert outcomes(iter(rows)) == ["scored"] * 4 + ["timeout"] + ["scored"] * 3
