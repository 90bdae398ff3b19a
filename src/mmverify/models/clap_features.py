"""CLAP's log-mel audio features in torch, batched on the model's device.

The same features as transformers' ``ClapFeatureExtractor`` (the front end of
``laion/clap-htsat-unfused``), computed for a whole batch at once instead of frame by frame in
numpy.  What the extractor does, and what is done here:

- the window: ``max_length_s * sampling_rate`` samples (10 s at 48 kHz).  A longer clip is cut to
  the window at an offset seeded by its content (:func:`deterministic_crop`), where the extractor's
  ``"rand_trunc"`` draws a random one.  A shorter clip is zero-padded (``padding="zero"``, what the
  published evaluator computed) or tiled ``window // len`` times and then zero-padded
  (``padding="repeat"``, the checkpoint's "repeatpad").  An empty clip zero-pads to silence; it
  cannot be tiled.
- the STFT: a periodic Hann window of ``fft_window_size`` samples, hop ``hop_length``, frames
  centred by reflecting ``fft_window_size // 2`` samples at both ends, one-sided spectrum, power 2.
- the mel filterbank: ``feature_size`` triangular filters between ``frequency_min`` and
  ``frequency_max`` over bins spaced evenly from 0 to ``sampling_rate // 2``.  Unfused checkpoints
  (``"rand_trunc"``) use the Slaney mel scale with Slaney area normalisation (librosa's default);
  fused ones (``"fusion"``) use the HTK scale without normalisation (torchaudio's default).
- decibels: ``10 * log10(max(mel, 1e-10))``, so silence reads -100 dB.  The extractor stores a
  ``top_db`` setting but never applies it, so there is no dynamic-range clamp.
- output: float32 ``(batch, 1, frames, mels)``.  laion/clap-htsat-unfused is unfused (truncation
  "rand_trunc", ``enable_fusion`` False), so this is all it needs.  A fused checkpoint gets the same
  mel four times, ``(batch, 4, frames, mels)``, which is what the extractor returns for clips that
  fit the window (every clip does, once cropped); the fused long-clip path (three random chunks
  and a shrunk whole) is therefore never taken and not reproduced.

Frames that see only zeros (the tail of a zero-padded clip) are not transformed: their features
are exactly the -100 dB the transform would give them.

Precision: the extractor computes its FFT in float64.  A float32 FFT leaves rounding noise about
140 dB below a frame's loudest bin, which is above the -100 dB floor for a full-scale tone: such
quiet mel bands then differ by up to 0.09 dB (5e-4 of the dynamic range) from the extractor's.  The
frames and FFT therefore run in float64 for published parity (``compute_dtype=torch.float64``);
the spectrum is then rounded to complex64 (as the extractor stores it) and the filterbank product,
a sum of squares without cancellation, runs in float32.  This agrees with the extractor to about
1e-5 dB.  ``compute_dtype=torch.float32`` is the faster choice where the model itself runs in
bf16/fp16 (and on devices without float64).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from .cache import array_digest
from .mel import centred, frame_spectrum, last_sounding_sample, mel_filterbank, mel_power, power_to_db, sounding_frames
from .transfer import upload, upload_joined

if TYPE_CHECKING:
    import torch

PADDINGS = ("repeat", "zero")
FUSION_CHANNELS = 4
CPU_CHUNK_BYTES = 2 * 1024 * 1024  # frame buffer per block on the CPU (see ClapMelFeatures._blocks)
# Slaney's mel scale: linear below 1 kHz (3 mels per 200 Hz), logarithmic above (27 mels per factor 6.4).


# -- cropping and padding (numpy; the crop offset only depends on the clip) -----------------------
def crop_offset(digest: str, overflow: int) -> int:
    """Start of the crop window for a clip ``overflow`` samples longer than the window.

    Uniform over ``[0, overflow]`` like the published random crop, but seeded by the clip's content
    hash so it never changes between calls, processes or machines.
    """
    rng = np.random.default_rng(int(digest[:16], 16))
    return int(rng.integers(0, overflow + 1))


def deterministic_crop(clip: np.ndarray, max_samples: int, digest: str | None = None) -> np.ndarray:
    """``clip`` cut to at most ``max_samples`` at a content-seeded offset (shorter clips unchanged)."""
    overflow = clip.shape[0] - max_samples
    if overflow <= 0:
        return clip
    start = crop_offset(digest or array_digest(clip), overflow)
    return clip[start : start + max_samples]


def check_padding(padding: str) -> str:
    if padding not in PADDINGS:
        raise ValueError(f"padding must be one of {', '.join(PADDINGS)}, got {padding!r}")
    return padding


def filled_length(length: int, window: int, padding: str) -> int:
    """Samples of a ``length``-sample clip (at most ``window``) before the zeros start: the clip
    itself, or ``window // length`` copies of it when repeat-padding."""
    if padding == "repeat" and length:
        return (window // length) * length
    return length


def waveform_batch(
    clips: Sequence[np.ndarray],
    window: int,
    padding: str,
    device: "torch.device | str" = "cpu",
    dtype: "torch.dtype | None" = None,
    digests: Sequence[str | None] | None = None,
    gather: bool | None = None,
) -> "torch.Tensor":
    """``(len(clips), window)`` waveforms on ``device``: each mono clip cropped (content-seeded) and
    padded by ``padding`` ("zero" or "repeat").

    All samples travel to the device in one copy; tiling and padding happen there, row by row on a
    CPU, or for all rows at once by ``gather``-ing samples by index (the default on an accelerator,
    where every row's copies would be kernel launches of their own).  Both copy the same samples.
    """
    import torch

    check_padding(padding)
    dtype = torch.float32 if dtype is None else dtype
    seeds = list(digests) if digests is not None else [None] * len(clips)
    cropped = [deterministic_crop(np.asarray(c, dtype=np.float32), window, d) for c, d in zip(clips, seeds)]
    if padding == "repeat" and any(c.shape[0] == 0 for c in cropped):
        raise ValueError("cannot repeat-pad an empty clip")
    lengths = [clip.shape[0] for clip in cropped]
    if not sum(lengths):
        return torch.zeros((len(cropped), window), dtype=dtype, device=device)
    flat = upload_joined(cropped, device)  # float32 travels; rows take ``dtype``
    if gather if gather is not None else flat.device.type != "cpu":
        return _gathered_rows(flat, lengths, window, padding, dtype)
    batch = torch.zeros((len(cropped), window), dtype=dtype, device=device)
    start = 0
    for row, length in zip(batch, lengths):
        if length:
            samples = flat[start : start + length]
            copies = filled_length(length, window, padding) // length
            row[: copies * length] = samples.repeat(copies) if copies > 1 else samples
        start += length
    return batch


_GATHER_ELEMENTS = 1 << 25  # samples gathered per step: bounds the index tensor (8 bytes each)


def _gathered_rows(flat: "torch.Tensor", lengths: list[int], window: int, padding: str, dtype: "torch.dtype") -> "torch.Tensor":
    """The rows of :func:`waveform_batch` at once: sample ``p`` of a row is its clip's sample
    ``p mod length`` up to the filled length, zero after."""
    import torch

    device = flat.device
    starts, periods, filled = upload(
        np.array([np.cumsum([0, *lengths[:-1]]), [max(n, 1) for n in lengths], [filled_length(n, window, padding) for n in lengths]]),
        device,
    )[:, :, None]
    positions = torch.arange(window, device=device)[None, :]
    step = max(1, _GATHER_ELEMENTS // window)
    rows = []
    for first in range(0, len(lengths), step):
        part = slice(first, first + step)
        index = (starts[part] + positions % periods[part]).clamp_(max=flat.numel() - 1)  # empty clips index nothing kept
        rows.append(torch.where(positions < filled[part], flat[index].to(dtype), torch.zeros((), dtype=dtype, device=device)))
    return torch.cat(rows) if len(rows) > 1 else rows[0]


# -- settings and the per-device tensors ---------------------------------------------------------
@dataclass(frozen=True)
class ClapMelSettings:
    """The extractor settings the features depend on."""

    sampling_rate: int = 48_000
    n_fft: int = 1024
    hop_length: int = 480
    n_mels: int = 64
    f_min: float = 50.0
    f_max: float = 14_000.0
    max_samples: int = 480_000
    fusion: bool = False

    @classmethod
    def from_extractor(cls, extractor: Any, fusion: bool | None = None) -> "ClapMelSettings":
        """Settings of a transformers ``ClapFeatureExtractor``; ``fusion`` defaults to its truncation mode."""
        return cls(
            sampling_rate=int(extractor.sampling_rate),
            n_fft=int(extractor.fft_window_size),
            hop_length=int(extractor.hop_length),
            n_mels=int(extractor.feature_size),
            f_min=float(extractor.frequency_min),
            f_max=float(extractor.frequency_max),
            max_samples=int(extractor.nb_max_samples),
            fusion=(extractor.truncation == "fusion") if fusion is None else bool(fusion),
        )

    @property
    def n_freqs(self) -> int:
        return self.n_fft // 2 + 1

    @property
    def n_frames(self) -> int:
        return 1 + self.max_samples // self.hop_length

    @property
    def channels(self) -> int:
        return FUSION_CHANNELS if self.fusion else 1

    def filterbank(self) -> "torch.Tensor":
        """The float64 filterbank the extractor pairs with this truncation mode."""
        if self.fusion:
            return mel_filterbank(self.n_freqs, self.n_mels, self.f_min, self.f_max, self.sampling_rate, "htk", False)
        return mel_filterbank(self.n_freqs, self.n_mels, self.f_min, self.f_max, self.sampling_rate, "slaney", True)


class ClapMelFeatures:
    """Log-mel features of CLAP clips for one extractor configuration.

    Holds the Hann window and the filterbank per (device, dtype); call it with a list of clips of
    any lengths to get one float32 feature batch on that device.
    """

    def __init__(self, settings: ClapMelSettings) -> None:
        if settings.max_samples <= settings.n_fft // 2:
            raise ValueError(f"a {settings.max_samples}-sample window is too short for {settings.n_fft}-point frames")
        self.settings = settings
        filters = settings.filterbank()
        used = (filters > 0).any(dim=1).nonzero().flatten()
        self._first_bin = int(used[0]) if used.numel() else 0
        self._filters = filters[self._first_bin : int(used[-1]) + 1 if used.numel() else 1]
        self._tensors: dict[tuple[str, Any], tuple["torch.Tensor", "torch.Tensor"]] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_extractor(cls, extractor: Any, fusion: bool | None = None) -> "ClapMelFeatures":
        return cls(ClapMelSettings.from_extractor(extractor, fusion))

    def tensors(self, device: "torch.device | str", dtype: "torch.dtype") -> tuple["torch.Tensor", "torch.Tensor"]:
        """(Hann window in ``dtype``, float32 paired filterbank) on ``device``, built once per pair."""
        import torch

        key = (str(torch.device(device)), dtype)
        with self._lock:
            if key not in self._tensors:
                window = torch.hann_window(self.settings.n_fft, periodic=True, dtype=torch.float64)
                paired = self._filters.repeat_interleave(2, dim=0)
                self._tensors[key] = (window.to(device=device, dtype=dtype), paired.to(device=device, dtype=torch.float32))
            return self._tensors[key]

    def from_waveforms(
        self, waveforms: "torch.Tensor", compute_dtype: "torch.dtype | None" = None, sounding: int | None = None
    ) -> "torch.Tensor":
        """Float32 features ``(batch, channels, frames, mels)`` of ``(batch, max_samples)`` waveforms.

        ``sounding``: a length after which every row is zero (found by a scan when not given).
        Frames that see only those zeros (the tail of zero-padded clips) are not transformed: they
        are -100 dB, exactly what the transform gives them.
        """
        import torch

        compute_dtype = torch.float64 if compute_dtype is None else compute_dtype
        settings = self.settings
        if waveforms.ndim != 2 or waveforms.shape[1] != settings.max_samples:
            raise ValueError(f"expected (batch, {settings.max_samples}) waveforms, got {tuple(waveforms.shape)}")
        window, paired = self.tensors(waveforms.device, compute_dtype)
        silent = power_to_db(torch.zeros((), dtype=paired.dtype, device=waveforms.device)).to(torch.float32)
        decibels = silent.expand(waveforms.shape[0], settings.n_frames, settings.n_mels).clone()
        last = last_sounding_sample(waveforms) if sounding is None else min(sounding, settings.max_samples) - 1
        frames = sounding_frames(last, settings.max_samples, settings.n_fft, settings.hop_length)
        for rows, blocks in self._blocks(waveforms.shape[0], frames, window):
            padded = centred(waveforms[rows], settings.n_fft, settings.hop_length, frames)
            for first, last in blocks:
                spectrum = frame_spectrum(padded, window, settings.hop_length, first, last)
                decibels[rows, first:last] = power_to_db(mel_power(spectrum, paired, self._first_bin))
        channels = decibels[:, None]
        return channels.expand(-1, FUSION_CHANNELS, -1, -1).contiguous() if settings.fusion else channels

    def _blocks(self, count: int, frames: int, window: "torch.Tensor") -> list[tuple[slice, list[tuple[int, int]]]]:
        """Rows, and frame ranges within them, transformed together: everything at once on an
        accelerator; on the CPU blocks whose frame buffer stays under ``CPU_CHUNK_BYTES``, small
        enough for the allocator to reuse from block to block instead of mapping (and faulting in)
        fresh pages for every large buffer."""
        if not frames:
            return []
        if window.device.type != "cpu":
            return [(slice(0, count), [(0, frames)])]
        frame_bytes = self.settings.n_fft * window.element_size()
        per_block = max(1, CPU_CHUNK_BYTES // frame_bytes)
        rows = max(1, per_block // frames)
        ranges = [(first, min(first + per_block, frames)) for first in range(0, frames, per_block)]
        return [(slice(start, min(start + rows, count)), ranges) for start in range(0, count, rows)]

    def __call__(
        self,
        clips: Sequence[np.ndarray],
        padding: str = "zero",
        device: "torch.device | str" = "cpu",
        compute_dtype: "torch.dtype | None" = None,
        digests: Sequence[str | None] | None = None,
    ) -> "torch.Tensor":
        """Float32 features ``(len(clips), channels, frames, mels)`` on ``device`` of mono clips at
        ``sampling_rate``: cropped (content-seeded), padded by ``padding``, then transformed in
        ``compute_dtype`` (float64 unless given)."""
        import torch

        window = self.settings.max_samples
        waveforms = waveform_batch(clips, window, padding, device, torch.float32, digests)
        sounding = max((filled_length(min(len(clip), window), window, padding) for clip in clips), default=0)
        return self.from_waveforms(waveforms, compute_dtype, sounding)
