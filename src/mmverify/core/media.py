"""The one place where media bytes become arrays.

Every image and audio clip goes through here, so size limits, decode errors and normalisation are
handled once: images come back as ``uint8`` RGB arrays of shape ``(H, W, 3)``; audio as mono
``float32`` in [-1, 1] at the requested sample rate.  Problems raise :class:`MediaError` with a
typed ``reason`` (the caller decides whether that is the generator's fault or the user's).
"""

from __future__ import annotations

import io
import os
import re
import stat
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from math import gcd
from pathlib import Path
from typing import Any, BinaryIO, Mapping, Union

import numpy as np

from .interrupts import Interrupt, shielded

MediaSource = Union[str, "os.PathLike[str]", bytes]


class MediaReason:
    MISSING = "media_missing"
    EMPTY = "media_empty"
    TOO_LARGE = "media_too_large"
    UNDECODABLE = "media_undecodable"
    INVALID_SAMPLES = "media_invalid_samples"


class MediaError(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        return (type(self), (self.reason, self.message))  # rebuilt from both parts (decoding processes)


@dataclass(frozen=True)
class MediaLimits:
    """Bounds that keep one bad file from exhausting memory."""

    max_bytes: int = 256 * 1024 * 1024
    max_pixels: int = 40_000_000  # ~ 6300 x 6300; decompression bombs stop at the header
    max_seconds: float = 30 * 60.0
    # resampling designs a filter as long as the rates' reduced ratio: an odd rate in a header
    # (5,000,011 Hz) would cost GBs; 384 kHz, the highest rate in common use, costs ~0.4 GB at worst
    max_sample_rate: int = 384_000
    # decoded samples over all channels (30 min of 48 kHz stereo, ~0.7 GB as float32): a compressed
    # file of many channels at a high rate -- a few MB of FLAC silence -- stops at the header
    max_samples: int = 30 * 60 * 48_000 * 2

    def __post_init__(self) -> None:
        if min(self.max_bytes, self.max_pixels, self.max_seconds, self.max_sample_rate, self.max_samples) <= 0:
            raise ValueError("media limits must be positive")


DEFAULT_LIMITS = MediaLimits()


# In-memory media over the limits (judged by their shape by the Reward API, which does not encode
# them) travel as these bytes and the reason: decoding them is that refusal.
_OVER_LIMITS = b"mmverify: media over the limits: "


def over_limits_stand_in(message: str) -> bytes:
    """The inline bytes that stand for media refused as too large (``message`` says why)."""
    return _OVER_LIMITS + message.encode("utf-8")


def read_bytes(source: MediaSource, limits: MediaLimits = DEFAULT_LIMITS) -> bytes:
    """Read a file (or pass bytes through) enforcing the byte limit."""
    if isinstance(source, bytes) and source.startswith(_OVER_LIMITS):
        raise MediaError(MediaReason.TOO_LARGE, source[len(_OVER_LIMITS) :].decode("utf-8", "replace"))
    data = source if isinstance(source, bytes) else _read_file(Path(source), limits.max_bytes)
    if not data:
        raise MediaError(MediaReason.EMPTY, "zero-length media")
    if len(data) > limits.max_bytes:
        raise MediaError(MediaReason.TOO_LARGE, f"{len(data)} bytes (limit {limits.max_bytes})")
    return data


# A named pipe opened for reading would wait for a writer, which no deadline interrupts: it is
# opened without waiting, then refused with devices and folders, as is everything not a regular file.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


def _read_file(path: Path, max_bytes: int) -> bytes:
    """A regular file's bytes, at most ``max_bytes + 1`` of them (one descriptor: what is checked is
    what is read)."""
    handle: BinaryIO | None = None
    try:
        with shielded():  # a timeout landing between os.open and the file object would leak the descriptor
            handle = _opened(path)
        size = _checked_size(handle, path, max_bytes)
        data = handle.read(size + 1)  # sized by the file: a read allocates what it asks for
        if len(data) <= size:
            return data
        parts, count = [data], len(data)  # it grows meanwhile: read on to one byte past the limit
        while count <= max_bytes:
            more = handle.read(min(_GROWTH_CHUNK, max_bytes + 1 - count))
            if not more:
                break
            parts.append(more)
            count += len(more)
        return b"".join(parts)
    except OSError as exc:
        raise MediaError(MediaReason.MISSING, f"cannot read {path}: {exc.strerror or type(exc).__name__}") from None
    finally:
        if handle is not None:
            handle.close()


def _checked_size(handle: BinaryIO, path: Path, max_bytes: int) -> int:
    """The size of the open ``path``, once it is known to be a regular file of at most ``max_bytes``."""
    info = os.fstat(handle.fileno())
    if not stat.S_ISREG(info.st_mode):
        raise MediaError(MediaReason.MISSING, f"cannot read {path}: not a regular file")
    if info.st_size > max_bytes:
        raise MediaError(MediaReason.TOO_LARGE, f"{path} is {info.st_size} bytes (limit {max_bytes})")
    return info.st_size


_GROWTH_CHUNK = 1 << 20


def _opened(path: Path) -> BinaryIO:
    try:
        return open(path, "rb", opener=lambda name, _flags: os.open(name, _OPEN_FLAGS))
    except FileNotFoundError:
        raise MediaError(MediaReason.MISSING, f"no such file: {path}") from None
    except IsADirectoryError:
        raise MediaError(MediaReason.MISSING, f"cannot read {path}: not a regular file") from None
    except (OSError, ValueError) as exc:  # a parent that is a file, a name too long, a NUL byte, no permission
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
        raise MediaError(MediaReason.MISSING, f"cannot read {path}: {reason}") from None


def _to_rgb(image: "PIL.Image.Image") -> np.ndarray:  # noqa: F821
    from PIL import Image

    mode = image.mode
    if mode in ("I;16", "I;16B", "I;16L", "I;16N", "I"):
        # 16/32-bit grayscale: scale to 8 bits instead of clipping at 255
        wide = np.asarray(image, dtype=np.float64)
        top = 65535.0 if mode.startswith("I;16") or wide.max(initial=0) > 255 else 255.0
        gray = np.clip(np.round(wide * (255.0 / top)), 0, 255).astype(np.uint8)
        return np.repeat(gray[:, :, None], 3, axis=2)
    if mode == "F":
        gray = np.clip(np.nan_to_num(np.asarray(image, dtype=np.float64)), 0.0, 255.0).astype(np.uint8)
        return np.repeat(gray[:, :, None], 3, axis=2)
    if mode == "P" and "transparency" in image.info:
        image = image.convert("RGBA")
    if image.mode != "RGB":
        # Alpha is dropped, as a plain RGB conversion does: the colour channels are what was drawn.
        image = image.convert("RGB")
    return np.asarray(image, dtype=np.uint8)


_OBJECT_REPR = re.compile(r"<[\w.]+ object at 0x[0-9a-fA-F]+>")


def _describe(exc: BaseException) -> str:
    """A decoder's message without object addresses (they change between processes, and result rows
    must be byte-identical across runs)."""
    return _OBJECT_REPR.sub("<data>", str(exc))


# Raster formats a generator plausibly writes (JPEG includes camera MPO files).  Pillow would open
# anything it knows -- EPS through Ghostscript, rarely used decoders that fail in unexpected ways.
IMAGE_FORMATS = ("PNG", "JPEG", "WEBP", "GIF", "BMP", "TIFF")


def load_image(source: MediaSource, limits: MediaLimits = DEFAULT_LIMITS) -> np.ndarray:
    """Decode an image (one of :data:`IMAGE_FORMATS`) to a C-contiguous ``uint8`` array
    ``(H, W, 3)``; first frame of animations."""
    from PIL import Image, UnidentifiedImageError

    data = read_bytes(source, limits)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data), formats=IMAGE_FORMATS)
            width, height = image.size
            if width <= 0 or height <= 0:
                raise MediaError(MediaReason.UNDECODABLE, f"invalid image size {width}x{height}")
            if width * height > limits.max_pixels:
                raise MediaError(
                    MediaReason.TOO_LARGE, f"{width}x{height} pixels (limit {limits.max_pixels})"
                )
            image.seek(0)
            image.load()
            array = _to_rgb(image)
    except MediaError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:  # refused by its header
        raise MediaError(MediaReason.TOO_LARGE, f"image too large to decode ({_describe(exc)})") from None
    except UnidentifiedImageError as exc:
        raise MediaError(MediaReason.UNDECODABLE, f"not a decodable image ({_describe(exc)})") from None
    except (MemoryError, Interrupt):
        raise
    except Exception as exc:  # noqa: BLE001  (truncated, corrupt or hostile data breaks decoders in many ways)
        raise MediaError(MediaReason.UNDECODABLE, f"corrupt image data ({type(exc).__name__}: {_describe(exc)})") from None
    return np.ascontiguousarray(array)


