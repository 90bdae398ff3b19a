"""SSIM against scikit-image's structural_similarity (the reference implementation)."""

from __future__ import annotations

import numpy as np
import pytest
from skimage import data
from skimage.metrics import structural_similarity as skimage_ssim

from mmverify.verifiers.image.ssim import ssim_to_constant, structural_similarity

SHAPES = [(7, 7, 3), (8, 31, 3), (64, 48, 3), (130, 257, 3), (40, 40), (33, 20, 1)]


def _pair(shape, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 256, shape, dtype=np.uint8)
    b = np.clip(a.astype(int) // 2 + rng.integers(0, 128, shape), 0, 255).astype(np.uint8)
    return a, b


def _reference(a, b, **kwargs):
    if a.ndim == 3:
        return skimage_ssim(a, b, channel_axis=-1, **kwargs)
    return skimage_ssim(a, b, **kwargs)


@pytest.mark.parametrize("shape", SHAPES)
def test_pair_matches_skimage(shape):
    a, b = _pair(shape, 1)
    assert structural_similarity(a, b) == pytest.approx(_reference(a, b), abs=1e-10)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("value", [0, 37, 255])
def test_constant_matches_skimage(shape, value):
    a, _ = _pair(shape, 2)
    flat = np.full_like(a, value)
    expected = _reference(a, flat)
    channels = 1 if a.ndim == 2 else a.shape[2]
    assert ssim_to_constant(a, (value,) * channels) == pytest.approx(expected, abs=1e-10)


def test_per_channel_constant_and_a_real_photo():
    photo = data.astronaut()[::2, ::2]
    colour = (12, 130, 40)
    flat = np.empty_like(photo)
    flat[...] = colour
    assert ssim_to_constant(photo, colour) == pytest.approx(_reference(photo, flat), abs=1e-10)
    noisy = np.clip(photo.astype(int) + np.random.default_rng(3).integers(-20, 21, photo.shape), 0, 255).astype(np.uint8)
    assert structural_similarity(photo, noisy) == pytest.approx(_reference(photo, noisy), abs=1e-10)


def test_identical_and_flat_images():
    a, _ = _pair((20, 20, 3), 4)
    assert structural_similarity(a, a) == pytest.approx(1.0, abs=1e-12)
    flat = np.full((20, 20, 3), 90, np.uint8)
    assert ssim_to_constant(flat, (90, 90, 90)) == pytest.approx(1.0, abs=1e-12)


def test_float_images_need_a_data_range():
    a, b = _pair((30, 30, 3), 5)
    x, y = a.astype(np.float64), b.astype(np.float64)
    with pytest.raises(ValueError, match="data_range"):
        structural_similarity(x, y)
    assert structural_similarity(x, y, data_range=255) == pytest.approx(_reference(x, y, data_range=255), abs=1e-10)
    assert ssim_to_constant(x, 50.0, data_range=255) == pytest.approx(
        _reference(x, np.full_like(x, 50.0), data_range=255), abs=1e-10
    )


@pytest.mark.parametrize("win_size", [3, 11])
def test_other_window_sizes(win_size):
    a, b = _pair((40, 50, 3), 6)
    assert structural_similarity(a, b, win_size=win_size) == pytest.approx(_reference(a, b, win_size=win_size), abs=1e-10)


def test_invalid_inputs():
    a, b = _pair((6, 20, 3), 7)
    with pytest.raises(ValueError, match="smaller"):
        structural_similarity(a, b)
    a, b = _pair((20, 20, 3), 7)
    with pytest.raises(ValueError, match="odd"):
        structural_similarity(a, b, win_size=4)
    with pytest.raises(ValueError, match="shapes"):
        structural_similarity(a, b[:10])
