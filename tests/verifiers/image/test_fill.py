"""Solid fills and borders: answers known by construction, and parity with the published recipe."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from mmverify.verifiers.image.fill import (
    NAMED_COLORS,
    FillParams,
    border_strip,
    check_solid_border,
    check_solid_region,
    color_matches,
    region_boxes,
    resolve_color,
)
from tests.conftest import scene
from tests.reference import fill_skimage as reference

GREEN = NAMED_COLORS["green"]


def with_border(image: np.ndarray, color, fraction: float) -> np.ndarray:
    out = image.copy()
    height, width = out.shape[:2]
    bw, bh = round(fraction * width), round(fraction * height)
    out[:bh], out[height - bh :], out[:, :bw], out[:, width - bw :] = (color,) * 4
    return out


def noisy(image: np.ndarray, sigma: float, seed: int = 0) -> np.ndarray:
    noise = np.random.default_rng(seed).normal(0, sigma, image.shape)
    return np.clip(image + noise, 0, 255).astype(np.uint8)


@pytest.mark.parametrize("shape", [(200, 200), (240, 320), (301, 199)])
def test_clean_ten_percent_border_scores_about_one(shape):
    check = check_solid_border(with_border(scene(*shape), GREEN, 0.10), "green")
    assert check.score > 0.99
    assert check.components["color_ok"] == 1.0 and check.components["overfill_penalty"] < 0.01


def test_no_border_wrong_colour_wide_border_and_full_fill_score_zero_or_low():
    base = scene(240, 240, seed=5)
    assert check_solid_border(with_border(base, NAMED_COLORS["red"], 0.10), "green").score == 0.0
    assert check_solid_border(with_border(base, GREEN, 0.30), "green").score == 0.0  # inner ring is green too
    assert check_solid_border(np.full((240, 240, 3), GREEN, np.uint8), "green").score == 0.0
    assert check_solid_border(base, "green").score < 0.1


def test_noise_lowers_the_score_monotonically():
    clean = with_border(scene(240, 240, seed=1), GREEN, 0.10)
    mask = np.zeros(clean.shape[:2], bool)
    mask[:24], mask[-24:], mask[:, :24], mask[:, -24:] = True, True, True, True
    scores = []
    for sigma in (3, 10, 30):
        image = clean.copy()
        image[mask] = noisy(clean, sigma, seed=sigma)[mask]
        scores.append(check_solid_border(image, "green").score)
    assert 1.0 > scores[0] > scores[1] > scores[2] > 0.0


@pytest.mark.parametrize("region", sorted(reference.REGIONS))
def test_each_region_filled_exactly_scores_about_one(region):
    image = scene(200, 300, seed=2)
    target, band = region_boxes(region, 300, 200)
    x0, y0, x1, y1 = target
    image[y0:y1, x0:x1] = NAMED_COLORS["blue"]
    check = check_solid_region(image, region, "blue")
    assert check.score > 0.99 and check.evidence["region_box"] == list(target)
    # the region's boxes are the published ones (rounded fractions)
    assert (target, band) == tuple(reference._box(f, 300, 200) for f in reference.REGIONS[region])


def test_fill_spilling_into_the_adjacent_band_is_penalised():
    image = scene(200, 200, seed=3)
    image[:, :150] = NAMED_COLORS["purple"]  # left half requested; half of the right half filled too
    check = check_solid_region(image, "left half", "purple")
    assert check.components["overfill_penalty"] == pytest.approx(0.5, abs=0.01)
    assert check.score == pytest.approx(0.5, abs=0.01)


def _battery():
    rng = np.random.default_rng(11)
    for i, shape in enumerate([(200, 200), (180, 260), (301, 199), (64, 96)]):
        base = scene(*shape, seed=i)
        for color in ("green", "white", "black", "orange", "cyan"):
            rgb = NAMED_COLORS[color]
            yield base, color, "border"
            yield noisy(with_border(base, rgb, 0.1), 8, seed=i), color, "border"
            yield with_border(base, rgb, 0.12), color, "border"
            filled = base.copy()
            filled[:, : shape[1] // 2] = rgb
            yield noisy(filled, float(rng.uniform(0, 25)), seed=i), color, "left half"
            yield filled, color, "right third"
            yield filled, color, "upper quarter"


@pytest.mark.parametrize("index", range(6))
def test_matches_the_published_recipe(index):
    cases = list(_battery())[index::6]
    for image, color, where in cases:
        pil = Image.fromarray(image)
        if where == "border":
            expected = reference.score_border(pil, color)
            actual = check_solid_border(image, color).score
        else:
            expected = reference.score_region(pil, where, color)
            actual = check_solid_region(image, where, color).score
        assert actual == pytest.approx(expected, abs=1e-9), (color, where, image.shape)


@pytest.mark.parametrize("shape", [(200, 200), (180, 260), (261, 180), (101, 57)])
def test_border_strip_equals_pil_crops_and_rotations(shape):
    image = scene(*shape, seed=9)
    np.testing.assert_array_equal(border_strip(image), np.asarray(reference.border(Image.fromarray(image))))


def test_colour_rules_hue_and_neutral_distance():
    assert color_matches((128, 128, 128), NAMED_COLORS["red"])[0]  # grey has hue 0: passes red (published)
    assert not color_matches((0, 0, 200), NAMED_COLORS["red"])[0]
    assert color_matches((250, 10, 60), NAMED_COLORS["red"])[0]  # hue wraps around 1.0
    assert color_matches((240, 240, 240), NAMED_COLORS["white"])[0]  # distance 26 <= 38.4
    assert not color_matches((230, 230, 230), NAMED_COLORS["white"])[0]  # distance 43.3
    ok, evidence = color_matches((20, 20, 20), NAMED_COLORS["black"])
    assert ok and evidence["rgb_distance"] == pytest.approx(34.641016, abs=1e-6)


def test_tiny_images_and_bad_parameters():
    assert check_solid_border(np.zeros((5, 5, 3), np.uint8), "black").reason == "image_too_small"
    with pytest.raises(ValueError):
        FillParams(hue_tolerance=0.7)
    with pytest.raises(ValueError):
        FillParams(win_size=4)
    with pytest.raises(ValueError, match="unknown colour"):
        check_solid_border(scene(), "mauve")
    for unusable in (5, [1.5, 0, 0], [True, 0, 0], ["1", "2", "3"], [0, 0], [0, 0, 256], {"r": 1}):
        with pytest.raises(ValueError, match="a colour name or three integers"):
            resolve_color(unusable)
    assert resolve_color([0, np.int64(128), 255]) == (0, 128, 255) and resolve_color("Green ") == resolve_color("green")
    with pytest.raises(ValueError, match="region"):
        check_solid_region(scene(), "middle half", "green")
    assert region_boxes("top half", 100, 100) == region_boxes("upper half", 100, 100)
