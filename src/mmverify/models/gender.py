"""Speaker gender from a wav2vec2 sequence classifier, as in MMMG: the first 5 s at 16 kHz.

The classifier sees exactly ``window_seconds`` of audio, as published: longer clips are cut to their
first 5 s and shorter ones are zero-padded to 5 s *before* the feature extractor, so its
zero-mean/unit-variance normalisation and the model's attention cover the padding too (the input a
short clip gets is not the one it would get unpadded).

``classify`` returns one ``{label: probability}`` dict per clip, labels taken from the checkpoint's
``id2label`` ("female"/"male" in any letter case are normalised to lower case).  A silent clip
(peak below -80 dBFS) gets a uniform distribution: there is no voice to classify.
"""

from __future__ import annotations

from typing import Any, ClassVar, Sequence

import numpy as np

from .base import validate_waveform
from .clips import TransformersClipModel, conv_min_samples, is_silent, length_groups, pad_to


def normalise_label(label: str) -> str:
    lowered = str(label).strip().lower()
    return lowered if lowered in ("female", "male") else str(label)


class Wav2Vec2Gender(TransformersClipModel):
    """``alefiury/wav2vec2-large-xlsr-53-gender-recognition-librispeech`` or another wav2vec2-family
    (wav2vec2, HuBERT, WavLM) sequence-classification checkpoint with its feature extractor."""

    name = "gender-w2v2"
    capability = "gender"
    kind = "gender_probs"
    default_source = "alefiury/wav2vec2-large-xlsr-53-gender-recognition-librispeech"
    auto_model = "AutoModelForAudioClassification"
    checkpoint_kind = "an audio classifier"
    window_seconds: ClassVar[float] = 5.0
    labels: list[str]  # the checkpoint's classes in id order, known once loaded

    def _configure(self, config: Any) -> None:
        super()._configure(config)
        self.labels = [normalise_label(config.id2label[i]) for i in range(config.num_labels)]
        self._min_samples = conv_min_samples(config.conv_kernel, config.conv_stride, 1)

    def worker_settings(self) -> dict[str, Any]:
        return {"labels": list(self.labels)}  # a silent window's uniform probabilities name them

    def adopt(self, settings: dict[str, Any]) -> None:
        self.labels = [str(label) for label in settings["labels"]]

    def _cache_params(self) -> dict[str, Any]:
        return {**super()._cache_params(), "window_s": self.window_seconds, "window": "zero-padded"}

    def _window(self, clip: np.ndarray) -> np.ndarray:
        """The first ``window_seconds`` of the clip, zero-padded to exactly that length."""
        size = int(self.window_seconds * self.sample_rate)
        head = validate_waveform(clip)[:size]
        return np.pad(head, (0, size - head.size)) if head.size < size else head

    def _known_output(self, clip: np.ndarray) -> np.ndarray | None:
        """A silent window is no evidence either way: uniform probabilities."""
        return np.full(len(self.labels), 1.0 / len(self.labels), dtype=np.float32) if is_silent(clip) else None

    def _compute(self, clips: list[np.ndarray]) -> list[np.ndarray]:
        torch = self._torch
        out = np.zeros((len(clips), len(self.labels)), dtype=np.float32)
        padded = [pad_to(clip, self._min_samples) for clip in clips]
        for rows in length_groups([clip.size for clip in padded], self.batch_size, self._pad_ok):
            values, mask = self._inputs([padded[i] for i in rows])
            with torch.inference_mode():
                logits = self._model(values, attention_mask=mask).logits
            out[rows] = torch.softmax(logits.float(), dim=-1).cpu().numpy()
        return list(out)

    def classify(self, clips: Sequence[np.ndarray]) -> list[dict[str, float]]:
        """``{label: probability}`` per clip, from its first ``window_seconds``."""
        rows = self._outputs([self._window(clip) for clip in clips])
        return [{label: float(p) for label, p in zip(self.labels, row)} for row in rows]
