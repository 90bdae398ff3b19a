"""Tempo from beat times.

``bpm_from_beat_count`` is the published estimator: number of beats x 60 / duration of the
(silence-trimmed) clip.  Its value depends on how a tracker treats the clip's edges: a tracker that
drops the first or last beat under-counts, and even a perfect tracker over-estimates by about one
beat per clip, because ``N`` beats span ``N - 1`` periods plus the last note's tail.

``bpm_from_intervals`` measures the beat period itself: each inter-beat interval is counted in
median intervals (rounded, at least one), which numbers the beats on their grid -- a missed beat
leaves a gap of two periods instead of halving the tempo -- and a least-squares line through
(number, time) gives the period.  Frame quantisation of the individual beat times averages out over
the clip, and missing edge beats do not matter.
"""

from __future__ import annotations

import numpy as np

from ...core.types import Check

ESTIMATORS = ("count", "intervals")


def bpm_from_beat_count(beat_times: np.ndarray, duration_s: float) -> float:
    if duration_s <= 0:
        raise ValueError("duration must be positive")
    return len(beat_times) * 60.0 / duration_s


def bpm_from_intervals(beat_times: np.ndarray) -> float | None:
    """60 / beat period, the period fitted through the beats placed on their grid; None with fewer
    than two distinct beats."""
    beats = np.unique(np.asarray(beat_times, dtype=np.float64))
    if beats.size < 2:
        return None
    intervals = np.diff(beats)
    steps = np.maximum(np.round(intervals / float(np.median(intervals))), 1.0)
    index = np.concatenate([[0.0], np.cumsum(steps)])
    slope = float(np.polyfit(index, beats, 1)[0])
    return 60.0 / slope if slope > 0 else None


def estimate_bpm(estimator: str, beat_times: np.ndarray, duration_s: float) -> float | None:
    """BPM by the named estimator (``"count"`` or ``"intervals"``)."""
    if estimator == "count":
        return bpm_from_beat_count(beat_times, duration_s)
    if estimator == "intervals":
        return bpm_from_intervals(beat_times)
    raise ValueError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")


def check_tempo(bpm: float | None, target: float, tolerance: float = 5.0) -> Check:
    """Pass when ``|bpm - target| < tolerance`` (published tolerance: 5 BPM)."""
    if tolerance <= 0 or target <= 0:
        raise ValueError("target and tolerance must be positive")
    if bpm is None:
        return Check(score=0.0, passed=False, components={}, evidence={"target_bpm": target, "note": "fewer than two beats"})
    ok = abs(bpm - target) < tolerance
    return Check(score=1.0 if ok else 0.0, passed=ok, components={"bpm": bpm, "bpm_error": abs(bpm - target)}, evidence={"target_bpm": target})
