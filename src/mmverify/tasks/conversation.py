"""a_consistency_conversation: one clip per turn, per-turn transcript constraints, consistent voices.

Published rule (``mmmg``): the number of clips must equal ``len(order)``; every clip is transcribed
with English forced, first 30 s (see :mod:`mmverify.tasks.speech`); score = mean over the constrained
turns of their constraint check x the product over every pair of turns by the same speaker id of
[speaker cosine > 0.93].

``distinct_speakers_ok`` is an addition the published check lacks: every pair of turns by
*different* speaker ids must have cosine <= the threshold (otherwise one voice reading every part
passes).  It is always reported; it changes the score only with ``require_distinct_speakers=True``.
``strict`` sets it, detects the language, transcribes whole clips and matches keywords at word
boundaries.  Version 2: the transcription policy became part of the profile.
"""

from __future__ import annotations

import itertools
from typing import Any, Mapping

from ..core.errors import ErrorCode, GenerationFault, ScoringError
from ..core.types import Check, Instance
from ..verifiers.speech.text_metrics import normalize_english
from ..verifiers.text import parse_mmmg_turn_constraints
from .base import Task, require_field
from .response import Response
from .speech_steps import (
    MODEL_RATES,
    PUBLISHED_TRANSCRIPTION,
    SAMPLE_RATE,
    SPEAKER_THRESHOLD,
    Transcription,
    check_constraints,
    speaker_similarities,
    transcribe,
    transcript_evidence,
    transcription_for,
    validate_semantics,
    validate_threshold,
    validate_transcription,
)


class Conversation(Task):
    id = "a_consistency_conversation"
    version = 2

    def __init__(
        self,
        speaker_threshold: float = SPEAKER_THRESHOLD,
        require_distinct_speakers: bool = False,
        semantics: str = "published",
        transcription: Transcription = PUBLISHED_TRANSCRIPTION,
    ) -> None:
        self.speaker_threshold = validate_threshold(speaker_threshold)
        if not isinstance(require_distinct_speakers, bool):
            raise ValueError("require_distinct_speakers must be a bool")
        self.require_distinct_speakers = require_distinct_speakers
        self.semantics = validate_semantics(semantics)
        self.transcription = validate_transcription(transcription)

    @classmethod
    def profile_params(cls, profile: str) -> Mapping[str, Any]:
        strict = profile == "strict"
        return {
            "require_distinct_speakers": strict,
            "semantics": "word" if strict else "published",
            "transcription": transcription_for(profile),
        }

    def params(self) -> Mapping[str, Any]:
        return {
            "speaker_threshold": self.speaker_threshold,
            "require_distinct_speakers": self.require_distinct_speakers,
            "semantics": self.semantics,
            "transcription": self.transcription.as_params(),
        }

    def score(self, instance: Instance, response: Response) -> Check:
        order = require_field(instance, "order")
        if not isinstance(order, list) or not order or not all(isinstance(s, (int, str)) and not isinstance(s, bool) for s in order):
            raise ScoringError(ErrorCode.INVALID_INSTANCE, f"{instance.id}: order must be a non-empty list of speaker ids")
        try:
            turns = parse_mmmg_turn_constraints(
                require_field(instance, "constraint", "constraints"), n_turns=len(order),
                semantics=self.semantics, normalizer=normalize_english,
            )  # fmt: skip
        except ValueError as exc:
            raise ScoringError(ErrorCode.INVALID_INSTANCE, f"{instance.id}: constraint: {exc}") from None

        count = len(response.of_type("audio"))
        if count == 0:
            raise GenerationFault("no_audio", "the response contains no audio")
        if count != len(order):
            raise GenerationFault(
                "wrong_audio_count", f"expected {len(order)} clips (one per turn), got {count}",
                audio_count=count, expected=len(order),
            )  # fmt: skip
        clips = response.clips(SAMPLE_RATE, MODEL_RATES)
        transcripts = transcribe(clips, "en", self.transcription)

        components: dict[str, float] = {}
        turn_evidence = []
        for turn, checkers in turns.items():
            check = check_constraints(transcripts[turn], checkers)
            components[f"turn_{turn}"] = check.score
            turn_evidence.append({"turn": turn, "instructions": check.evidence["instructions"]})
        constraint_score = sum(components.values()) / len(turns)

        sims = speaker_similarities(clips)
        pairs = list(itertools.combinations(range(len(order)), 2))
        same = [float(sims[i, j]) for i, j in pairs if order[i] == order[j]]
        cross = [float(sims[i, j]) for i, j in pairs if order[i] != order[j]]
        same_ok = 1.0 if all(s > self.speaker_threshold for s in same) else 0.0
        distinct_ok = 1.0 if all(s <= self.speaker_threshold for s in cross) else 0.0

        score = constraint_score * same_ok * (distinct_ok if self.require_distinct_speakers else 1.0)
        components.update(constraint_score=constraint_score, same_speaker_ok=same_ok, distinct_speakers_ok=distinct_ok)
        if same:
            components["min_same_speaker_similarity"] = min(same)
        if cross:
            components["max_cross_speaker_similarity"] = max(cross)
        evidence = {
            "order": list(order),
            "turns": [transcript_evidence(t) for t in transcripts],
            "constraints": turn_evidence,
            "similarities": [[i, j, round(float(sims[i, j]), 4)] for i, j in pairs],
            "speaker_threshold": self.speaker_threshold,
            "require_distinct_speakers": self.require_distinct_speakers,
        }
        return Check(score=score, components=components, evidence=evidence)
