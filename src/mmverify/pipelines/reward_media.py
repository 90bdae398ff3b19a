"""In-memory media (PIL images, numpy arrays, tensors, waveforms, bytes, paths, data URLs) turned
into manifest parts with inline, deterministically encoded bytes."""

from __future__ import annotations

import base64
import io
import math
import os
import struct
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..core.media import DEFAULT_LIMITS, MediaLimits, over_limits_stand_in

_IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".webp", ".bmp", ".gif", ".tif", ".tiff"}
_AUDIO_SUFFIXES = {".wav", ".flac", ".ogg", ".mp3", ".opus", ".aiff", ".aif"}
NON_FINITE_IMAGE = b"mmverify: image with non-finite pixel values"


class NonFiniteImage(ValueError):
    """A float image holding NaN or infinity (the generator's fault, not the caller's)."""


# In-memory media over the limits are judged by their shape alone, before anything is converted
# or encoded (that would hold several copies of them), and sent as a stand-in that decodes as
# their refusal: the row is the generator's 0 (unreadable_image / unreadable_audio,
# media_too_large), as for a file that size.


def _over_pixels(height: int, width: int, limits: MediaLimits) -> str | None:
    if height * width > limits.max_pixels:
        return f"an in-memory image of {width}x{height} pixels is over the limit of {limits.max_pixels:,} pixels"
    return None


def _over_samples(shape: tuple[int, ...], sample_rate: Any, limits: MediaLimits) -> str | None:
    if len(shape) not in (1, 2):
        return None  # refused by its shape when it is encoded
    frames, samples = max(shape), math.prod(shape)
    if samples > limits.max_samples:
        return f"in-memory audio of {samples:,} samples is over the limit of {limits.max_samples:,}"
    if isinstance(sample_rate, (int, np.integer)) and sample_rate > 0 and frames / sample_rate > limits.max_seconds:
        return f"in-memory audio of {frames / sample_rate:,.1f} s is over the limit of {limits.max_seconds:,.1f} s"
    return None


def _shape_of(value: Any) -> tuple[int, ...]:
    """An array's or tensor's shape, read without converting it."""
    shape = getattr(value, "shape", None)
    return tuple(int(n) for n in shape) if shape is not None else tuple(np.shape(value))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _is_torch_tensor(value: Any) -> bool:
    return type(value).__module__.startswith("torch") and hasattr(value, "detach")


def _as_numpy(value: Any) -> np.ndarray:
    if _is_torch_tensor(value):
        tensor = value.detach().cpu()
        if tensor.is_floating_point():
            tensor = tensor.float()  # bfloat16/half have no numpy dtype
        return tensor.numpy()
    return np.asarray(value)


def to_uint8_image(value: Any, channels_first: bool | None = None) -> np.ndarray:
    """An image array as ``uint8`` HW / HWC.

    Floats are taken to lie in [0, 1] and mapped as ``round(x * 255)`` (half to even) clipped to
    [0, 255] -- the conversion image-RL trainers apply before their own reward models -- computed
    in float32, or in float64 for float64 arrays.  ``uint16``
    reads as the 16-bit PNG of it does (grey rounded from [0, 65535], colour by its high byte);
    other integers are clipped to [0, 255].  Layout:
    ``channels_first`` True (CHW), False (HWC) or None: torch tensors are read channels-first and
    numpy arrays channels-last unless only the other reading has a channel axis of size 1, 3 or 4.
    Raises ``ValueError`` for non-finite floats, which callers turn into an unreadable image.
    """
    return _uint8_pixels(_image_layout(value, channels_first))


def _reads_channels_first(shape: tuple[int, ...], tensor: bool, channels_first: bool | None) -> bool:
    """Whether a 3-D image of ``shape`` is read CHW (see :func:`to_uint8_image`)."""
    first, last = shape[0] in (1, 3, 4), shape[-1] in (1, 3, 4)
    if channels_first is None:
        channels_first = first if tensor else not last
        if channels_first and not first and last:
            channels_first = False
        elif not channels_first and not last and first:
            channels_first = True
    return channels_first


