"""Tempo from beat times.

``bpm_from_beat_count`` is the published estimator: number of beats x 60 / duration of the
(silence-trimmed) clip.  It under-counts when a tracker misses the first or last beats and is biased
by the partial beat periods at the edges; ``bpm_from_intervals`` (60 / median inter-beat interval)
is robust to both and is used by tempo version 2.
"""

from __future__ import annotations

import numpy as np

from ...core.types import Check


def bpm_from_beat_count(beat_times: np.ndarray, duration_s: float) -> float:
    if duration_s <= 0:
        raise ValueError("duration must be positive")
    return len(beat_times) * 60.0 / duration_s


def bpm_from_intervals(beat_times: np.ndarray) -> float | None:
    """60 / median inter-beat interval; None with fewer than two beats."""
    beats = np.sort(np.asarray(beat_times, dtype=np.float64))
    if beats.size < 2:
        return None
    intervals = np.diff(beats)
    intervals = intervals[intervals > 0]
    return float(60.0 / np.median(intervals)) if intervals.size else None


def check_tempo(bpm: float | None, target: float, tolerance: float = 5.0) -> Check:
    """Pass when ``|bpm - target| < tolerance`` (published tolerance: 5 BPM)."""
    if tolerance <= 0 or target <= 0:
        raise ValueError("target and tolerance must be positive")
    if bpm is None:
        return Check(score=0.0, passed=False, components={}, evidence={"target_bpm": target, "note": "fewer than two beats"})
    ok = abs(bpm - target) < tolerance
    return Check(score=1.0 if ok else 0.0, passed=ok, components={"bpm": bpm, "bpm_error": abs(bpm - target)}, evidence={"target_bpm": target})
