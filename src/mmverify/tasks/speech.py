"""Speech tasks: what Whisper hears in the generated clip, compared with the annotation, plus voice
checks (gender, pitch, speaking rate, speaker similarity).

Shared by every task here and by the conversation task: clips are decoded at the published analysis
rate (22050 Hz; pitch and speaking rate run on that), and each model gets them resampled to its own
rate (16 kHz).  Transcripts are Whisper's (``transcriber``; ``transcriber_zh`` for Chinese) and are
compared after Whisper's English normaliser on both sides.

How Whisper is run is a :class:`~.speech_steps.Transcription` policy, chosen by the profile:

* ``mmmg`` (published): the language is forced -- English for the English tasks, Chinese for
  a_speech_chinese -- and only the first 30 s of a clip are transcribed.
* ``strict``: Whisper detects the language and transcribes the whole clip.  Forcing English makes
  Whisper *translate* speech in another language, so a clip that says the right words in the wrong
  language passes; in a_speech_translate in particular, a model that merely repeats the source-language
  speech gets that speech translated into English by Whisper and scores as a translation.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from ..core.errors import ErrorCode, ScoringError
from ..core.media import DecodedAudio
from ..core.types import Check, Instance
from ..verifiers.speech import prosody
from ..verifiers.speech.text_metrics import (
    char_accuracy,
    normalize_chinese,
    normalize_english,
    published_char_accuracy,
    word_accuracy,
)
from . import models
from .base import Task, require_field
from .media import instance_audios
from .response import Response
from .speech_steps import (
    MODEL_RATES,
    PUBLISHED_TRANSCRIPTION,
    SAMPLE_RATE,
    SPEAKER_THRESHOLD,
    Transcription,
    check_constraints,
    parse_constraints,
    require_text,
    speaker_similarities,
    transcribe,
    transcript_evidence,
    transcription_for,
    validate_semantics,
    validate_threshold,
    validate_transcription,
)

GENDERS = ("female", "male")


def _level(instance: Instance, name: str) -> str | None:
    value = instance.data.get(name)
    if value is None:
        return None
    if value not in prosody.LEVELS:
        raise ScoringError(ErrorCode.INVALID_INSTANCE, f"{instance.id}: {name} must be one of {prosody.LEVELS}, got {value!r}")
    return str(value)


# -- tasks --------------------------------------------------------------------------------------------


class SpeechTask(Task):
    """One generated clip, transcribed with the profile's :class:`Transcription` policy.

    Version 2: the published policy (language forced, first 30 s) is the ``mmmg`` default.
    """

    version = 2
    language: ClassVar[str] = "en"

    def __init__(self, transcription: Transcription = PUBLISHED_TRANSCRIPTION) -> None:
        self.transcription = validate_transcription(transcription)

    @classmethod
    def profile_params(cls, profile: str) -> Mapping[str, Any]:
        return {"transcription": transcription_for(profile)}

    def params(self) -> Mapping[str, Any]:
        return {"transcription": self.transcription.as_params()}

    def clip(self, response: Response) -> DecodedAudio:
        """The one clip at the published analysis rate, and at the models' rate where decoding
        makes it (in a decoding process, where items have them)."""
        return response.single_clip(SAMPLE_RATE, MODEL_RATES)

    def transcript(self, clip: DecodedAudio) -> str:
        return transcribe([clip], self.language, self.transcription)[0]


class SpeechAttribute(SpeechTask):
    """``text``, ``gender`` and optional ``pitch`` / ``speed`` ("high" | "low").

    score = max(1 - WER, 0) x gender_ok x pitch_score (if asked) x speed_score (if asked).  The pitch
    band is that of the *predicted* gender (published); when the classifier ties, gender_ok is 0 and
    the annotated gender's band is reported instead.  Speaking rate counts the words of the
    normalised transcript split on spaces (published).

    Profiles: ``mmmg`` pairs the pitch and intensity tracks as published and gives digital silence a
    speaking rate (as published); ``strict`` always interpolates the intensity track and reports no
    rate (speed_score 0) for clips below -80 dBFS.
    """

    id = "a_speech_attribute"
    accuracy_name: ClassVar[str] = "word_accuracy"
    rate_band_name: ClassVar[str] = "english"

    def __init__(
        self,
        pitch_bands: Mapping[str, tuple[float, float]] = prosody.PITCH_BANDS_MEL,
        rate_band: tuple[float, float] | None = None,
        trim_top_db: float = 60.0,
        transcription: Transcription = PUBLISHED_TRANSCRIPTION,
        pitch_align: str = "published",
        guard_silence: bool = False,
    ) -> None:
        super().__init__(transcription)
        if set(pitch_bands) != set(GENDERS):
            raise ValueError(f"pitch_bands must give a band for each of {GENDERS}")
        self.pitch_bands = {g: _band(pitch_bands[g]) for g in GENDERS}
        self.rate_band = _band(rate_band or prosody.RATE_BANDS[self.rate_band_name])
        if not trim_top_db > 0:
            raise ValueError("trim_top_db must be > 0")
        self.trim_top_db = float(trim_top_db)
        if pitch_align not in prosody.ALIGNMENTS:
            raise ValueError(f"pitch_align must be one of {prosody.ALIGNMENTS}")
        self.pitch_align = pitch_align
        if not isinstance(guard_silence, bool):
            raise ValueError("guard_silence must be a bool")
        self.guard_silence = guard_silence

    @classmethod
    def profile_params(cls, profile: str) -> Mapping[str, Any]:
        strict = profile == "strict"
        return {
            **super().profile_params(profile),
            "pitch_align": "interpolate" if strict else "published",
            "guard_silence": strict,
        }

    def params(self) -> Mapping[str, Any]:
        return {
            **super().params(),
            "pitch_bands": {g: list(b) for g, b in self.pitch_bands.items()},
            "rate_band": list(self.rate_band),
            "trim_top_db": self.trim_top_db,
            "pitch_align": self.pitch_align,
            "guard_silence": self.guard_silence,
        }

    def accuracy(self, reference: str, transcript: str) -> float:
        return word_accuracy(reference, transcript)

    def speech_units(self, transcript: str) -> int:
        return len(normalize_english(transcript).split(" "))

    def evidence_normalizer(self) -> str:
        return "english"

    def score(self, instance: Instance, response: Response) -> Check:
        text = require_text(instance, "text")
        gender = require_field(instance, "gender")
        if gender not in GENDERS:
            raise ScoringError(ErrorCode.INVALID_INSTANCE, f"{instance.id}: gender must be one of {GENDERS}, got {gender!r}")
        pitch, speed = _level(instance, "pitch"), _level(instance, "speed")
        clip = self.clip(response)
        audio = clip.samples
        transcript = self.transcript(clip)
        accuracy = self.accuracy(text, transcript)
        predicted, probs = _predict_gender(clip)
        gender_ok = 1.0 if predicted == gender else 0.0

        components: dict[str, float] = {self.accuracy_name: accuracy, "gender_ok": gender_ok}
        evidence: dict[str, Any] = {
            **transcript_evidence(transcript, self.evidence_normalizer()),
            "gender_probs": {label: probs[label] for label in GENDERS},
            "predicted_gender": predicted,
        }
        if predicted is None:
            evidence["gender_reason"] = "tie"
        score = accuracy * gender_ok
        if pitch is not None:
            score *= self._pitch(audio, pitch, self.pitch_bands[predicted or gender], components, evidence)
        if speed is not None:
            score *= self._speed(audio, transcript, speed, components, evidence)
        return Check(score=score, components=components, evidence=evidence)

    def _pitch(self, audio: np.ndarray, level: str, band: tuple[float, float], components: dict[str, float], evidence: dict[str, Any]) -> float:
        mel = prosody.dominant_pitch_mel(audio, SAMPLE_RATE, align=self.pitch_align)
        components["pitch_score"] = prosody.band_score(mel, band, level) if mel is not None else 0.0
        if mel is not None:
            components["pitch_mel"] = mel
        evidence.update(pitch=level, pitch_band_mel=list(band), voiced=mel is not None)
        return components["pitch_score"]

    def _speed(self, audio: np.ndarray, transcript: str, level: str, components: dict[str, float], evidence: dict[str, Any]) -> float:
        units = self.speech_units(transcript)
        rate = prosody.speaking_rate(units, audio, SAMPLE_RATE, self.trim_top_db, guard_silence=self.guard_silence)
        components["speed_score"] = prosody.band_score(rate, self.rate_band, level) if rate is not None else 0.0
        if rate is not None:
            components["rate"] = rate
        evidence.update(speed=level, rate_band=list(self.rate_band), rate_units=units)
        return components["speed_score"]


def _predict_gender(clip: DecodedAudio) -> tuple[str | None, dict[str, float]]:
    """The classifier's label for the clip (None on a tie) and its probabilities."""
    classifier = models.backend("gender")
    probs = classifier.classify([clip.whole_at(classifier.sample_rate)])[0]
    if set(probs) != set(GENDERS):
        raise ScoringError(ErrorCode.MODEL_UNAVAILABLE, f"gender classifier labels {sorted(probs)} are not {list(GENDERS)}")
    top = max(probs.values())
    winners = [label for label in GENDERS if probs[label] == top]
    return (winners[0] if len(winners) == 1 else None), probs


