"""Whisper's log-mel input features in torch, batched on the model's device.

The same features as transformers' ``WhisperFeatureExtractor``, computed for a whole batch on the
model's device instead of on the CPU after padding every clip in numpy.  What the extractor does,
and what is done here:

- the window: ``chunk_length * sampling_rate`` samples (30 s at 16 kHz).  Samples are read as
  float32; a longer clip keeps its first 30 s (truncation), a shorter one is zero-padded.
- the STFT: a periodic Hann window of ``n_fft`` samples (400), hop ``hop_length`` (160), frames
  centred by reflecting ``n_fft // 2`` samples at both ends, one-sided spectrum, power 2, in
  float32.  That gives ``1 + 480000 // 160 = 3001`` frames; the last one is dropped, leaving 3000.
- the mel filterbank: ``feature_size`` triangular filters (80, or 128 for large-v3) from 0 to
  8 kHz on the Slaney mel scale with Slaney area normalisation, over bins spaced evenly from 0 to
  ``sampling_rate // 2`` (:func:`mmverify.models.mel.mel_filterbank`).
- the log: ``log10(max(mel, 1e-10))``; then, per clip, everything is raised to at least the clip's
  maximum minus 8 (an 80 dB dynamic range) and scaled as ``(x + 4) / 4``.
- output: float32 ``(batch, feature_size, 3000)``.

Frames that see only zeros (the tail of a zero-padded clip) are not transformed: their log-mel is
exactly the ``log10(1e-10) = -10`` the transform would give them.

Precision: the STFT runs in float32, as in the extractor.  Float32 rounding noise lies about 140 dB
below a frame's loudest bin, far under the 80 dB range the per-clip clamp keeps, so it never
shows in the features.  The extractor's optional dithering (``dither``, random noise added to the
samples) is not reproduced: an extractor that dithers is refused.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from .mel import centred, frame_spectrum, mel_filterbank, mel_power, sounding_frames
from .transfer import upload_joined

if TYPE_CHECKING:
    import torch

LOG_MEL_FLOOR = 1e-10  # the extractor's floor before log10: -10
DYNAMIC_RANGE = 8.0  # in log10 units: features are clamped to the clip's maximum minus this
CPU_BLOCK_CLIPS = 4  # clips transformed together on the CPU (bounds the frame buffer to ~20 MB)


@dataclass(frozen=True)
class WhisperMelSettings:
    """The extractor settings the features depend on (transformers' defaults are Whisper's)."""

    sampling_rate: int = 16_000
    n_fft: int = 400
    hop_length: int = 160
    n_mels: int = 80
    n_samples: int = 480_000
    f_max: float = 8_000.0  # fixed in the extractor, whatever the sampling rate

    @classmethod
    def from_extractor(cls, extractor: Any) -> "WhisperMelSettings":
        """Settings of a transformers ``WhisperFeatureExtractor``; one that dithers is refused."""
        dither = float(getattr(extractor, "dither", 0.0) or 0.0)
        if dither != 0.0:
            raise ValueError(f"the extractor adds random dither ({dither}); the torch front end computes undithered features")
        return cls(
            sampling_rate=int(extractor.sampling_rate),
            n_fft=int(extractor.n_fft),
            hop_length=int(extractor.hop_length),
            n_mels=int(extractor.feature_size),
            n_samples=int(extractor.n_samples),
        )

    @property
    def n_freqs(self) -> int:
        return self.n_fft // 2 + 1

    @property
    def n_frames(self) -> int:
        """Frames kept per clip: the centred STFT's ``1 + n_samples // hop`` less the last one."""
        return self.n_samples // self.hop_length

    def filterbank(self) -> "torch.Tensor":
        """``(n_freqs, n_mels)`` float64 Slaney-scale, Slaney-normalised filters from 0 Hz to ``f_max``."""
        return mel_filterbank(self.n_freqs, self.n_mels, 0.0, self.f_max, self.sampling_rate, "slaney", True)


def waveform_batch(clips: Sequence[np.ndarray], n_samples: int, device: "torch.device | str") -> "torch.Tensor":
    """``(len(clips), n_samples)`` float32 rows on ``device``: each clip's first ``n_samples``
    samples, zero-padded.  Only the samples travel to the device, in one copy."""
    import torch

    kept = [np.asarray(clip, dtype=np.float32).reshape(-1)[:n_samples] for clip in clips]
    batch = torch.zeros((len(kept), n_samples), dtype=torch.float32, device=device)
    if not kept or not any(clip.size for clip in kept):
        return batch
    flat = upload_joined(kept, device)
    start = 0
    for row, clip in zip(batch, kept):
        row[: clip.size] = flat[start : start + clip.size]
        start += clip.size
    return batch