def resample(signal: np.ndarray, orig_sr: int, target_sr: int) -> np.ndarray:
    """Deterministic polyphase resampling (no dependence on optional resampler backends):
    scipy's ``resample_poly`` with its default Kaiser-window filter, designed once per rate pair."""
    if orig_sr == target_sr:
        return signal
    from scipy.signal import resample_poly

    divisor = gcd(orig_sr, target_sr)
    up, down = target_sr // divisor, orig_sr // divisor
    samples = np.asarray(signal)
    if samples.dtype in (np.float32, np.float64) and max(up, down) <= _STORED_FILTER_MAX_RATE:
        resampled = resample_poly(samples, up, down, window=_polyphase_filter(up, down, samples.dtype.str))
    else:
        resampled = resample_poly(samples, up, down)
    return resampled.astype(np.float32)


@dataclass(frozen=True, eq=False)
class DecodedAudio:
    """A decoded clip: mono ``float32`` ``samples`` at ``rate``, and the whole of it resampled to
    other rates where that was asked for at decoding (a decoding process does it off this
    process's interpreter lock)."""

    samples: np.ndarray
    rate: int
    resampled: Mapping[int, np.ndarray] = field(default_factory=dict)
    _made_here: dict[int, np.ndarray] = field(default_factory=dict, init=False, repr=False)

    def whole_at(self, rate: int) -> np.ndarray:
        """``resample(samples, self.rate, rate)``, made at decoding when it was asked for then, else
        here on the first call (the same array is returned on every call: read it, do not write it)."""
        made = self.resampled.get(rate)
        if made is None:
            made = self._made_here.get(rate)
        if made is None:
            made = self._made_here[rate] = resample(self.samples, self.rate, rate)
        return made


