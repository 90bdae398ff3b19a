"""The capability interfaces tasks program against.  Inputs are mono float32 waveforms at the
backend's ``sample_rate`` (callers resample through :func:`mmverify.core.media.resample`) and uint8
RGB images; outputs are plain numpy arrays, strings and floats."""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np


@runtime_checkable
class AudioTextEmbedder(Protocol):
    """CLAP-style joint embeddings; rows are L2-normalised."""

    sample_rate: int

    def embed_audio(self, clips: Sequence[np.ndarray]) -> np.ndarray: ...

    def embed_text(self, texts: Sequence[str]) -> np.ndarray: ...


@runtime_checkable
class ImageSimilarity(Protocol):
    """Perceptual similarity in [0, 1] (1 = same), e.g. 1 - DreamSim distance."""

    def similarity(self, pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[float]: ...


@runtime_checkable
class Transcriber(Protocol):
    sample_rate: int

    def transcribe(self, clips: Sequence[np.ndarray], language: str | None = None) -> list[str]: ...


@runtime_checkable
class SpeakerEmbedder(Protocol):
    """Speaker embeddings; rows are L2-normalised so a dot product is the cosine similarity."""

    sample_rate: int

    def embed(self, clips: Sequence[np.ndarray]) -> np.ndarray: ...


@runtime_checkable
class GenderClassifier(Protocol):
    sample_rate: int

    def classify(self, clips: Sequence[np.ndarray]) -> list[dict[str, float]]: ...


@runtime_checkable
class BeatTracker(Protocol):
    """Beat times in seconds; ``name`` says which tracker produced them (kept in evidence)."""

    name: str

    def beats(self, audio: np.ndarray, sample_rate: int) -> np.ndarray: ...


@runtime_checkable
class VoiceActivity(Protocol):
    sample_rate: int

    def speech_segments(self, audio: np.ndarray, sample_rate: int) -> list[tuple[float, float]]: ...


@runtime_checkable
class VisionLanguageJudge(Protocol):
    """A (vision-)language model answering one prompt about zero or more images.

    ``ask`` returns the raw reply text; parsing it (and refusing unparseable replies) is the job of
    :mod:`mmverify.verifiers.vlm`.  Implementations use temperature 0, cache replies by content, and
    raise :class:`mmverify.models.base.ModelUnavailable` or a ``judge_failed`` ScoringError when no
    reply could be obtained -- never an empty string standing in for an answer.
    """

    model_id: str

    def ask(self, prompt: str, images: Sequence[np.ndarray] = (), *, max_tokens: int = 1024) -> str: ...
