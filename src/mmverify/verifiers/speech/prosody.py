"""Voice pitch and speaking rate, scored against the published bands.

Pitch (version 1, published): Praat pitch and intensity tracks (parselmouth; time step 256/22050 s,
floor 80 Hz, ceiling 600 Hz); voiced frames converted to mel (2595 log10(1 + f/700)); the mel range
cut into 100 bins, intensity (dB) summed per bin, and the pitch is the intensity-weighted mean mel of
the loudest bin -- the speaker's dominant register, robust to octave errors at the edges.
Bands (mel): male 140-182, female 236-278; "high" scores the position in the band from its bottom,
"low" from its top, clamped to [0, 1].

Speaking rate: words (English) or characters (Chinese) per minute of silence-trimmed audio
(librosa.effects.trim, top_db 60); bands 156-180 WPM and 232-272 CPM, scored like pitch.
"""

from __future__ import annotations

import numpy as np

PITCH_BANDS_MEL: dict[str, tuple[float, float]] = {"male": (140.0, 182.0), "female": (236.0, 278.0)}
RATE_BANDS: dict[str, tuple[float, float]] = {"english": (156.0, 180.0), "chinese": (232.0, 272.0)}
LEVELS = ("high", "low")


def hz_to_mel(frequency: np.ndarray | float) -> np.ndarray | float:
    return 2595.0 * np.log10(1.0 + np.asarray(frequency, dtype=np.float64) / 700.0)


def dominant_pitch_mel(
    audio: np.ndarray,
    sample_rate: int,
    *,
    time_step: float = 256 / 22050,
    floor_hz: float = 80.0,
    ceiling_hz: float = 600.0,
    bins: int = 100,
) -> float | None:
    """Intensity-weighted pitch of the loudest pitch bin, in mel; None when nothing is voiced."""
    import parselmouth

    if not 0 < floor_hz < ceiling_hz or bins < 1:
        raise ValueError("need 0 < floor < ceiling and bins >= 1")
    sound = parselmouth.Sound(np.asarray(audio, dtype=np.float64), sampling_frequency=float(sample_rate))
    pitch = sound.to_pitch(time_step=time_step, pitch_floor=floor_hz, pitch_ceiling=ceiling_hz)
    f0 = pitch.selected_array["frequency"]
    intensity = sound.to_intensity(time_step=time_step, minimum_pitch=floor_hz)
    loudness = np.interp(pitch.xs(), intensity.xs(), intensity.values[0])
    voiced = f0 > 0
    if not voiced.any():
        return None
    mel = np.asarray(hz_to_mel(f0[voiced]))
    weights = loudness[voiced]
    edges = np.linspace(mel.min() - 0.1, mel.max() + 0.1, bins)
    which = np.digitize(mel, edges)
    totals = np.bincount(which, weights=weights, minlength=bins + 1)
    loudest = int(np.argmax(totals))
    members = which == loudest
    if weights[members].sum() <= 0:
        return float(mel[members].mean())
    return float(np.average(mel[members], weights=weights[members]))


def band_score(value: float, band: tuple[float, float], level: str) -> float:
    """Position of ``value`` in ``band``: from the bottom for "high", from the top for "low"."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    low, high = band
    if not low < high:
        raise ValueError("band must be (low, high) with low < high")
    clamped = min(max(value, low), high)
    return (clamped - low) / (high - low) if level == "high" else (high - clamped) / (high - low)


def speaking_rate(units: int, audio: np.ndarray, sample_rate: int, top_db: float = 60.0) -> float | None:
    """Units (words or characters) per minute of silence-trimmed audio; None for silent audio."""
    import librosa

    from ..audio.segments import SILENCE_FLOOR

    if len(audio) == 0 or float(np.max(np.abs(audio))) < SILENCE_FLOOR:
        return None  # trimming is relative to the peak: digital silence would count as speech
    trimmed, _ = librosa.effects.trim(audio, top_db=top_db)
    return units * 60.0 * sample_rate / len(trimmed)
