"""The steps the speech tasks (:mod:`.speech`) and the conversation task (:mod:`.conversation`)
share: the :class:`Transcription` policy and Whisper transcripts of clips at the published analysis
rate, what a row shows about a transcript, speaker similarities, and the checks of their settings
and annotations (thresholds, MMMG constraints, required texts)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..core.errors import ErrorCode, ScoringError
from ..core.media import DecodedAudio
from ..core.types import Check, Instance
from ..verifiers.audio import PUBLISHED_SAMPLE_RATE
from ..verifiers.speech.text_metrics import english_normalizer_name, normalize_chinese, normalize_english
from ..verifiers.text import evaluate, parse_mmmg_constraint
from ..verifiers.text.mmmg import SEMANTICS, MmmgChecker
from . import models
from .base import require_field

SAMPLE_RATE = PUBLISHED_SAMPLE_RATE
MODEL_RATES = (16_000,)  # what the speech models take (Whisper, speaker, gender): decoding makes the clip at it too
SPEAKER_THRESHOLD = 0.93  # published: WavLM-SV cosine must exceed it for "same speaker"
DETECT = "detect"  # the Whisper backends' language argument for detection (models.whisper.DETECT)


@dataclass(frozen=True)
class Transcription:
    """How Whisper is run: with the task's language forced or detected, on the first ``max_seconds``
    of the clip or (``None``) on all of it."""

    force_language: bool = True
    max_seconds: float | None = 30.0

    def __post_init__(self) -> None:
        if self.max_seconds is not None and not self.max_seconds > 0:
            raise ValueError("max_seconds must be positive or None")

    def as_params(self) -> dict[str, Any]:
        return {"force_language": self.force_language, "max_seconds": self.max_seconds}


PUBLISHED_TRANSCRIPTION = Transcription(force_language=True, max_seconds=30.0)
STRICT_TRANSCRIPTION = Transcription(force_language=False, max_seconds=None)


def transcription_for(profile: str) -> Transcription:
    return STRICT_TRANSCRIPTION if profile == "strict" else PUBLISHED_TRANSCRIPTION


def transcribe(clips: Sequence[DecodedAudio], language: str = "en", policy: Transcription = PUBLISHED_TRANSCRIPTION) -> list[str]:
    """Whisper transcripts of ``clips``, one per clip, in order: the task's ``language`` ("en" or
    "zh") forced or detected and the clip limited as ``policy`` says."""
    if language not in ("en", "zh"):
        raise ValueError(f"language must be 'en' or 'zh', got {language!r}")
    backend = models.backend("transcriber_zh" if language == "zh" else "transcriber")
    inputs = [clip.whole_at(backend.sample_rate) for clip in clips]
    return backend.transcribe(inputs, language=language if policy.force_language else DETECT, max_seconds=policy.max_seconds)


def transcript_evidence(transcript: str, normalizer: str = "english") -> dict[str, Any]:
    """What a row shows about the transcript: raw, normalised, and which normaliser was used
    (``"english"``: Whisper's English normaliser; ``"chinese"``: :func:`normalize_chinese`)."""
    if normalizer == "chinese":
        return {"transcript": transcript, "normalized_transcript": normalize_chinese(transcript), "normalizer": "chinese"}
    return {
        "transcript": transcript,
        "normalized_transcript": normalize_english(transcript),
        "normalizer": english_normalizer_name(),
    }


def speaker_similarities(clips: Sequence[DecodedAudio]) -> np.ndarray:
    """Pairwise cosine similarities of the clips' speaker embeddings (rows are unit-norm)."""
    backend = models.backend("speaker")
    embeddings = np.asarray(backend.embed([clip.whole_at(backend.sample_rate) for clip in clips]), dtype=np.float64)
    return embeddings @ embeddings.T


def validate_threshold(value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not -1.0 <= float(value) <= 1.0:
        raise ValueError(f"speaker_threshold must be a cosine in [-1, 1], got {value!r}")
    return float(value)


def validate_semantics(value: str) -> str:
    if value not in SEMANTICS:
        raise ValueError(f"semantics must be one of {list(SEMANTICS)}, got {value!r}")
    return value


def parse_constraints(instance: Instance, spec: Any, semantics: str) -> list[MmmgChecker]:
    """The instance's MMMG constraint(s), checked on Whisper-normalised text."""
    try:
        return parse_mmmg_constraint(spec, semantics=semantics, normalizer=normalize_english)
    except ValueError as exc:
        raise ScoringError(ErrorCode.INVALID_INSTANCE, f"{instance.id}: constraint: {exc}") from None


def validate_transcription(value: Transcription) -> Transcription:
    if not isinstance(value, Transcription):
        raise ValueError(f"transcription must be a Transcription, got {value!r}")
    return value


def check_constraints(transcript: str, checkers: Sequence[MmmgChecker]) -> Check:
    # The published checks have no "empty response fails" rule: an empty transcript passes an exclusion.
    return evaluate(transcript, checkers, "strict", require_nonempty=False)


# A text to be spoken: a sentence or a paragraph in MMMG.  Comparing a transcript with it costs
# the product of the two lengths, and an inline instance reaches the reward server from a client.
MAX_TEXT_CHARS = 10_000


def require_text(instance: Instance, *names: str) -> str:
    value = require_field(instance, *names)
    if not isinstance(value, str) or not value.strip():
        raise ScoringError(ErrorCode.INVALID_INSTANCE, f"{instance.id}: {names[0]} must be a non-empty string")
    if len(value) > MAX_TEXT_CHARS:
        raise ScoringError(
            ErrorCode.INVALID_INSTANCE, f"{instance.id}: {names[0]} has {len(value):,} characters; at most {MAX_TEXT_CHARS:,} are scored"
        )
    return value
