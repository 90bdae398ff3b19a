"""The 13 judged image tasks on real MMMG rows, with a scripted judge (tests/tasks/fake_judge.py).

Each test scripts the judge's replies, scores through the public API and checks the published
combination (re-derived in tests/reference/mmmg_image.py), which questions went to which judge
role, and what the row keeps as evidence -- in both profiles where they differ.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from mmverify.api import score_items
from mmverify.core.errors import ErrorCode, ScoringError
from mmverify.models.base import ModelUnavailable
from mmverify.verifiers.vlm.templates import TEMPLATES
from tests.conftest import save_png, scene
from tests.reference import mmmg_image as ref
from tests.tasks.fake_judge import FakeJudge, Judges, failed, install, letter, no, texts, yes

JUDGED = [
    "i_object_include", "i_object_exclude", "i_object_count", "i_object_attribute", "i_object_cot",
    "i_object_commonsense", "i_relation_two", "i_relation_all", "i_spacial_relative", "i_spacial_absolute",
    "i_ocr", "i_ocr_two", "i_ocr_multi_lingual",
]  # fmt: skip
# one real instruction per task (i_ocr_multi_lingual: a Chinese row; German rows are tested below)
FIRST = {task: f"{task}/0" for task in JUDGED} | {"i_ocr_multi_lingual": "i_ocr_chinese/0"}
BINARY = {"i_object_count", "i_spacial_relative", "i_spacial_absolute"}
PROFILES = ("mmmg", "strict")
VERSIONS = {"i_object_exclude": 2, "i_object_count": 2, "i_spacial_relative": 2, "i_spacial_absolute": 2,
            "i_ocr": 2, "i_ocr_two": 2, "i_ocr_multi_lingual": 2}  # fmt: skip


@pytest.fixture
def image(tmp_path: Path) -> np.ndarray:
    picture = scene(96, 128, seed=4)
    save_png(tmp_path / "gen.png", picture)
    save_png(tmp_path / "other.png", scene(96, 128, seed=5))
    return picture


def score(
    tmp_path: Path, instructions: Path, task: str, instance_id: str, images: tuple[str, ...] = ("gen.png",), profile: str = "mmmg"
) -> dict:
    parts: list[dict[str, Any]] = [{"type": "text", "text": "Here it is."}]
    parts += [{"type": "image", "path": name} for name in images]
    item = {"task": task, "instance_id": instance_id, "parts": parts}
    [row] = score_items([item], base_dir=tmp_path, instructions=instructions, profile=profile)
    return row


def score_inline(tmp_path: Path, task: str, instance: dict, profile: str = "mmmg") -> dict:
    item = {"task": task, "instance": instance, "parts": [{"type": "image", "path": "gen.png"}]}
    [row] = score_items([item], base_dir=tmp_path, profile=profile)
    return row


def assert_evidence_complete(row: dict, judges: Judges) -> None:
    """Every question asked is in the row, in order, with its filled prompt, raw reply and verdict."""
    calls = judges.all_calls()
    entries = row["evidence"]["judge"]
    assert len(entries) == len(calls)
    by_prompt = {(c.prompt, c.reply) for c in calls}
    for entry in entries:
        assert (entry["prompt"], entry["reply"]) in by_prompt
        name, version = entry["template"].split("@")
        assert int(version) == TEMPLATES[name].version and entry["verdict"] is not None
        assert entry["judge"] in {j.model_id for j in judges.values()}


def second_reader(reply: Any = None, auto: bool = True) -> FakeJudge:
    """A judge of another model for the ``ocr_second`` role (Chinese OCR refuses one model twice)."""
    judge = FakeJudge("second-vlm", auto=auto)
    return judge.on(None, reply) if reply is not None else judge


# -- scene x objects -------------------------------------------------------------------------------
def test_include_scene_times_object_present(tmp_path, image, mmmg_instructions, monkeypatch):
    judges = install(monkeypatch)
    judges["default"].on("scene", yes("A sandy beach with the sun low on the horizon."), target="beach at sunrise")
    judges["default"].on("existence", yes(), target="exactly one hot air balloon")
    row = score(tmp_path, mmmg_instructions, "i_object_include", "i_object_include/0")
    assert row["status"] == "scored" and row["score"] == 1.0
    assert row["components"] == {"scene": 1.0, "objects_present": 1.0}
    assert judges["default"].templates_asked() == ["scene", "existence"]
    [entry_scene, entry_object] = row["evidence"]["judge"]
    assert entry_scene["template"] == "scene@1" and entry_scene["verdict"] is True
    assert "beach at sunrise" in entry_scene["prompt"] and entry_scene["reply"].startswith("A sandy beach")
    assert entry_object["step"] == "object_0" and entry_object["role"] == "default"
    assert_evidence_complete(row, judges)
    # the one generated image is what the judge saw, every time
    assert all(len(ims) == 1 and np.array_equal(ims[0], image) for ims in judges["default"].images)


def test_include_object_missing_or_scene_wrong_scores_zero(tmp_path, image, mmmg_instructions, monkeypatch):
    judges = install(monkeypatch)
    judges["default"].on("scene", yes()).on("existence", no())
    row = score(tmp_path, mmmg_instructions, "i_object_include", "i_object_include/0")
    assert row["score"] == 0.0 and row["components"] == {"scene": 1.0, "objects_present": 0.0}

    judges = install(monkeypatch)
    judges["default"].on("scene", no("This is a forest at night."))
    row = score(tmp_path, mmmg_instructions, "i_object_include", "i_object_include/0")
    assert row["score"] == 0.0 and row["components"] == {"scene": 0.0}
    assert judges["default"].templates_asked() == ["scene"]  # the gate failed: nothing else asked
    assert row["evidence"]["not_asked"] == ["object_0"]


def test_include_mean_over_several_objects(tmp_path, image, monkeypatch):
    judges = install(monkeypatch)
    judges["default"].on("scene", yes()).on("existence", yes(), target="cat").on("existence", no(), target="dog")
    row = score_inline(tmp_path, "i_object_include", {"object": ["a garden", "a cat", "a dog"]})
    assert row["score"] == 0.5 and row["components"]["objects_present"] == 0.5
    row = score_inline(tmp_path, "i_object_include", {"object": {"scene": "a garden", "objects": ["a cat"]}})
    assert row["score"] == 1.0


@pytest.mark.parametrize("profile", PROFILES)
def test_exclude_asks_presence_and_inverts_it(tmp_path, image, mmmg_instructions, monkeypatch, profile):
    # i_object_exclude/0: people camping, no tents
    judges = install(monkeypatch)
    judges["default"].on("scene", yes(), target="people camping").on("existence", no("No tent anywhere."), target="tents")
    row = score(tmp_path, mmmg_instructions, "i_object_exclude", "i_object_exclude/0", profile=profile)
    assert row["score"] == 1.0 and row["components"] == {"scene": 1.0, "objects_absent": 1.0}
    assert judges["default"].templates_asked() == ["scene", "existence"]
    assert judges["default"].calls[1].values == {"target": "tents"} and row["evidence"]["present"] == [False]
    assert "free of" not in row["evidence"]["judge"][1]["prompt"]

    install(monkeypatch, FakeJudge().on("scene", yes()).on("existence", yes("A tent is at the left edge.")))
    row = score(tmp_path, mmmg_instructions, "i_object_exclude", "i_object_exclude/0", profile=profile)
    assert row["score"] == 0.0 and row["components"]["objects_absent"] == 0.0


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("task", ["i_object_include", "i_object_exclude"])
@pytest.mark.parametrize("seed", range(12))
def test_scene_objects_combine_as_published(tmp_path, image, monkeypatch, task, seed, profile):
    rng = random.Random(seed)
    objects = [f"object number {i}" for i in range(rng.randint(1, 4))]
    scene_ok, present = rng.random() < 0.7, [rng.random() < 0.5 for _ in objects]
    judge = FakeJudge().on("scene", yes() if scene_ok else no())
    for name, verdict in zip(objects, present):
        judge.on("existence", yes() if verdict else no(), target=name)
    install(monkeypatch, judge)
    row = score_inline(tmp_path, task, {"object": ["a quiet park", *objects]}, profile=profile)
    assert row["score"] == pytest.approx(ref.scene_objects_score(scene_ok, present, exclude=task == "i_object_exclude"))
    assert len(judge.calls) == (1 + len(objects) if scene_ok else 1)


# -- counting --------------------------------------------------------------------------------------
def by_meaning(seen: int) -> Callable[[str, dict], str]:
    """A judge that counts ``seen`` objects and picks the option of the prompt that says so."""

    def reply(prompt: str, values: dict) -> str:
        options = dict(re.findall(r"^([A-F])\. (.+)$", prompt, flags=re.MULTILINE))
        for option, text in options.items():
            if text == str(seen):
                return letter(option, f"I count {seen}.")
        bound = {k: int(re.search(r"\d+", t).group()) for k, t in options.items() if not t.isdigit()}
        low = next(k for k, t in options.items() if t.startswith("fewer"))
        high = next(k for k, t in options.items() if t.startswith("more"))
        return letter(low if seen < bound[low] else high, f"I count {seen}.")

    return reply


@pytest.mark.parametrize(
    ("instance_id", "answer", "expected"),
    [
        ("i_object_count/0", "B", 1.0),  # 3 scarecrows -> B
        ("i_object_count/0", "C", 0.0),
        ("i_object_count/0", "A", 0.0),
        ("i_object_count/10", "D", 1.0),  # data quirk: the text says 4 pumpkins, `count` says 5: count wins
        ("i_object_count/10", "C", 0.0),
    ],
)
def test_count_up_to_six_needs_the_letter_of_the_count(tmp_path, image, mmmg_instructions, monkeypatch, instance_id, answer, expected):
    judges = install(monkeypatch)
    judges["default"].on("count", letter(answer, "I count them one by one: 1, 2, 3. So B, or maybe C."))
    row = score(tmp_path, mmmg_instructions, "i_object_count", instance_id)
    assert row["score"] == expected and row["passed"] is (expected == 1.0)
    assert row["evidence"]["answered_letters"] == [answer] and judges["default"].templates_asked() == ["count"]
    prompt = row["evidence"]["judge"][0]["prompt"]
    assert "F. more than 6" in prompt and "A. fewer than 3, or none" in prompt


def test_count_above_six_is_one_question_with_the_published_7_to_10_options_in_mmmg(tmp_path, image, mmmg_instructions, monkeypatch):
    # i_object_count/24: 7 windmills (its text says 8); "more than 6" no longer passes
    judges = install(monkeypatch, FakeJudge().on("count_above_six", letter("B")).on("count", letter("F")))
    row = score(tmp_path, mmmg_instructions, "i_object_count", "i_object_count/24")
    assert row["score"] == 1.0 and judges["default"].templates_asked() == ["count_above_six"]
    prompt = row["evidence"]["judge"][0]["prompt"]
    assert row["evidence"]["expected_letters"] == ["B"] and "A. fewer than 7, or none\nB. 7\n" in prompt
    assert row["evidence"]["judge"][0]["reader"] == "first_answer_letter"
    install(monkeypatch, FakeJudge().on("count_above_six", letter("C")))  # 8
    assert score(tmp_path, mmmg_instructions, "i_object_count", "i_object_count/24")["score"] == 0.0


def test_count_strict_asks_the_same_first_question_then_the_follow_up(tmp_path, image, mmmg_instructions, monkeypatch):
    judges = install(monkeypatch, FakeJudge().on("count", letter("F")).on("count_more", letter("A")))
    row = score(tmp_path, mmmg_instructions, "i_object_count", "i_object_count/24", profile="strict")
    assert row["score"] == 1.0 and judges["default"].templates_asked() == ["count", "count_more"]
    assert row["evidence"]["expected_letters"] == ["F", "A"] and row["evidence"]["answered_letters"] == ["F", "A"]

    judges = install(monkeypatch, FakeJudge().on("count", letter("E")))  # 6: the follow-up is not asked
    row = score(tmp_path, mmmg_instructions, "i_object_count", "i_object_count/24", profile="strict")
    assert row["score"] == 0.0 and judges["default"].templates_asked() == ["count"]
    assert row["evidence"]["not_asked"] == ["count_more"]

    judges = install(monkeypatch, FakeJudge().on("count", letter("B")))  # 3 scarecrows: one question
    row = score(tmp_path, mmmg_instructions, "i_object_count", "i_object_count/0", profile="strict")
    assert row["score"] == 1.0 and judges["default"].templates_asked() == ["count"]


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("seed", range(40))
def test_count_passes_exactly_when_the_published_rule_does(tmp_path, image, monkeypatch, seed, profile):
    rng = random.Random(seed)
    count, seen = rng.randint(3, 10), rng.choice([0, 2, rng.randint(3, 10), rng.randint(3, 10), rng.randint(3, 10), 12])
    install(monkeypatch, FakeJudge().on(None, by_meaning(seen)))
    row = score_inline(tmp_path, "i_object_count", {"object": "cats", "count": count}, profile=profile)
    assert row["passed"] is ref.count_passes(count, seen), (count, seen, row["evidence"]["answered_letters"])


@pytest.mark.parametrize("count", [2, 11, -1, True, "many", 4.5])
def test_counts_the_options_cannot_confirm_are_invalid(tmp_path, image, monkeypatch, count):
    judges = install(monkeypatch, FakeJudge(auto=True))
    row = score_inline(tmp_path, "i_object_count", {"object": "cats", "count": count})
    assert row["error"]["code"] == "invalid_instance" and judges.all_calls() == []
    assert score_inline(tmp_path, "i_object_count", {"object": "cats", "count": "7"})["status"] == "scored"


# -- existence per object ----------------------------------------------------------------------------
@pytest.mark.parametrize("task", ["i_object_attribute", "i_object_cot", "i_object_commonsense", "i_relation_two", "i_relation_all"])
def test_existence_tasks_ask_the_annotated_description(tmp_path, image, mmmg_instructions, monkeypatch, task):
    target = json.loads((mmmg_instructions / f"{task}.jsonl").read_text(encoding="utf-8").splitlines()[0])["object"]
    judges = install(monkeypatch)
    judges["default"].on("existence", yes(), target=target)
    row = score(tmp_path, mmmg_instructions, task, f"{task}/0")
    assert row["score"] == 1.0 and row["components"] == {"objects_present": 1.0}
    assert judges["default"].calls[0].values == {"target": target}
    assert_evidence_complete(row, judges)

    install(monkeypatch, FakeJudge().on("existence", no("The banana is yellow, not blue.\nNo.")))
    assert score(tmp_path, mmmg_instructions, task, f"{task}/0")["score"] == 0.0


@pytest.mark.parametrize("seed", range(8))
def test_existence_mean_over_a_list_of_objects(tmp_path, image, monkeypatch, seed):
    rng = random.Random(seed)
    objects = [f"thing number {i}" for i in range(rng.randint(1, 5))]
    verdicts = [rng.random() < 0.5 for _ in objects]
    judge = FakeJudge()
    for name, verdict in zip(objects, verdicts):
        judge.on("existence", yes() if verdict else no(), target=name)
    install(monkeypatch, judge)
    assert score_inline(tmp_path, "i_object_cot", {"object": objects})["score"] == pytest.approx(ref.existence_score(verdicts))


# -- spatial ---------------------------------------------------------------------------------------
def test_relative_mmmg_one_gate_then_the_mcq_all_to_the_relative_judge(tmp_path, image, mmmg_instructions, monkeypatch):
    # i_spacial_relative/0: the surfboard to the left of the beach umbrella -> A
    relative = FakeJudge("relative-vlm").on("existence", yes()).on("relative_horizontal", letter("A"))
    judges = install(monkeypatch, FakeJudge("default-vlm"), spatial_relative=relative)
    row = score(tmp_path, mmmg_instructions, "i_spacial_relative", "i_spacial_relative/0")
    assert row["score"] == 1.0 and row["passed"] is True
    assert relative.templates_asked() == ["existence", "relative_horizontal"] and judges["default"].calls == []
    assert relative.calls[0].values == {"target": "exactly one surfboard and exactly one beach umbrella"}
    assert [e["role"] for e in row["evidence"]["judge"]] == ["spatial_relative"] * 2
    assert [e["step"] for e in row["evidence"]["judge"]] == ["gate_0", "position_0"]
    assert_evidence_complete(row, judges)

    for answer in ("B", "C"):
        install(monkeypatch, FakeJudge(), spatial_relative=FakeJudge().on("existence", yes()).on(None, letter(answer)))
        row = score(tmp_path, mmmg_instructions, "i_spacial_relative", "i_spacial_relative/0")
        assert row["score"] == 0.0 and row["passed"] is False


def test_relative_strict_gates_each_object_on_its_own(tmp_path, image, mmmg_instructions, monkeypatch):
    relative = FakeJudge("relative-vlm").on("exactly_one", yes()).on("relative_horizontal", letter("A"))
    install(monkeypatch, FakeJudge(), spatial_relative=relative)
    row = score(tmp_path, mmmg_instructions, "i_spacial_relative", "i_spacial_relative/0", profile="strict")
    assert row["score"] == 1.0 and relative.templates_asked() == ["exactly_one", "exactly_one", "relative_horizontal"]
    assert [c.values.get("target") for c in relative.calls[:2]] == ["surfboard", "beach umbrella"]

    relative = FakeJudge().on("exactly_one", yes(), target="surfboard").on("exactly_one", no("Two umbrellas."))
    install(monkeypatch, FakeJudge(), spatial_relative=relative)
    row = score(tmp_path, mmmg_instructions, "i_spacial_relative", "i_spacial_relative/0", profile="strict")
    assert row["score"] == 0.0 and row["components"] == {"exactly_one": 0.0}
    assert row["evidence"]["not_asked"] == ["position_0"] and len(relative.calls) == 2


def test_relative_failed_gate_skips_the_position_question(tmp_path, image, mmmg_instructions, monkeypatch):
    relative = FakeJudge("relative-vlm").on("existence", no("Two umbrellas."))
    install(monkeypatch, FakeJudge(), spatial_relative=relative)
    row = score(tmp_path, mmmg_instructions, "i_spacial_relative", "i_spacial_relative/0")
    assert row["score"] == 0.0 and row["components"] == {"exactly_one": 0.0}
    assert relative.templates_asked() == ["existence"] and row["evidence"]["not_asked"] == ["position_0"]


def test_spatial_roles_fall_back_to_spatial_then_default(tmp_path, image, mmmg_instructions, monkeypatch):
    spatial = FakeJudge("spatial-vlm", auto=True)
    judges = install(monkeypatch, FakeJudge("default-vlm"), spatial=spatial)
    for task in ("i_spacial_relative", "i_spacial_absolute"):
        assert score(tmp_path, mmmg_instructions, task, f"{task}/0")["status"] == "scored"
    assert judges["default"].calls == [] and len(spatial.calls) == 4
    judges = install(monkeypatch, FakeJudge("default-vlm", auto=True))
    row = score(tmp_path, mmmg_instructions, "i_spacial_absolute", "i_spacial_absolute/0")
    assert {e["judge"] for e in row["evidence"]["judge"]} == {"default-vlm"}


def test_relative_vertical_relations(tmp_path, image, mmmg_instructions, monkeypatch):
    # /9: the beach umbrella above the cooler (A); /11: the watering can below the wooden chair (B)
    relative = FakeJudge().on("existence", yes()).on("relative_vertical", letter("A"))
    install(monkeypatch, FakeJudge(), spatial_relative=relative)
    assert score(tmp_path, mmmg_instructions, "i_spacial_relative", "i_spacial_relative/9")["score"] == 1.0
    assert score(tmp_path, mmmg_instructions, "i_spacial_relative", "i_spacial_relative/11")["score"] == 0.0
    assert relative.templates_asked() == ["existence", "relative_vertical"] * 2


@pytest.mark.parametrize("seed", range(16))
def test_relative_combines_as_published(tmp_path, image, monkeypatch, seed):
    rng = random.Random(seed)
    relation, gate, answer = rng.choice(["left", "right", "above", "below"]), rng.random() < 0.7, rng.choice("ABC")
    install(monkeypatch, FakeJudge(), spatial_relative=FakeJudge().on("existence", yes() if gate else no()).on(None, letter(answer)))
    row = score_inline(tmp_path, "i_spacial_relative", {"constraint": [["cat", "dog", relation]]})
    assert row["score"] == ref.relative_score(gate, answer, relation)


def test_absolute_product_over_constraints(tmp_path, image, mmmg_instructions, monkeypatch):
    # i_spacial_absolute/10: the cooler bottom left (A), the beach ball bottom right (B)
    absolute = FakeJudge("absolute-vlm").on("existence", yes())
    absolute.on("absolute", letter("A"), target="cooler").on("absolute", letter("B"), target="beach ball")
    judges = install(monkeypatch, FakeJudge(), spatial_absolute=absolute)
    row = score(tmp_path, mmmg_instructions, "i_spacial_absolute", "i_spacial_absolute/10")
    assert row["score"] == 1.0 and row["components"] == {"constraint_0": 1.0, "constraint_1": 1.0}
    assert [c.values["target"] for c in absolute.calls if c.template == "existence"] == ["exactly one cooler", "exactly one beach ball"]
    assert row["evidence"]["expected"] == ["A", "B"] and row["evidence"]["answered"] == ["A", "B"]
    assert {e["role"] for e in row["evidence"]["judge"]} == {"spatial_absolute"} and judges["default"].calls == []
    assert_evidence_complete(row, judges)

    install(monkeypatch, FakeJudge(), spatial_absolute=FakeJudge().on("existence", yes()).on("absolute", letter("A")))
    row = score(tmp_path, mmmg_instructions, "i_spacial_absolute", "i_spacial_absolute/10")
    assert row["score"] == 0.0 and row["components"] == {"constraint_0": 1.0, "constraint_1": 0.0}

    absolute = FakeJudge().on("existence", no())
    install(monkeypatch, FakeJudge(), spatial_absolute=absolute)
    row = score(tmp_path, mmmg_instructions, "i_spacial_absolute", "i_spacial_absolute/10")
    assert row["score"] == 0.0 and absolute.templates_asked() == ["existence"]
    assert row["evidence"]["not_asked"] == ["position_0", "exactly_one_1", "position_1"]


def test_absolute_strict_asks_the_exactly_one_question(tmp_path, image, mmmg_instructions, monkeypatch):
    absolute = FakeJudge().on("exactly_one", yes()).on("absolute", letter("A"), target="cooler").on("absolute", letter("B"))
    install(monkeypatch, FakeJudge(), spatial_absolute=absolute)
    row = score(tmp_path, mmmg_instructions, "i_spacial_absolute", "i_spacial_absolute/10", profile="strict")
    assert row["score"] == 1.0 and absolute.templates_asked() == ["exactly_one", "absolute"] * 2
    assert [c.values["target"] for c in absolute.calls] == ["cooler", "cooler", "beach ball", "beach ball"]


@pytest.mark.parametrize("seed", range(16))
def test_absolute_combines_as_published(tmp_path, image, monkeypatch, seed):
    rng = random.Random(seed)
    names = ["cat", "dog"][: rng.randint(1, 2)]
    positions = [rng.choice(["bottom left", "bottom right", "up left", "up right"]) for _ in names]
    gates, answers = [rng.random() < 0.8 for _ in names], [rng.choice("ABCDE") for _ in names]
    absolute = FakeJudge()
    for name, gate, answer in zip(names, gates, answers):
        absolute.on("existence", yes() if gate else no(), target=f"exactly one {name}").on("absolute", letter(answer), target=name)
    install(monkeypatch, FakeJudge(), spatial_absolute=absolute)
    row = score_inline(tmp_path, "i_spacial_absolute", {"constraint": [list(c) for c in zip(names, positions)]})
    assert row["score"] == ref.absolute_score(gates, answers, positions)


@pytest.mark.parametrize(
    ("position", "answer"),
    [("bottom right", "B"), ("Top-Left corner", "C"), ("upper right", "D"), ("lower left", "A"), ("centre", "E"), ("middle", "E")],
)
def test_absolute_position_words(tmp_path, image, monkeypatch, position, answer):
    install(monkeypatch, FakeJudge(), spatial_absolute=FakeJudge().on("existence", yes()).on("absolute", letter(answer)))
    assert score_inline(tmp_path, "i_spacial_absolute", {"constraints": [["the cat", position]]})["score"] == 1.0
    assert score_inline(tmp_path, "i_spacial_absolute", {"constraint": {"the cat": position}})["score"] == 1.0


@pytest.mark.parametrize(
    ("task", "instance"),
    [
        ("i_spacial_absolute", {"constraints": [["the cat", "somewhere nice"]]}),
        ("i_spacial_absolute", {"constraints": [["the cat", "top bottom left"]]}),
        ("i_spacial_absolute", {"constraints": []}),
        ("i_spacial_relative", {"constraints": [["cat", "dog", "near"]]}),
        ("i_spacial_relative", {"constraints": [["cat", "dog"]]}),
        ("i_object_include", {"object": ["only a scene"]}),
        ("i_object_attribute", {"object": ""}),
        ("i_ocr_two", {"object": "two signs", "text": "not a mapping"}),
        ("i_ocr_multi_lingual", {"text": "Hallo", "language": "french"}),
        ("i_ocr", {"txt": "typo"}),
    ],
)
def test_bad_annotations_are_invalid_instance_errors(tmp_path, image, monkeypatch, task, instance):
    judges = install(monkeypatch, FakeJudge(auto=True))
    row = score_inline(tmp_path, task, instance)
    assert row["status"] == "error" and row["error"]["code"] == "invalid_instance"
    assert judges.all_calls() == []


# -- OCR -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("reading", "mmmg", "strict"),
    [
        (["Happy Birthday"], 1.0, 1.0),
        (["HAPPY", "birthday!"], 1.0, 1.0),  # case and punctuation are normalised away; pieces are joined
        (["Happy Birthdy"], 0.5, 0.5),
        ([], 0.0, 0.0),
        (["one two three four five"], 0.0, 0.0),  # WER above 1 is clipped
        (["Happy-Birthday"], 0.0, 1.0),  # mmmg deletes the hyphen: one word "happybirthday"
        (["Häppy Birthday"], 1.0, 1.0),  # accents are removed
    ],
)
def test_ocr_reads_the_annotated_object_and_scores_one_minus_wer(tmp_path, image, mmmg_instructions, monkeypatch, reading, mmmg, strict):
    # i_ocr/4: "Happy Birthday" on the t-shirt
    for profile, expected in (("mmmg", mmmg), ("strict", strict)):
        judges = install(monkeypatch, FakeJudge(), ocr=FakeJudge("ocr-vlm").on("ocr_object", texts(reading)))
        row = score(tmp_path, mmmg_instructions, "i_ocr", "i_ocr/4", profile=profile)
        assert row["score"] == pytest.approx(expected), profile
        assert row["evidence"]["reading"] == reading and row["evidence"]["reference"] == "Happy Birthday"
        assert judges["default"].calls == [] and judges["ocr"].calls[0].values == {"target": "the t-shirt"}
        assert row["evidence"]["judge"][0]["role"] == "ocr" and row["evidence"]["judge"][0]["template"] == "ocr_object@2"
        assert "small or unclear text" in row["evidence"]["judge"][0]["prompt"]


def test_ocr_without_an_object_reads_the_main_text_of_the_image(tmp_path, image, monkeypatch):
    judges = install(monkeypatch, FakeJudge().on("ocr", texts(["Café Olé"])))
    assert score_inline(tmp_path, "i_ocr", {"text": "Cafe Ole"})["score"] == 1.0
    assert judges["default"].templates_asked() == ["ocr"]


@pytest.mark.parametrize(("profile", "expected"), [("mmmg", 1 - 2 / 9), ("strict", 1.0)])
def test_ocr_two_gate_then_pooled_wer(tmp_path, image, mmmg_instructions, monkeypatch, profile, expected):
    # i_ocr_two/0: "Stay bold, chase dreams" on the sticky note, "Coffee fuels infinite morning
    # possibilities" on the mug.  "bold,chase" is one word once mmmg deletes the comma: one
    # substitution and one deletion over the 9 reference words.
    ocr = (
        FakeJudge("ocr-vlm")
        .on("ocr_object", texts(["Stay bold,chase dreams"]), target="sticky note")
        .on("ocr_object", texts(["Coffee fuels infinite morning possibilities"]), target="coffee mug")
    )
    judges = install(monkeypatch, FakeJudge().on("existence", yes(), target="sticky note and one coffee mug"), ocr=ocr)
    row = score(tmp_path, mmmg_instructions, "i_ocr_two", "i_ocr_two/0", profile=profile)
    assert row["score"] == pytest.approx(expected) and row["components"]["wer"] == pytest.approx(1 - expected)
    assert [c.values["target"] for c in ocr.calls] == ["the left-side sticky note", "the right-side coffee mug"]
    assert_evidence_complete(row, judges)

    ocr = FakeJudge("ocr-vlm")
    install(monkeypatch, FakeJudge().on("existence", no("There is no mug.")), ocr=ocr)
    row = score(tmp_path, mmmg_instructions, "i_ocr_two", "i_ocr_two/0", profile=profile)
    assert row["score"] == 0.0 and ocr.calls == [] and row["evidence"]["not_asked"] == ["ocr_0", "ocr_1"]


@pytest.mark.parametrize(
    ("first", "second", "mmmg", "strict"),
    [
        (["和平"], ["和平"], 1.0, 1.0),
        (["和平"], ["和"], 0.5, 0.5),  # only characters both judges read count
        (["和", "平"], ["平和"], 1.0, 1.0),  # the first judge's order, pieces joined
        (["和平路"], ["和平路"], 0.5, 0.5),  # an extra character: one insertion over two
        (["和平"], ["和乎"], 0.5, 0.5),  # a character only one judge saw is dropped
        ([], ["和平"], 0.0, 0.0),
        (["和平和平"], ["和平和平"], 1.0, 0.0),  # mmmg keeps each shared character once
        (["和平 Peace!"], ["和平 peace"], 1.0, 0.0),  # mmmg counts only CJK ideographs
    ],
)
def test_chinese_ocr_intersects_two_judges(tmp_path, image, mmmg_instructions, monkeypatch, first, second, mmmg, strict):
    for profile, expected in (("mmmg", mmmg), ("strict", strict)):
        ocr, ocr_second = FakeJudge("ocr-a").on("ocr_chinese", texts(first)), FakeJudge("ocr-b").on("ocr_chinese", texts(second))
        judges = install(monkeypatch, FakeJudge(), ocr=ocr, ocr_second=ocr_second)
        row = score(tmp_path, mmmg_instructions, "i_ocr_multi_lingual", "i_ocr_chinese/0", profile=profile)  # "和平"
        assert row["score"] == pytest.approx(expected), profile
        assert row["evidence"]["readings"] == [first, second]
        assert [e["judge"] for e in row["evidence"]["judge"]] == ["ocr-a", "ocr-b"] and judges["default"].calls == []


@pytest.mark.parametrize("same", ["one judge for every role", "another judge of the same model"])
def test_chinese_ocr_refuses_one_model_as_both_readers(tmp_path, image, mmmg_instructions, monkeypatch, same):
    if same.startswith("one"):
        judges = install(monkeypatch, FakeJudge("default-vlm", auto=True))
        model = "default-vlm"
    else:
        judges = install(monkeypatch, FakeJudge("default-vlm"), ocr=FakeJudge("ocr-a", auto=True), ocr_second=FakeJudge("ocr-a", auto=True))
        model = "ocr-a"
    row = score(tmp_path, mmmg_instructions, "i_ocr_multi_lingual", "i_ocr_chinese/0")
    assert row["status"] == "error" and row["error"]["code"] == "model_unavailable"
    assert "--vlm-role ocr_second=MODEL[@URL]" in row["error"]["message"] and repr(model) in row["error"]["message"]
    assert judges.all_calls() == []
    # German rows need one reader only
    assert score(tmp_path, mmmg_instructions, "i_ocr_multi_lingual", "i_ocr_german/4")["status"] == "scored"


def test_chinese_ocr_second_reader_may_be_the_default_judge(tmp_path, image, mmmg_instructions, monkeypatch):
    # ocr configured, ocr_second not: it falls back to the default judge, another model
    judges = install(monkeypatch, FakeJudge("default-vlm").on("ocr_chinese", texts(["和"])), ocr=FakeJudge("ocr-a").on("ocr_chinese", texts(["和平"])))
    row = score(tmp_path, mmmg_instructions, "i_ocr_multi_lingual", "i_ocr_chinese/0")
    assert row["score"] == 0.5 and [e["judge"] for e in row["evidence"]["judge"]] == ["ocr-a", "default-vlm"]
    assert len(judges.all_calls()) == 2


@pytest.mark.parametrize(("profile", "expected"), [("mmmg", 2 / 3), ("strict", 1.0)])
def test_german_ocr_compares_umlauts_as_written_in_mmmg(tmp_path, image, mmmg_instructions, monkeypatch, profile, expected):
    # i_ocr_german/4: the instruction asks for "Mut Fuehrt Weiter" on the t-shirt; "FÜHRT" becomes
    # "fuhrt" (accent removed), one wrong word of three; strict folds ü and ue together
    judges = install(monkeypatch, FakeJudge(), ocr=FakeJudge().on("ocr_object", texts(["MUT FÜHRT", "WEITER"])))
    row = score(tmp_path, mmmg_instructions, "i_ocr_multi_lingual", "i_ocr_german/4", profile=profile)
    assert row["score"] == pytest.approx(expected) and row["evidence"]["language"] == "de"
    assert judges["ocr"].calls[0].values == {"target": "the t-shirt"}
    install(monkeypatch, FakeJudge(), ocr=FakeJudge().on("ocr_object", texts(["Mut Fuehrt Weiter"])))
    assert score(tmp_path, mmmg_instructions, "i_ocr_multi_lingual", "i_ocr_german/4", profile=profile)["score"] == 1.0


def test_inline_multilingual_rows_tell_the_language_from_the_text(tmp_path, image, monkeypatch):
    install(monkeypatch, FakeJudge().on("ocr", texts(["Mut Führt Weiter"])))
    row = score_inline(tmp_path, "i_ocr_multi_lingual", {"text": "Mut Führt Weiter"})
    assert row["evidence"]["language"] == "de" and row["score"] == 1.0
    install(monkeypatch, FakeJudge().on("ocr_chinese", texts(["德"])), ocr_second=second_reader(texts(["德"])))
    row = score_inline(tmp_path, "i_ocr_multi_lingual", {"text": "德"})
    assert row["score"] == 1.0 and row["evidence"]["language"] == "zh"


# -- every task: failures, shape, evidence, determinism ----------------------------------------------
@pytest.mark.parametrize("task", JUDGED)
def test_judge_failure_is_an_error_row_never_a_score(tmp_path, image, mmmg_instructions, monkeypatch, task):
    for cause, code in [
        (failed(), "judge_failed"),
        (ConnectionError("connection reset"), "judge_failed"),
        (ModelUnavailable("vlm", "no judge configured"), "model_unavailable"),
    ]:
        install(monkeypatch, FakeJudge().on(None, cause), ocr_second=second_reader(cause, auto=False))
        row = score(tmp_path, mmmg_instructions, task, FIRST[task])
        assert row["status"] == "error" and row["score"] is None and row["passed"] is None, row
        assert row["error"]["code"] == code


# the tasks whose first question is read with a published reader under mmmg (no option: a wrong
# answer; no list: an empty reading), so the replies below score instead of erroring there
READ_AS_PUBLISHED_FIRST = {"i_object_count", "i_ocr"}


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("task", JUDGED)
@pytest.mark.parametrize("reply", ["", "Yes\nThe image shows a lot of things and I am not going to say more", "Answer: Maybe", "Answer: Z"])
def test_unparseable_reply_is_an_error_row(tmp_path, image, mmmg_instructions, monkeypatch, task, reply, profile):
    install(monkeypatch, FakeJudge().on(None, reply), ocr_second=second_reader(reply, auto=False))
    row = score(tmp_path, mmmg_instructions, task, FIRST[task], profile=profile)
    if profile == "mmmg" and task in READ_AS_PUBLISHED_FIRST:
        assert (row["status"], row["score"]) == ("scored", 0.0)  # as published: no option / no text read
        return
    assert row["status"] == "error" and row["score"] is None
    assert row["error"]["code"] == "judge_unparseable"
    assert ("empty reply" in row["error"]["message"]) if not reply else (reply[-20:] in row["error"]["message"])


def test_a_failure_after_good_answers_still_fails_the_item(tmp_path, image, mmmg_instructions, monkeypatch):
    install(monkeypatch, FakeJudge(), spatial_relative=FakeJudge().on("existence", yes()).on(None, failed("timeout")))
    row = score(tmp_path, mmmg_instructions, "i_spacial_relative", "i_spacial_relative/0")
    assert row["error"]["code"] == "judge_failed" and "position_0" in row["error"]["message"]


@pytest.mark.parametrize("task", JUDGED)
def test_wrong_image_count_scores_zero_without_asking(tmp_path, image, mmmg_instructions, monkeypatch, task):
    judges = install(monkeypatch, FakeJudge(auto=True))
    none = score(tmp_path, mmmg_instructions, task, FIRST[task], images=())
    two = score(tmp_path, mmmg_instructions, task, FIRST[task], images=("gen.png", "other.png"))
    assert (none["status"], none["score"], none["reason"]) == ("scored", 0.0, "no_image")
    assert (two["status"], two["score"], two["reason"]) == ("scored", 0.0, "wrong_image_count")
    assert none["passed"] is two["passed"] is (False if task in BINARY else None)
    assert judges.all_calls() == []


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("task", JUDGED)
def test_evidence_and_determinism(tmp_path, image, mmmg_instructions, monkeypatch, task, profile):
    """With well-formed replies every task scores, keeps every exchange, and scores identically twice."""
    rows = []
    for _ in range(2):
        judges = install(monkeypatch, FakeJudge(auto=True), ocr_second=second_reader())
        rows.append(score(tmp_path, mmmg_instructions, task, FIRST[task], profile=profile))
        assert_evidence_complete(rows[-1], judges)
    first, second = rows
    assert first["status"] == "scored" and 0.0 <= first["score"] <= 1.0
    assert first["verifier"] == f"{task}@{VERSIONS.get(task, 1)}:{profile}"
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)


def test_every_task_asks_through_the_hub_roles(tmp_path, image, mmmg_instructions, monkeypatch):
    """Position tasks ask everything (gates included) of their own role, OCR goes to "ocr" and
    "ocr_second", everything else to "default"."""
    names = ("default", "spatial_relative", "spatial_absolute", "ocr", "ocr_second")
    roles = {role: FakeJudge(role, auto=True) for role in names}
    judges = install(monkeypatch, roles.pop("default"), **roles)
    for task in JUDGED:
        score(tmp_path, mmmg_instructions, task, FIRST[task])
    asked = {role: set(judge.templates_asked()) for role, judge in judges.items()}
    assert asked == {
        "default": {"scene", "existence", "count"},
        "spatial_relative": {"existence", "relative_horizontal"},
        "spatial_absolute": {"existence", "absolute"},
        "ocr": {"ocr_object", "ocr_chinese"},
        "ocr_second": {"ocr_chinese"},
    }


def test_params_carry_the_template_version_and_the_profile_settings():
    from mmverify.tasks.catalog import TASK_REGISTRY
    from mmverify.verifiers.vlm.templates import TEMPLATE_KEY

    for task in JUDGED:
        params = TASK_REGISTRY.get(task)().params()
        assert params["templates"] == TEMPLATE_KEY and TEMPLATE_KEY.startswith("3:") and params["roles"]
    settings = {"i_object_count": "stages", "i_spacial_relative": "gates", "i_spacial_absolute": "gates", "i_ocr": "normalization",
                "i_ocr_two": "normalization", "i_ocr_multi_lingual": "normalization"}  # fmt: skip
    for task, key in settings.items():
        cls = TASK_REGISTRY.get(task)
        assert cls.build("mmmg").params()[key] != cls.build("strict").params()[key]
        assert cls().params()[key] == cls.build("mmmg").params()[key]
    assert TASK_REGISTRY.get("i_spacial_relative")().params()["roles"] == ["spatial_relative"]


def test_scoring_error_passes_through_with_its_code(tmp_path, image, monkeypatch):
    install(monkeypatch, FakeJudge().on(None, ScoringError(ErrorCode.TIMEOUT, "slow")))
    assert score_inline(tmp_path, "i_ocr", {"text": "Hello"})["error"]["code"] == "timeout"


def test_the_configured_judge_is_part_of_the_result_key(monkeypatch, tmp_path):
    """Switching --vlm-model must rescore rather than reuse rows judged by another model."""
    from mmverify.pipelines.plan import Planner

    line = json.dumps({"task": "i_ocr", "instance": {"text": "x"}, "parts": [{"type": "text", "text": "t"}]})
    keys = []
    for model in ("model-a", "model-b", "model-a"):
        monkeypatch.setenv("MMVERIFY_VLM_BASE_URL", "http://127.0.0.1:9/v1")
        monkeypatch.setenv("MMVERIFY_VLM_MODEL", model)
        keys.append(Planner(manifest_dir=tmp_path).plan(1, line).key)
    assert keys[0] != keys[1] and keys[0] == keys[2]


def test_a_separate_relative_judge_changes_only_the_relative_key(monkeypatch, tmp_path):
    from mmverify.pipelines.plan import Planner

    def key(task: str) -> str:
        line = json.dumps({"task": task, "instance": {"constraint": [["cat", "dog", "left"]] if "relative" in task else [["cat", "up left"]]},
                           "parts": [{"type": "text", "text": "t"}]})  # fmt: skip
        return Planner(manifest_dir=tmp_path).plan(1, line).key

    monkeypatch.setenv("MMVERIFY_VLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("MMVERIFY_VLM_MODEL", "model-a")
    before = key("i_spacial_relative"), key("i_spacial_absolute")
    monkeypatch.setenv("MMVERIFY_VLM_SPATIAL_RELATIVE_MODEL", "model-b")
    after = key("i_spacial_relative"), key("i_spacial_absolute")
    assert before[0] != after[0] and before[1] == after[1]
