"""i_consistency_semantic / _compose / _decompose on real MMMG rows with a scripted judge, and against
the re-derived published evaluator (tests/reference/mmmg_interleaved.py) on seeded random cases."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pytest

from mmverify.api import score_items
from tests.conftest import save_png, scene
from tests.reference import mmmg_interleaved as ref
from tests.tasks.fake_judge import FakeJudge, failed, install, no, yes

TASKS = ["i_consistency_semantic", "i_consistency_compose", "i_consistency_decompose"]


def objects_of(instructions: Path, task: str, index: int = 0) -> list[str]:
    return json.loads((instructions / f"{task}.jsonl").read_text(encoding="utf-8").splitlines()[index])["object"]


def images(n: int) -> list[np.ndarray]:
    return [scene(48, 64, seed=10 + i) for i in range(n)]


def score(
    tmp_path: Path,
    instructions: Path | None,
    task: str,
    instance_id: str,
    pictures: Sequence[np.ndarray],
    inline: dict | None = None,
    profile: str = "mmmg",
) -> dict:
    parts: list[dict[str, Any]] = [{"type": "text", "text": "Step by step:"}]
    for i, picture in enumerate(pictures):
        save_png(tmp_path / f"gen_{i}.png", picture)
        parts += [{"type": "image", "path": f"gen_{i}.png"}, {"type": "text", "text": f"step {i}"}]
    item: dict[str, Any] = {"task": task, "parts": parts}
    item.update({"instance": inline} if inline is not None else {"instance_id": instance_id})
    [row] = score_items([item], base_dir=tmp_path, instructions=instructions, profile=profile)
    return row


@pytest.mark.parametrize("task", TASKS)
def test_each_image_is_asked_about_its_own_object(tmp_path, mmmg_instructions, monkeypatch, task):
    objects = objects_of(mmmg_instructions, task)
    pictures = images(len(objects))
    judges = install(monkeypatch, FakeJudge().on("existence", yes()))
    # decompose's image_list names an input image; it is not scored, so none is provided here
    row = score(tmp_path, mmmg_instructions, task, f"{task}/0", pictures)
    assert row["status"] == "scored" and row["score"] == 1.0 and row["components"] == {"all_present": 1.0}
    calls = judges["default"].calls
    assert [c.values["target"] for c in calls] == objects
    assert all(np.array_equal(seen[0], picture) for seen, picture in zip(judges["default"].images, pictures))
    assert [e["step"] for e in row["evidence"]["judge"]] == [f"image_{i}" for i in range(len(objects))]
    assert row["evidence"]["verdicts"] == [True] * len(objects)


def test_one_no_makes_the_product_zero_and_stops_asking(tmp_path, mmmg_instructions, monkeypatch):
    objects = objects_of(mmmg_instructions, "i_consistency_semantic")  # numbers 1, 3, 5, 7, 9
    assert len(objects) == 5
    judges = install(monkeypatch, FakeJudge().on("existence", no("This card shows a 4."), target="number 5").on("existence", yes()))
    row = score(tmp_path, mmmg_instructions, "i_consistency_semantic", "i_consistency_semantic/0", images(5))
    assert row["score"] == 0.0 and row["components"] == {"all_present": 0.0}
    assert len(judges["default"].calls) == 3 and row["evidence"]["verdicts"] == [True, True, False]
    assert row["evidence"]["not_asked"] == ["image_3", "image_4"]


@pytest.mark.parametrize("task", TASKS)
def test_image_count_must_equal_the_number_of_objects(tmp_path, mmmg_instructions, monkeypatch, task):
    n = len(objects_of(mmmg_instructions, task))
    judges = install(monkeypatch, FakeJudge(auto=True))
    for count, reason in [(0, "no_image"), (n - 1, "wrong_image_count"), (n + 1, "wrong_image_count")]:
        row = score(tmp_path, mmmg_instructions, task, f"{task}/0", images(count))
        assert (row["status"], row["score"], row["reason"]) == ("scored", 0.0, reason)
    assert judges.all_calls() == []


@pytest.mark.parametrize("cause", [failed(), "Answer: perhaps", ""])
def test_judge_failure_is_an_error_row(tmp_path, mmmg_instructions, monkeypatch, cause):
    install(monkeypatch, FakeJudge().on("existence", yes(), target="orange in it without").on(None, cause))
    row = score(tmp_path, mmmg_instructions, "i_consistency_compose", "i_consistency_compose/0", images(3))
    assert row["status"] == "error" and row["score"] is None
    assert row["error"]["code"] == ("judge_failed" if isinstance(cause, Exception) else "judge_unparseable")
    assert "image_1" in row["error"]["message"]


def test_inline_instances_and_bad_annotations(tmp_path, monkeypatch):
    install(monkeypatch, FakeJudge().on("existence", yes()))
    assert score(tmp_path, None, "i_consistency_semantic", "", images(1), inline={"object": "a red card"})["score"] == 1.0
    for bad in ({"object": []}, {"object": ["a card", ""]}, {"objects": 3}, {"instruction": "x"}):
        row = score(tmp_path, None, "i_consistency_semantic", "", images(1), inline=bad)
        assert row["status"] == "error" and row["error"]["code"] == "invalid_instance", bad


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("profile", ["mmmg", "strict"])
def test_determinism(tmp_path, mmmg_instructions, monkeypatch, task, profile):
    pictures = images(len(objects_of(mmmg_instructions, task)))
    results = []
    for _ in range(2):
        install(monkeypatch, FakeJudge(auto=True))
        results.append(score(tmp_path, mmmg_instructions, task, f"{task}/0", pictures, profile=profile))
    assert results[0]["verifier"] == f"{task}@1:{profile}"
    assert json.dumps(results[0], sort_keys=True) == json.dumps(results[1], sort_keys=True)


@pytest.mark.parametrize("task", TASKS)
def test_combination_matches_the_reference(tmp_path, monkeypatch, task):
    """Random object lists, image counts and per-image verdicts: the score is the published product,
    in both profiles, and only images before the first "No" are asked about, each about its own object."""
    rng = random.Random(len(task))
    pool = [scene(16, 16, seed=100 + i) for i in range(6)]
    outcomes: list[float] = []
    for _ in range(40):
        objects = [f"object {k}" for k in rng.sample(range(20), rng.randrange(1, 5))]
        count = len(objects) if rng.random() < 0.8 else rng.randrange(0, 6)
        present = {target: rng.random() < 0.85 for target in objects}
        profile = rng.choice(["mmmg", "strict"])
        judge = FakeJudge().on("existence", lambda prompt, values: yes() if present[values["target"]] else no())
        install(monkeypatch, judge)
        row = score(tmp_path, None, task, "", pool[:count], inline={"object": objects}, profile=profile)
        expected = ref.consistency_score(objects, count, lambda i, target: present[target])
        assert row["score"] == expected, (objects, count, present, row)
        asked = [call.values["target"] for call in judge.calls]
        assert asked == objects[: len(asked)] and all(np.array_equal(seen[0], pool[i]) for i, seen in enumerate(judge.images))
        outcomes.append(expected)
    assert outcomes.count(0.0) >= 5 and outcomes.count(1.0) >= 5


def test_params_carry_templates_and_judges():
    from mmverify.tasks.catalog import TASK_REGISTRY
    from mmverify.verifiers.vlm.templates import TEMPLATE_KEY

    for task in TASKS:
        params = TASK_REGISTRY.get(task)().params()
        assert params["templates"] == TEMPLATE_KEY and params["roles"] == ["default"] and "judges" in params