_STORED_FILTER_MAX_RATE = 1000  # filters of odd rate pairs (44101 Hz) run to MBs: designed per call


@lru_cache(maxsize=64)
def _polyphase_filter(up: int, down: int, dtype: str) -> np.ndarray:
    """The low-pass filter ``resample_poly`` designs for these factors, in the signal's dtype (as it
    casts it): designing it costs about a quarter of a 5 s resampling, and the bytes are the same."""
    from scipy.signal import firwin

    rate = max(up, down)
    taps = firwin(2 * 10 * rate + 1, 1.0 / rate, window=("kaiser", 5.0)).astype(np.dtype(dtype))
    taps.flags.writeable = False  # resample_poly copies it before scaling
    return taps


_BLOCK_SAMPLES = 1 << 20  # samples (all channels) decoded at a time when files have many channels


def _read_mono(handle: Any, limits: MediaLimits) -> np.ndarray:
    """The channels' mean as float32, refusing more samples than the limit whatever the header
    claims, and any NaN or infinite sample.

    Mono and stereo are decoded in one read: the limit bounds them, and some decoders (MP3's) give
    other samples when read in pieces.  More channels are decoded block by block, so memory holds
    about the mono result twice (its blocks, then their join) rather than every channel; each
    frame's mean reads only that frame, so the values are those of averaging the whole array."""
    channels = int(handle.channels)

    def refuse_beyond(frames: int) -> None:
        if frames * channels > limits.max_samples:
            message = f"{channels} channels x {frames} frames of audio (limit {limits.max_samples} samples)"
            raise MediaError(MediaReason.TOO_LARGE, message)

    refuse_beyond(int(handle.frames))
    block_frames = -1 if channels <= 2 else max(1, _BLOCK_SAMPLES // channels)
    blocks, frames = [], 0
    while True:
        block = handle.read(block_frames, dtype="float32", always_2d=True)
        if block.shape[0] == 0:
            break
        frames += block.shape[0]
        refuse_beyond(frames)
        if not np.isfinite(block).all():
            raise MediaError(MediaReason.INVALID_SAMPLES, "audio contains NaN or infinite samples")
        blocks.append(block.mean(axis=1, dtype=np.float32))
        if block_frames < 0:
            break
    if len(blocks) == 1:
        return blocks[0]
    return np.concatenate(blocks) if blocks else np.zeros(0, dtype=np.float32)


def load_audio(
    source: MediaSource, sample_rate: int | None = None, limits: MediaLimits = DEFAULT_LIMITS
) -> tuple[np.ndarray, int]:
    """Decode audio to mono ``float32``; resample to ``sample_rate`` when given."""
    if isinstance(source, bytes):
        mono, native_sr = _decode_audio(io.BytesIO(read_bytes(source, limits)), limits)
    else:
        mono, native_sr = _decode_audio_file(Path(source), limits)
    if sample_rate is not None and sample_rate != native_sr:
        mono = resample(mono, native_sr, sample_rate)
        native_sr = sample_rate
    return np.ascontiguousarray(mono, dtype=np.float32), native_sr


def _decode_audio_file(path: Path, limits: MediaLimits) -> tuple[np.ndarray, int]:
    """A file decoded by libsndfile from its descriptor, which makes no Python call per read (from
    bytes in memory it makes dozens, each taking the interpreter lock back from other threads).  A
    file refused that way (by any check) is read and decoded again from its bytes, which refuses it
    with the words rows have always carried: libsndfile's message would name the descriptor.  The
    byte limit is checked when the file is opened; a file growing meanwhile is bounded by the
    sample limits (its bytes, read later, could be refused as too large)."""
    handle: BinaryIO | None = None
    try:
        with shielded():  # as in _read_file
            handle = _opened(path)
        if _checked_size(handle, path, limits.max_bytes):  # an empty file: refused below, before any decoder sees it
            return _decode_audio(handle.fileno(), limits)
    except (MediaError, OSError):
        pass
    finally:
        if handle is not None:
            handle.close()
    return _decode_audio(io.BytesIO(read_bytes(path, limits)), limits)


def _decode_audio(file: int | BinaryIO, limits: MediaLimits) -> tuple[np.ndarray, int]:
    """Mono samples and their rate, from an open descriptor or a file object."""
    import soundfile as sf

    try:
        with sf.SoundFile(file, closefd=False) as handle:
            native_sr = int(handle.samplerate)
            if native_sr <= 0:
                raise MediaError(MediaReason.UNDECODABLE, f"invalid sample rate {native_sr}")
            if native_sr > limits.max_sample_rate:
                raise MediaError(
                    MediaReason.TOO_LARGE, f"sample rate {native_sr} Hz (limit {limits.max_sample_rate} Hz)"
                )
            if handle.frames > limits.max_seconds * native_sr:
                raise MediaError(
                    MediaReason.TOO_LARGE,
                    f"{handle.frames / native_sr:.1f} s of audio (limit {limits.max_seconds:.0f} s)",
                )
            mono = _read_mono(handle, limits)
    except MediaError:
        raise
    except (sf.LibsndfileError, RuntimeError, ValueError, TypeError) as exc:
        raise MediaError(MediaReason.UNDECODABLE, f"not decodable audio ({_describe(exc)})") from None
    if mono.shape[0] == 0:
        raise MediaError(MediaReason.EMPTY, "audio has no samples")
    return mono, native_sr
