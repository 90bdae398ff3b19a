"""What the 16 kHz clip models (speaker embeddings, speaker gender) share.

:class:`ClipBackend` checks each clip, serves outputs from the per-clip cache, computes each
distinct missing clip once and batches clips by length; :class:`TransformersClipModel` loads a
transformers checkpoint (feature extractor and model) in the chosen precision; the helpers below
pad short clips, group clips into batches that padding cannot change, and normalise embedding rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, ClassVar, Sequence

import numpy as np

from .base import PRECISIONS, Backend, ModelUnavailable, check_precision, precision_dtype, validate_waveform
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
        self, source: str | None = None, device: str | None = None, batch_size: int = 8, cache: OutputCache | None = None,
        rows: str = "auto",
    ) -> None:
        super().__init__(source=source, device=device, batch_size=batch_size, rows=rows)
        self.cache = cache

    def _cache_params(self) -> dict[str, Any]:
        return {"sr": self.sample_rate, "prep": _PREPROCESS}

    def _known_output(self, clip: np.ndarray) -> np.ndarray | None:
        """The output of a clip the model need not see (a silent one), else None."""
        return None

    def _compute(self, clips: list[np.ndarray]) -> list[np.ndarray]:
        """One output vector per clip of a batch."""
        raise NotImplementedError

    def computation(self, kind: Any) -> Callable[[list[np.ndarray]], list[np.ndarray]]:
        if kind != self.kind:
            raise ValueError(f"{self.name} has no computation {kind!r}")
        return self._compute

    def _outputs(self, clips: Sequence[np.ndarray]) -> list[np.ndarray]:
        """One float32 vector per clip, from the cache where possible; misses computed together
        (:meth:`_compute`), each distinct clip once."""
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
            computed.update(zip(run, self.run_batched(self.kind, [arrays[i] for i in run], self.computation(self.kind), len)))
            for i in todo:
                row = np.asarray(computed[i], dtype=np.float32)
                if self.cache is not None:
                    self.cache.put_array(keys[i], self.kind, row)
                computed[i] = row
            for i, row in enumerate(rows):
                if row is None:
                    rows[i] = computed[first[digests[i]]]
        return rows  # type: ignore[return-value]


class TransformersClipModel(ClipBackend):
    """A transformers audio checkpoint -- feature extractor and ``auto_model`` -- whose model and
    inputs run in ``precision``: ``fp32`` (default; published parity), ``bf16`` or ``fp16`` (not on
    the CPU).  Any other precision than fp32 is part of the fingerprint."""

    packages = ("torch", "transformers")
    option_choices: ClassVar[dict[str, tuple[str, ...]]] = {"precision": PRECISIONS}
    servable = True
    auto_model: ClassVar[str]  # the transformers class that loads the checkpoint
    checkpoint_kind: ClassVar[str]  # what the checkpoint is, for error messages

    def __init__(
        self,
        source: str | None = None,
        device: str | None = None,
        batch_size: int = 8,
        cache: OutputCache | None = None,
        precision: str = "fp32",
        rows: str = "auto",
    ) -> None:
        super().__init__(source=source, device=device, batch_size=batch_size, cache=cache, rows=rows)
        self.precision = check_precision(precision)

    @property
    def fingerprint(self) -> str:
        base = super().fingerprint
        return base if self.precision == "fp32" else f"{base};precision={self.precision}"

    def _load(self, path: Path) -> None:
        import torch
        import transformers

        self._dtype = precision_dtype(torch, self.precision, self.device, self.name)  # refused before any load
        try:
            self._extractor = transformers.AutoFeatureExtractor.from_pretrained(str(path), local_files_only=True)
            self._model = getattr(transformers, self.auto_model).from_pretrained(str(path), local_files_only=True)
        except Exception as exc:  # any failure to build it from that folder means: not usable here
            raise ModelUnavailable(self.name, f"cannot load {self.checkpoint_kind} from {path}: {describe(exc)}") from None
        self._torch = torch
        self._model.to(self.device, self._dtype).eval()
        self._configure(self._model.config)

    def _configure(self, config: Any) -> None:
        """What the checkpoint's settings decide."""
        # Group norm in the conv feature encoder normalises over time, padding included.
        self._pad_ok = getattr(config, "feat_extract_norm", "group") == "layer"

    def _inputs(self, clips: list[np.ndarray]) -> tuple[Any, Any]:
        """The extractor's padded input values, in the model's dtype, and attention mask, on its device."""
        inputs = self._extractor(
            clips, sampling_rate=self.sample_rate, padding=True, return_attention_mask=True, return_tensors="pt"
        )
        return inputs["input_values"].to(self.device, self._dtype), inputs["attention_mask"].to(self.device)
