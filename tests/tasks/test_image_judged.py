"""The 13 judged image tasks on real MMMG rows, with a scripted judge (tests/tasks/fake_judge.py).

Each test scripts the judge's replies, scores through the public API and checks the published
combination, which questions went to which judge role, and what the row keeps as evidence.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jiwer
import numpy as np
import pytest

from mmverify.api import score_items
from mmverify.core.errors import ErrorCode, ScoringError
from mmverify.models.base import ModelUnavailable
from tests.conftest import save_png, scene
from tests.tasks.fake_judge import FakeJudge, Judges, failed, install, letter, no, texts, yes

JUDGED = [
    "i_object_include", "i_object_exclude", "i_object_count", "i_object_attribute", "i_object_cot",
    "i_object_commonsense", "i_relation_two", "i_relation_all", "i_spacial_relative", "i_spacial_absolute",
    "i_ocr", "i_ocr_two", "i_ocr_multi_lingual",
]  # fmt: skip
# one real instruction per task (i_ocr_multi_lingual: a Chinese row; German rows are tested below)
FIRST = {task: f"{task}/0" for task in JUDGED} | {"i_ocr_multi_lingual": "i_ocr_chinese/0"}
BINARY = {"i_object_count", "i_spacial_relative", "i_spacial_absolute"}


@pytest.fixture
def image(tmp_path: Path) -> np.ndarray:
    picture = scene(96, 128, seed=4)
    save_png(tmp_path / "gen.png", picture)
    save_png(tmp_path / "other.png", scene(96, 128, seed=5))
    return picture


def score(tmp_path: Path, instructions: Path, task: str, instance_id: str, images: tuple[str, ...] = ("gen.png",)) -> dict:
    parts: list[dict[str, Any]] = [{"type": "text", "text": "Here it is."}]
    parts += [{"type": "image", "path": name} for name in images]
    [row] = score_items([{"task": task, "instance_id": instance_id, "parts": parts}], base_dir=tmp_path, instructions=instructions)
    return row


def score_inline(tmp_path: Path, task: str, instance: dict) -> dict:
    item = {"task": task, "instance": instance, "parts": [{"type": "image", "path": "gen.png"}]}
    [row] = score_items([item], base_dir=tmp_path)
    return row


def assert_evidence_complete(row: dict, judges: Judges) -> None:
    """Every question asked is in the row, in order, with its filled prompt, raw reply and verdict."""
    calls = judges.all_calls()
    entries = row["evidence"]["judge"]
    assert len(entries) == len(calls)
    by_prompt = {(c.prompt, c.reply) for c in calls}
    for entry in entries:
        assert (entry["prompt"], entry["reply"]) in by_prompt
        assert entry["template"].endswith("@1") and entry["verdict"] is not None
        assert entry["judge"] in {j.model_id for j in judges.values()}


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


def test_exclude_asks_absence_with_negative_phrasing(tmp_path, image, mmmg_instructions, monkeypatch):
    judges = install(monkeypatch)
    judges["default"].on("scene", yes(), target="people camping").on("absence", yes("No tent anywhere."), target="tents")
    row = score(tmp_path, mmmg_instructions, "i_object_exclude", "i_object_exclude/0")
    assert row["score"] == 1.0 and row["components"] == {"scene": 1.0, "objects_absent": 1.0}
    assert judges["default"].templates_asked() == ["scene", "absence"]
    assert "completely free of" in row["evidence"]["judge"][1]["prompt"]

    judges = install(monkeypatch)
    judges["default"].on("scene", yes()).on("absence", no("A tent is at the left edge."))
    row = score(tmp_path, mmmg_instructions, "i_object_exclude", "i_object_exclude/0")
    assert row["score"] == 0.0 and row["components"]["objects_absent"] == 0.0


# -- counting --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("instance_id", "answer", "expected"),
    [
        ("i_object_count/0", "B", 1.0),  # 3 scarecrows -> B
        ("i_object_count/0", "C", 0.0),
        ("i_object_count/0", "A", 0.0),
        ("i_object_count/10", "D", 1.0),  # data quirk: the text says 4 pumpkins, `count` says 5: count wins
        ("i_object_count/10", "C", 0.0),
        ("i_object_count/24", "F", 1.0),  # 7 windmills (the text says 8): more than 6
    ],
)
def test_count_letter_must_match_the_annotated_count(tmp_path, image, mmmg_instructions, monkeypatch, instance_id, answer, expected):
    judges = install(monkeypatch)
    judges["default"].on("count", letter(answer, "I count them one by one: 1, 2, 3. So B, or maybe C."))
    row = score(tmp_path, mmmg_instructions, "i_object_count", instance_id)
    assert row["score"] == expected and row["passed"] is (expected == 1.0)
    assert row["evidence"]["answered_letter"] == answer
    prompt = row["evidence"]["judge"][0]["prompt"]
    assert "F. more than 6" in prompt and "A. fewer than 3, or none" in prompt


def test_count_letters_for_every_count(tmp_path, image, monkeypatch):
    install(monkeypatch, FakeJudge().on("count", letter("F")))
    scores = {n: score_inline(tmp_path, "i_object_count", {"object": "cats", "count": n})["score"] for n in (2, 3, 6, 7, 10)}
    assert scores == {2: 0.0, 3: 0.0, 6: 0.0, 7: 1.0, 10: 1.0}
    install(monkeypatch, FakeJudge().on("count", letter("A")))
    assert score_inline(tmp_path, "i_object_count", {"object": "cats", "count": "0"})["score"] == 1.0
    assert score_inline(tmp_path, "i_object_count", {"object": "cats", "count": -1})["error"]["code"] == "invalid_instance"
    assert score_inline(tmp_path, "i_object_count", {"object": "cats", "count": True})["error"]["code"] == "invalid_instance"


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


def test_existence_mean_over_a_list_of_objects(tmp_path, image, monkeypatch):
    install(monkeypatch, FakeJudge().on("existence", yes(), target="owl").on("existence", no()))
    row = score_inline(tmp_path, "i_object_cot", {"object": ["an owl", "a moon", "a branch", "an owl on a branch"]})
    assert row["score"] == 0.5


# -- spatial ---------------------------------------------------------------------------------------
def test_relative_gates_then_spatial_mcq(tmp_path, image, mmmg_instructions, monkeypatch):
    # i_spacial_relative/0: the surfboard to the left of the beach umbrella -> option A
    spatial = FakeJudge("spatial-vlm").on("relative_horizontal", letter("A"), first="surfboard", second="beach umbrella")
    judges = install(monkeypatch, FakeJudge().on("exactly_one", yes()), spatial=spatial)
    row = score(tmp_path, mmmg_instructions, "i_spacial_relative", "i_spacial_relative/0")
    assert row["score"] == 1.0 and row["passed"] is True
    assert judges["default"].templates_asked() == ["exactly_one", "exactly_one"]
    assert [c.values["target"] for c in judges["default"].calls] == ["surfboard", "beach umbrella"]
    assert spatial.templates_asked() == ["relative_horizontal"]
    assert [e["role"] for e in row["evidence"]["judge"]] == ["default", "default", "spatial"]
    assert row["evidence"]["judge"][2]["judge"] == "spatial-vlm"
    assert_evidence_complete(row, judges)

    for answer in ("B", "C"):
        install(monkeypatch, FakeJudge().on("exactly_one", yes()), spatial=FakeJudge().on(None, letter(answer)))
        row = score(tmp_path, mmmg_instructions, "i_spacial_relative", "i_spacial_relative/0")
        assert row["score"] == 0.0 and row["passed"] is False


def test_relative_failed_gate_skips_the_position_question(tmp_path, image, mmmg_instructions, monkeypatch):
    spatial = FakeJudge("spatial-vlm")  # any question to it would be unscripted
    judges = install(monkeypatch, FakeJudge().on("exactly_one", yes(), target="surfboard").on("exactly_one", no("Two umbrellas.")), spatial=spatial)
    row = score(tmp_path, mmmg_instructions, "i_spacial_relative", "i_spacial_relative/0")
    assert row["score"] == 0.0 and row["components"] == {"exactly_one": 0.0}
    assert spatial.calls == [] and row["evidence"]["not_asked"] == ["position_0"]
    assert len(judges["default"].calls) == 2


def test_relative_vertical_relations(tmp_path, image, mmmg_instructions, monkeypatch):
    # /9: the beach umbrella above the cooler (A); /11: the watering can below the wooden chair (B)
    spatial = FakeJudge().on("relative_vertical", letter("A"))
    install(monkeypatch, FakeJudge().on("exactly_one", yes()), spatial=spatial)
    assert score(tmp_path, mmmg_instructions, "i_spacial_relative", "i_spacial_relative/9")["score"] == 1.0
    assert score(tmp_path, mmmg_instructions, "i_spacial_relative", "i_spacial_relative/11")["score"] == 0.0
    assert spatial.templates_asked() == ["relative_vertical", "relative_vertical"]


def test_absolute_product_over_constraints(tmp_path, image, mmmg_instructions, monkeypatch):
    # i_spacial_absolute/10: the cooler bottom left (A), the beach ball bottom right (B)
    spatial = FakeJudge().on("absolute", letter("A"), target="cooler").on("absolute", letter("B"), target="beach ball")
    judges = install(monkeypatch, FakeJudge().on("exactly_one", yes()), spatial=spatial)
    row = score(tmp_path, mmmg_instructions, "i_spacial_absolute", "i_spacial_absolute/10")
    assert row["score"] == 1.0 and row["components"] == {"constraint_0": 1.0, "constraint_1": 1.0}
    assert [c.values["target"] for c in judges["default"].calls] == ["cooler", "beach ball"]  # article dropped
    assert row["evidence"]["expected"] == ["A", "B"] and row["evidence"]["answered"] == ["A", "B"]
    assert_evidence_complete(row, judges)

    spatial = FakeJudge().on("absolute", letter("A"))  # the beach ball answered bottom-left: wrong
    install(monkeypatch, FakeJudge().on("exactly_one", yes()), spatial=spatial)
    row = score(tmp_path, mmmg_instructions, "i_spacial_absolute", "i_spacial_absolute/10")
    assert row["score"] == 0.0 and row["components"] == {"constraint_0": 1.0, "constraint_1": 0.0}

    spatial = FakeJudge()
    judges = install(monkeypatch, FakeJudge().on("exactly_one", no()), spatial=spatial)
    row = score(tmp_path, mmmg_instructions, "i_spacial_absolute", "i_spacial_absolute/10")
    assert row["score"] == 0.0 and spatial.calls == [] and len(judges["default"].calls) == 1
    assert row["evidence"]["not_asked"] == ["position_0", "exactly_one_1", "position_1"]


@pytest.mark.parametrize(
    ("position", "answer"),
    [("bottom right", "B"), ("Top-Left corner", "C"), ("upper right", "D"), ("lower left", "A"), ("centre", "E"), ("middle", "E")],
)
def test_absolute_position_words(tmp_path, image, monkeypatch, position, answer):
    install(monkeypatch, FakeJudge().on("exactly_one", yes()), spatial=FakeJudge().on("absolute", letter(answer)))
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
    ("reading", "expected"),
    [
        (["Happy Birthday"], 1.0),
        (["HAPPY", "birthday!"], 1.0),  # case and punctuation are normalised away; pieces are joined
        (["Happy Birthdy"], 0.5),
        ([], 0.0),
        (["one two three four five"], 0.0),  # WER above 1 is clipped
    ],
)
def test_ocr_is_one_minus_wer(tmp_path, image, mmmg_instructions, monkeypatch, reading, expected):
    # i_ocr/4: "Happy Birthday"
    judges = install(monkeypatch, FakeJudge(), ocr=FakeJudge("ocr-vlm").on("ocr", texts(reading)))
    row = score(tmp_path, mmmg_instructions, "i_ocr", "i_ocr/4")
    assert row["score"] == pytest.approx(expected)
    assert row["evidence"]["reading"] == reading and row["evidence"]["reference"] == "Happy Birthday"
    assert judges["default"].calls == [] and judges["ocr"].templates_asked() == ["ocr"]
    assert row["evidence"]["judge"][0]["role"] == "ocr"


def test_ocr_accents_are_removed(tmp_path, image, monkeypatch):
    install(monkeypatch, FakeJudge().on("ocr", texts(["Café Olé"])))
    assert score_inline(tmp_path, "i_ocr", {"text": "Cafe Ole"})["score"] == 1.0


def test_ocr_two_gate_then_pooled_wer(tmp_path, image, mmmg_instructions, monkeypatch):
    # i_ocr_two/0: "Stay bold, chase dreams" on the sticky note, "Coffee fuels infinite morning
    # possibilities" on the mug
    ocr = (
        FakeJudge("ocr-vlm")
        .on("ocr_object", texts(["Stay bold, chase dreams"]), target="sticky note")
        .on("ocr_object", texts(["Coffee fuels morning possibilities"]), target="coffee mug")
    )
    judges = install(monkeypatch, FakeJudge().on("existence", yes(), target="sticky note and one coffee mug"), ocr=ocr)
    row = score(tmp_path, mmmg_instructions, "i_ocr_two", "i_ocr_two/0")
    expected_wer = jiwer.wer(
        ["stay bold chase dreams", "coffee fuels infinite morning possibilities"],
        ["stay bold chase dreams", "coffee fuels morning possibilities"],
    )
    assert expected_wer == pytest.approx(1 / 9)
    assert row["score"] == pytest.approx(1 - expected_wer) and row["components"]["wer"] == pytest.approx(expected_wer)
    assert [c.values["target"] for c in ocr.calls] == ["the left-side sticky note", "the right-side coffee mug"]
    assert_evidence_complete(row, judges)

    ocr = FakeJudge("ocr-vlm")
    install(monkeypatch, FakeJudge().on("existence", no("There is no mug.")), ocr=ocr)
    row = score(tmp_path, mmmg_instructions, "i_ocr_two", "i_ocr_two/0")
    assert row["score"] == 0.0 and ocr.calls == [] and row["evidence"]["not_asked"] == ["ocr_0", "ocr_1"]


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        (["和平"], ["和平"], 1.0),
        (["和平"], ["和"], 0.5),  # only characters both judges read count
        (["和", "平"], ["平和"], 1.0),  # the first judge's order, pieces joined
        (["和平路"], ["和平路"], 0.5),  # an extra character: one insertion over two
        (["和平"], ["和乎"], 0.5),  # a character only one judge saw is dropped
        ([], ["和平"], 0.0),
    ],
)
def test_chinese_ocr_intersects_two_judges(tmp_path, image, mmmg_instructions, monkeypatch, first, second, expected):
    ocr, ocr_second = FakeJudge("ocr-a").on("ocr_chinese", texts(first)), FakeJudge("ocr-b").on("ocr_chinese", texts(second))
    judges = install(monkeypatch, FakeJudge(), ocr=ocr, ocr_second=ocr_second)
    row = score(tmp_path, mmmg_instructions, "i_ocr_multi_lingual", "i_ocr_chinese/0")  # "和平"
    assert row["score"] == pytest.approx(expected) and row["evidence"]["readings"] == [first, second]
    assert [e["judge"] for e in row["evidence"]["judge"]] == ["ocr-a", "ocr-b"]
    assert judges["default"].calls == []


def test_german_ocr_folds_umlauts(tmp_path, image, mmmg_instructions, monkeypatch):
    # i_ocr_german/4: "Mut Fuehrt Weiter"
    judges = install(monkeypatch, FakeJudge(), ocr=FakeJudge().on("ocr", texts(["MUT FÜHRT", "WEITER"])))
    row = score(tmp_path, mmmg_instructions, "i_ocr_multi_lingual", "i_ocr_german/4")
    assert row["score"] == 1.0 and row["evidence"]["language"] == "de"
    assert judges["ocr"].templates_asked() == ["ocr"]
    # inline rows carry no source file: the language comes from the text (or an explicit field)
    assert score_inline(tmp_path, "i_ocr_multi_lingual", {"text": "Mut Führt Weiter"})["evidence"]["language"] == "de"
    install(monkeypatch, FakeJudge().on("ocr_chinese", texts(["德"])))
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
        install(monkeypatch, FakeJudge().on(None, cause))
        row = score(tmp_path, mmmg_instructions, task, FIRST[task])
        assert row["status"] == "error" and row["score"] is None and row["passed"] is None, row
        assert row["error"]["code"] == code


@pytest.mark.parametrize("task", JUDGED)
@pytest.mark.parametrize("reply", ["", "Yes\nThe image shows a lot of things and I am not going to say more", "Answer: Maybe", "Answer: Z"])
def test_unparseable_reply_is_an_error_row(tmp_path, image, mmmg_instructions, monkeypatch, task, reply):
    install(monkeypatch, FakeJudge().on(None, reply))
    row = score(tmp_path, mmmg_instructions, task, FIRST[task])
    assert row["status"] == "error" and row["score"] is None
    assert row["error"]["code"] == "judge_unparseable"
    assert ("empty reply" in row["error"]["message"]) if not reply else (reply[-20:] in row["error"]["message"])


def test_a_failure_after_good_answers_still_fails_the_item(tmp_path, image, mmmg_instructions, monkeypatch):
    install(monkeypatch, FakeJudge().on("exactly_one", yes()), spatial=FakeJudge().on(None, failed("timeout")))
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


@pytest.mark.parametrize("task", JUDGED)
def test_evidence_and_determinism(tmp_path, image, mmmg_instructions, monkeypatch, task):
    """With well-formed replies every task scores, keeps every exchange, and scores identically twice."""
    judges = install(monkeypatch, FakeJudge(auto=True))
    first = score(tmp_path, mmmg_instructions, task, FIRST[task])
    assert first["status"] == "scored" and 0.0 <= first["score"] <= 1.0
    assert first["verifier"] == f"{task}@1"
    assert_evidence_complete(first, judges)
    judges = install(monkeypatch, FakeJudge(auto=True))
    second = score(tmp_path, mmmg_instructions, task, FIRST[task])
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)


def test_every_task_asks_through_the_hub_roles(tmp_path, image, mmmg_instructions, monkeypatch):
    """Spatial MCQs go to "spatial", OCR to "ocr"/"ocr_second", everything else to "default"."""
    roles = {role: FakeJudge(role, auto=True) for role in ("default", "spatial", "ocr", "ocr_second")}
    judges = install(monkeypatch, roles.pop("default"), **roles)
    for task in JUDGED:
        score(tmp_path, mmmg_instructions, task, FIRST[task])
    asked = {role: set(judge.templates_asked()) for role, judge in judges.items()}
    assert asked == {
        "default": {"scene", "existence", "absence", "count", "exactly_one"},
        "spatial": {"relative_horizontal", "absolute"},
        "ocr": {"ocr", "ocr_object", "ocr_chinese"},
        "ocr_second": {"ocr_chinese"},
    }


def test_params_carry_the_template_version():
    from mmverify.tasks.catalog import TASK_REGISTRY
    from mmverify.verifiers.vlm.templates import TEMPLATE_VERSION

    for task in JUDGED:
        params = TASK_REGISTRY.get(task)().params()
        assert params["templates"] == TEMPLATE_VERSION and params["roles"]


def test_scoring_error_passes_through_with_its_code(tmp_path, image, monkeypatch):
    install(monkeypatch, FakeJudge().on(None, ScoringError(ErrorCode.TIMEOUT, "slow")))
    assert score_inline(tmp_path, "i_ocr", {"text": "Hello"})["error"]["code"] == "timeout"


def test_the_configured_judge_is_part_of_the_result_key(monkeypatch, tmp_path):
    """Switching --vlm-model must rescore rather than reuse rows judged by another model."""
    from mmverify.pipelines.plan import Planner
    import json as _json

    line = _json.dumps({"task": "i_ocr", "instance": {"text": "x"}, "parts": [{"type": "text", "text": "t"}]})
    keys = []
    for model in ("model-a", "model-b", "model-a"):
        monkeypatch.setenv("MMVERIFY_VLM_BASE_URL", "http://127.0.0.1:9/v1")
        monkeypatch.setenv("MMVERIFY_VLM_MODEL", model)
        keys.append(Planner(manifest_dir=tmp_path).plan(1, line).key)
    assert keys[0] != keys[1] and keys[0] == keys[2]
