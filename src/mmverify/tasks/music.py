"""Music tasks scored by programs (and a beat tracker): a_music_intensity and a_music_tempo."""

from __future__ import annotations

from typing import Any, Mapping

from ..core.errors import ErrorCode, ScoringError
from ..core.types import Check, Instance
from ..verifiers.audio import PUBLISHED_SAMPLE_RATE
from ..verifiers.audio.intensity import TRENDS, IntensityParams, check_intensity
from ..verifiers.audio.tempo import bpm_from_beat_count, bpm_from_intervals, check_tempo
from .base import Task, require_field
from .response import Response


class MusicIntensity(Task):
    """``intensity: [position, trend]``, e.g. ``["start", "fade in"]``."""

    id = "a_music_intensity"
    binary = True

    def __init__(self, params: IntensityParams = IntensityParams()) -> None:
        self.intensity_params = params

    def params(self) -> Mapping[str, Any]:
        return dict(self.intensity_params.__dict__)

    def score(self, instance: Instance, response: Response) -> Check:
        annotation = require_field(instance, "intensity")
        if not (isinstance(annotation, (list, tuple)) and len(annotation) == 2 and annotation[0] in ("start", "end") and annotation[1] in TRENDS):
            raise ScoringError(ErrorCode.INVALID_INSTANCE, f"{instance.id}: intensity must be [start|end, {' | '.join(TRENDS)}]")
        audio, rate = response.single_audio(PUBLISHED_SAMPLE_RATE)
        return check_intensity(audio, rate, annotation[0], annotation[1], self.intensity_params)


class MusicTempo(Task):
    """``tempo`` in BPM.  Version 1 estimates BPM as beats x 60 / trimmed duration (published);
    ``estimator="intervals"`` (60 / median inter-beat interval) is the more robust alternative."""

    id = "a_music_tempo"
    binary = True

    def __init__(self, estimator: str = "count", tolerance: float = 5.0, trim_top_db: float = 60.0) -> None:
        if estimator not in ("count", "intervals"):
            raise ValueError("estimator must be 'count' or 'intervals'")
        self.estimator = estimator
        self.tolerance = tolerance
        self.trim_top_db = trim_top_db

    def params(self) -> Mapping[str, Any]:
        return {"estimator": self.estimator, "tolerance": self.tolerance, "trim_top_db": self.trim_top_db}

    def score(self, instance: Instance, response: Response) -> Check:
        import librosa

        from ..models.hub import get_hub

        target = require_field(instance, "tempo")
        if not isinstance(target, (int, float)) or isinstance(target, bool) or target <= 0:
            raise ScoringError(ErrorCode.INVALID_INSTANCE, f"{instance.id}: tempo must be a positive number")
        audio, rate = response.single_audio(PUBLISHED_SAMPLE_RATE)
        trimmed, _ = librosa.effects.trim(audio, top_db=self.trim_top_db)
        if len(trimmed) == 0:
            return Check.fail("silent_audio")
        tracker = get_hub().backend("beat_tracker")
        beats = tracker.beats(trimmed, rate)
        duration = len(trimmed) / rate
        bpm = bpm_from_beat_count(beats, duration) if self.estimator == "count" else bpm_from_intervals(beats)
        check = check_tempo(bpm, float(target), self.tolerance)
        evidence = {**check.evidence, "tracker": tracker.name, "beats": int(len(beats)), "trimmed_seconds": round(duration, 3)}
        return Check(score=check.score, passed=check.passed, components=check.components, evidence=evidence)
