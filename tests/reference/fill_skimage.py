"""Straightforward solid-fill scoring with PIL crops and skimage SSIM (the published recipe).

Independent of mmverify's implementation: it is the yardstick for correctness tests and the
baseline in benchmarks/fill.py.
"""

from __future__ import annotations

import colorsys

import numpy as np
from PIL import Image
from skimage.metrics import structural_similarity

COLORS = {
    "green": (0, 128, 0), "blue": (0, 0, 255), "yellow": (255, 255, 0), "white": (255, 255, 255),
    "black": (0, 0, 0), "pink": (255, 128, 255), "red": (255, 0, 0), "orange": (255, 128, 0),
    "purple": (128, 0, 128), "cyan": (0, 255, 255),
}  # fmt: skip
REGIONS = {  # region -> (x0, y0, x1, y1) fractions, penalty band fractions
    "left half": ((0, 0, 0.5, 1), (0.5, 0, 1, 1)),
    "right half": ((0.5, 0, 1, 1), (0, 0, 0.5, 1)),
    "upper half": ((0, 0, 1, 0.5), (0, 0.5, 1, 1)),
    "lower half": ((0, 0.5, 1, 1), (0, 0, 1, 0.5)),
    "left third": ((0, 0, 0.33, 1), (0.33, 0, 0.67, 1)),
    "right third": ((0.67, 0, 1, 1), (0.33, 0, 0.67, 1)),
    "upper third": ((0, 0, 1, 0.33), (0, 0.33, 1, 0.67)),
    "lower third": ((0, 0.67, 1, 1), (0, 0.33, 1, 0.67)),
    "left quarter": ((0, 0, 0.25, 1), (0.25, 0, 0.5, 1)),
    "right quarter": ((0.75, 0, 1, 1), (0.5, 0, 0.75, 1)),
    "upper quarter": ((0, 0, 1, 0.25), (0, 0.25, 1, 0.5)),
    "lower quarter": ((0, 0.75, 1, 1), (0, 0.5, 1, 0.75)),
}


def _box(fractions, width, height):
    x0, y0, x1, y1 = fractions
    return round(x0 * width), round(y0 * height), round(x1 * width), round(y1 * height)


def color_ssim(patch: Image.Image, color: str):
    avg = tuple(np.mean(np.array(patch).reshape(-1, 3), axis=0).astype(int))
    target = COLORS[color]
    if color in ("white", "black"):
        if np.sqrt(np.sum((np.array(avg) - np.array(target)) ** 2)) > 38.4:
            return 0.0, avg
    elif 0.15 < abs(colorsys.rgb_to_hsv(*avg)[0] - colorsys.rgb_to_hsv(*target)[0]) < 0.85:
        return 0.0, avg
    flat = np.array(Image.new("RGB", patch.size, avg))
    return structural_similarity(np.array(patch), flat, channel_axis=-1), avg


def overfill(patch: Image.Image, color) -> float:
    pixels = np.array(patch).reshape(-1, 3).astype(np.int64)
    distance = np.sqrt(np.sum((pixels - np.array(color)) ** 2, axis=1))
    return float(np.sum(distance <= 16) / (patch.size[0] * patch.size[1]))


def border(image: Image.Image) -> Image.Image:
    width, height = image.size
    m = min(width, height)
    bw, bh = round(0.1 * width), round(0.1 * height)
    top = image.crop(((width - m) // 2, 0, (width + m) // 2, bh))
    bottom = image.crop(((width - m) // 2, height - bh, (width + m) // 2, height))
    left = image.crop((0, (height - m) // 2, bw, (height + m) // 2)).rotate(90, expand=True)
    right = image.crop((width - bw, (height - m) // 2, width, (height + m) // 2)).rotate(90, expand=True)
    canvas = Image.new("RGB", (m, 2 * bh + 2 * bw), (255, 255, 255))
    y = 0
    for strip in (top, left, right, bottom):
        canvas.paste(strip, (0, y))
        y += strip.size[1]
    return canvas


def score_region(image: Image.Image, region: str, color: str) -> float:
    target, band = REGIONS[region]
    width, height = image.size
    ssim, avg = color_ssim(image.crop(_box(target, width, height)), color)
    if ssim == 0.0:
        return 0.0
    return max(0.0, ssim - overfill(image.crop(_box(band, width, height)), avg))


def score_border(image: Image.Image, color: str) -> float:
    width, height = image.size
    ssim, avg = color_ssim(border(image), color)
    if ssim == 0.0:
        return 0.0
    inner = image.crop((round(0.1 * width), round(0.1 * height), round(0.9 * width), round(0.9 * height)))
    return max(0.0, ssim - overfill(border(inner), avg))
