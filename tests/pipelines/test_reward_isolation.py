"""The Reward API and the framework adapters never let one bad sample fail its batch: values JSON
cannot carry, unsupported response parts, undecodable annotations and failures while planning one
item each become that item's typed error row, and the other items' rows are those they get alone."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from mmverify.pipelines import plan as plan_module
from mmverify.pipelines.adapters import FlowGRPOReward, TRLReward, compute_score, compute_score_batch, openrlhf_items
from mmverify.pipelines.reward import Refused, Reward, RewardError
from mmverify.pipelines.reward_json import first_json_problem, json_problem
from tests.pipelines.conftest import bordered

ORDER_T = {"order": ["t"]}
GOOD = {"task": "i_structure", "instance": ORDER_T, "parts": [{"type": "text", "text": "fine"}]}
LINE_CODES = {"malformed_line"}
INSTANCE_CODES = {"invalid_instance", "malformed_line"}  # where the value sits decides; both are typed


def nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


def with_instance(**extra: Any) -> dict[str, Any]:
    return {**GOOD, "instance": {**ORDER_T, **extra}}


BAD_ITEMS: dict[str, tuple[Any, set[str]]] = {
    "lone surrogate in a text part": ({**GOOD, "parts": [{"type": "text", "text": "a\udcffb"}]}, LINE_CODES),
    "lone surrogate in instance_id": ({**GOOD, "instance_id": "\ud800"}, LINE_CODES),
    "lone surrogate in model": ({**GOOD, "model": "m\udfff"}, LINE_CODES),
    "lone surrogate in an instance key": (with_instance(**{"k\udcff": 1}), INSTANCE_CODES),
    "NaN in the instance": (with_instance(x=math.nan), INSTANCE_CODES),
    "infinity in the instance": (with_instance(x=-math.inf), INSTANCE_CODES),
    "5000-digit integer in the instance": (with_instance(x=[10**5000]), {"invalid_instance"}),
    "5000-digit sample": ({**GOOD, "sample": 10**5000}, LINE_CODES),
    "nesting past the recursion limit": (with_instance(x=nested(5000)), {"invalid_instance"}),
    "bytes in the instance": (with_instance(x=b"raw"), {"invalid_instance"}),
    "an object in the parts": ({**GOOD, "parts": [{"type": "text", "text": object()}]}, LINE_CODES),
    "task of the wrong type": ({**GOOD, "task": ["i_structure"]}, LINE_CODES),
    "parts of the wrong type": ({**GOOD, "parts": {"type": "text"}}, LINE_CODES),
    "not an object": (12, LINE_CODES),
}


def assert_isolated(rows: list[dict[str, Any]], alone: dict[str, Any], expected: list[set[str] | None]) -> None:
    """``None`` marks a good item (its row must equal its row alone); sets, the allowed error codes."""
    assert len(rows) == len(expected)
    for row, codes in zip(rows, expected):
        if codes is None:
            assert row == alone
        else:
            assert row["status"] == "error" and row["error"]["code"] in codes, row
            json.dumps(row, allow_nan=False).encode("utf-8")  # every row is strict, encodable JSON


# -- the Reward API ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(BAD_ITEMS))
def test_one_bad_item_costs_one_row(name: str):
    bad, codes = BAD_ITEMS[name]
    reward = Reward(None, on_error="zero")
    alone = reward.rows([GOOD])[0]
    batch = reward.score_items([GOOD, bad, GOOD])
    assert_isolated(batch.rows[:1] + batch.rows[1:2], alone, [None, codes])
    assert batch.rows[2]["status"] == "scored" and batch.rows[2]["score"] == alone["score"]
    assert batch.scores == [alone["score"], 0.0, alone["score"]]


def test_every_bad_item_in_one_batch():
    reward = Reward(None)
    alone = reward.rows([GOOD])[0]
    items, expected = [], []
    for bad, codes in BAD_ITEMS.values():
        items += [bad]
        expected += [codes]
    rows = reward.rows([GOOD, *items])
    assert_isolated(rows[:1], alone, [None])
    assert_isolated(rows[1:], alone, expected)
    with pytest.raises(RewardError) as raised:  # "raise" is a policy: it names every bad item
        Reward(None, on_error="raise").score_items([GOOD, *items])
    assert [index for index, _, _ in raised.value.errors] == list(range(1, len(items) + 1))


def test_problems_are_named_by_where_they_are():
    assert json_problem({"instance": {"a": [1, math.nan]}}) == "instance.a[1]: a non-finite number (nan)"
    assert json_problem({"parts": [{"text": "\udcff"}]}) == "parts[0].text: a string with an unpaired surrogate (\\udcff)"
    assert first_json_problem({"instance": {"x": 10**5000}})[0] == "instance"
    assert "nested deeper than 10 levels" in json_problem(nested(50), max_depth=10)
    assert json_problem({"ok": [1, 2.5, "text", None, True, {"n": 10**100}], 3: "int keys are written as strings"}) is None


def test_calling_the_reward_with_parts_it_cannot_use():
    reward = Reward("i_structure", on_error="zero")
    batch = reward([
        (ORDER_T, "fine"),
        (ORDER_T, object()),  # not a response part
        ('{"order": [' + "9" * 5000 + "]}", "fine"),  # annotation with an integer Python will not convert
        ("[" * 100_000, "fine"),  # annotation nested past the decoder's limit
        (ORDER_T, np.zeros(5)),  # 1-D array: audio without a rate
        (ORDER_T, "fine"),
    ])  # fmt: skip
    codes = [row["error"]["code"] if row["error"] else row["status"] for row in batch.rows]
    assert codes == ["scored", "malformed_line", "invalid_instance", "malformed_line", "malformed_line", "scored"]
    assert batch.scores == [1.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    assert all(row["task"] == "i_structure" for row in batch.rows)


def test_a_failure_while_planning_one_item_is_that_items_row(monkeypatch):
    real = plan_module.Planner.plan

    def plan(self: Any, line: int, text: str | None) -> Any:
        if text and "boom" in text:
            raise RuntimeError("planner bug")
        if text and "locked" in text:
            raise PermissionError(13, "Permission denied", "/srv/data/locked.png")
        return real(self, line, text)

    monkeypatch.setattr(plan_module.Planner, "plan", plan)
    reward = Reward(None)
    alone = reward.rows([GOOD])[0]
    rows = reward.rows([GOOD, {**GOOD, "instance_id": "boom"}, {**GOOD, "instance_id": "locked"}, GOOD])
    assert rows[0] == alone and rows[3]["status"] == "scored"
    assert rows[1]["error"]["code"] == "internal_error" and "planner bug" in rows[1]["error"]["message"]
    assert rows[2]["error"]["code"] == "missing_media" and "/srv/data" not in rows[2]["error"]["message"]
    assert rows[1]["instance_id"] == "boom" and rows[2]["instance_id"] == "locked"


# -- adapters ----------------------------------------------------------------------------------------


def test_trl_rewards_skip_only_the_bad_samples():
    instances = [json.dumps(ORDER_T), '{"order": ["t"], "n": ' + "7" * 5000 + "}", "[" * 100_000,
                 '{"order": ["t"], "x": NaN}', json.dumps(ORDER_T), json.dumps(ORDER_T)]  # fmt: skip
    completions = ["a", "b", "c", "d", object(), [{"role": "assistant", "content": "e"}]]
    assert TRLReward("i_structure")([""] * 6, completions, instance=instances) == [1.0, None, None, None, None, 1.0]
    zeros = TRLReward("i_structure", on_error="zero")([""] * 6, completions, instance=instances)
    assert zeros == [1.0, 0.0, 0.0, 0.0, 0.0, 1.0]


def test_verl_batch_scores_every_good_sample():
    ground_truths = [json.dumps(ORDER_T), '{"order": ["t"], "n": ' + "1" * 4400 + "}", "{" * 100_000,
                     '{"order": ["t"], "x": Infinity}', json.dumps(ORDER_T), json.dumps(ORDER_T), json.dumps(ORDER_T)]  # fmt: skip
    extras = [None, None, None, None, {"parts": [{"type": "response"}, {"type": "image", "data": object()}]}, {"sample": 10**5000}, None]
    results = compute_score_batch(["i_structure"] * 7, ["text"] * 7, ground_truths, extras, on_error="zero")
    assert [r["score"] for r in results] == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    assert [r["valid"] for r in results] == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    assert results[1]["error"] == "invalid_instance" and results[2]["error"] == "malformed_line"
    assert results[3]["error"] in INSTANCE_CODES and results[4]["error"] == results[5]["error"] == "malformed_line"
    assert len({frozenset(r) for r in results}) == 1  # verl stacks keys: every result has the same ones
    with pytest.raises(RewardError):
        compute_score("i_structure", "text", "{" * 100_000)  # default policy: raise, with the rows
    assert compute_score("i_structure\udcff", "text", json.dumps(ORDER_T), on_error="zero")["score"] == 0.0


def test_flow_grpo_scores_the_good_images_of_a_batch():
    green = bordered("green")
    images = [green, np.zeros(5, dtype=np.uint8), green, np.zeros((5, 5, 7), dtype=np.uint8)]
    metadata = [{"color": "green"}, {"color": "green"}, {"color": "green", "x": math.nan}, {"color": "green"}]
    scores, info = FlowGRPOReward("i_format_border", on_error="zero")(images, ["p"] * 4, metadata)
    assert scores[0] > 0.9 and scores[1:].tolist() == [0.0, 0.0, 0.0]
    assert info["error"][0] is None and info["error"][1] == "malformed_line" and info["error"][3] == "malformed_line"
    assert info["error"][2] in INSTANCE_CODES


def test_openrlhf_labels_and_queries_that_break_are_their_own_rows():
    labels = [json.dumps({"task": "i_structure", "instance": ORDER_T}), '{"task": "i_structure", "instance": ' + "[" * 100_000,
              json.dumps({"task": "i_structure", "instance": ORDER_T}), 7]  # fmt: skip
    items = openrlhf_items({"query": ["a", "b", 10**5000, "d"], "labels": labels})
    assert isinstance(items[0], dict) and all(isinstance(item, Refused) for item in items[1:])
    rows = Reward(None).rows(items)
    assert [r["error"]["code"] if r["error"] else r["status"] for r in rows] == ["scored"] + ["malformed_line"] * 3


def test_a_tasks_first_use_runs_under_the_warm_up_budget_not_the_item_limit(monkeypatch):
    """The Reward API splits warm-up from the item clock as the score executors do: the first item
    of a task is scored under ``warmup_timeout``, later ones under ``timeout``."""
    from mmverify.pipelines import execute, reward as reward_module

    budgets: list[float | None] = []
    real_deadline = reward_module.deadline

    def recording_deadline(seconds):
        budgets.append(seconds)
        return real_deadline(seconds)

    monkeypatch.setattr(reward_module, "deadline", recording_deadline)
    monkeypatch.setattr(execute, "_TASKS", {})  # nothing is warm in this process yet
    scorer = reward_module.Reward("i_structure", timeout=60.0, warmup_timeout=123.0)  # no stall reaches either
    item = {"instance": {"order": ["t"]}, "parts": [{"type": "text", "text": "hello"}]}
    first = scorer.score_items([item]).rows[0]
    assert first["status"] == "scored" and budgets == [123.0]
    second = scorer.score_items([item]).rows[0]
    assert second["status"] == "scored" and budgets == [123.0, 60.0]
