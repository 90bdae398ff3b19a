"""The six self-coherence tasks on real MMMG rows, with a scripted judge (tests/tasks/fake_judge.py).

Each test writes the model's text the way its instruction asks, scripts the judge, scores through
the public API and checks the combination, which questions were asked of which role, and what the
row keeps.  Text that does not say what the instruction asked for scores 0 with a reason and asks
no judge; judge failures are error rows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mmverify.api import score_items
from mmverify.models import hub as hub_module
from mmverify.tasks.coherence import first_json, format_regex, match_names, parse_count
from mmverify.core.errors import GenerationFault, ScoringError
from mmverify.core.types import Instance
from tests.conftest import save_png, scene
from tests.tasks.fake_judge import FakeJudge, Judges, failed, install, letter, no, texts, yes
from tests.vlm_server import by_prompt, vlm_env, vlm_server  # noqa: F401  (fixtures)

# a well-formed text for the first published row of each task
GOOD_TEXT = {
    "it_coherence_count": "<count>4</count>",
    "it_coherence_color": '{"chair": "red", "microwave": "blue", "vase": "yellow"}',
    "it_coherence_size": '["paper clip", "stapler", "monitor"]',  # row 1: the first row's relation is area
    "it_coherence_spacial_relative": '["A", "B"]',
    "it_coherence_spacial_absolute": '["C", "B"]',
    "it_coherence_ocr": '{"text": "Dream big and work hard"}',
}
ROW = {task: f"{task}/0" for task in GOOD_TEXT} | {"it_coherence_size": "it_coherence_size/1"}
TASKS = list(GOOD_TEXT)


@pytest.fixture
def image(tmp_path: Path) -> np.ndarray:
    picture = scene(96, 128, seed=7)
    save_png(tmp_path / "gen.png", picture)
    save_png(tmp_path / "other.png", scene(96, 128, seed=8))
    return picture


def score(tmp_path: Path, instructions: Path | None, task: str, instance: str | dict, text: str | None, images=("gen.png",)) -> dict:
    parts: list[dict[str, Any]] = [{"type": "image", "path": name} for name in images]
    if text is not None:
        parts.append({"type": "text", "text": text})
    item: dict[str, Any] = {"task": task, "parts": parts}
    item.update({"instance": instance} if isinstance(instance, dict) else {"instance_id": instance})
    [row] = score_items([item], base_dir=tmp_path, instructions=instructions)
    return row


def assert_zero(row: dict, reason: str, judges: Judges) -> None:
    assert (row["status"], row["score"], row["reason"]) == ("scored", 0.0, reason), row
    assert judges.all_calls() == []


# -- count ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "answer", "expected"), [("<count>4</count>", "C", 1.0), ("There are <count> 4 </count>.", "D", 0.0), ("<count>6</count>", "E", 1.0)])
def test_count_letter_must_be_the_claimed_counts(tmp_path, image, mmmg_instructions, monkeypatch, text, answer, expected):
    judges = install(monkeypatch, FakeJudge().on("count", letter(answer), target="benches"))
    row = score(tmp_path, mmmg_instructions, "it_coherence_count", "it_coherence_count/0", text)
    assert row["score"] == expected and row["passed"] is (expected == 1.0)
    assert row["evidence"]["claimed_count"] == int(text.split(">")[1].split("<")[0])
    assert row["evidence"]["answered_letter"] == answer
    assert judges["default"].templates_asked() == ["count"]
    assert np.array_equal(judges["default"].images[0][0], image)


@pytest.mark.parametrize(
    ("text", "reason"),
    [("I drew four benches.", "missing_count"), ("<count>7</count>", "count_out_of_range"), ("<count>2</count>", "count_out_of_range"), ("<count>four</count>", "missing_count")],
)
def test_count_text_errors_score_zero_without_asking(tmp_path, image, mmmg_instructions, monkeypatch, text, reason):
    judges = install(monkeypatch, FakeJudge(auto=True))
    row = score(tmp_path, mmmg_instructions, "it_coherence_count", "it_coherence_count/0", text)
    assert_zero(row, reason, judges)
    assert row["passed"] is False and row["evidence"]["text"] == text


# -- colour -----------------------------------------------------------------------------------------
def test_color_map_then_one_existence_question_per_object(tmp_path, image, mmmg_instructions, monkeypatch):
    judges = install(monkeypatch, FakeJudge().on("existence", yes()))
    text = 'Here is the mapping: {"Chair": "RED", "microwave": "blue", "vase": "yellow"}'  # case does not matter
    row = score(tmp_path, mmmg_instructions, "it_coherence_color", "it_coherence_color/0", text)
    assert row["score"] == 1.0 and row["components"] == {"object_0": 1.0, "object_1": 1.0, "object_2": 1.0}
    assert row["evidence"]["color_map"] == {"chair": "red", "microwave": "blue", "vase": "yellow"}
    targets = [call.values["target"] for call in judges["default"].calls]
    assert targets[0] == "exactly one chair, whose colour is mostly red, with no other major colour"
    assert targets[1] == "exactly one microwave, whose colour is mostly blue"  # naturally multi-coloured
    assert "no other major colour" in targets[2]

    judges = install(monkeypatch, FakeJudge().on("existence", no(), target="microwave").on("existence", yes()))
    row = score(tmp_path, mmmg_instructions, "it_coherence_color", "it_coherence_color/0", text)
    assert row["score"] == 0.0 and row["components"] == {"object_0": 1.0, "object_1": 0.0}
    assert row["evidence"]["not_asked"] == ["object_2"] and len(judges["default"].calls) == 2


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("chair: red, microwave: blue, vase: yellow", "missing_color_map"),
        ('{"chair": "red", "microwave": "blue"}', "color_map_mismatch"),
        ('{"chair": "red", "microwave": "red", "vase": "yellow"}', "color_map_mismatch"),  # colours must differ
        ('{"chair": "green", "microwave": "blue", "vase": "yellow"}', "color_map_mismatch"),
        ('{"chair": "red", "table": "blue", "vase": "yellow"}', "color_map_mismatch"),
        ('{"chair": ["red"], "microwave": "blue", "vase": "yellow"}', "color_map_mismatch"),
    ],
)
def test_color_map_errors_score_zero(tmp_path, image, mmmg_instructions, monkeypatch, text, reason):
    judges = install(monkeypatch, FakeJudge(auto=True))
    assert_zero(score(tmp_path, mmmg_instructions, "it_coherence_color", "it_coherence_color/0", text), reason, judges)


# -- size -------------------------------------------------------------------------------------------
def test_size_checks_every_pair_of_the_ranking(tmp_path, image, mmmg_instructions, monkeypatch):
    judges = install(monkeypatch, FakeJudge().on("existence", yes()))
    row = score(tmp_path, mmmg_instructions, "it_coherence_size", "it_coherence_size/1", GOOD_TEXT["it_coherence_size"])
    assert row["score"] == 1.0 and row["components"] == {"pair_0": 1.0, "pair_1": 1.0, "pair_2": 1.0}
    assert [call.values["target"] for call in judges["default"].calls] == [
        "exactly one paper clip, exactly one stapler, and the stapler is obviously larger than the paper clip",
        "exactly one paper clip, exactly one monitor, and the monitor is obviously larger than the paper clip",
        "exactly one stapler, exactly one monitor, and the monitor is obviously larger than the stapler",
    ]

    install(monkeypatch, FakeJudge().on("existence", no(), target="monitor is obviously larger than the paper").on("existence", yes()))
    row = score(tmp_path, mmmg_instructions, "it_coherence_size", "it_coherence_size/1", GOOD_TEXT["it_coherence_size"])
    assert row["score"] == 0.0 and row["components"] == {"pair_0": 1.0, "pair_1": 0.0}
    assert row["evidence"]["not_asked"] == ["pair_2"]


def test_size_relation_words(tmp_path, image, mmmg_instructions, monkeypatch):
    # row 4 compares length, row 8 height
    judges = install(monkeypatch, FakeJudge().on("existence", yes()))
    score(tmp_path, mmmg_instructions, "it_coherence_size", "it_coherence_size/4", '["toothbrush", "comb", "toothpaste tube"]')
    score(tmp_path, mmmg_instructions, "it_coherence_size", "it_coherence_size/8", '["wine glass", "bowl", "wine bottle"]')
    targets = [call.values["target"] for call in judges["default"].calls]
    assert "the comb is obviously longer than the toothbrush" in targets[0]
    assert "the bowl is obviously taller than the wine glass" in targets[3]
    bad = score(tmp_path, None, "it_coherence_size", {"object": ["a", "b"], "relation": "weight"}, '["a", "b"]')
    assert bad["error"]["code"] == "invalid_instance"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("paper clip < stapler < monitor", "missing_ranking"),
        ('["paper clip", "stapler"]', "ranking_mismatch"),
        ('["paper clip", "stapler", "stapler"]', "ranking_mismatch"),
        ('["paper clip", "stapler", "laptop"]', "ranking_mismatch"),
        ("[1, 2, 3]", "missing_ranking"),
    ],
)
def test_size_ranking_errors_score_zero(tmp_path, image, mmmg_instructions, monkeypatch, text, reason):
    judges = install(monkeypatch, FakeJudge(auto=True))
    assert_zero(score(tmp_path, mmmg_instructions, "it_coherence_size", "it_coherence_size/1", text), reason, judges)


# -- position ---------------------------------------------------------------------------------------
def test_relative_gates_then_the_models_letters(tmp_path, image, mmmg_instructions, monkeypatch):
    # row 0: the laptop left/right of the coffee mug, then the notebook higher/lower than the laptop
    spatial = FakeJudge("spatial-vlm").on("relative_horizontal", letter("A"), first="laptop").on("relative_vertical", letter("B"))
    judges = install(monkeypatch, FakeJudge().on("exactly_one", yes()), spatial=spatial)
    row = score(tmp_path, mmmg_instructions, "it_coherence_spacial_relative", "it_coherence_spacial_relative/0", '["A", "B"]')
    assert row["score"] == 1.0 and row["passed"] is True
    assert [c.values["target"] for c in judges["default"].calls] == ["laptop", "coffee mug", "notebook"]
    assert [c.values for c in spatial.calls] == [{"first": "laptop", "second": "coffee mug"}, {"first": "notebook", "second": "laptop"}]
    assert row["evidence"]["claimed"] == ["A", "B"] and row["evidence"]["answered"] == ["A", "B"]
    assert [e["role"] for e in row["evidence"]["judge"]] == ["default"] * 3 + ["spatial"] * 2

    # lower-case letters are the model's letters too; a disagreement stops the questions
    spatial = FakeJudge().on("relative_horizontal", letter("C"))
    install(monkeypatch, FakeJudge().on("exactly_one", yes()), spatial=spatial)
    row = score(tmp_path, mmmg_instructions, "it_coherence_spacial_relative", "it_coherence_spacial_relative/0", '["a", "b"]')
    assert row["score"] == 0.0 and row["components"] == {"exactly_one": 1.0, "position_0": 0.0}
    assert row["evidence"]["not_asked"] == ["position_1"] and spatial.templates_asked() == ["relative_horizontal"]

    spatial = FakeJudge()
    install(monkeypatch, FakeJudge().on("exactly_one", no("Two mugs.")), spatial=spatial)
    row = score(tmp_path, mmmg_instructions, "it_coherence_spacial_relative", "it_coherence_spacial_relative/0", '["A", "B"]')
    assert row["score"] == 0.0 and spatial.calls == []
    assert row["evidence"]["not_asked"] == ["exactly_one_1", "exactly_one_2", "position_0", "position_1"]


def test_absolute_quadrants_must_be_the_models(tmp_path, image, mmmg_instructions, monkeypatch):
    # row 0: the blender and the cutting board
    spatial = FakeJudge().on("absolute", letter("C"), target="blender").on("absolute", letter("B"), target="cutting board")
    install(monkeypatch, FakeJudge().on("exactly_one", yes()), spatial=spatial)
    row = score(tmp_path, mmmg_instructions, "it_coherence_spacial_absolute", "it_coherence_spacial_absolute/0", 'Answers: ["C", "B"]')
    assert row["score"] == 1.0 and row["components"] == {"exactly_one": 1.0, "position_0": 1.0, "position_1": 1.0}

    spatial = FakeJudge().on("absolute", letter("C"), target="blender").on("absolute", letter("E"))  # centre: never a model letter
    install(monkeypatch, FakeJudge().on("exactly_one", yes()), spatial=spatial)
    row = score(tmp_path, mmmg_instructions, "it_coherence_spacial_absolute", "it_coherence_spacial_absolute/0", '["C", "B"]')
    assert row["score"] == 0.0 and row["components"]["position_1"] == 0.0


@pytest.mark.parametrize(
    ("task", "text", "reason"),
    [
        ("it_coherence_spacial_absolute", "C and B", "missing_letters"),
        ("it_coherence_spacial_absolute", '["C"]', "bad_letters"),
        ("it_coherence_spacial_absolute", '["C", "E"]', "bad_letters"),  # the instruction offers A-D
        ("it_coherence_spacial_relative", '["A", "D"]', "bad_letters"),
        ("it_coherence_spacial_relative", '["A", "B", "C"]', "bad_letters"),
        ("it_coherence_spacial_relative", "['A', 'B']", "missing_letters"),  # not JSON
    ],
)
def test_letter_errors_score_zero(tmp_path, image, mmmg_instructions, monkeypatch, task, text, reason):
    judges = install(monkeypatch, FakeJudge(auto=True))
    row = score(tmp_path, mmmg_instructions, task, f"{task}/0", text)
    assert_zero(row, reason, judges)
    assert row["passed"] is False


# -- text -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("row_id", "text", "written"),
    [
        (0, '{"text": "Dream big and work hard"}', "Dream big and work hard"),  # JSON format, the whiteboard
        (3, "$Good fortune finds you soon", "Good fortune finds you soon"),  # "$(.*)"
        (12, "**Welcome home dear friends**", "Welcome home dear friends"),  # "\*\*(.*?)\*\*"
        (1, "Card:\n<text>Happy birthday to you</text>", "Happy birthday to you"),
    ],
)
def test_ocr_reads_the_models_own_text(tmp_path, image, mmmg_instructions, monkeypatch, row_id, text, written):
    target = json.loads((mmmg_instructions / "it_coherence_ocr.jsonl").read_text().splitlines()[row_id])["object"]
    ocr = FakeJudge("ocr-vlm").on("ocr_object", texts([written.upper() + "!"]), target=target)
    judges = install(monkeypatch, FakeJudge(), ocr=ocr)
    row = score(tmp_path, mmmg_instructions, "it_coherence_ocr", f"it_coherence_ocr/{row_id}", text)
    assert row["score"] == 1.0 and row["components"] == {"wer": 0.0}
    assert row["evidence"]["claimed_text"] == written and row["evidence"]["object"] == target
    assert judges["default"].calls == [] and ocr.templates_asked() == ["ocr_object"]


def test_ocr_score_is_one_minus_wer(tmp_path, image, mmmg_instructions, monkeypatch):
    install(monkeypatch, FakeJudge(), ocr=FakeJudge().on("ocr_object", texts(["Dream big", "and work"])))
    row = score(tmp_path, mmmg_instructions, "it_coherence_ocr", "it_coherence_ocr/0", GOOD_TEXT["it_coherence_ocr"])
    assert row["score"] == pytest.approx(0.8) and row["components"]["wer"] == pytest.approx(0.2)
    install(monkeypatch, FakeJudge(), ocr=FakeJudge().on("ocr", texts(["one two three four five six seven"])))
    row = score(tmp_path, None, "it_coherence_ocr", {"format": "<text>(.*?)</text>"}, "<text>a b</text>")  # no object: whole image
    assert row["score"] == 0.0 and row["components"]["wer"] > 1


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Dream big and work hard", "missing_text"),
        ('{"text": ""}', "missing_text"),
        ('{"text": "Dream"}', "text_length"),
        ('{"text": "one two three four five six seven eight nine ten eleven"}', "text_length"),
    ],
)
def test_ocr_text_errors_score_zero(tmp_path, image, mmmg_instructions, monkeypatch, text, reason):
    judges = install(monkeypatch, FakeJudge(auto=True))
    assert_zero(score(tmp_path, mmmg_instructions, "it_coherence_ocr", "it_coherence_ocr/0", text), reason, judges)


def test_ocr_formats_are_literal_text_around_one_group(mmmg_instructions):
    lines = (mmmg_instructions / "it_coherence_ocr.jsonl").read_text(encoding="utf-8").splitlines()
    every = [json.loads(line)["format"] for line in lines]
    instance = Instance("x", {})
    for fmt in every + [r"<text>(.*?)</text>", r"^#(.*)$"]:
        assert format_regex(instance, fmt).groups == 1
    for fmt in [r"(a+)+$(.*)", r"(.*)(.*)", r"x|(.*)", r"[ab](.*)", r"(.*?)+", "no group", r"\(.*\)"]:
        with pytest.raises(ScoringError) as info:
            format_regex(instance, fmt)
        assert info.value.code == "invalid_instance"


# -- shared parsing --------------------------------------------------------------------------------
def test_parsers():
    assert first_json('noise {bad} then {"a": "b"} and {"c": "d"}', dict) == {"a": "b"}
    assert first_json("[not json] [\"x\"]", list) == ["x"]
    assert first_json("nothing here", list) is None
    assert first_json("[" * 50_000 + ' ["a"]', list) is None  # only the first brackets are tried: bounded time
    assert match_names(["TV", "Carpet ", "poster"], ["carpet", "tv", "poster"]) == ["tv", "carpet", "poster"]
    assert match_names(["tv", "tv", "poster"], ["carpet", "tv", "poster"]) is None
    assert parse_count("<COUNT>5</COUNT> and <count>9</count>") == 5  # the first tag counts
    with pytest.raises(GenerationFault):
        parse_count("<count>13</count>")


# -- every task: shape, judge failures, evidence ---------------------------------------------------------
@pytest.mark.parametrize("task", TASKS)
def test_response_shape_faults(tmp_path, image, mmmg_instructions, monkeypatch, task):
    judges = install(monkeypatch, FakeJudge(auto=True))
    none = score(tmp_path, mmmg_instructions, task, ROW[task], GOOD_TEXT[task], images=())
    two = score(tmp_path, mmmg_instructions, task, ROW[task], GOOD_TEXT[task], images=("gen.png", "other.png"))
    silent = score(tmp_path, mmmg_instructions, task, ROW[task], None)
    blank = score(tmp_path, mmmg_instructions, task, ROW[task], "  \n")
    assert [r["reason"] for r in (none, two, silent, blank)] == ["no_image", "wrong_image_count", "no_text", "no_text"]
    assert all(r["status"] == "scored" and r["score"] == 0.0 for r in (none, two, silent, blank))
    assert judges.all_calls() == []


@pytest.mark.parametrize("task", TASKS)
def test_judge_failures_are_error_rows(tmp_path, image, mmmg_instructions, monkeypatch, task):
    for reply, code in [(failed(), "judge_failed"), ("I cannot tell.\nAnswer: Maybe", "judge_unparseable"), ("", "judge_unparseable")]:
        install(monkeypatch, FakeJudge().on(None, reply))
        row = score(tmp_path, mmmg_instructions, task, ROW[task], GOOD_TEXT[task])
        assert row["status"] == "error" and row["score"] is None and row["passed"] is None, row
        assert row["error"]["code"] == code


@pytest.mark.parametrize("task", TASKS)
def test_evidence_and_determinism(tmp_path, image, mmmg_instructions, monkeypatch, task):
    judges = install(monkeypatch, FakeJudge(auto=True))
    first = score(tmp_path, mmmg_instructions, task, ROW[task], GOOD_TEXT[task])
    assert first["status"] == "scored" and 0.0 <= first["score"] <= 1.0 and first["verifier"] == f"{task}@1"
    entries = first["evidence"]["judge"]
    assert len(entries) == len(judges.all_calls()) > 0
    assert all(e["template"].endswith("@1") and e["reply"] and e["verdict"] is not None for e in entries)
    install(monkeypatch, FakeJudge(auto=True))
    second = score(tmp_path, mmmg_instructions, task, ROW[task], GOOD_TEXT[task])
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)


@pytest.mark.parametrize(
    ("task", "instance"),
    [
        ("it_coherence_count", {"object": ["cats", "dogs"]}),
        ("it_coherence_color", {"object": ["a", "b"], "color": ["red"]}),
        ("it_coherence_color", {"object": ["a", "A"], "color": ["red", "blue"]}),
        ("it_coherence_spacial_relative", {"object": [["a", "b"]]}),
        ("it_coherence_spacial_relative", {"object": [["a", "b", "c"], ["a", "b"]]}),
        ("it_coherence_spacial_absolute", {"object": ["a", "a"]}),
        ("it_coherence_ocr", {"format": "(a+)+(.*)"}),
    ],
)
def test_bad_annotations_are_invalid_instance(tmp_path, image, monkeypatch, task, instance):
    judges = install(monkeypatch, FakeJudge(auto=True))
    row = score(tmp_path, None, task, instance, "<count>4</count>")
    assert row["status"] == "error" and row["error"]["code"] == "invalid_instance"
    assert judges.all_calls() == []


def test_roles_and_params():
    from mmverify.tasks.catalog import TASK_REGISTRY

    roles = {task: TASK_REGISTRY.get(task)().params()["roles"] for task in TASKS}
    assert roles["it_coherence_ocr"] == ["ocr"] and roles["it_coherence_spacial_relative"] == ["default", "spatial"]
    assert TASK_REGISTRY.get("it_coherence_ocr")().params()["word_range"] == [2, 10]
    with pytest.raises(ValueError):
        TASK_REGISTRY.get("it_coherence_ocr")(word_range=(5, 2))


# -- through the real HTTP judge ---------------------------------------------------------------------
def test_count_end_to_end_through_the_http_judge(vlm_env, tmp_path, image, mmmg_instructions, monkeypatch):
    monkeypatch.setattr(hub_module, "_HUB", None)
    vlm_env.script(by_prompt({"Count the benches": "1. left bench\n2. middle bench\n3. right bench\n4. far bench\n**Answer:** C"}))
    row = score(tmp_path, mmmg_instructions, "it_coherence_count", "it_coherence_count/0", "<count>4</count>")
    assert row["status"] == "scored" and row["score"] == 1.0, row
    [request] = vlm_env.requests
    assert np.array_equal(request.images[0], image) and "F. more than 6" in request.prompt
    assert row["evidence"]["judge"][0]["judge"] == "test-vlm"

    again = score(tmp_path, mmmg_instructions, "it_coherence_count", "it_coherence_count/0", "<count>4</count>")
    assert vlm_env.count == 1 and (again["score"], again["key"]) == (1.0, row["key"])  # the reply cache answered
