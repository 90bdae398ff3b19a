"""Loudness trend of a clip's start or end: fade in, fade out, or neither.

Published algorithm (version 1): trim silence (``librosa.effects.trim``, top_db 60); take the first
or last ``min(max_seconds, duration // 2)`` whole seconds; RMS envelope (librosa defaults),
min-max normalised, against frame times in seconds; peaks by ``scipy.signal.find_peaks`` with
``distance=4``, adding frame 0 when the first peak is >= 5 frames in and the last frame when the
last peak is >= 5 frames before the end; linear regression through the peaks.  Fade in: slope >
0.18/s with slope stderr < 0.04; fade out: slope < -0.18/s with stderr < 0.04.
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

    def __post_init__(self) -> None:
        if self.max_seconds < 1 or self.peak_distance < 1 or self.edge_frames < 0:
            raise ValueError("max_seconds and peak_distance must be >= 1, edge_frames >= 0")
        if self.slope <= 0 or self.stderr <= 0 or self.trim_top_db <= 0:
            raise ValueError("slope, stderr and trim_top_db must be positive")


@dataclass(frozen=True)
class Trend:
    trend: str | None  # "fade in", "fade out" or None
    slope: float | None
    stderr: float | None
    peaks: int
    reason: str | None = None  # why no trend could be measured


def envelope_trend(audio: np.ndarray, sample_rate: int, position: str, params: IntensityParams = IntensityParams()) -> Trend:
    import librosa
    from scipy.signal import find_peaks
    from scipy.stats import linregress

    if position not in ("start", "end"):
        raise ValueError("position must be 'start' or 'end'")
    trimmed, _ = librosa.effects.trim(audio, top_db=params.trim_top_db)
    seconds = min(params.max_seconds, len(trimmed) // (2 * sample_rate))
    length = round(seconds * sample_rate)
    if length == 0:
        return Trend(None, None, None, 0, "audio_too_short")
    window = trimmed[:length] if position == "start" else trimmed[len(trimmed) - length :]
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
    if len(peaks) < 3:  # a line through two points has no standard error
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
