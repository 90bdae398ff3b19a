"""Segment cropping and silence splitting on clips whose layout is known by construction."""

from __future__ import annotations

import numpy as np
import pytest

from mmverify.verifiers.audio.segments import edge_seconds, edge_segment, fraction_segment, split_on_silence

SR = 22050


def tone(seconds: float, frequency: float = 440.0, amplitude: float = 0.5) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    return (amplitude * np.sin(2 * np.pi * frequency * t)).astype(np.float32)


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * SR), dtype=np.float32)


def test_edge_segments_are_whole_seconds_capped_at_four_and_half_the_clip():
    assert edge_seconds(10 * SR, SR) == 4
    assert edge_seconds(int(5.9 * SR), SR) == 2  # 5.9 s // 2 = 2 whole seconds
    assert edge_seconds(int(1.9 * SR), SR) == 0
    clip = np.arange(10 * SR, dtype=np.float32)
    assert np.array_equal(edge_segment(clip, SR, "start"), clip[: 4 * SR])
    assert np.array_equal(edge_segment(clip, SR, "end"), clip[-4 * SR :])
    assert edge_segment(clip[: SR], SR, "end").size == 0
    with pytest.raises(ValueError):
        edge_segment(clip, SR, "middle")


def test_fraction_segments_round_sample_indices():
    clip = np.arange(1000)
    assert np.array_equal(fraction_segment(clip, [0.33, 0.66]), clip[330:660])
    assert np.array_equal(fraction_segment(clip, [0.75, 1.0]), clip[750:])
    with pytest.raises(ValueError):
        fraction_segment(clip, [0.5, 0.4])


def test_two_sounds_separated_by_two_seconds_of_silence_give_two_segments():
    clip = np.concatenate([tone(2.0), silence(2.0), tone(2.0, 880.0)])
    segments = split_on_silence(clip, SR)
    assert len(segments) == 2
    (a0, a1), (b0, b1) = segments
    assert abs(a0) < 0.1 * SR and abs(a1 - 2 * SR) < 0.1 * SR
    assert abs(b0 - 4 * SR) < 0.1 * SR and b1 == len(clip)  # the last segment runs to the end


def test_short_gaps_merge_and_silence_gives_nothing():
    clip = np.concatenate([tone(2.0), silence(0.5), tone(2.0)])
    assert len(split_on_silence(clip, SR)) == 1
    three = np.concatenate([tone(1.5), silence(1.6), tone(1.5), silence(1.6), tone(1.5)])
    assert len(split_on_silence(three, SR)) == 3
    assert split_on_silence(silence(3.0), SR) == []
    assert split_on_silence(np.zeros(0, np.float32), SR) == []