def _height_width(value: Any, channels_first: bool | None) -> tuple[int, int] | None:
    """The image's height and width from its shape alone (None where it is no image's shape)."""
    shape = _shape_of(value)
    if len(shape) == 2:
        return shape[0], shape[1]
    if len(shape) == 3:
        return shape[1:] if _reads_channels_first(shape, _is_torch_tensor(value), channels_first) else shape[:2]  # type: ignore[return-value]
    return None


def _image_layout(value: Any, channels_first: bool | None) -> np.ndarray:
    """``value`` as an HW or HWC array of its own dtype (views only: no pixel is converted)."""
    array = _as_numpy(value)
    if array.ndim == 3:
        if _reads_channels_first(array.shape, _is_torch_tensor(value), channels_first):
            array = np.moveaxis(array, 0, -1)
        if array.shape[-1] not in (1, 3, 4):
            raise ValueError(f"cannot read an image of shape {tuple(array.shape)} (need 1, 3 or 4 channels)")
        if array.shape[-1] == 1:
            array = array[..., 0]
    elif array.ndim != 2:
        raise ValueError(f"an image array must have 2 or 3 dimensions, got shape {tuple(array.shape)}")
    return array


def _uint8_pixels(array: np.ndarray) -> np.ndarray:
    if array.dtype == np.uint8:
        return np.ascontiguousarray(array)
    if array.dtype == np.bool_:
        return np.ascontiguousarray(array.astype(np.uint8) * 255)
    if np.issubdtype(array.dtype, np.floating):
        if not np.isfinite(array).all():
            raise NonFiniteImage("image has non-finite pixel values")
        exact = np.float64 if array.dtype.itemsize >= 8 else np.float32  # half and bfloat16 computed in float32
        return np.ascontiguousarray(np.clip(np.round(array.astype(exact) * exact(255)), 0, 255).astype(np.uint8))
    if array.dtype == np.uint16:  # 16-bit samples, as the 16-bit PNG of them reads
        if array.ndim == 3:  # colour: Pillow keeps the high byte
            return np.ascontiguousarray((array >> 8).astype(np.uint8))
        scaled = np.round(array.astype(np.float64) * (255.0 / 65535.0))  # grey: the loader rounds
        return np.ascontiguousarray(np.clip(scaled, 0, 255).astype(np.uint8))
    if np.issubdtype(array.dtype, np.integer):
        return np.ascontiguousarray(np.clip(array, 0, 255).astype(np.uint8))
    raise ValueError(f"unsupported image dtype {array.dtype}")


