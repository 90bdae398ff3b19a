"""The published MMMG CLAP front end, re-derived with numpy and librosa from its description.

Independent of mmverify's implementation: the yardstick for the differential tests in
``mmmg_clap_test.py``.  What it re-derives, step by step:

- The generated clip is decoded at 22050 Hz; a task cuts parts of it (edges, a range, the
  silence-separated sounds, or the whole clip) and each part is resampled to 48 kHz.
- References are decoded at 22050 Hz (``librosa.load``'s default rate) and then resampled to
  48 kHz, so nothing above 11.025 kHz survives.
- The processor is called with ``padding=True``.  transformers 4.x resolved the padding mode as
  ``padding if padding else configured``, which keeps ``True``; ``True`` is neither "repeat" nor
  "repeatpad", so a clip shorter than the 10 s window was followed by zeros.  Newer transformers
  resolve ``True`` to the configured "repeatpad".
- Longer clips were cut to the window at a random offset ("rand_trunc"); here the offset is an
  argument.
- Log-mel features: a centred STFT (periodic Hann window, reflect padding), power spectrum,
  Slaney-style mel filters, ``10 * log10(max(x, 1e-10))``; shape (frames, mel bands).
- Similarity: cosine of CLAP audio embeddings; the mean of the 10 highest against a class.
- OpenMIC: ``<instrument>/<k>.mp3`` for ``k`` in 0..99; those folders were numbered from
  OpenMIC-2018's aggregated labels (relevance 1, clips with exactly one such label, per instrument
  in file order).
"""

from __future__ import annotations

from collections import Counter
from typing import Callable, Sequence

import librosa
import numpy as np

PUBLISHED_RATE = 22_050
CLAP_RATE = 48_000
Resampler = Callable[[np.ndarray, int, int], np.ndarray]


def librosa_resample(signal: np.ndarray, orig_sr: int, target_sr: int) -> np.ndarray:
    """The published resampler (librosa's default, soxr "HQ")."""
    if orig_sr == target_sr:
        return signal
    return librosa.resample(signal, orig_sr=orig_sr, target_sr=target_sr)


# -- padding ---------------------------------------------------------------------------------------
def padding_mode_4x(padding_argument: object, configured: str = "repeatpad") -> object:
    """The mode transformers 4.x ``ClapFeatureExtractor.__call__`` used for ``padding=...``."""
    return padding_argument if padding_argument else configured


def padding_mode_current(padding_argument: object, configured: str = "repeatpad") -> object:
    """The mode newer transformers use: ``True`` and ``None`` both mean the configured one."""
    return configured if padding_argument is True or padding_argument is None else padding_argument


