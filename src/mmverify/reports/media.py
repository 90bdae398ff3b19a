"""Media for the report: downscaled image thumbnails, compressed audio, and the boxes verifiers checked.

Images are decoded by :mod:`mmverify.core.media` (the same limits as scoring), shrunk to at most
``THUMB_SIDE`` pixels and re-encoded as PNG (few colours) or JPEG (photographs).  Audio is mixed to mono,
resampled, cut to ``MAX_AUDIO_S`` and encoded as MP3 (WAV mu-law where the installed libsndfile
has no MP3 encoder).  Boxes stay in the original image's pixel coordinates; the page scales them.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from ..core.media import MediaSource, load_audio, load_image, resample
from ..verifiers.image.fill import DEFAULT_PARAMS

THUMB_SIDE = 256
JPEG_QUALITY = 78
PNG_MAX_COLORS = 256  # thumbnails with at most this many colours are stored as PNG
AUDIO_RATE = 22050  # the rate every published audio check analyses
MAX_AUDIO_S = 60.0
MP3_QUALITY = 0.6  # libsndfile's VBR compression level: 0 best quality .. 1 smallest

Box = list[float]


@dataclass(frozen=True)
class Thumbnail:
    uri: str
    width: int  # the original image's size: boxes are drawn in these coordinates
    height: int


def _data_uri(mime: str, payload: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(payload).decode('ascii')}"


def encode_thumbnail(array: np.ndarray, side: int = THUMB_SIDE) -> str:
    """``array`` (uint8 RGB) shrunk to fit ``side`` x ``side``: PNG for images of few colours
    (drawings, flat fills: exact and small), JPEG for photographs."""
    from PIL import Image

    image = Image.fromarray(array)
    image.thumbnail((side, side), Image.Resampling.LANCZOS)
    buffer = io.BytesIO()
    if image.getcolors(maxcolors=PNG_MAX_COLORS) is not None:
        image.save(buffer, format="PNG")
        return _data_uri("image/png", buffer.getvalue())
    image.save(buffer, format="JPEG", quality=JPEG_QUALITY, optimize=True)
    return _data_uri("image/jpeg", buffer.getvalue())


def image_thumbnail(source: MediaSource, side: int = THUMB_SIDE) -> Thumbnail:
    array = load_image(source)
    return Thumbnail(encode_thumbnail(array, side), int(array.shape[1]), int(array.shape[0]))


def load_report_audio(source: MediaSource) -> np.ndarray:
    """Mono float32 at :data:`AUDIO_RATE`, decoded as the audio tasks decode it."""
    samples, _ = load_audio(source, AUDIO_RATE)
    return samples


def encode_audio(samples: np.ndarray, rate: int = AUDIO_RATE) -> str:
    """A playable data URI of the first :data:`MAX_AUDIO_S` seconds: MP3 when libsndfile can write
    it, else 8-bit mu-law WAV."""
    import soundfile as sf

    clipped = np.clip(samples[: int(MAX_AUDIO_S * rate)], -1.0, 1.0)
    buffer = io.BytesIO()
    try:
        sf.write(buffer, clipped, rate, format="MP3", subtype="MPEG_LAYER_III", compression_level=MP3_QUALITY, bitrate_mode="VARIABLE")
        return _data_uri("audio/mpeg", buffer.getvalue())
    except (sf.LibsndfileError, TypeError, ValueError, RuntimeError):
        buffer = io.BytesIO()
        sf.write(buffer, resample(clipped, rate, 16000), 16000, format="WAV", subtype="ULAW")
        return _data_uri("audio/wav", buffer.getvalue())


# -- boxes -------------------------------------------------------------------------------------------


def _box(value: Any) -> Box | None:
    if isinstance(value, (list, tuple)) and len(value) == 4 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        return [float(v) for v in value]
    return None


def _overlay(kind: str, box: Sequence[float], label: str) -> dict[str, Any]:
    return {"kind": kind, "box": [round(float(v), 2) for v in box], "label": label}


def border_rects(width: int, height: int, fraction: float) -> list[Box]:
    """The four strips the border check stacks: top and bottom cut to the centred square's width,
    left and right to its height (:func:`mmverify.verifiers.image.fill.border_strip`)."""
    side = min(width, height)
    bw, bh = round(fraction * width), round(fraction * height)
    x0, x1 = (width - side) // 2, (width + side) // 2
    y0, y1 = (height - side) // 2, (height + side) // 2
    return [[x0, 0, x1, bh], [x0, height - bh, x1, height], [0, y0, bw, y1], [width - bw, y0, width, y1]]


def border_overlays(inner: Box, width: int, height: int, fraction: float = DEFAULT_PARAMS.border_fraction) -> list[dict[str, Any]]:
    """Strips scored for colour and flatness, and the strips of the inner crop used for over-fill."""
    overlays = [_overlay("region", r, "border strip (colour, SSIM)") for r in border_rects(width, height, fraction)]
    ix0, iy0, ix1, iy1 = (int(v) for v in inner)
    for x0, y0, x1, y1 in border_rects(ix1 - ix0, iy1 - iy0, fraction):
        overlays.append(_overlay("penalty", [x0 + ix0, y0 + iy0, x1 + ix0, y1 + iy0], "inner band (over-fill penalty)"))
    return overlays


def _scaled(box: Box, sx: float, sy: float) -> Box:
    return [box[0] * sx, box[1] * sy, box[2] * sx, box[3] * sy]


def edit_overlays(evidence: Mapping[str, Any], width: int, height: int) -> list[dict[str, Any]]:
    """The annotated edit box and its widened version, from the compared image's size to this one's."""
    size = evidence.get("compared_size")
    if not (isinstance(size, list) and len(size) == 2 and all(isinstance(v, (int, float)) and v > 0 for v in size)):
        return []
    sx, sy = width / float(size[0]), height / float(size[1])
    overlays = []
    widened, bbox = _box(evidence.get("widened_box")), _box(evidence.get("bbox"))
    if widened is not None:
        overlays.append(_overlay("widened", _scaled(widened, sx, sy), "widened edit box (blacked out for SSIM; judged crop)"))
    if bbox is not None:
        overlays.append(_overlay("edit", _scaled(bbox, sx, sy), "annotated edit box"))
    return overlays


def image_overlays(evidence: Mapping[str, Any], width: int, height: int) -> list[dict[str, Any]]:
    """Every box the row's evidence names, in this image's pixel coordinates."""
    overlays = []
    region, penalty, inner = (_box(evidence.get(k)) for k in ("region_box", "penalty_box", "inner_box"))
    if region is not None:
        overlays.append(_overlay("region", region, "checked region (colour, SSIM)"))
    if penalty is not None:
        overlays.append(_overlay("penalty", penalty, "adjacent band (over-fill penalty)"))
    if inner is not None:
        overlays += border_overlays(inner, width, height)
    return overlays + edit_overlays(evidence, width, height)
