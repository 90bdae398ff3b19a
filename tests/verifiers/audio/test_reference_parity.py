"""Music rules against the independent re-derivation of the published evaluator (tests/reference/
mmmg_audio.py) on seeded random clips and beat lists: the default (``mmmg``) parameters must give the
published verdicts, edge cases included."""

from __future__ import annotations

import numpy as np
import pytest

from mmverify.verifiers.audio.intensity import IntensityParams, check_intensity, envelope_trend
from mmverify.verifiers.audio.tempo import check_tempo, estimate_bpm
from tests.reference import mmmg_audio as ref

SR = ref.SR


def random_clip(rng: np.random.Generator) -> np.ndarray:
    """A tone, noise or pulsing tone under a random loudness curve (half the time one steady fade,
    otherwise piecewise linear), sometimes with silence around it; 0.5-9 s long."""
    seconds = float(rng.uniform(0.5, 9.0))
    n = int(seconds * SR)
    t = np.arange(n) / SR
    if rng.random() < 0.5:
        gain = np.linspace(*rng.uniform(0.02, 1.0, 2), n)
    else:
        knots = np.sort(rng.uniform(0, seconds, int(rng.integers(2, 6))))
        gain = np.interp(t, knots, rng.uniform(0.02, 1.0, knots.size))
    kind = int(rng.integers(0, 3))
    if kind == 0:
        carrier = np.sin(2 * np.pi * rng.uniform(110, 880) * t)
    elif kind == 1:
        carrier = rng.normal(0, 0.5, n)
    else:
        carrier = np.sin(2 * np.pi * 330 * t) * (0.5 + 0.5 * np.cos(2 * np.pi * rng.uniform(1, 6) * t)) ** 2
    clip = 0.5 * carrier * gain
    if rng.random() < 0.3:
        pad = np.zeros(int(rng.uniform(0.1, 1.0) * SR))
        clip = np.concatenate([pad, clip, pad])
    return clip.astype(np.float32)


CASES = 80


@pytest.mark.parametrize("seed", range(CASES))
def test_intensity_verdicts_match_the_published_rule(seed):
    rng = np.random.default_rng(1000 + seed)
    clip = random_clip(rng)
    position = ("start", "end")[seed % 2]
    fit = ref.intensity_fit(clip, position)
    trend = envelope_trend(clip, SR, position)
    if fit is None:
        assert trend.trend is None and trend.reason is not None
    else:
        assert trend.slope == pytest.approx(fit[0], rel=1e-9, abs=1e-12)
        assert trend.stderr == pytest.approx(fit[1], rel=1e-9, abs=1e-12)
    for expected in ("fade in", "fade out"):
        assert check_intensity(clip, SR, position, expected).score == ref.intensity_score(clip, position, expected)


def test_the_random_cases_cover_the_edge_cases():
    """The seeded cases include two-point fits, short clips read whole at their end, and both trends."""
    two_points = short_end = fade_in = fade_out = 0
    for seed in range(CASES):
        rng = np.random.default_rng(1000 + seed)
        clip = random_clip(rng)
        position = ("start", "end")[seed % 2]
        trend = envelope_trend(clip, SR, position)
        two_points += trend.peaks == 2
        short_end += position == "end" and len(clip) < 2 * SR and trend.reason is None
        fade_in += trend.trend == "fade in"
        fade_out += trend.trend == "fade out"
    assert min(two_points, short_end, fade_in, fade_out) >= 1, (two_points, short_end, fade_in, fade_out)


def test_strict_parameters_refuse_what_the_published_rule_accepts_on_few_points():
    strict = IntensityParams(min_points=3, short_end_whole_clip=False)
    refused = 0
    for seed in range(CASES):
        rng = np.random.default_rng(1000 + seed)
        clip = random_clip(rng)
        position = ("start", "end")[seed % 2]
        published = envelope_trend(clip, SR, position)
        if published.peaks == 2 or (position == "end" and len(clip) < 2 * SR):
            refused += envelope_trend(clip, SR, position, strict).trend is None
    assert refused >= 1


@pytest.mark.parametrize("seed", range(20))
def test_tempo_formula_and_tolerance_match_the_published_rule(seed):
    rng = np.random.default_rng(seed)
    samples = int(rng.integers(SR, 40 * SR))
    beats = np.sort(rng.uniform(0, samples / SR, int(rng.integers(0, 90))))
    target = float(rng.choice([60, 80, 100, 120, 140, 160]))
    bpm = estimate_bpm("count", beats, samples / SR)
    assert bpm == pytest.approx(ref.tempo_bpm(len(beats), samples), rel=1e-12)
    assert check_tempo(bpm, target).score == ref.tempo_score(target, bpm)
    near = target + float(rng.uniform(-6, 6))
    assert check_tempo(near, target).score == ref.tempo_score(target, near)