def fit_window(waveform: np.ndarray, window: int, mode: object, offset: int = 0) -> np.ndarray:
    """The waveform the extractor computes features of: cut to the window from ``offset`` when
    longer; when shorter, tiled ("repeat": tiled past the window and cut; "repeatpad": whole
    copies, then zeros) or, for any other mode, followed by zeros."""
    samples = np.asarray(waveform, dtype=np.float64)
    if samples.size > window:
        return samples[offset : offset + window]
    if 0 < samples.size < window and mode == "repeat":
        return np.tile(samples, window // samples.size + 1)[:window]
    if 0 < samples.size < window and mode == "repeatpad":
        samples = np.tile(samples, window // samples.size)
    out = np.zeros(window, dtype=np.float64)
    out[: samples.size] = samples
    return out


# -- features --------------------------------------------------------------------------------------
def log_mel(
    waveform: np.ndarray,
    sample_rate: int = CLAP_RATE,
    n_fft: int = 1024,
    hop_length: int = 480,
    n_mels: int = 64,
    fmin: float = 50.0,
    fmax: float = 14_000.0,
) -> np.ndarray:
    """(frames, n_mels) log-mel power features with Slaney mel filters, as CLAP's unfused model takes."""
    spectrum = librosa.stft(
        np.asarray(waveform, dtype=np.float64), n_fft=n_fft, hop_length=hop_length, window="hann", center=True, pad_mode="reflect"
    )
    power = np.abs(spectrum) ** 2
    filters = librosa.filters.mel(
        sr=sample_rate, n_fft=n_fft, n_mels=n_mels, fmin=fmin, fmax=fmax, htk=False, norm="slaney", dtype=np.float64
    )
    return (10.0 * np.log10(np.maximum(filters @ power, 1e-10))).T


# -- decoding --------------------------------------------------------------------------------------
def load_reference(path: str, resampler: Resampler | None = None) -> np.ndarray:
    """A reference clip as the published code gets it: decoded (mono) at 22050 Hz, then at 48 kHz.
    ``resampler`` replaces librosa's for both steps (None: librosa's, as published)."""
    if resampler is None:
        audio, _ = librosa.load(path)  # sr=22050, mono
        return librosa_resample(audio, PUBLISHED_RATE, CLAP_RATE)
    import soundfile as sf

    samples, native = sf.read(path, dtype="float32", always_2d=True)
    mono = samples.mean(axis=1)
    return resampler(resampler(mono, native, PUBLISHED_RATE), PUBLISHED_RATE, CLAP_RATE)


# -- which parts of the clip ----------------------------------------------------------------------
def edge_parts(audio: np.ndarray, sample_rate: int, start: bool, end: bool) -> list[np.ndarray]:
    """a_sound_begin_end: ``audio[:sr*L]`` and ``audio[-sr*L:]`` with ``L = min(4, len // (2 sr))``."""
    seconds = min(4, len(audio) // (sample_rate * 2))
    parts = []
    if start:
        parts.append(audio[: sample_rate * seconds])
    if end:
        parts.append(audio[-sample_rate * seconds :])
    return parts


def range_part(audio: np.ndarray, fraction: Sequence[float]) -> np.ndarray:
    """a_sound_include: ``audio[round(a * N): round(b * N)]``."""
    return audio[round(fraction[0] * len(audio)) : round(fraction[1] * len(audio))]


def silence_parts(audio: np.ndarray, sample_rate: int, top_db: float = 40.0, min_duration: float = 1.0) -> list[np.ndarray]:
    """a_sound_silence: non-silent intervals merged across gaps of at most ``min_duration``; the
    last sound runs to the end of the clip."""
    intervals = librosa.effects.split(audio, top_db=top_db)
    gap = int(min_duration * sample_rate)
    starts = [int(intervals[0][0])]
    ends = []
    for (_, end), (next_start, _) in zip(intervals[:-1], intervals[1:]):
        if next_start - end > gap:
            ends.append(int(end))
            starts.append(int(next_start))
    parts = [audio[s:e] for s, e in zip(starts, ends)]
    if starts[-1] < intervals[-1][1]:
        parts.append(audio[starts[-1] :])
    return parts


# -- scores ---------------------------------------------------------------------------------------
def top_k_mean(query: np.ndarray, references: np.ndarray, k: int = 10) -> float:
    """Mean of the ``k`` highest cosine similarities of ``query`` against the rows of ``references``."""
    q = np.asarray(query, dtype=np.float64)
    r = np.asarray(references, dtype=np.float64)
    cosines = (r @ q) / (np.linalg.norm(r, axis=1) * np.linalg.norm(q))
    return float(np.sort(cosines)[::-1][:k].mean())


# -- OpenMIC --------------------------------------------------------------------------------------
def openmic_numbered_names(size: int = 100) -> list[str]:
    """The file names the published code loads from an instrument folder."""
    return [f"{k}.mp3" for k in range(size)]


def openmic_selection(rows: Sequence[dict[str, str]], size: int = 100) -> dict[str, list[str]]:
    """Sample keys MMMG copied into ``<instrument>/0.mp3``, ``1.mp3``, ... in that order."""
    agreed = [row for row in rows if float(row["relevance"]) == 1]
    once = {key for key, n in Counter(row["sample_key"] for row in agreed).items() if n == 1}
    instruments = sorted({row["instrument"] for row in agreed if row["sample_key"] in once})
    return {
        name: [row["sample_key"] for row in agreed if row["sample_key"] in once and row["instrument"] == name][:size]
        for name in instruments
    }
