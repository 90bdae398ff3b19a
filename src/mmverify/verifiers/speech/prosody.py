"""Voice pitch and speaking rate, scored against the published bands.

Pitch (published): Praat pitch and intensity tracks (parselmouth; time step 256/22050 s, floor
80 Hz, ceiling 600 Hz); voiced frames converted to mel (2595 log10(1 + f/700)); the mel range cut
into 100 bins, intensity (dB) summed per bin, and the pitch is the intensity-weighted mean mel of the
loudest bin -- the speaker's dominant register, robust to octave errors at the edges.  The two tracks
are paired frame by frame when they have the same number of frames, and the intensity track is
interpolated at the pitch frames' times otherwise (``align="published"``); ``align="interpolate"``
always interpolates (the tracks' frame times can differ even when their lengths agree).
Bands (mel): male 140-182, female 236-278; "high" scores the position in the band from its bottom,
"low" from its top, clamped to [0, 1].

Speaking rate: words (English) or characters (Chinese) per minute of silence-trimmed audio
(librosa.effects.trim, top_db 60); bands 156-180 WPM and 232-272 CPM, scored like pitch.  Trimming is
relative to the clip's peak, so digital silence is kept whole and gets a (meaningless) rate, as
published; ``guard_silence=True`` reports no rate for clips whose peak is below -80 dBFS instead.
"""

from __future__ import annotations

import numpy as np

PITCH_BANDS_MEL: dict[str, tuple[float, float]] = {"male": (140.0, 182.0), "female": (236.0, 278.0)}
RATE_BANDS: dict[str, tuple[float, float]] = {"english": (156.0, 180.0), "chinese": (232.0, 272.0)}
LEVELS = ("high", "low")
ALIGNMENTS = ("published", "interpolate")


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
    align: str = "published",
) -> float | None:
    """Intensity-weighted pitch of the loudest pitch bin, in mel; None when nothing is voiced."""
    import parselmouth

    if not 0 < floor_hz < ceiling_hz or bins < 1:
        raise ValueError("need 0 < floor < ceiling and bins >= 1")
    if align not in ALIGNMENTS:
        raise ValueError(f"align must be one of {ALIGNMENTS}, got {align!r}")
    sound = parselmouth.Sound(np.asarray(audio, dtype=np.float64), sampling_frequency=float(sample_rate))
    pitch = sound.to_pitch(time_step=time_step, pitch_floor=floor_hz, pitch_ceiling=ceiling_hz)
    f0 = pitch.selected_array["frequency"]
    intensity = sound.to_intensity(time_step=time_step, minimum_pitch=floor_hz)
    loudness = _loudness_at_pitch_frames(pitch.xs(), intensity.xs(), intensity.values.reshape(-1), align)
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
    total = float(weights[members].sum())
    if total == 0.0:  # the weighted mean is undefined; the plain mean stands in
        return float(mel[members].mean())
    return float((mel[members] * weights[members]).sum() / total)


def _loudness_at_pitch_frames(pitch_times: np.ndarray, intensity_times: np.ndarray, values: np.ndarray, align: str) -> np.ndarray:
    """Intensity (dB) for each pitch frame: paired by index when the tracks have equal length and
    ``align == "published"``, interpolated at the pitch frames' times otherwise."""
    if align == "published" and len(pitch_times) == len(intensity_times):
        return np.asarray(values, dtype=np.float64)
    return np.interp(pitch_times, intensity_times, values)


def band_score(value: float, band: tuple[float, float], level: str) -> float:
    """Position of ``value`` in ``band``: from the bottom for "high", from the top for "low"."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    low, high = band
    if not low < high:
        raise ValueError("band must be (low, high) with low < high")
    clamped = min(max(value, low), high)
    return (clamped - low) / (high - low) if level == "high" else (high - clamped) / (high - low)


def speaking_rate(
    units: int, audio: np.ndarray, sample_rate: int, top_db: float = 60.0, *, guard_silence: bool = False
) -> float | None:
    """Units (words or characters) per minute of silence-trimmed audio; None for empty audio, and
    with ``guard_silence`` for audio whose peak is below -80 dBFS."""
    import librosa

    from ..audio.segments import SILENCE_FLOOR

    if len(audio) == 0:
        return None
    if guard_silence and float(np.max(np.abs(audio))) < SILENCE_FLOOR:
        return None  # trimming is relative to the peak: digital silence would count as speech
    trimmed, _ = librosa.effects.trim(audio, top_db=top_db)
    return units * 60.0 * sample_rate / len(trimmed) if len(trimmed) else None
