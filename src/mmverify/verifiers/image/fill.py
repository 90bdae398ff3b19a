"""Solid-fill checks: "the left third must be pure green", "a 10% blue border on all sides".

Published semantics (MMMG, kept as version 1):

1. Crop the region (fractions of width/height, rounded with Python's ``round``).
2. Mean RGB of the crop, truncated to int.  Named colours fail when their hue (``colorsys``) differs
   from the mean's by more than ``hue_tolerance`` on the hue circle; white/black (and any grey
   target) fail when the Euclidean RGB distance exceeds ``neutral_distance``.  A failed colour
   scores 0.
3. Otherwise: SSIM of the crop against a flat image of its mean colour, minus an over-fill penalty
   (fraction of the *adjacent* band's pixels within ``overfill_distance`` of the mean colour),
   floored at 0.

Borders use the four 10% strips, each cut to the centred square's extent, side strips rotated 90°
counter-clockwise, stacked top/left/right/bottom; the penalty uses the same construction on the
inner 0.1-0.9 crop (the ring just inside the border).
"""

from __future__ import annotations

import colorsys
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ...core.types import Check
from . import _kernels
from .ssim import DEFAULT_WIN, K1, K2

NAMED_COLORS: dict[str, tuple[int, int, int]] = {
    "green": (0, 128, 0),
    "blue": (0, 0, 255),
    "yellow": (255, 255, 0),
    "white": (255, 255, 255),
    "black": (0, 0, 0),
    "pink": (255, 128, 255),
    "red": (255, 0, 0),
    "orange": (255, 128, 0),
    "purple": (128, 0, 128),
    "cyan": (0, 255, 255),
}

_SIDE_ALIASES = {"top": "upper", "bottom": "lower", "up": "upper", "down": "lower"}
# (start, end) along the cut axis; the adjacent band the over-fill penalty looks at.
_PORTIONS: dict[str, dict[str, tuple[tuple[float, float], tuple[float, float]]]] = {
    "half": {"first": ((0.0, 0.5), (0.5, 1.0)), "last": ((0.5, 1.0), (0.0, 0.5))},
    "third": {"first": ((0.0, 0.33), (0.33, 0.67)), "last": ((0.67, 1.0), (0.33, 0.67))},
    "quarter": {"first": ((0.0, 0.25), (0.25, 0.5)), "last": ((0.75, 1.0), (0.5, 0.75))},
}
_SIDES = {"left": ("x", "first"), "right": ("x", "last"), "upper": ("y", "first"), "lower": ("y", "last")}

Box = tuple[int, int, int, int]  # x0, y0, x1, y1 (end-exclusive), like PIL's crop box


@dataclass(frozen=True)
class FillParams:
    hue_tolerance: float = 0.15
    neutral_distance: float = 38.4
    overfill_distance: float = 16.0
    border_fraction: float = 0.1
    win_size: int = DEFAULT_WIN

    def __post_init__(self) -> None:
        if not 0.0 < self.hue_tolerance < 0.5:
            raise ValueError("hue_tolerance must lie in (0, 0.5)")
        if self.neutral_distance <= 0 or self.overfill_distance < 0:
            raise ValueError("distances must be positive")
        if not 0.0 < self.border_fraction < 0.5:
            raise ValueError("border_fraction must lie in (0, 0.5)")
        if self.win_size < 3 or self.win_size % 2 == 0:
            raise ValueError("win_size must be an odd integer >= 3")


DEFAULT_PARAMS = FillParams()


def resolve_color(color: str | Sequence[int]) -> tuple[int, int, int]:
    """A named colour (``"green"``) or an explicit RGB triple."""
    if isinstance(color, str):
        key = color.strip().lower()
        if key not in NAMED_COLORS:
            raise ValueError(f"unknown colour {color!r}; known: {', '.join(NAMED_COLORS)}")
        return NAMED_COLORS[key]
    if not (
        isinstance(color, (list, tuple)) and len(color) == 3
        and all(isinstance(c, (int, np.integer)) and not isinstance(c, bool) and 0 <= c <= 255 for c in color)
    ):  # fmt: skip
        raise ValueError(f"colour must be a colour name or three integers in [0, 255], got {color!r}")
    return (int(color[0]), int(color[1]), int(color[2]))


def parse_region(region: str) -> tuple[str, str]:
    """``"left third"`` -> ``("left", "third")``; accepts top/bottom for upper/lower."""
    words = region.strip().lower().split()
    if len(words) != 2:
        raise ValueError(f"region must look like 'left half', got {region!r}")
    side = _SIDE_ALIASES.get(words[0], words[0])
    portion = words[1]
    if side not in _SIDES or portion not in _PORTIONS:
        raise ValueError(f"unknown region {region!r}; sides: {sorted(_SIDES)}, portions: {sorted(_PORTIONS)}")
    return side, portion


def _box(axis: str, span: tuple[float, float], width: int, height: int) -> Box:
    if axis == "x":
        return round(span[0] * width), 0, round(span[1] * width), height
    return 0, round(span[0] * height), width, round(span[1] * height)


def region_boxes(region: str, width: int, height: int) -> tuple[Box, Box]:
    """The region's crop box and the adjacent band used for the over-fill penalty."""
    side, portion = parse_region(region)
    axis, end = _SIDES[side]
    target, band = _PORTIONS[portion][end]
    return _box(axis, target, width, height), _box(axis, band, width, height)


