"""The editing tasks on real MMMG rows with source / ground-truth images drawn here.

Edits are made by construction: pixels changed only inside the annotated box must leave the
preservation term at exactly 1, changes outside it must lower it (checked against scikit-image on
the masked images), and the judge (tests/tasks/fake_judge.py) or DreamSim (a scripted stand-in in
the model hub) decides the part inside the box.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pytest
from PIL import Image
from skimage.metrics import structural_similarity as skimage_ssim

from mmverify.api import score_items
from mmverify.models import hub as hub_module
from mmverify.models.base import ModelUnavailable
from tests.conftest import save_png, scene
from tests.reference import mmmg_image as ref
from tests.tasks.fake_judge import FakeJudge, failed, install, no, texts, yes
from tests.vlm_server import by_prompt, vlm_env, vlm_server  # noqa: F401  (fixtures)

JUDGED = [
    "i_edit_object_add", "i_edit_object_remove", "i_edit_object_modify", "i_edit_object_attribute",
    "i_edit_text_add", "i_edit_text_alter",
]  # fmt: skip
REFERENCE = ["i_edit_add", "i_edit_color"]
VERSIONS = {"i_edit_object_remove": 2, "i_edit_text_add": 2, "i_edit_text_alter": 2}
SIZE = 500  # the published boxes are in the coordinates of ~500-pixel sources


def rows(instructions: Path, task: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (instructions / f"{task}.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]


def painted(image: np.ndarray, box: Sequence[float], seed: int = 9) -> np.ndarray:
    """``image`` with new content inside ``box`` (clipped), nothing else touched."""
    out = image.copy()
    h, w = image.shape[:2]
    x0, y0, x1, y1 = (min(max(int(v), 0), lim) for v, lim in zip(box, (w, h, w, h)))
    out[y0:y1, x0:x1] = scene(y1 - y0, x1 - x0, seed=seed)
    return out


def widened(box: Sequence[float], width: int, height: int, divisor: int) -> tuple[int, int, int, int]:
    """The published widening, written out independently of the code under test."""
    mx, my = width // divisor, height // divisor
    x0, y0, x1, y1 = (int(v) for v in box)
    return max(0, x0 - mx), max(0, y0 - my), min(width, x1 + mx), min(height, y1 + my)


def masked_ssim(a: np.ndarray, b: np.ndarray, box: tuple[int, int, int, int]) -> float:
    x0, y0, x1, y1 = box
    a, b = a.copy(), b.copy()
    a[y0:y1, x0:x1] = 0
    b[y0:y1, x0:x1] = 0
    return float(skimage_ssim(a, b, channel_axis=-1))


@pytest.fixture(scope="module")
def source() -> np.ndarray:
    return scene(SIZE, SIZE, seed=1)


@pytest.fixture(scope="module")
def instructions(tmp_path_factory: pytest.TempPathFactory, mmmg_instructions: Path, source: np.ndarray) -> Path:
    """The published editing files, with image/<task>_<k>.png for the rows these tests use
    (read-only for the tests, so built once)."""
    root = tmp_path_factory.mktemp("instructions")
    drawn = save_png(root / "source.png", source)
    for task in JUDGED + REFERENCE:
        shutil.copy(mmmg_instructions / f"{task}.jsonl", root / f"{task}.jsonl")
    for task in JUDGED:
        for row in rows(root, task)[:3] + rows(root, task)[14:15]:
            (root / "image").mkdir(exist_ok=True)
            shutil.copy(drawn, root / "image" / f"{task}_{row['image_list'][0]}.png")
    # i_edit_add / i_edit_color: the ground truth is the source with new content painted into the
    # box; the sources themselves (image_list) are deliberately absent: they are never compared
    for task in REFERENCE:
        first = rows(root, task)[0]
        save_png(root / "image" / f"{task}_{first['ref_image_list'][0]}.png", painted(source, first["bbox"]))
    return root


def score(
    tmp_path: Path, instructions: Path | None, task: str, instance_id: str, images: Sequence[np.ndarray], profile: str = "mmmg"
) -> dict:
    parts: list[dict[str, Any]] = [{"type": "text", "text": "Here is the edit."}]
    for i, image in enumerate(images):
        save_png(tmp_path / f"gen_{i}.png", image)
        parts.append({"type": "image", "path": f"gen_{i}.png"})
    item = {"task": task, "instance_id": instance_id, "parts": parts}
    [row] = score_items([item], base_dir=tmp_path, instructions=instructions, profile=profile)
    return row


def score_inline(tmp_path: Path, task: str, instance: dict, images: Sequence[np.ndarray]) -> dict:
    parts = []
    for i, image in enumerate(images):
        save_png(tmp_path / f"gen_{i}.png", image)
        parts.append({"type": "image", "path": f"gen_{i}.png"})
    [row] = score_items([{"task": task, "instance": instance, "parts": parts}], base_dir=tmp_path)
    return row


class ScriptedSimilarity:
    """An ImageSimilarity stand-in: fixed answers, records the pairs it was given."""

    name = "scripted-dreamsim"

    def __init__(self, value: float | BaseException = 0.8) -> None:
        self.value = value
        self.pairs: list[tuple[np.ndarray, np.ndarray]] = []

    def ensure_loaded(self) -> None:
        pass

    def similarity(self, pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[float]:
        self.pairs.extend((np.array(a), np.array(b)) for a, b in pairs)
        if isinstance(self.value, BaseException):
            raise self.value
        return [self.value] * len(pairs)


def use_similarity(monkeypatch: pytest.MonkeyPatch, fake: ScriptedSimilarity) -> ScriptedSimilarity:
    fresh = hub_module.ModelHub()  # no on-disk caches from the environment
    fresh._instances["image_similarity"] = fake
    monkeypatch.setattr(hub_module, "_HUB", fresh)
    return fake


# -- preservation ----------------------------------------------------------------------------------
def test_unchanged_outside_scores_preservation_one_and_the_judge_sees_the_crop(tmp_path, instructions, source, monkeypatch):
    [row0] = rows(instructions, "i_edit_object_add")[:1]  # "exactly one puppy", bbox [122, 47, 500, 476]
    generated = painted(source, row0["bbox"])
    judges = install(monkeypatch, FakeJudge().on("existence", yes(), target="exactly one puppy"))
    row = score(tmp_path, instructions, "i_edit_object_add", "i_edit_object_add/0", [generated])
    assert row["status"] == "scored" and row["score"] == 1.0 and row["passed"] is None
    assert row["components"] == {"ssim_outside": 1.0, "objects_present": 1.0}
    box = widened(row0["bbox"], SIZE, SIZE, 20)
    assert box == (97, 22, 500, 500) and row["evidence"]["widened_box"] == list(box)
    [[seen]] = judges["default"].images
    x0, y0, x1, y1 = box
    assert np.array_equal(seen, generated[y0:y1, x0:x1])
    [entry] = row["evidence"]["judge"]
    assert entry["step"] == "object_0" and entry["template"] == "existence@1" and entry["verdict"] is True
    assert row["evidence"]["present"] == [True] and row["evidence"]["objects"] == ["exactly one puppy"]

    install(monkeypatch, FakeJudge().on("existence", no("There is no dog on the suitcase.")))
    row = score(tmp_path, instructions, "i_edit_object_add", "i_edit_object_add/0", [generated])
    assert row["score"] == 0.0 and row["components"] == {"ssim_outside": 1.0, "objects_present": 0.0}


def test_changes_outside_lower_preservation_exactly_as_skimage_on_the_masked_images(tmp_path, monkeypatch):
    small = scene(96, 128, seed=3)
    bbox = [40, 30, 90, 70]
    save_png(tmp_path / "image" / "i_edit_object_modify_0.png", small)
    rng = np.random.default_rng(0)
    generated = np.clip(painted(small, bbox).astype(int) + rng.integers(-40, 41, small.shape), 0, 255).astype(np.uint8)
    install(monkeypatch, FakeJudge().on("existence", yes(), target="cat").on("existence", no()))
    instance = {"image_list": [0], "bbox": bbox, "object": ["a cat", "a dog"]}
    row = score_inline(tmp_path, "i_edit_object_modify", instance, [generated])
    expected = masked_ssim(generated, small, widened(bbox, 128, 96, 20))
    assert 0.0 < expected < 0.9
    assert row["components"]["ssim_outside"] == pytest.approx(expected, abs=1e-9)
    assert row["components"]["objects_present"] == 0.5
    assert row["score"] == pytest.approx(expected * 0.5, abs=1e-9)


def test_a_generation_of_another_size_is_resized_to_the_source(tmp_path, instructions, source, monkeypatch):
    [row0] = rows(instructions, "i_edit_object_add")[:1]
    edited = painted(source, row0["bbox"])
    bigger = np.asarray(Image.fromarray(edited).resize((750, 600), Image.Resampling.BICUBIC))
    judges = install(monkeypatch, FakeJudge().on("existence", yes()))
    row = score(tmp_path, instructions, "i_edit_object_add", "i_edit_object_add/0", [bigger])
    assert row["evidence"]["generated_size"] == [750, 600] and row["evidence"]["compared_size"] == [SIZE, SIZE]
    back = np.asarray(Image.fromarray(bigger).resize((SIZE, SIZE), Image.Resampling.BICUBIC))
    box = widened(row0["bbox"], SIZE, SIZE, 20)
    assert row["components"]["ssim_outside"] == pytest.approx(masked_ssim(back, source, box), abs=1e-9)
    assert 0.5 < row["score"] < 1.0  # the round trip blurs a little, nothing more
    x0, y0, x1, y1 = box
    assert np.array_equal(judges["default"].images[0][0], back[y0:y1, x0:x1])


def test_zero_preservation_scores_zero_without_asking(tmp_path, monkeypatch):
    small = scene(96, 128, seed=3)
    save_png(tmp_path / "image" / "i_edit_object_add_0.png", small)
    judges = install(monkeypatch, FakeJudge())  # any question would be unscripted
    row = score_inline(tmp_path, "i_edit_object_add", {"image_list": [0], "bbox": [10, 10, 20, 20], "object": "x"}, [255 - small])
    assert row["status"] == "scored" and row["score"] == 0.0
    assert row["components"]["ssim_outside"] < 0.0 and judges.all_calls() == []
    assert row["evidence"]["not_asked"] == ["object_0"]


def test_published_boxes_beyond_the_image_are_clipped(tmp_path, instructions, source, monkeypatch):
    # i_edit_object_remove/14: bbox [350, 118, 701, 450] on a 500-pixel source
    row14 = rows(instructions, "i_edit_object_remove")[14]
    assert row14["bbox"][2] > SIZE
    install(monkeypatch, FakeJudge().on("existence", no()))
    row = score(tmp_path, instructions, "i_edit_object_remove", "i_edit_object_remove/14", [painted(source, row14["bbox"])])
    assert row["evidence"]["widened_box"] == [325, 93, 500, 475] and row["score"] == 1.0


# -- what the judge is asked ---------------------------------------------------------------------
@pytest.mark.parametrize("profile", ["mmmg", "strict"])
def test_remove_asks_presence_per_object_and_inverts_it(tmp_path, instructions, source, monkeypatch, profile):
    row0 = rows(instructions, "i_edit_object_remove")[0]  # "a gray laptop"
    judges = install(monkeypatch, FakeJudge().on("existence", no("Only a white laptop is left."), target="a gray laptop"))
    generated = painted(source, row0["bbox"])
    row = score(tmp_path, instructions, "i_edit_object_remove", "i_edit_object_remove/0", [generated], profile=profile)
    assert row["score"] == 1.0 and row["components"] == {"ssim_outside": 1.0, "objects_absent": 1.0}
    assert judges["default"].templates_asked() == ["existence"] and row["evidence"]["present"] == [False]
    assert "free of" not in row["evidence"]["judge"][0]["prompt"]

    install(monkeypatch, FakeJudge().on("existence", yes("The gray laptop is still on the desk.")))
    row = score(tmp_path, instructions, "i_edit_object_remove", "i_edit_object_remove/0", [generated], profile=profile)
    assert row["score"] == 0.0 and row["components"] == {"ssim_outside": 1.0, "objects_absent": 0.0}


@pytest.mark.parametrize("task", ["i_edit_object_add", "i_edit_object_remove"])
@pytest.mark.parametrize("seed", range(6))
def test_object_edits_combine_as_published(tmp_path, monkeypatch, task, seed):
    """preservation (SSIM outside the widened, blacked-out box, floored at 0) x mean of the verdicts
    (inverted for removal), on random boxes, edits and verdicts."""
    rng = np.random.default_rng(seed)
    height, width = int(rng.integers(40, 90)), int(rng.integers(40, 90))
    source = scene(height, width, seed=seed)
    save_png(tmp_path / "image" / f"{task}_0.png", source)
    x0, y0 = int(rng.integers(-5, width // 2)), int(rng.integers(-5, height // 2))
    bbox = [x0, y0, int(rng.integers(x0 + 5, width + 10)), int(rng.integers(y0 + 5, height + 10))]
    generated = np.clip(painted(source, bbox, seed=seed).astype(int) + rng.integers(-25, 26, source.shape), 0, 255).astype(np.uint8)
    objects = [f"object number {i}" for i in range(int(rng.integers(1, 4)))]
    present = [bool(rng.random() < 0.5) for _ in objects]
    judge = FakeJudge()
    for name, verdict in zip(objects, present):
        judge.on("existence", yes() if verdict else no(), target=name)
    install(monkeypatch, judge)
    row = score_inline(tmp_path, task, {"image_list": [0], "bbox": bbox, "object": objects}, [generated])
    box = ref.edit_box(bbox, width, height, 20)
    kept = max(0.0, ref.outside_ssim(generated, source, box))
    verdicts = ref.scene_objects_score(True, present, exclude=task == "i_edit_object_remove")
    assert row["score"] == pytest.approx(kept * verdicts, abs=1e-9)
    assert all(np.array_equal(seen[0], ref.edit_crop(generated, box)) for seen in judge.images)


@pytest.mark.parametrize("task", ["i_edit_object_modify", "i_edit_object_attribute"])
def test_replacing_and_altering_ask_existence_of_the_annotated_object(tmp_path, instructions, source, monkeypatch, task):
    row0 = rows(instructions, task)[0]
    judges = install(monkeypatch, FakeJudge().on("existence", yes(), target=row0["object"]))
    row = score(tmp_path, instructions, task, f"{task}/0", [painted(source, row0["bbox"])])
    assert row["score"] == 1.0 and judges["default"].calls[0].values == {"target": row0["object"]}


@pytest.mark.parametrize(
    ("task", "index", "reading", "mmmg", "strict"),
    [
        ("i_edit_text_add", 1, ["EXIT"], 1.0, 1.0),  # "EXIT"
        ("i_edit_text_add", 1, ["exit!"], 1.0, 1.0),  # normalised as the OCR task does
        ("i_edit_text_add", 1, ["EXT"], 0.0, 0.0),
        ("i_edit_text_add", 1, [], 0.0, 0.0),
        ("i_edit_text_add", 14, ["cat-broke the toilet"], 0.5, 1.0),  # mmmg deletes the hyphen: 2 edits / 4
        ("i_edit_text_alter", 0, [], 1.0, 1.0),  # text "": the brand name must be gone
        ("i_edit_text_alter", 0, ["Budweiser"], 0.0, 0.0),
    ],
)
def test_text_edits_read_the_crop(tmp_path, instructions, source, monkeypatch, task, index, reading, mmmg, strict):
    row_i = rows(instructions, task)[index]
    for profile, expected in (("mmmg", mmmg), ("strict", strict)):
        judges = install(monkeypatch, FakeJudge(), ocr=FakeJudge("ocr-vlm").on("ocr", texts(reading)))
        row = score(tmp_path, instructions, task, f"{task}/{index}", [painted(source, row_i["bbox"])], profile=profile)
        assert row["score"] == pytest.approx(expected) and row["components"]["ocr_accuracy"] == pytest.approx(expected)
        assert row["evidence"]["reference"] == row_i["text"] and row["evidence"]["reading"] == reading
        assert judges["default"].calls == [] and judges["ocr"].templates_asked() == ["ocr"]
        assert row["evidence"]["judge"][0]["role"] == "ocr" and row["evidence"]["judge"][0]["template"] == "ocr@2"
        assert "small or unclear text" in row["evidence"]["judge"][0]["prompt"]


# -- DreamSim edits against the ground truth ---------------------------------------------------------
def test_reference_edit_compares_the_ground_truth_not_the_source(tmp_path, instructions, source, monkeypatch):
    row0 = rows(instructions, "i_edit_add")[0]  # bbox [24, 109, 478, 205], image_list [0, 20], ref [40]
    truth = painted(source, row0["bbox"])
    fake = use_similarity(monkeypatch, ScriptedSimilarity(0.8))
    row = score(tmp_path, instructions, "i_edit_add", "i_edit_add/0", [truth])
    assert row["status"] == "scored", row
    assert row["score"] == pytest.approx(0.8) and row["components"] == {"ssim_outside": 1.0, "similarity": 0.8}
    box = widened(row0["bbox"], SIZE, SIZE, 10)
    assert row["evidence"]["widened_box"] == list(box) == [0, 59, SIZE, 255]
    [(generated_crop, truth_crop)] = fake.pairs
    x0, y0, x1, y1 = box
    assert np.array_equal(generated_crop, truth[y0:y1, x0:x1]) and np.array_equal(truth_crop, truth[y0:y1, x0:x1])

    # the unedited source differs from the ground truth only inside the box: preservation stays 1,
    # and DreamSim sees the source's crop next to the ground truth's
    fake = use_similarity(monkeypatch, ScriptedSimilarity(0.25))
    row = score(tmp_path, instructions, "i_edit_add", "i_edit_add/0", [source])
    assert row["score"] == pytest.approx(0.25) and np.array_equal(fake.pairs[0][0], source[y0:y1, x0:x1])

    changed = truth.copy()
    changed[300:] = 255 - changed[300:]
    use_similarity(monkeypatch, ScriptedSimilarity(1.0))
    row = score(tmp_path, instructions, "i_edit_add", "i_edit_add/0", [changed])
    expected = masked_ssim(changed, truth, box)
    assert row["components"]["ssim_outside"] == pytest.approx(expected, abs=1e-9) and row["score"] < 0.7


def test_edit_color_published_rows_score_against_their_ground_truth(tmp_path, instructions, source, monkeypatch):
    row0 = rows(instructions, "i_edit_color")[0]  # bbox [250, 189, 279, 226], image_list [0, 20], ref [40]
    truth = painted(source, row0["bbox"])
    fake = use_similarity(monkeypatch, ScriptedSimilarity(0.7))
    row = score(tmp_path, instructions, "i_edit_color", "i_edit_color/0", [truth])
    assert row["status"] == "scored", row
    assert row["score"] == pytest.approx(0.7) and row["components"] == {"ssim_outside": 1.0, "similarity": 0.7}
    box = widened(row0["bbox"], SIZE, SIZE, 10)
    assert row["evidence"]["widened_box"] == list(box) == [200, 139, 329, 276]
    [(generated_crop, truth_crop)] = fake.pairs
    assert np.array_equal(generated_crop, ref.edit_crop(truth, box)) and np.array_equal(truth_crop, ref.edit_crop(truth, box))


def test_edit_color_instances_without_images_or_box_name_the_missing_fields(tmp_path, monkeypatch):
    fake = use_similarity(monkeypatch, ScriptedSimilarity())
    row = score_inline(tmp_path, "i_edit_color", {"instruction": "Make the car red."}, [scene(64, 64)])
    assert row["status"] == "error" and row["error"]["code"] == "invalid_instance"
    assert all(name in row["error"]["message"] for name in ("bbox", "image_list", "ref_image_list"))
    assert fake.pairs == []


def test_edit_color_with_the_fields_scores(tmp_path, monkeypatch):
    truth = scene(96, 128, seed=2)
    save_png(tmp_path / "image" / "i_edit_color_7.png", truth)
    use_similarity(monkeypatch, ScriptedSimilarity(0.5))
    instance = {"instruction": "x", "image_list": [3, 4], "ref_image_list": [7], "bbox": [20, 20, 60, 50]}
    row = score_inline(tmp_path, "i_edit_color", instance, [truth])
    assert row["score"] == pytest.approx(0.5) and row["components"]["ssim_outside"] == 1.0

    use_similarity(monkeypatch, ScriptedSimilarity(ModelUnavailable("dreamsim", "weights not found")))
    assert score_inline(tmp_path, "i_edit_color", instance, [truth])["error"]["code"] == "model_unavailable"
    row = score_inline(tmp_path, "i_edit_color", {**instance, "ref_image_list": [8]}, [truth])
    assert row["error"]["code"] == "missing_media"


# -- failures and shape ------------------------------------------------------------------------------
@pytest.mark.parametrize("task", JUDGED + REFERENCE)
def test_wrong_image_count_scores_zero_without_asking(tmp_path, instructions, source, monkeypatch, task):
    judges = install(monkeypatch, FakeJudge(auto=True))
    fake = use_similarity(monkeypatch, ScriptedSimilarity())
    none = score(tmp_path, instructions, task, f"{task}/0", [])
    two = score(tmp_path, instructions, task, f"{task}/0", [source, source])
    assert (none["status"], none["score"], none["reason"]) == ("scored", 0.0, "no_image")
    assert (two["status"], two["score"], two["reason"]) == ("scored", 0.0, "wrong_image_count")
    assert judges.all_calls() == [] and fake.pairs == []


@pytest.mark.parametrize("profile", ["mmmg", "strict"])
@pytest.mark.parametrize("task", JUDGED)
def test_judge_failure_is_an_error_row(tmp_path, instructions, source, monkeypatch, task, profile):
    for cause, code in [(failed(), "judge_failed"), ("Answer: Maybe", "judge_unparseable"), ("", "judge_unparseable")]:
        install(monkeypatch, FakeJudge().on(None, cause))
        row = score(tmp_path, instructions, task, f"{task}/0", [source], profile=profile)
        if profile == "mmmg" and task.startswith("i_edit_text") and isinstance(cause, str):
            # the published list reader reads a reply without a one-line [...] as an empty reading
            assert row["status"] == "scored" and row["evidence"]["reading"] == [], row
            continue
        assert row["status"] == "error" and row["score"] is None and row["error"]["code"] == code, row


def test_missing_source_image_is_missing_media(tmp_path, instructions, source, monkeypatch):
    judges = install(monkeypatch, FakeJudge(auto=True))
    row = score(tmp_path, instructions, "i_edit_object_add", "i_edit_object_add/5", [source])  # no image drawn
    assert row["status"] == "error" and row["error"]["code"] == "missing_media"
    assert "i_edit_object_add_5.png" in row["error"]["message"] and judges.all_calls() == []


@pytest.mark.parametrize(
    ("task", "instance"),
    [
        ("i_edit_object_add", {"image_list": [0], "object": "a cat"}),
        ("i_edit_object_add", {"image_list": [0], "bbox": [1, 2, 3], "object": "a cat"}),
        ("i_edit_object_add", {"image_list": [0], "bbox": [1, 2, "3", 4], "object": "a cat"}),
        ("i_edit_object_add", {"image_list": [0], "bbox": [30, 10, 20, 40], "object": "a cat"}),
        ("i_edit_object_add", {"image_list": [0], "bbox": [900, 10, 950, 40], "object": "a cat"}),
        ("i_edit_object_add", {"image_list": [], "bbox": [1, 2, 30, 40], "object": "a cat"}),
        ("i_edit_object_remove", {"image_list": [0], "bbox": [1, 2, 30, 40], "object": ""}),
        ("i_edit_text_add", {"image_list": [0], "bbox": [1, 2, 30, 40], "text": 5}),
        ("i_edit_add", {"image_list": [0, 1], "bbox": [1, 2, 30, 40]}),
    ],
)
def test_bad_annotations_are_invalid_instance(tmp_path, monkeypatch, task, instance):
    for k in (0, 1, 2):
        save_png(tmp_path / "image" / f"{task}_{k}.png", scene(96, 128))
    judges = install(monkeypatch, FakeJudge(auto=True))
    row = score_inline(tmp_path, task, instance, [scene(96, 128)])
    assert row["status"] == "error" and row["error"]["code"] == "invalid_instance", row
    assert judges.all_calls() == []


# -- determinism, params, end to end ------------------------------------------------------------------
@pytest.mark.parametrize("profile", ["mmmg", "strict"])
@pytest.mark.parametrize("task", JUDGED + REFERENCE)
def test_determinism_and_evidence(tmp_path, instructions, source, monkeypatch, task, profile):
    generated = painted(source, rows(instructions, task)[0]["bbox"], seed=4)
    results = []
    for _ in range(2):
        judges = install(monkeypatch, FakeJudge(auto=True))
        use_similarity(monkeypatch, ScriptedSimilarity(0.6))
        results.append(score(tmp_path, instructions, task, f"{task}/0", [generated], profile=profile))
    first, second = results
    assert first["status"] == "scored" and first["verifier"] == f"{task}@{VERSIONS.get(task, 1)}:{profile}"
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)
    if task in JUDGED:
        assert len(first["evidence"]["judge"]) == len(judges.all_calls()) >= 1


def test_params_name_templates_judges_and_margins():
    from mmverify.tasks.catalog import TASK_REGISTRY
    from mmverify.verifiers.vlm.templates import TEMPLATE_KEY

    for task in JUDGED:
        params = TASK_REGISTRY.get(task)().params()
        assert params["templates"] == TEMPLATE_KEY and params["margin_divisor"] == 20 and "judges" in params
    assert TASK_REGISTRY.get("i_edit_text_add")().params()["roles"] == ["ocr"]
    for task in ("i_edit_text_add", "i_edit_text_alter"):
        cls = TASK_REGISTRY.get(task)
        assert (cls().params()["normalization"], cls.build("strict").params()["normalization"]) == ("mmmg", "unicode")
    for task in REFERENCE:
        assert TASK_REGISTRY.get(task)().params() == {
            "margin_divisor": 10, "resample": "bicubic",
            "family": "ReferenceEdit", "family_version": 2, "args": {},
        }  # fmt: skip


def test_end_to_end_through_the_http_judge(vlm_env, tmp_path, instructions, source, monkeypatch):
    monkeypatch.setattr(hub_module, "_HUB", None)
    row0 = rows(instructions, "i_edit_object_attribute")[0]  # "exactly one yellow plastic suitcase"
    generated = painted(source, row0["bbox"])
    vlm_env.script(by_prompt({"yellow plastic suitcase": "The suitcase in the crop is yellow plastic.\n**Answer:** Yes"}))
    row = score(tmp_path, instructions, "i_edit_object_attribute", "i_edit_object_attribute/0", [generated])
    assert row["status"] == "scored" and row["score"] == 1.0, row
    [request] = vlm_env.requests
    x0, y0, x1, y1 = widened(row0["bbox"], SIZE, SIZE, 20)
    assert np.array_equal(request.images[0], generated[y0:y1, x0:x1])
    assert row["evidence"]["judge"][0]["judge"] == "test-vlm"

    again = score(tmp_path, instructions, "i_edit_object_attribute", "i_edit_object_attribute/0", [generated])
    assert vlm_env.count == 1 and again["score"] == 1.0  # the reply cache answered the rerun


def test_decoding_processes_decode_the_generation_and_the_instance_images_alike(tmp_path, instructions, source, monkeypatch):
    """Scored together with decoding processes, an edit's generated image and its ground truth (an
    instance image) are both decoded there, and the row is the one decoded in place."""
    from mmverify.core.decoding import DecodePool

    row0 = rows(instructions, "i_edit_add")[0]
    changed = painted(source, row0["bbox"])
    changed[300:] = 255 - changed[300:]
    save_png(tmp_path / "gen.png", changed)
    item = {"task": "i_edit_add", "instance_id": "i_edit_add/0", "parts": [{"type": "image", "path": "gen.png"}]}
    use_similarity(monkeypatch, ScriptedSimilarity(0.6))
    [alone] = score_items([item], base_dir=tmp_path, instructions=instructions)
    decoded: list[str] = []
    original = DecodePool.image

    def recorded(self, source, *args, **kwargs):
        decoded.append(Path(source).name)
        return original(self, source, *args, **kwargs)

    monkeypatch.setattr(DecodePool, "image", recorded)
    together = score_items([item, item], base_dir=tmp_path, instructions=instructions, in_flight=2, decode_processes=1)
    assert [{**row, "line": 1} for row in together] == [alone, alone] and alone["status"] == "scored" and alone["components"]["ssim_outside"] < 1.0
    assert sorted(decoded) == sorted(["gen.png", f"i_edit_add_{row0['ref_image_list'][0]}.png"] * 2)
