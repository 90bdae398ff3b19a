"""Log-mel building blocks in torch, shared by the CLAP and Whisper front ends
(:mod:`mmverify.models.clap_features`, :mod:`mmverify.models.whisper_features`): mel scales and
triangular filterbanks, centred frames, their spectra, filterbank energies and decibels.  Each
works on a whole batch, on whatever device its tensors are on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

FEATURE_FRONT_ENDS = ("torch", "numpy")  # a backend's log-mel: torch on the model's device, or its extractor's numpy
MEL_FLOOR = 1e-10  # CLAP's extractor's mel floor and dB clip: -100 dB
_SLANEY_BREAK_HZ = 1000.0
_SLANEY_BREAK_MEL = 15.0
_SLANEY_LOG_STEP = float(np.log(6.4) / 27.0)


def check_features(features: str) -> str:
    """``features`` if it names a front end (:data:`FEATURE_FRONT_ENDS`), else ValueError."""
    if features not in FEATURE_FRONT_ENDS:
        raise ValueError(f"features must be one of {', '.join(FEATURE_FRONT_ENDS)}, got {features!r}")
    return features


# -- mel filterbank --------------------------------------------------------------------------------
def hz_to_mel(freq: "torch.Tensor", scale: str) -> "torch.Tensor":
    """Frequencies in Hz on the ``"htk"`` or ``"slaney"`` mel scale."""
    import torch

    if scale == "htk":
        return 2595.0 * torch.log10(1.0 + freq / 700.0)
    if scale != "slaney":
        raise ValueError(f"mel scale must be 'htk' or 'slaney', got {scale!r}")
    linear = 3.0 * freq / 200.0
    logarithmic = _SLANEY_BREAK_MEL + torch.log(torch.clamp(freq, min=_SLANEY_BREAK_HZ) / _SLANEY_BREAK_HZ) / _SLANEY_LOG_STEP
    return torch.where(freq >= _SLANEY_BREAK_HZ, logarithmic, linear)


def mel_to_hz(mel: "torch.Tensor", scale: str) -> "torch.Tensor":
    """Inverse of :func:`hz_to_mel`."""
    import torch

    if scale == "htk":
        return 700.0 * (torch.pow(10.0, mel / 2595.0) - 1.0)
    if scale != "slaney":
        raise ValueError(f"mel scale must be 'htk' or 'slaney', got {scale!r}")
    linear = 200.0 * mel / 3.0
    logarithmic = _SLANEY_BREAK_HZ * torch.exp(_SLANEY_LOG_STEP * (mel - _SLANEY_BREAK_MEL))
    return torch.where(mel >= _SLANEY_BREAK_MEL, logarithmic, linear)


def mel_filterbank(
    n_freqs: int, n_mels: int, f_min: float, f_max: float, sample_rate: int, scale: str, slaney_norm: bool
) -> "torch.Tensor":
    """``(n_freqs, n_mels)`` float64 triangular filters over a one-sided spectrum of ``n_freqs`` bins.

    Filter ``m`` rises from edge ``m`` to its peak at edge ``m + 1`` and falls to zero at edge
    ``m + 2``, the ``n_mels + 2`` edges being evenly spaced in mels between ``f_min`` and ``f_max``.
    ``slaney_norm`` scales each filter by ``2 / (upper - lower)`` (equal area in Hz).
    """
    import torch

    if n_freqs < 2 or n_mels < 1:
        raise ValueError(f"need at least 2 frequency bins and 1 mel band, got {n_freqs} and {n_mels}")
    if not 0 <= f_min <= f_max:
        raise ValueError(f"need 0 <= f_min <= f_max, got {f_min} and {f_max}")
    f64 = torch.float64
    limits = hz_to_mel(torch.tensor([float(f_min), float(f_max)], dtype=f64), scale)
    edges = mel_to_hz(torch.linspace(float(limits[0]), float(limits[1]), n_mels + 2, dtype=f64), scale)
    bins = torch.linspace(0.0, float(sample_rate // 2), n_freqs, dtype=f64)[:, None]
    lower, centre, upper = edges[None, :-2], edges[None, 1:-1], edges[None, 2:]
    rising = (bins - lower) / (centre - lower)
    falling = (upper - bins) / (upper - centre)
    filters = torch.clamp(torch.minimum(rising, falling), min=0.0)
    if slaney_norm:
        filters = filters * (2.0 / (upper - lower))
    return filters


# -- spectrogram -----------------------------------------------------------------------------------
def last_sounding_sample(waveforms: "torch.Tensor") -> int:
    """Index of the last sample that is non-zero in any row (-1 for an all-zero or empty batch)."""
    if waveforms.numel() == 0:
        return -1
    sounding = waveforms.abs().amax(dim=0).nonzero()
    return int(sounding[-1]) if sounding.numel() else -1


def sounding_frames(last_sample: int, samples: int, n_fft: int, hop: int) -> int:
    """How many leading frames can hold sound when every sample after ``last_sample`` is zero:
    later frames (and their reflection at the end) see only zeros, whose spectrum is exactly zero."""
    total = 1 + samples // hop
    if last_sample < 0:
        return 0
    if last_sample >= samples - 1 - n_fft // 2:  # the end reflection holds sound: every frame may
        return total
    return min(total, (last_sample + n_fft // 2) // hop + 1)


def centred(waveforms: "torch.Tensor", n_fft: int, hop: int, frames: int | None = None) -> "torch.Tensor":
    """The waveforms padded for centred frames: ``n_fft // 2`` samples reflected at each end, so that
    frame ``t`` starts at ``t * hop`` (``1 + samples // hop`` frames in all).  With ``frames``, only
    what the first ``frames`` frames see."""
    import torch

    samples, half = waveforms.shape[-1], n_fft // 2
    if samples <= half:
        raise ValueError(f"waveforms of {samples} samples are too short for {n_fft}-point frames")
    total = 1 + samples // hop
    frames = total if frames is None else min(frames, total)
    reach = (frames - 1) * hop + half  # one past the last waveform sample the kept frames see
    if reach > samples:
        padded = torch.nn.functional.pad(waveforms[:, None, :], (half, half), mode="reflect")[:, 0, :]
    else:  # the kept frames end before the right reflection: only the left one is built
        padded = torch.cat([waveforms[:, 1 : half + 1].flip(-1), waveforms[:, :reach]], dim=-1)
    return padded[:, : (frames - 1) * hop + n_fft]


def frame_spectrum(padded: "torch.Tensor", window: "torch.Tensor", hop: int, first: int = 0, last: int | None = None) -> "torch.Tensor":
    """``(batch, last - first, n_fft // 2 + 1)`` complex spectra of frames ``first`` to ``last`` of a
    :func:`centred` signal, windowed, in the window's precision."""
    import torch

    n_fft = window.shape[0]
    last = 1 + (padded.shape[-1] - n_fft) // hop if last is None else last
    samples = padded[:, first * hop : (last - 1) * hop + n_fft].to(window.dtype)
    return torch.fft.rfft(samples.unfold(-1, n_fft, hop) * window, dim=-1)


def mel_power(spectrum: "torch.Tensor", paired_filters: "torch.Tensor", first_bin: int) -> "torch.Tensor":
    """``(batch, frames, mels)`` filterbank energies of the power spectrum, in ``paired_filters``' dtype.

    ``paired_filters`` holds each filter row twice, once for the real and once for the imaginary
    part, for the bins from ``first_bin`` on: one product then sums ``re**2 + im**2`` and the
    filter weights without forming the power spectrum.  The spectrum is first rounded to the
    filters' precision (a float64 spectrum to complex64, as the extractor stores its own): the sum
    of squares has no cancellation, so float32 keeps it to about 1e-6 relative.
    """
    import torch

    complex_dtype = torch.complex128 if paired_filters.dtype == torch.float64 else torch.complex64
    last_bin = first_bin + paired_filters.shape[0] // 2
    squares = torch.view_as_real(spectrum[..., first_bin:last_bin].to(complex_dtype)).square()
    return torch.matmul(squares.flatten(-2), paired_filters)


def power_to_db(power: "torch.Tensor", floor: float = MEL_FLOOR) -> "torch.Tensor":
    """``10 * log10(max(power, floor))``: decibels relative to 1, floored at ``10 * log10(floor)``."""
    return 10.0 * power.clamp(min=floor).log10()