def crop(image: np.ndarray, box: Box) -> np.ndarray:
    x0, y0, x1, y1 = box
    return image[y0:y1, x0:x1]


def border_strip(image: np.ndarray, fraction: float = 0.1) -> np.ndarray:
    """Stack the four border strips (cut to the centred square, sides rotated) into one image."""
    height, width = image.shape[:2]
    side = min(width, height)
    bw, bh = round(fraction * width), round(fraction * height)
    x0, x1 = (width - side) // 2, (width + side) // 2
    y0, y1 = (height - side) // 2, (height + side) // 2
    top = image[0:bh, x0:x1]
    bottom = image[height - bh : height, x0:x1]
    left = np.rot90(image[y0:y1, 0:bw])  # counter-clockwise, as PIL's rotate(90, expand=True)
    right = np.rot90(image[y0:y1, width - bw : width])
    return np.ascontiguousarray(np.concatenate([top, left, right, bottom], axis=0))


def mean_color(pixels: np.ndarray) -> tuple[int, int, int]:
    """Mean RGB truncated to int (exact: integer sums divided once)."""
    sums = _kernels.channel_sums(np.ascontiguousarray(pixels))
    count = pixels.shape[0] * pixels.shape[1]
    return tuple(int(s / count) for s in sums)  # type: ignore[return-value]


def color_matches(
    mean_rgb: Sequence[int], target_rgb: Sequence[int], params: FillParams = DEFAULT_PARAMS
) -> tuple[bool, dict[str, float]]:
    """Published colour rule: hue distance for chromatic targets, RGB distance for grey ones."""
    if target_rgb[0] == target_rgb[1] == target_rgb[2]:
        distance = math.dist(mean_rgb, target_rgb)
        return distance <= params.neutral_distance, {"rgb_distance": round(distance, 6)}
    hue_mean = colorsys.rgb_to_hsv(*mean_rgb)[0]
    hue_target = colorsys.rgb_to_hsv(*target_rgb)[0]
    delta = abs(hue_mean - hue_target)
    ok = not (params.hue_tolerance < delta < 1.0 - params.hue_tolerance)
    return ok, {"hue_delta": round(delta, 6)}


def overfill_fraction(band: np.ndarray, color: Sequence[int], max_distance: float) -> float:
    """Fraction of ``band``'s pixels within ``max_distance`` (Euclidean RGB) of ``color``."""
    pixels = band.shape[0] * band.shape[1]
    if pixels == 0:
        return 0.0
    limit = math.floor(max_distance * max_distance)  # integer squared distances
    near = _kernels.count_near(np.ascontiguousarray(band), np.asarray(color, np.int64), limit)
    return near / pixels


def score_flat_patch(
    patch: np.ndarray, band: np.ndarray, target_rgb: Sequence[int], params: FillParams = DEFAULT_PARAMS
) -> Check:
    """Colour gate, SSIM against the patch's flat mean colour, minus the band's over-fill."""
    if min(patch.shape[0], patch.shape[1]) < params.win_size:
        return Check.fail("image_too_small", patch_shape=list(patch.shape[:2]))
    mean_rgb = mean_color(patch)
    ok, colour_evidence = color_matches(mean_rgb, target_rgb, params)
    evidence = {"mean_rgb": list(mean_rgb), "target_rgb": list(target_rgb), **colour_evidence}
    if not ok:
        return Check(score=0.0, components={"color_ok": 0.0}, evidence=evidence)
    c1, c2 = (K1 * 255.0) ** 2, (K2 * 255.0) ** 2
    ssim = float(
        _kernels.ssim_constant_mean(
            np.ascontiguousarray(patch), np.asarray(mean_rgb, np.float64), params.win_size, c1, c2
        )
    )
    penalty = overfill_fraction(band, mean_rgb, params.overfill_distance)
    score = min(1.0, max(0.0, ssim - penalty))
    return Check(
        score=score,
        components={"color_ok": 1.0, "ssim": ssim, "overfill_penalty": penalty},
        evidence=evidence,
    )


def check_solid_region(
    image: np.ndarray, region: str, color: str | Sequence[int], params: FillParams = DEFAULT_PARAMS
) -> Check:
    """Score "the <region> must be pure <color>" on a uint8 RGB image."""
    height, width = image.shape[:2]
    target_box, band_box = region_boxes(region, width, height)
    result = score_flat_patch(crop(image, target_box), crop(image, band_box), resolve_color(color), params)
    return _with_evidence(result, region_box=list(target_box), penalty_box=list(band_box))


def check_solid_border(image: np.ndarray, color: str | Sequence[int], params: FillParams = DEFAULT_PARAMS) -> Check:
    """Score "a solid <color> border of ~10% of the width on all sides" on a uint8 RGB image."""
    height, width = image.shape[:2]
    f = params.border_fraction
    inner_box = (round(f * width), round(f * height), round((1 - f) * width), round((1 - f) * height))
    strip = border_strip(image, f)
    inner = crop(image, inner_box)
    band = border_strip(inner, f) if min(inner.shape[:2]) > 0 else inner
    result = score_flat_patch(strip, band, resolve_color(color), params)
    return _with_evidence(result, inner_box=list(inner_box))


def _with_evidence(check: Check, **extra: object) -> Check:
    return Check(
        score=check.score,
        passed=check.passed,
        components=check.components,
        evidence={**check.evidence, **extra},
        reason=check.reason,
    )
