"""Editing preservation: SSIM outside the widened box, against skimage on explicitly masked images."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from skimage.metrics import structural_similarity as skimage_ssim

from mmverify.verifiers.image.preserve import check_preserved_outside, edited_crop, widen_box
from tests.conftest import scene


def _masked_reference(generated, source, box):
    x0, y0, x1, y1 = box
    a, b = generated.copy(), source.copy()
    a[y0:y1, x0:x1] = 0
    b[y0:y1, x0:x1] = 0
    return skimage_ssim(a, b, channel_axis=-1)


def test_widen_box_adds_margins_and_clips():
    assert widen_box([100, 50, 200, 150], 500, 400, margin_divisor=10) == (50, 10, 250, 190)
    assert widen_box([100, 50, 200, 150], 500, 400, margin_divisor=20) == (75, 30, 225, 170)
    assert widen_box([-1, 5, 505, 300], 500, 400) == (0, 0, 500, 340)  # labeller overshoot is clipped
    with pytest.raises(ValueError):
        widen_box([10, 10, 5, 20], 100, 100)
    with pytest.raises(ValueError):
        widen_box([1, 2, 3], 100, 100)


def test_changes_inside_the_box_do_not_count_changes_outside_do():
    source = scene(160, 200, seed=1)
    bbox = [60, 40, 120, 100]
    inside = source.copy()
    inside[40:100, 60:120] = 255 - inside[40:100, 60:120]
    assert check_preserved_outside(inside, source, bbox).score == pytest.approx(1.0, abs=1e-12)
    outside = source.copy()
    outside[:, :20] = 0
    check = check_preserved_outside(outside, source, bbox)
    assert 0.0 < check.score < 0.95
    box = widen_box(bbox, 200, 160)
    assert check.components["ssim_outside"] == pytest.approx(_masked_reference(outside, source, box), abs=1e-10)
    assert check.evidence["widened_box"] == list(box)


def test_generation_of_another_size_is_resized_to_the_source_first():
    source = scene(120, 160, seed=2)
    bigger = np.asarray(Image.fromarray(source).resize((320, 240), Image.Resampling.BICUBIC))
    resized_back = np.asarray(Image.fromarray(bigger).resize((160, 120), Image.Resampling.BICUBIC))
    bbox = [10, 10, 50, 50]
    expected = _masked_reference(resized_back, source, widen_box(bbox, 160, 120))
    assert check_preserved_outside(bigger, source, bbox).score == pytest.approx(expected, abs=1e-10)
    crop = edited_crop(bigger, source.shape, bbox)
    x0, y0, x1, y1 = widen_box(bbox, 160, 120)
    np.testing.assert_array_equal(crop, resized_back[y0:y1, x0:x1])