class SpeechChinese(SpeechAttribute):
    """As :class:`SpeechAttribute` with CER and characters per minute, transcribed by the Chinese
    Whisper.

    ``mmmg`` (published): the CER compares the transcript and the reference both passed through
    Whisper's *English* normaliser (punctuation becomes spaces), with the spaces removed from the
    reference only, so a perfect reading with punctuation loses one character per mark; the speaking
    rate counts every character of that normalised transcript, spaces included.
    ``strict``: both sides reduced to letters, digits and CJK characters (:func:`normalize_chinese`)
    for the CER and the rate.
    """

    id = "a_speech_chinese"
    language = "zh"
    accuracy_name = "char_accuracy"
    rate_band_name = "chinese"
    NORMALIZATIONS: ClassVar[tuple[str, ...]] = ("published", "chinese")

    def __init__(self, *args: Any, normalization: str = "published", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if normalization not in self.NORMALIZATIONS:
            raise ValueError(f"normalization must be one of {self.NORMALIZATIONS}")
        self.normalization = normalization

    @classmethod
    def profile_params(cls, profile: str) -> Mapping[str, Any]:
        return {**super().profile_params(profile), "normalization": "chinese" if profile == "strict" else "published"}

    def params(self) -> Mapping[str, Any]:
        return {**super().params(), "normalization": self.normalization}

    def accuracy(self, reference: str, transcript: str) -> float:
        if self.normalization == "published":
            return published_char_accuracy(reference, transcript)
        return char_accuracy(reference, transcript)

    def speech_units(self, transcript: str) -> int:
        if self.normalization == "published":
            return len(normalize_english(transcript))
        return len(normalize_chinese(transcript))

    def evidence_normalizer(self) -> str:
        return "english" if self.normalization == "published" else "chinese"


class SpeechImitate(SpeechTask):
    """``text`` read in the voice of ``audio_list``'s reference speaker:
    max(1 - WER, 0) x [speaker cosine > speaker_threshold]."""

    id = "a_speech_imitate"
    version = 3  # 3: media indices as written, nothing coerced

    def __init__(self, speaker_threshold: float = SPEAKER_THRESHOLD, transcription: Transcription = PUBLISHED_TRANSCRIPTION) -> None:
        super().__init__(transcription)
        self.speaker_threshold = validate_threshold(speaker_threshold)

    def params(self) -> Mapping[str, Any]:
        return {**super().params(), "speaker_threshold": self.speaker_threshold}

    def score(self, instance: Instance, response: Response) -> Check:
        text = require_text(instance, "text")
        clip = self.clip(response)
        references = instance_audios(instance, require_field(instance, "audio_list"), SAMPLE_RATE, response.decoder)
        if len(references) != 1:
            raise ScoringError(ErrorCode.INVALID_INSTANCE, f"{instance.id}: expected one reference speaker, got {len(references)}")
        transcript = self.transcript(clip)
        accuracy = word_accuracy(text, transcript)
        similarity = float(speaker_similarities([clip, DecodedAudio(*references[0])])[0, 1])
        speaker_ok = 1.0 if similarity > self.speaker_threshold else 0.0
        return Check(
            score=accuracy * speaker_ok,
            components={"word_accuracy": accuracy, "speaker_similarity": similarity, "speaker_ok": speaker_ok},
            evidence={**transcript_evidence(transcript), "speaker_threshold": self.speaker_threshold},
        )


class SpeechConstraint(SpeechTask):
    """MMMG ``constraint`` annotation(s) checked on the transcript; 1 when all hold.

    ``mmmg`` (published): a response without exactly one clip is checked as an *empty* transcript, so
    it passes exclusions and upper bounds on length (and fails everything else); keywords match as
    raw substrings (``semantics="published"``).  ``strict``: such a response scores 0
    (``no_audio`` / ``wrong_audio_count``), and keywords, starts and ends match at word boundaries
    (``semantics="word"``).

    Also the family of a_speech_modify, whose ``audio_list`` names the input speech (not scored).
    """

    id = "a_speech_constraint"
    binary = True

    def __init__(
        self, semantics: str = "published", transcription: Transcription = PUBLISHED_TRANSCRIPTION, empty_without_clip: bool = True
    ) -> None:
        super().__init__(transcription)
        self.semantics = validate_semantics(semantics)
        if not isinstance(empty_without_clip, bool):
            raise ValueError("empty_without_clip must be a bool")
        self.empty_without_clip = empty_without_clip

    @classmethod
    def profile_params(cls, profile: str) -> Mapping[str, Any]:
        strict = profile == "strict"
        return {
            **super().profile_params(profile),
            "semantics": "word" if strict else "published",
            "empty_without_clip": not strict,
        }

    def params(self) -> Mapping[str, Any]:
        return {**super().params(), "semantics": self.semantics, "empty_without_clip": self.empty_without_clip}

    def score(self, instance: Instance, response: Response) -> Check:
        checkers = parse_constraints(instance, require_field(instance, "constraint", "constraints"), self.semantics)
        clips = len(response.of_type("audio"))
        if clips != 1 and self.empty_without_clip:
            transcript, note = "", {"audio_count": clips, "note": "no single clip: checked as an empty transcript (published)"}
        else:
            transcript, note = self.transcript(self.clip(response)), {}
        check = check_constraints(transcript, checkers)
        evidence = {**transcript_evidence(transcript), "instructions": check.evidence["instructions"], **note}
        return Check(score=check.score, passed=check.passed, components=check.components, evidence=evidence)


class SpeechTranslate(SpeechTask):
    """sacrebleu sentence BLEU / 100 (defaults: 13a tokens, exp smoothing) of the normalised transcript
    against the reference ``text``.  The published BLEU helper itself is not part of the released
    code, so the BLEU variant is this project's reading of "sentence BLEU".

    Under ``mmmg`` Whisper is forced to English, so speech in the *source* language comes back
    translated by Whisper and a clip that merely repeats the input scores as a translation, and --
    as published -- only the transcript is normalised, so a perfect transcript of a reference with
    number words ("thirty") scores below 1 (Whisper's normaliser writes "30").  ``strict`` detects
    the language, so such a clip is transcribed in its own language, and normalises both sides.
    """

    id = "a_speech_translate"

    def __init__(self, transcription: Transcription = PUBLISHED_TRANSCRIPTION, normalize_reference: bool = False) -> None:
        super().__init__(transcription)
        self.normalize_reference = bool(normalize_reference)

    @classmethod
    def profile_params(cls, profile: str) -> Mapping[str, Any]:
        return {**super().profile_params(profile), "normalize_reference": profile == "strict"}

    def params(self) -> Mapping[str, Any]:
        return {**super().params(), "normalize_reference": self.normalize_reference}

    def score(self, instance: Instance, response: Response) -> Check:
        import sacrebleu

        text = require_text(instance, "text")
        reference = normalize_english(text) if self.normalize_reference else text
        transcript = self.transcript(self.clip(response))
        bleu = sacrebleu.sentence_bleu(normalize_english(transcript), [reference]).score / 100.0
        bleu = min(max(bleu, 0.0), 1.0) if math.isfinite(bleu) else 0.0
        return Check(score=bleu, components={"bleu": bleu}, evidence=transcript_evidence(transcript))


class SpeechRetrieve(SpeechTask):
    """max(1 - WER, 0) of the transcript against the passage ``text`` it should repeat."""

    id = "a_speech_retrieve"

    def score(self, instance: Instance, response: Response) -> Check:
        text = require_text(instance, "text")
        transcript = self.transcript(self.clip(response))
        accuracy = word_accuracy(text, transcript)
        return Check(score=accuracy, components={"word_accuracy": accuracy}, evidence=transcript_evidence(transcript))


def _band(band: Sequence[float]) -> tuple[float, float]:
    low, high = (float(x) for x in band)
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ValueError(f"a band must be (low, high) with low < high, got {band!r}")
    return low, high
