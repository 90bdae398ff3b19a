"""Multi-view consistency: generated views vs the instruction set's reference views (SSIM)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from skimage.metrics import structural_similarity as skimage_ssim

from mmverify.api import score_items
from tests.conftest import save_png, scene


@pytest.fixture
def instruction_set(tmp_path: Path, mmmg_instructions: Path) -> tuple[Path, list[np.ndarray]]:
    """A copy of i_consistency_3d_object.jsonl with the reference views of instance 0 drawn here."""
    root = tmp_path / "instructions"
    root.mkdir()
    shutil.copy(mmmg_instructions / "i_consistency_3d_object.jsonl", root)
    first = json.loads((root / "i_consistency_3d_object.jsonl").read_text().splitlines()[0])
    views = [scene(96, 128, seed=10 + i) for i in range(len(first["ref_image_list"]))]
    for k, view in zip(first["ref_image_list"], views):
        save_png(root / "image" / f"i_consistency_3d_object_{k}.png", view)
    return root, views


def _score(root: Path, tmp_path: Path, images: list[np.ndarray], instance: str = "i_consistency_3d_object/0") -> dict:
    parts = []
    for i, image in enumerate(images):
        save_png(tmp_path / f"gen_{i}.png", image)
        parts.append({"type": "image", "path": f"gen_{i}.png"})
    [row] = score_items([{"task": "i_consistency_3d_object", "instance_id": instance, "parts": parts}], base_dir=tmp_path, instructions=root)
    return row


def test_identical_views_score_one_and_noise_matches_skimage(instruction_set, tmp_path):
    root, views = instruction_set
    assert _score(root, tmp_path, views)["score"] == pytest.approx(1.0)
    rng = np.random.default_rng(0)
    noisy = [np.clip(v + rng.normal(0, 25, v.shape), 0, 255).astype(np.uint8) for v in views]
    row = _score(root, tmp_path, noisy)
    expected = np.mean([skimage_ssim(n, v, channel_axis=-1) for n, v in zip(noisy, views)])
    assert row["score"] == pytest.approx(expected, abs=1e-9) and 0.0 < row["score"] < 1.0
    assert set(row["components"]) == {f"ssim_view_{i}" for i in range(len(views))}


def test_wrong_view_count_scores_zero_and_missing_references_are_errors(instruction_set, tmp_path):
    root, views = instruction_set
    row = _score(root, tmp_path, views[:-1])
    assert row["score"] == 0.0 and row["reason"] == "wrong_image_count"
    row = _score(root, tmp_path, views, instance="i_consistency_3d_object/1")  # its references are absent
    assert row["status"] == "error" and row["error"]["code"] == "missing_media"


def test_a_reference_view_too_small_for_ssim_is_the_datas_error(instruction_set, tmp_path):
    root, views = instruction_set
    first = json.loads((root / "i_consistency_3d_object.jsonl").read_text().splitlines()[0])
    save_png(root / "image" / f"i_consistency_3d_object_{first['ref_image_list'][-1]}.png", scene(1, 40, seed=3))
    row = _score(root, tmp_path, views)
    assert row["status"] == "error" and row["error"]["code"] == "invalid_instance"
    assert f"reference view {len(views) - 1} is 40x1" in row["error"]["message"]


@pytest.mark.parametrize("indices", [[], [1.5], [True], [-1], [1e308], ["x"], {"0": 1}, [[0]]])
def test_reference_indices_are_taken_as_written_or_refused(tmp_path, indices):
    line = {"task": "i_consistency_3d_object", "instance": {"ref_image_list": indices}, "parts": []}
    [row] = score_items([line], base_dir=tmp_path, instructions=tmp_path)
    assert row["status"] == "error" and row["error"]["code"] == "invalid_instance", row


def test_reference_indices_may_be_digit_strings(instruction_set, tmp_path):
    root, views = instruction_set
    first = json.loads((root / "i_consistency_3d_object.jsonl").read_text().splitlines()[0])
    as_text = {"ref_image_list": [str(k) for k in first["ref_image_list"]]}
    parts = []
    for i, image in enumerate(views):
        save_png(tmp_path / f"gen_{i}.png", image)
        parts.append({"type": "image", "path": f"gen_{i}.png"})
    line = {"task": "i_consistency_3d_object", "instance_id": "i_consistency_3d_object/0", "instance": as_text, "parts": parts}
    [row] = score_items([line], base_dir=tmp_path, instructions=root)
    assert row["score"] == pytest.approx(1.0)
