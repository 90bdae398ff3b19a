"""Loudness trend of a clip's start or end: fade in, fade out, or neither.

Published algorithm (version 1): trim silence (``librosa.effects.trim``, top_db 60); take the first
or last ``min(max_seconds, duration // 2)`` whole seconds; RMS envelope (librosa defaults),
min-max normalised, against frame times in seconds; peaks by ``scipy.signal.find_peaks`` with
``distance=4``, adding frame 0 when the first peak is >= 5 frames in and the last frame when the
last peak is >= 5 frames before the end; linear regression through the peaks.  Fade in: slope >
0.18/s with slope stderr < 0.04; fade out: slope < -0.18/s with stderr < 0.04.

Published edge cases, reproduced by the defaults:

* two regression points (``min_points=2``): the line through them is exact and its standard error
  is 0, so the slope alone decides.  A steady fade of a pure tone yields exactly two points: the
  envelope's single maximum sits next to a window edge (the RMS frames are zero-padded there) and
  only the opposite edge frame is added.  ``min_points=3`` refuses such fits (``too_few_peaks``).
* trimmed clips shorter than 2 s: the window is 0 s long.  At the start that leaves nothing to
  measure (``audio_too_short``); at the end the published slice ``audio[-0:]`` is the *whole*
  trimmed clip, which is what is analysed (``short_end_whole_clip=True``).  With
  ``short_end_whole_clip=False`` both positions report ``audio_too_short``.
* flat loudness or no RMS peak at all: the published code divides by zero or indexes an empty list
  and stops; here such clips fail with ``constant_loudness`` / ``no_peaks``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...core.types import Check

TRENDS = ("fade in", "fade out")


@dataclass(frozen=True)
class IntensityParams:
    max_seconds: int = 4
    trim_top_db: float = 60.0
    peak_distance: int = 4
    edge_frames: int = 5
    slope: float = 0.18
    stderr: float = 0.04
    min_points: int = 2
    short_end_whole_clip: bool = True

    def __post_init__(self) -> None:
        if self.max_seconds < 1 or self.peak_distance < 1 or self.edge_frames < 0:
            raise ValueError("max_seconds and peak_distance must be >= 1, edge_frames >= 0")
        if self.slope <= 0 or self.stderr <= 0 or self.trim_top_db <= 0:
            raise ValueError("slope, stderr and trim_top_db must be positive")
        if self.min_points < 2:
            raise ValueError("min_points must be >= 2 (a line needs two points)")


@dataclass(frozen=True)
class Trend:
    trend: str | None  # "fade in", "fade out" or None
    slope: float | None
    stderr: float | None
    peaks: int
    reason: str | None = None  # why no trend could be measured


def analysis_window(trimmed: np.ndarray, sample_rate: int, position: str, params: IntensityParams = IntensityParams()) -> np.ndarray:
    """The part of the trimmed clip whose loudness trend is measured (empty: nothing to measure)."""
    if position not in ("start", "end"):
        raise ValueError("position must be 'start' or 'end'")
    seconds = min(params.max_seconds, len(trimmed) // (2 * sample_rate))
    length = round(seconds * sample_rate)
    if length == 0:
        return trimmed if position == "end" and params.short_end_whole_clip else trimmed[:0]
    return trimmed[:length] if position == "start" else trimmed[len(trimmed) - length :]


def envelope_trend(audio: np.ndarray, sample_rate: int, position: str, params: IntensityParams = IntensityParams()) -> Trend:
    import librosa
    from scipy.signal import find_peaks
    from scipy.stats import linregress

    if position not in ("start", "end"):
        raise ValueError("position must be 'start' or 'end'")
    trimmed, _ = librosa.effects.trim(audio, top_db=params.trim_top_db)
    window = analysis_window(trimmed, sample_rate, position, params)
    if len(window) == 0:
        return Trend(None, None, None, 0, "audio_too_short")
    rms = librosa.feature.rms(y=window)[0]
    spread = rms.max() - rms.min()
    if spread <= 0:
        return Trend(None, None, None, 0, "constant_loudness")
    norm = (rms - rms.min()) / spread
    times = librosa.frames_to_time(np.arange(len(norm)), sr=sample_rate)
    peaks = list(find_peaks(norm, distance=params.peak_distance)[0])
    if not peaks:
        return Trend(None, None, None, 0, "no_peaks")
    if peaks[0] >= params.edge_frames:
        peaks.insert(0, 0)
    if peaks[-1] < len(norm) - params.edge_frames:
        peaks.append(len(norm) - 1)
    if len(peaks) < params.min_points:
        return Trend(None, None, None, len(peaks), "too_few_peaks")
    fit = linregress(times[peaks], norm[peaks])
    slope, stderr = float(fit.slope), float(fit.stderr)
    trend = None
    if stderr < params.stderr:
        trend = "fade in" if slope > params.slope else "fade out" if slope < -params.slope else None
    return Trend(trend, slope, stderr, len(peaks))


def check_intensity(
    audio: np.ndarray, sample_rate: int, position: str, expected: str, params: IntensityParams = IntensityParams()
) -> Check:
    """1 when the measured trend at ``position`` equals ``expected`` ("fade in" / "fade out")."""
    if expected not in TRENDS:
        raise ValueError(f"expected trend must be one of {TRENDS}, got {expected!r}")
    trend = envelope_trend(audio, sample_rate, position, params)
    ok = trend.trend == expected
    components = {"slope": trend.slope, "stderr": trend.stderr} if trend.slope is not None else {}
    return Check(
        score=1.0 if ok else 0.0,
        passed=ok,
        components=components,
        evidence={"measured": trend.trend, "expected": expected, "position": position, "peaks": trend.peaks, "note": trend.reason},
    )
