"""Time limits of items scored together: an item late among others is scored again alone before it
gets a ``timeout`` row, so a forward that holds the device thread delays its neighbours but never
fails them -- the rows are those of scoring one by one."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from mmverify.core.types import Check, Instance
from mmverify.models.batching import forward
from mmverify.pipelines import execute
from mmverify.pipelines.batch import score_together
from mmverify.pipelines.deadlines import deadline
from mmverify.pipelines.execute import ItemTimeout, is_warm, score_item, timeout_row, warm_up
from mmverify.pipelines.plan import WorkItem
from mmverify.tasks.base import Task
from mmverify.tasks.catalog import TASK_REGISTRY
from mmverify.tasks.response import Response

LIMIT_S = 3.0  # the item limit: a runaway forward meets it; everything else is far inside it
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


def test_a_forward_holding_the_device_thread_times_out_only_its_own_item(registered):
    warm = [_item(0, "test_decodes"), _item(1, "test_embeds")]  # first uses: scored alone
    items = warm + [_item(2, "test_decodes", runaway=True), _item(3, "test_embeds")]
    together = list(score_together(items, _alone, in_flight=4, timeout=LIMIT_S))
    # the embedding waited behind the runaway decode on the device thread past its limit, then was
    # scored alone; the runaway item timed out among the others and again alone
    assert _outcomes(together) == ["scored", "scored", "timeout", "scored"]
    assert f"{LIMIT_S:g} s" in together[2]["error"]["message"]
    one_by_one = [_alone(item) for item in items]
    assert together == one_by_one


def test_a_late_item_scored_again_alone_keeps_its_own_row_when_that_fits(registered, monkeypatch):
    """The runaway forward ends once an item has run past its limit among the others: the late
    items' second tries then fit, and every item is scored, in order."""
    from mmverify.pipelines import batch

    def releasing_after_a_timeout(item: WorkItem) -> dict[str, Any]:
        try:
            return score_item(item)
        except ItemTimeout:
            RELEASE.set()
            raise

    monkeypatch.setattr(batch, "score_item", releasing_after_a_timeout)
    items = [_item(0, "test_decodes"), _item(1, "test_embeds"), _item(2, "test_decodes", runaway=True), _item(3, "test_embeds")]
    rows = list(score_together(items, _alone, in_flight=4, timeout=LIMIT_S))
    assert RELEASE.is_set()  # an item did run past its limit among the others
    assert _outcomes(rows) == ["scored"] * 4
    assert [row["line"] for row in rows] == [1, 2, 3, 4]