def png_bytes(array: np.ndarray) -> bytes:
    """Deterministic PNG (no metadata)."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


def image_bytes(array: np.ndarray) -> bytes:
    """A uint8 image encoded losslessly and deterministically for an inline part: BMP for gray/RGB
    (raw pixels: ~40x faster to write than even uncompressed PNG, which filters every row), PNG
    for RGBA (BMP alpha support varies between decoders)."""
    from PIL import Image

    if array.ndim == 3 and array.shape[-1] == 4:
        return png_bytes(array)
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="BMP")
    return buffer.getvalue()


def wav_bytes(samples: Any, sample_rate: int) -> bytes:
    """Deterministic WAV: IEEE float32 for float input, 16-bit PCM for int16; (n,) or (n, channels)."""
    array = _as_numpy(samples)
    if array.ndim == 2 and array.shape[0] <= 8 < array.shape[1]:
        array = array.T  # (channels, n) as torch audio APIs return it
    if array.ndim not in (1, 2):
        raise ValueError(f"audio must be (n,) or (n, channels), got shape {tuple(array.shape)}")
    if not isinstance(sample_rate, (int, np.integer)) or isinstance(sample_rate, bool) or not 0 < sample_rate < 2**32:
        raise ValueError(f"sample_rate must be a positive integer (a WAV header's field), got {sample_rate!r}")
    channels = 1 if array.ndim == 1 else array.shape[1]
    if array.dtype == np.int16:
        fmt_tag, width, payload = 1, 2, array.astype("<i2").tobytes()
    elif np.issubdtype(array.dtype, np.floating):
        fmt_tag, width, payload = 3, 4, array.astype("<f4").tobytes()
    else:
        raise ValueError(f"audio samples must be float or int16, got {array.dtype}")
    frames = array.shape[0]
    rate = int(sample_rate)
    fmt = struct.pack("<HHIIHH", fmt_tag, channels, rate, rate * channels * width, channels * width, width * 8)
    chunks = b"fmt " + struct.pack("<I", len(fmt)) + fmt
    if fmt_tag == 3:
        chunks += b"fact" + struct.pack("<II", 4, frames)
    chunks += b"data" + struct.pack("<I", len(payload)) + payload
    return b"RIFF" + struct.pack("<I", 4 + len(chunks)) + b"WAVE" + chunks


def sniff_media(data: bytes) -> str:
    """``"image"`` or ``"audio"`` from an encoded payload's magic bytes."""
    head = bytes(data[:16])
    if head.startswith((b"\x89PNG", b"\xff\xd8\xff", b"GIF8", b"BM", b"II*\x00", b"MM\x00*")) or (
        head[:4] == b"RIFF" and head[8:12] == b"WEBP"
    ):
        return "image"
    if (head[:4] == b"RIFF" and head[8:12] == b"WAVE") or head.startswith((b"fLaC", b"OggS", b"ID3", b"FORM")):
        return "audio"
    if len(head) > 1 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0:  # MPEG audio frame sync
        return "audio"
    raise ValueError("cannot tell whether these bytes are an image or audio; pass {'type': ..., 'data': ...}")


def image_part(value: Any, channels_first: bool | None = None, limits: MediaLimits = DEFAULT_LIMITS) -> dict[str, Any]:
    """An image part from a PIL image, an array/tensor (see :func:`to_uint8_image`), encoded bytes
    or a path; an image over ``limits.max_pixels`` is sent as the stand-in of its refusal."""
    if type(value).__module__.startswith("PIL."):
        from PIL import Image

        if isinstance(value, Image.Image):
            too_large = _over_pixels(value.height, value.width, limits)
            if too_large is not None:
                return {"type": "image", "data": _b64(over_limits_stand_in(too_large))}
            if value.mode in ("RGB", "RGBA", "L"):
                return {"type": "image", "data": _b64(image_bytes(np.asarray(value)))}
            buffer = io.BytesIO()
            try:  # other modes (16-bit, palette, LA) go as PNG, for the media loader's normalisation
                value.save(buffer, format="PNG", compress_level=1)
            except (OSError, ValueError):  # modes PNG cannot hold (CMYK, YCbCr, ...)
                return {"type": "image", "data": _b64(image_bytes(np.asarray(value.convert("RGB"))))}
            return {"type": "image", "data": _b64(buffer.getvalue())}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"type": "image", "data": _b64(bytes(value))}
    if isinstance(value, (str, os.PathLike)):
        return {"type": "image", "path": os.fspath(value)}
    size = _height_width(value, channels_first)
    too_large = _over_pixels(*size, limits) if size is not None else None
    if too_large is not None:
        return {"type": "image", "data": _b64(over_limits_stand_in(too_large))}
    try:
        array = to_uint8_image(value, channels_first)
    except NonFiniteImage:
        return {"type": "image", "data": _b64(NON_FINITE_IMAGE)}
    return {"type": "image", "data": _b64(image_bytes(array))}