def scale_log_mel(log_mel: "torch.Tensor") -> "torch.Tensor":
    """Whisper's scaling of ``(batch, ...)`` log10 mel energies: each clip clamped from below at its
    maximum minus :data:`DYNAMIC_RANGE`, then mapped by ``(x + 4) / 4``."""
    import torch

    peak = log_mel.flatten(1).amax(dim=1).reshape((-1,) + (1,) * (log_mel.ndim - 1))
    return (torch.maximum(log_mel, peak - DYNAMIC_RANGE) + 4.0) / 4.0


class WhisperMelFeatures:
    """Log-mel features of Whisper inputs for one extractor configuration.

    Holds the Hann window and the filterbank per device; call it with a list of clips of any
    lengths to get one float32 feature batch ``(batch, n_mels, n_frames)`` on that device.
    """

    def __init__(self, settings: WhisperMelSettings | None = None) -> None:
        settings = settings or WhisperMelSettings()
        if settings.n_samples <= settings.n_fft // 2 or settings.n_frames < 1:
            raise ValueError(f"a {settings.n_samples}-sample window is too short for {settings.n_fft}-point frames")
        self.settings = settings
        filters = settings.filterbank()
        used = (filters > 0).any(dim=1).nonzero().flatten()
        self._first_bin = int(used[0]) if used.numel() else 0
        self._filters = filters[self._first_bin : int(used[-1]) + 1 if used.numel() else 1]
        self._tensors: dict[str, tuple["torch.Tensor", "torch.Tensor"]] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_extractor(cls, extractor: Any) -> "WhisperMelFeatures":
        return cls(WhisperMelSettings.from_extractor(extractor))

    def tensors(self, device: "torch.device | str") -> tuple["torch.Tensor", "torch.Tensor"]:
        """(float32 Hann window, float32 filterbank with each row paired for ``mel_power``) on
        ``device``, built once per device."""
        import torch

        key = str(torch.device(device))
        with self._lock:
            if key not in self._tensors:
                window = torch.hann_window(self.settings.n_fft, periodic=True, dtype=torch.float64)
                paired = self._filters.repeat_interleave(2, dim=0)
                self._tensors[key] = (
                    window.to(device=device, dtype=torch.float32),
                    paired.to(device=device, dtype=torch.float32),
                )
            return self._tensors[key]

    def log_mel(self, waveforms: "torch.Tensor", sounding: int | None = None) -> "torch.Tensor":
        """Unscaled ``log10(max(mel, 1e-10))`` as ``(batch, n_mels, n_frames)`` float32.

        ``sounding``: a length after which every row is zero (the whole window when not given);
        frames that see only those zeros are filled with -10 instead of being transformed.
        """
        import torch

        settings = self.settings
        if waveforms.ndim != 2 or waveforms.shape[1] != settings.n_samples:
            raise ValueError(f"expected (batch, {settings.n_samples}) waveforms, got {tuple(waveforms.shape)}")
        window, paired = self.tensors(waveforms.device)
        floor = float(np.log10(LOG_MEL_FLOOR))
        out = torch.full((waveforms.shape[0], settings.n_frames, settings.n_mels), floor, dtype=torch.float32, device=waveforms.device)
        last = settings.n_samples - 1 if sounding is None else min(sounding, settings.n_samples) - 1
        frames = min(settings.n_frames, sounding_frames(last, settings.n_samples, settings.n_fft, settings.hop_length))
        if frames:
            step = CPU_BLOCK_CLIPS if waveforms.device.type == "cpu" else waveforms.shape[0]
            for start in range(0, waveforms.shape[0], step):
                rows = slice(start, start + step)
                padded = centred(waveforms[rows].to(torch.float32), settings.n_fft, settings.hop_length, frames)
                spectrum = frame_spectrum(padded, window, settings.hop_length, 0, frames)
                out[rows, :frames] = mel_power(spectrum, paired, self._first_bin).clamp(min=LOG_MEL_FLOOR).log10()
        return out.transpose(1, 2)

    def from_waveforms(self, waveforms: "torch.Tensor", sounding: int | None = None) -> "torch.Tensor":
        """Whisper's input features ``(batch, n_mels, n_frames)`` of ``(batch, n_samples)`` waveforms."""
        return scale_log_mel(self.log_mel(waveforms, sounding)).contiguous()

    def __call__(self, clips: Sequence[np.ndarray], device: "torch.device | str" = "cpu") -> "torch.Tensor":
        """Float32 features ``(len(clips), n_mels, n_frames)`` on ``device`` of mono clips at
        ``sampling_rate``: truncated to the window, zero-padded, then transformed."""
        n_samples = self.settings.n_samples
        waveforms = waveform_batch(clips, n_samples, device)
        sounding = max((min(np.asarray(clip).size, n_samples) for clip in clips), default=0)
        return self.from_waveforms(waveforms, sounding)
