"""What the 16 kHz clip models (speaker embeddings, speaker gender) share.

:class:`ClipBackend` checks each clip, serves outputs from the per-clip cache, computes each
distinct missing clip once and batches clips by length; the helpers below pad short clips, group
clips into batches that padding cannot change, and normalise embedding rows.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar, Sequence

import numpy as np

from .base import Backend, validate_waveform
from .cache import OutputCache, array_digest

SILENCE_PEAK = 1e-4  # -80 dBFS: below this a clip carries no usable voice
_PREPROCESS = "v1"  # part of every cache key; bump when input handling changes


def is_silent(clip: np.ndarray) -> bool:
    return float(np.max(np.abs(clip))) <= SILENCE_PEAK


def pad_to(clip: np.ndarray, min_samples: int) -> np.ndarray:
    """Zero-pad a clip too short for the model's receptive field."""
    return clip if clip.size >= min_samples else np.pad(clip, (0, min_samples - clip.size))


def length_groups(lengths: Sequence[int], batch_size: int, pad_ok: bool) -> list[list[int]]:
    """Indices grouped into batches: sorted by length when padding is harmless (less padding),
    otherwise only clips of identical length share a batch."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    if pad_ok:
        return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    groups: list[list[int]] = []
    for i in order:
        if groups and len(groups[-1]) < batch_size and lengths[groups[-1][0]] == lengths[i]:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def conv_min_samples(kernels: Sequence[int], strides: Sequence[int], frames: int) -> int:
    """Fewest input samples for which a strided conv stack yields ``frames`` output frames."""
    samples = frames
    for kernel, stride in reversed(list(zip(kernels, strides))):
        samples = (samples - 1) * stride + kernel
    return samples


def describe(exc: BaseException) -> str:
    """An exception's type and first line (torch's unpickling errors run to a page)."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"


def l2_rows(matrix: np.ndarray) -> np.ndarray:
    rows = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return np.ascontiguousarray(rows / np.maximum(norms, np.float32(1e-12)), dtype=np.float32)


class ClipBackend(Backend):
    """16 kHz clip models: input checks, per-clip output cache, batching by length."""

    sample_rate: ClassVar[int] = 16_000
    kind: ClassVar[str]  # cache namespace of the outputs

    def __init__(
        self, source: str | None = None, device: str | None = None, batch_size: int = 8, cache: OutputCache | None = None
    ) -> None:
        super().__init__(source=source, device=device, batch_size=batch_size)
        self.cache = cache

    def _cache_params(self) -> dict[str, Any]:
        return {"sr": self.sample_rate, "prep": _PREPROCESS}

    def _known_output(self, clip: np.ndarray) -> np.ndarray | None:
        """The output of a clip the model need not see (a silent one), else None."""
        return None

    def _outputs(self, clips: Sequence[np.ndarray], compute: Callable[[list[np.ndarray]], list[np.ndarray]]) -> list[np.ndarray]:
        """One float32 vector per clip, from the cache where possible; misses computed together,
        each distinct clip once."""
        self.ensure_loaded()
        arrays = [validate_waveform(clip) for clip in clips]
        digests = [array_digest(a) for a in arrays]
        keys: list[str] = []
        rows: list[np.ndarray | None] = [None] * len(arrays)
        if self.cache is not None:
            params = self._cache_params()
            keys = [OutputCache.key(self.fingerprint, self.kind, d, **params) for d in digests]
            rows = [self.cache.get_array(key) for key in keys]
        first: dict[str, int] = {}
        for i, row in enumerate(rows):
            if row is None:
                first.setdefault(digests[i], i)
        if first:
            todo = list(first.values())
            computed: dict[int, Any] = {i: self._known_output(arrays[i]) for i in todo}
            run = [i for i in todo if computed[i] is None]
            # only clips of one length share a (fixed-shape) batch: see models/batching.py
            computed.update(zip(run, self.run_batched(self.kind, [arrays[i] for i in run], compute, len)))
            for i in todo:
                row = np.asarray(computed[i], dtype=np.float32)
                if self.cache is not None:
                    self.cache.put_array(keys[i], self.kind, row)
                computed[i] = row
            for i, row in enumerate(rows):
                if row is None:
                    rows[i] = computed[first[digests[i]]]
        return rows  # type: ignore[return-value]
