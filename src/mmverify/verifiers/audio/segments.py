"""Which part of a clip a check looks at: edges, fractional ranges, sound/silence segments.

Published semantics: edge segments are ``min(max_seconds, duration // 2)`` *whole* seconds of the
untrimmed clip; a fractional range ``[a, b]`` is samples ``round(a*N):round(b*N)``; silence
splitting merges non-silent intervals (``librosa.effects.split``) separated by less than
``min_gap_s`` and lets the last segment run to the end of the clip.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


SILENCE_FLOOR = 1e-4  # peak amplitude below -80 dBFS counts as no sound at all


def edge_seconds(n_samples: int, sample_rate: int, max_seconds: int = 4) -> int:
    """Whole seconds taken from each edge: ``min(max_seconds, n // (2 * sr))``."""
    if max_seconds < 1 or sample_rate <= 0:
        raise ValueError("max_seconds must be >= 1 and sample_rate positive")
    return min(max_seconds, n_samples // (2 * sample_rate))


def edge_bounds(n_samples: int, sample_rate: int, edge: str, max_seconds: int = 4) -> tuple[int, int]:
    """``(start, end)`` samples of the first (``edge="start"``) or last (``"end"``) edge segment;
    an empty range for clips under 2 s."""
    if edge not in ("start", "end"):
        raise ValueError("edge must be 'start' or 'end'")
    length = edge_seconds(n_samples, sample_rate, max_seconds) * sample_rate
    return (0, length) if edge == "start" else (n_samples - length, n_samples)


def edge_segment(audio: np.ndarray, sample_rate: int, edge: str, max_seconds: int = 4) -> np.ndarray:
    """The first (``edge="start"``) or last (``"end"``) edge segment; empty for clips under 2 s."""
    start, end = edge_bounds(len(audio), sample_rate, edge, max_seconds)
    return audio[start:end]


def fraction_bounds(n_samples: int, span: Sequence[float]) -> tuple[int, int]:
    """``(round(a * N), round(b * N))`` for ``span = [a, b]`` with 0 <= a < b <= 1."""
    if len(span) != 2 or not 0.0 <= span[0] < span[1] <= 1.0:
        raise ValueError(f"range must be [a, b] with 0 <= a < b <= 1, got {list(span)!r}")
    return round(span[0] * n_samples), round(span[1] * n_samples)


def fraction_segment(audio: np.ndarray, span: Sequence[float]) -> np.ndarray:
    """Samples ``round(a * N):round(b * N)`` for ``span = [a, b]`` with 0 <= a < b <= 1."""
    start, end = fraction_bounds(len(audio), span)
    return audio[start:end]


def split_on_silence(
    audio: np.ndarray,
    sample_rate: int,
    *,
    top_db: float = 40.0,
    min_gap_s: float = 1.0,
    frame_length: int = 2048,
    hop_length: int = 512,
) -> list[tuple[int, int]]:
    """``(start, end)`` sample ranges of sounds separated by silences longer than ``min_gap_s``."""
    import librosa

    if top_db <= 0 or min_gap_s < 0:
        raise ValueError("top_db must be positive and min_gap_s non-negative")
    if len(audio) == 0 or float(np.max(np.abs(audio))) < SILENCE_FLOOR:
        return []  # the split threshold is relative to the peak, so digital silence needs its own test
    intervals = librosa.effects.split(audio, top_db=top_db, frame_length=frame_length, hop_length=hop_length)
    if len(intervals) == 0:
        return []
    min_gap = int(min_gap_s * sample_rate)
    segments = []
    start = int(intervals[0][0])
    for (_, end), (next_start, _) in zip(intervals[:-1], intervals[1:]):
        if end + min_gap < next_start:
            segments.append((start, int(end)))
            start = int(next_start)
    if start < intervals[-1][1]:
        segments.append((start, len(audio)))  # the last sound runs to the end of the clip
    return segments
