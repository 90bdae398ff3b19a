"""Music tasks scored by programs (and a beat tracker): a_music_intensity and a_music_tempo."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar, Mapping

from ..core.errors import ErrorCode, ScoringError
from ..core.types import Check, Instance
from ..verifiers.audio import PUBLISHED_SAMPLE_RATE
from ..verifiers.audio.intensity import TRENDS, IntensityParams, check_intensity
from ..verifiers.audio.tempo import ESTIMATORS, check_tempo, estimate_bpm
from . import models
from .base import Task, require_field
from .response import Response


class MusicIntensity(Task):
    """``intensity: [position, trend]``, e.g. ``["start", "fade in"]``.

    Version 2.  ``mmmg``: the published fit, including its edge cases (a two-point regression has
    standard error 0 and is accepted; the end of a trimmed clip under 2 s is the whole clip).
    ``strict``: at least three regression points, and clips under 2 s have no measurable trend.
    """

    id = "a_music_intensity"
    version = 2
    binary = True

    def __init__(self, params: IntensityParams = IntensityParams()) -> None:
        self.intensity_params = params

    @classmethod
    def profile_params(cls, profile: str) -> Mapping[str, Any]:
        if profile == "strict":
            return {"params": replace(IntensityParams(), min_points=3, short_end_whole_clip=False)}
        return {}

    def params(self) -> Mapping[str, Any]:
        return dict(self.intensity_params.__dict__)

    def score(self, instance: Instance, response: Response) -> Check:
        annotation = require_field(instance, "intensity")
        if not (isinstance(annotation, (list, tuple)) and len(annotation) == 2 and annotation[0] in ("start", "end") and annotation[1] in TRENDS):
            raise ScoringError(ErrorCode.INVALID_INSTANCE, f"{instance.id}: intensity must be [start|end, {' | '.join(TRENDS)}]")
        audio, rate = response.single_audio(PUBLISHED_SAMPLE_RATE)
        return check_intensity(audio, rate, annotation[0], annotation[1], self.intensity_params)


class MusicTempo(Task):
    """``tempo`` in BPM, from a beat tracker run on the silence-trimmed clip; pass when
    ``|BPM - tempo| < 5``.

    Version 2.  ``estimator`` turns beats into BPM: ``"count"`` (beats x 60 / trimmed duration, the
    published formula), ``"intervals"`` (the fitted beat period, see
    :mod:`mmverify.verifiers.audio.tempo`) or ``"auto"``: the estimator the tracker declares
    (``bpm_estimator``) -- the published formula for beat_this, the one it was published with, and
    the beat period for librosa's tracker, whose dropped edge beats make the count formula
    under-count.  ``mmmg`` uses ``"auto"``, ``strict`` always ``"intervals"``.
    """

    id = "a_music_tempo"
    version = 2
    binary = True
    choices: ClassVar[tuple[str, ...]] = ("auto", *ESTIMATORS)

    def __init__(self, estimator: str = "auto", tolerance: float = 5.0, trim_top_db: float = 60.0) -> None:
        if estimator not in self.choices:
            raise ValueError(f"estimator must be one of {self.choices}")
        if not tolerance > 0 or not trim_top_db > 0:
            raise ValueError("tolerance and trim_top_db must be positive")
        self.estimator = estimator
        self.tolerance = float(tolerance)
        self.trim_top_db = float(trim_top_db)

    @classmethod
    def profile_params(cls, profile: str) -> Mapping[str, Any]:
        return {"estimator": "intervals"} if profile == "strict" else {}

    def params(self) -> Mapping[str, Any]:
        return {"estimator": self.estimator, "tolerance": self.tolerance, "trim_top_db": self.trim_top_db}

    def estimator_for(self, tracker: Any) -> str:
        """The estimator applied to ``tracker``'s beats."""
        if self.estimator != "auto":
            return self.estimator
        declared = getattr(tracker, "bpm_estimator", "count")
        return declared if declared in ESTIMATORS else "count"

    def score(self, instance: Instance, response: Response) -> Check:
        import librosa

        target = require_field(instance, "tempo")
        if not isinstance(target, (int, float)) or isinstance(target, bool) or target <= 0:
            raise ScoringError(ErrorCode.INVALID_INSTANCE, f"{instance.id}: tempo must be a positive number")
        audio, rate = response.single_audio(PUBLISHED_SAMPLE_RATE)
        trimmed, _ = librosa.effects.trim(audio, top_db=self.trim_top_db)
        if len(trimmed) == 0:
            return Check.fail("silent_audio")
        tracker = models.backend("beat_tracker")
        beats = tracker.beats(trimmed, rate)
        duration = len(trimmed) / rate
        estimator = self.estimator_for(tracker)
        check = check_tempo(estimate_bpm(estimator, beats, duration), float(target), self.tolerance)
        evidence = {
            **check.evidence, "tracker": tracker.name, "estimator": estimator,
            "beats": int(len(beats)), "trimmed_seconds": round(duration, 3),
        }  # fmt: skip
        return Check(score=check.score, passed=check.passed, components=check.components, evidence=evidence)
