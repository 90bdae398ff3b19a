"""Pitch and speaking rate on synthetic tones and espeak-ng speech with known settings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mmverify.verifiers.speech.prosody import PITCH_BANDS_MEL, band_score, dominant_pitch_mel, hz_to_mel, speaking_rate
from tests.conftest import espeak

SR = 22050


def harmonic(f0: float, seconds: float = 2.0) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    wave = sum(np.sin(2 * np.pi * f0 * k * t) / k for k in range(1, 6))
    return (0.2 * wave).astype(np.float32)


@pytest.mark.parametrize("f0", [120.0, 200.0, 300.0])
def test_pitch_of_a_harmonic_tone(f0):
    assert dominant_pitch_mel(harmonic(f0), SR) == pytest.approx(hz_to_mel(f0), abs=2.0)


def test_band_scores():
    low, high = PITCH_BANDS_MEL["male"]
    assert band_score(low, (low, high), "high") == 0.0 and band_score(high, (low, high), "high") == 1.0
    assert band_score(161.0, (low, high), "low") == pytest.approx((182 - 161) / 42)
    assert band_score(500.0, (low, high), "low") == 0.0  # clamped
    with pytest.raises(ValueError):
        band_score(150.0, (low, high), "medium")


def test_silence_has_no_pitch_and_no_rate():
    silent = np.zeros(SR, np.float32)
    assert dominant_pitch_mel(silent, SR) is None
    assert speaking_rate(10, silent, SR, guard_silence=True) is None


def test_espeak_pitch_setting_moves_the_measured_pitch(tmp_path: Path):
    text = "The quick brown fox jumps over the lazy dog near the river bank."
    low, rate = espeak(text, tmp_path / "low.wav", pitch=20)
    high, _ = espeak(text, tmp_path / "high.wav", pitch=80)
    assert dominant_pitch_mel(high, rate) > dominant_pitch_mel(low, rate) + 20


def test_espeak_rate_setting_is_recovered(tmp_path: Path):
    text = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen"
    slow, rate = espeak(text, tmp_path / "slow.wav", words_per_minute=120)
    fast, _ = espeak(text, tmp_path / "fast.wav", words_per_minute=220)
    words = len(text.split())
    slow_wpm, fast_wpm = speaking_rate(words, slow, rate), speaking_rate(words, fast, rate)
    assert fast_wpm > 1.4 * slow_wpm
    assert 90 < slow_wpm < 160  # espeak's -s is nominal words per minute


def test_equal_length_tracks_are_paired_by_index_as_published():
    """Published: the intensity track is interpolated only when its length differs from the pitch
    track's; equal lengths are paired frame by frame even when the frame times are offset."""
    from mmverify.verifiers.speech.prosody import _loudness_at_pitch_frames

    pitch_times = np.array([0.10, 0.20, 0.30])
    intensity_times = np.array([0.15, 0.25, 0.35])
    values = np.array([60.0, 70.0, 80.0])
    assert list(_loudness_at_pitch_frames(pitch_times, intensity_times, values, "published")) == [60.0, 70.0, 80.0]
    assert list(_loudness_at_pitch_frames(pitch_times, intensity_times, values, "interpolate")) == [60.0, 65.0, 75.0]
    longer = np.array([0.05, 0.15, 0.25, 0.35])
    assert list(_loudness_at_pitch_frames(pitch_times, longer, np.array([50.0, 60.0, 70.0, 80.0]), "published")) == [55.0, 65.0, 75.0]
    with pytest.raises(ValueError):
        dominant_pitch_mel(np.zeros(100, np.float32), SR, align="nearest")