def audio_part(value: Any, sample_rate: Any = None, limits: MediaLimits = DEFAULT_LIMITS) -> dict[str, Any]:
    """An audio part from samples and their rate (deterministic WAV), encoded bytes or a path;
    samples over ``limits`` (their number, or their duration) are sent as the stand-in of their
    refusal."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"type": "audio", "data": _b64(bytes(value))}
    if isinstance(value, (str, os.PathLike)):
        return {"type": "audio", "path": os.fspath(value)}
    if sample_rate is None:
        raise ValueError("audio samples need a sample rate: pass (samples, rate) or {'type': 'audio', 'audio': samples, 'sample_rate': rate}")
    too_large = _over_samples(_shape_of(value), sample_rate, limits)
    if too_large is not None:
        return {"type": "audio", "data": _b64(over_limits_stand_in(too_large))}
    return {"type": "audio", "data": _b64(wav_bytes(value, sample_rate))}


def _data_url(url: str) -> bytes:
    if not url.startswith("data:") or ";base64," not in url:
        raise ValueError("only base64 data: URLs are accepted for image_url parts (remote URLs are never fetched)")
    return base64.b64decode(url.split(";base64,", 1)[1], validate=True)


def to_part(part: Any, limits: MediaLimits = DEFAULT_LIMITS) -> Any:
    """One response part as a manifest part (dict).  Manifest-shaped dicts pass through unchanged,
    so malformed ones still become ``malformed_line`` rows; unsupported Python types raise
    TypeError; in-memory media over ``limits`` become the stand-in of their refusal."""
    if isinstance(part, str):
        return {"type": "text", "text": part}
    if isinstance(part, Mapping):
        kind = part.get("type")
        if kind in ("image", "audio") and isinstance(part.get("data"), (bytes, bytearray, memoryview)):
            return {**part, "data": _b64(bytes(part["data"]))}
        if kind == "image" and "image" in part and "path" not in part and "data" not in part:
            return image_part(part["image"], limits=limits)
        if kind == "audio" and "audio" in part and "path" not in part and "data" not in part:
            return audio_part(part["audio"], part.get("sample_rate", part.get("sampling_rate")), limits)
        if kind == "image_url" and isinstance(part.get("image_url"), Mapping):
            return {"type": "image", "data": _b64(_data_url(str(part["image_url"].get("url", ""))))}
        if kind == "input_audio" and isinstance(part.get("input_audio"), Mapping):
            return {"type": "audio", "data": str(part["input_audio"].get("data", ""))}
        return dict(part)
    if isinstance(part, tuple) and len(part) == 2 and isinstance(part[1], (int, float, np.integer, np.floating)):
        return audio_part(part[0], part[1], limits)  # (samples, rate); a rate that is not a positive integer is refused there
    if isinstance(part, (bytes, bytearray, memoryview)):
        data = bytes(part)
        return {"type": sniff_media(data), "data": _b64(data)}
    if isinstance(part, os.PathLike):
        suffix = Path(part).suffix.lower()
        if suffix in _IMAGE_SUFFIXES:
            return {"type": "image", "path": os.fspath(part)}
        if suffix in _AUDIO_SUFFIXES:
            return {"type": "audio", "path": os.fspath(part)}
        raise ValueError(f"cannot tell the media type of {os.fspath(part)!r} from its suffix; pass a manifest part")
    if type(part).__module__.startswith("PIL."):
        return image_part(part, limits=limits)
    if isinstance(part, np.ndarray) or _is_torch_tensor(part):
        if len(part.shape) == 1:
            raise ValueError("a 1-D array is audio without a sample rate: pass (samples, rate)")
        return image_part(part, limits=limits)
    raise TypeError(f"unsupported response part of type {type(part).__name__}")


def to_parts(parts: Any, limits: MediaLimits = DEFAULT_LIMITS) -> list[Any]:
    """A response as manifest parts; a single non-list value is a one-part response."""
    if isinstance(parts, (list, tuple)) and not (isinstance(parts, tuple) and len(parts) == 2 and isinstance(parts[1], (int, float, np.integer, np.floating))):
        return [to_part(p, limits) for p in parts]
    return [to_part(parts, limits)]
