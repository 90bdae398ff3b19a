"""Editing preservation: SSIM between the edited and the source image outside the edited box.

Published semantics: the generated image is resized to the source size (PIL's default bicubic
filter), the annotated box is widened by ``size // margin_divisor`` on every side (clipped to the
image), that area is set to black in both images, and SSIM is taken over the whole image.  The
widened box cropped from the resized generation is what a judge or DreamSim then inspects.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ...core.types import Check
from .fill import Box, crop
from .ssim import DEFAULT_WIN, structural_similarity


def widen_box(bbox: Sequence[float], width: int, height: int, margin_divisor: int = 10) -> Box:
    """``[x0, y0, x1, y1]`` widened by ``width // d`` / ``height // d`` and clipped to the image."""
    if len(bbox) != 4:
        raise ValueError(f"bbox must be [x0, y0, x1, y1], got {list(bbox)!r}")
    if margin_divisor < 1:
        raise ValueError("margin_divisor must be >= 1")
    x0, y0, x1, y1 = (int(v) for v in bbox)
    if x1 <= x0 or y1 <= y0:
        raise ValueError(f"bbox must have x1 > x0 and y1 > y0, got {list(bbox)!r}")
    mx, my = width // margin_divisor, height // margin_divisor
    return max(0, x0 - mx), max(0, y0 - my), min(width, x1 + mx), min(height, y1 + my)


def resize_to(image: np.ndarray, width: int, height: int, resample: str = "bicubic") -> np.ndarray:
    """Resize a uint8 RGB array with PIL (``bicubic``: PIL's default for RGB; or ``lanczos``)."""
    if image.shape[1] == width and image.shape[0] == height:
        return image
    from PIL import Image

    filters = {"bicubic": Image.Resampling.BICUBIC, "lanczos": Image.Resampling.LANCZOS}
    if resample not in filters:
        raise ValueError(f"resample must be one of {sorted(filters)}")
    return np.asarray(Image.fromarray(image).resize((width, height), filters[resample]), dtype=np.uint8)


def check_preserved_outside(
    generated: np.ndarray,
    source: np.ndarray,
    bbox: Sequence[float],
    *,
    margin_divisor: int = 10,
    win_size: int = DEFAULT_WIN,
) -> Check:
    """Score how unchanged the image is outside the (widened) edited box; 1 = identical."""
    height, width = source.shape[:2]
    resized = resize_to(generated, width, height)
    box = widen_box(bbox, width, height, margin_divisor)
    x0, y0, x1, y1 = box
    masked_generated = resized.copy()
    masked_source = np.array(source, dtype=np.uint8, copy=True)
    masked_generated[y0:y1, x0:x1] = 0
    masked_source[y0:y1, x0:x1] = 0
    if min(height, width) < win_size:
        return Check.fail("image_too_small", image_shape=[height, width])
    ssim = structural_similarity(masked_generated, masked_source, win_size=win_size)
    score = min(1.0, max(0.0, ssim))
    return Check(score=score, components={"ssim_outside": ssim}, evidence={"widened_box": list(box)})


def edited_crop(
    generated: np.ndarray, source_shape: tuple[int, ...], bbox: Sequence[float], margin_divisor: int = 10
) -> np.ndarray:
    """The widened box cut from the generation resized to the source size (what the judge sees)."""
    height, width = source_shape[:2]
    resized = resize_to(generated, width, height)
    return crop(resized, widen_box(bbox, width, height, margin_divisor))
