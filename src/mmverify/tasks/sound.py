"""Sound and music tasks scored by CLAP similarity to reference classes (ESC-50, OpenMIC, GTZAN).

Published semantics: the clip is loaded at 22050 Hz mono; each part the task checks (an edge
segment, a fractional range, a silence-separated segment, or the whole clip) is resampled to the
embedder's rate and embedded; its similarity to a class is the mean of its 10 highest cosine
similarities against that class's reference clips; each label holds when that similarity is above
the threshold (below it, for exclusion), and the score is the mean of the labels' binaries.

Version 2 reproduces the published CLAP front end.  References are decoded at 22050 Hz and then
resampled to 48 kHz, like the generated clip (both lose everything above 11.025 kHz).  Under the
``mmmg`` profile clips shorter than CLAP's 10 s window are zero-padded, as the published call
(``padding=True`` under transformers 4.x) did, and the parts are cut exactly as the published
slicing cuts them: a clip under 2 s has an empty first edge (10 s of silence once padded) and its
whole length as the last edge (``audio[-0:]``); any empty part is embedded as that silence.  The
``strict`` profile repeat-pads (the checkpoint's own "repeatpad", the padding CLAP was trained
with, so a short part is not compared as mostly silence) and fails a generation whose part is
empty (``audio_too_short``).  The thresholds were calibrated on zero-padded embeddings; recalibrate
them (``mmverify calibrate``) before relying on strict scores near a threshold.

The one deliberate difference from the published front end: clips longer than 10 s are cropped at
an offset seeded by their content instead of a random one (see :mod:`mmverify.models.clap`), so
the same clip always gets the same score.

The annotation field that names a class (``start``, ``end``, ``target``, ``instrument``, ``genre``)
is also the label of its component (``sim_start``, ...) and evidence entries.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from typing import Any, ClassVar, Mapping

import numpy as np

from ..core.errors import ErrorCode, GenerationFault, ScoringError
from ..core.decoding import Decoder
from ..core.media import DecodedAudio
from ..core.types import Check, Instance
from ..models.clap import SAMPLE_RATE as CLAP_SAMPLE_RATE
from ..references.index import PUBLISHED_LOAD_RATE
from ..references.sets import SETS, reference_set
from ..verifiers.audio import PUBLISHED_SAMPLE_RATE
from ..verifiers.audio.segments import edge_bounds, edge_seconds, fraction_bounds, split_on_silence
from . import models
from .base import Task, require_field
from .response import Response

Span = tuple[int, int]  # sample range of the 22050 Hz clip
PADDINGS = ("zero", "repeat")  # see mmverify.models.clap
EMPTY_PARTS = ("silence", "fail")  # an empty part is embedded as silence (published) or fails the generation


def _seconds(span: Span, rate: int) -> list[float]:
    return [round(span[0] / rate, 4), round(span[1] / rate, 4)]


def published_edge(n_samples: int, sample_rate: int, edge: str, max_seconds: int = 4) -> Span:
    """The published edge slices ``audio[:L]`` and ``audio[-L:]`` with ``L = min(max_seconds,
    n // (2 * sr))`` whole seconds: under 2 s ``L`` is 0, so the first edge is empty and the last
    edge, ``audio[-0:]``, is the whole clip."""
    length = edge_seconds(n_samples, sample_rate, max_seconds) * sample_rate
    if edge == "start":
        return 0, length
    return (n_samples - length, n_samples) if length else (0, n_samples)


def clap_front_end(backend: Any, padding: str) -> Any:
    """``backend`` seen through ``padding``; a backend that cannot choose its padding is refused."""
    if not callable(getattr(backend, "front_end", None)):
        raise ScoringError(
            ErrorCode.MODEL_UNAVAILABLE,
            f"audio_text backend {getattr(backend, 'name', type(backend).__name__)!r} cannot choose its padding; "
            "use clap-hf or laion-clap",
        )
    return backend.front_end(padding)


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
    return value


def _count(name: str, value: int) -> int:
    """``value`` when it is an integer >= 1 (a bool is not a count); else ValueError."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return value


def _finite(name: str, value: float, allow_zero: bool) -> float:
    """``value`` as a float when it is a finite number above 0 (or 0 itself with ``allow_zero``)."""
    if not (isinstance(value, (int, float)) and math.isfinite(value)) or not (value >= 0 if allow_zero else value > 0):
        raise ValueError(f"{name} must be {'>= 0' if allow_zero else 'positive'}, got {value!r}")
    return float(value)


class ClapClassTask(Task):
    """Parts of one clip compared with reference classes by CLAP; mean of the labels' binaries."""

    version = 2
    binary = True  # ``passed`` means every label holds (a two-label item can score 0.5)
    reference_set: ClassVar[str]  # a key of references.sets.SETS
    fields: ClassVar[tuple[str, ...]]  # annotation fields naming a class, in scoring order
    any_field: ClassVar[bool] = False  # True: at least one of ``fields`` (a_sound_begin_end); else all
    default_threshold: ClassVar[float]
    absent: ClassVar[bool] = False  # exclusion: a label holds when the similarity is *below* the threshold
    # the rates a whole clip is embedded at, asked of decoding so that decoding processes resample it
    # (another embedder's rate is made here); only where the parts are the whole clip
    whole_clip_rates: ClassVar[tuple[int, ...]] = ()

    def __init__(
        self,
        threshold: float | None = None,
        top_k: int = 10,
        layout: str | None = None,
        padding: str = "zero",
        empty_parts: str = "silence",
    ) -> None:
        threshold = self.default_threshold if threshold is None else threshold
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not -1.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be a cosine similarity in [-1, 1], got {threshold!r}")
        top_k = _count("top_k", top_k)
        layouts = SETS[self.reference_set].layouts
        layout = layouts[0] if layout is None else layout
        if layout not in layouts:
            raise ValueError(f"{self.reference_set} references are read as {' or '.join(layouts)}, not {layout!r}")
        self.threshold = float(threshold)
        self.top_k = top_k
        self.layout = layout
        self.padding = _choice("padding", padding, PADDINGS)
        self.empty_parts = _choice("empty_parts", empty_parts, EMPTY_PARTS)

    @classmethod
    def profile_params(cls, profile: str) -> Mapping[str, Any]:
        if profile == "strict":
            return {"padding": "repeat", "empty_parts": "fail"}
        return {"padding": "zero", "empty_parts": "silence"}

    def params(self) -> Mapping[str, Any]:
        return {
            "threshold": self.threshold, "direction": "<" if self.absent else ">", "top_k": self.top_k,
            "references": self.reference_set, "layout": self.layout, "sample_rate": PUBLISHED_SAMPLE_RATE,
            "padding": self.padding, "empty_parts": self.empty_parts, "reference_load_rate": PUBLISHED_LOAD_RATE,
            **self.segment_params(),
        }  # fmt: skip

    def segment_params(self) -> Mapping[str, Any]:
        """Settings of how the parts are cut (part of the result key)."""
        return {}

    def validate(self, instance: Instance) -> None:
        """Check annotation fields beyond the class names (before the response is looked at)."""

    @abstractmethod
    def spans(self, instance: Instance, audio: np.ndarray, rate: int, labels: list[str]) -> dict[str, Span]:
        """The sample range each label is scored on; GenerationFault when the clip cannot have them."""

    def classes(self, instance: Instance) -> dict[str, str]:
        found = {name: instance.data[name] for name in self.fields if instance.data.get(name) is not None}
        if not found or (not self.any_field and len(found) < len(self.fields)):
            require_field(instance, *(name for name in self.fields if name not in found))  # raises, naming them
        for name, value in found.items():
            if not isinstance(value, str) or not value.strip():
                raise ScoringError(ErrorCode.INVALID_INSTANCE, f"{instance.id}: {name!r} must name a class, got {value!r}")
        return {name: value.strip() for name, value in found.items()}

    def score(self, instance: Instance, response: Response) -> Check:
        # Everything that is the user's problem is checked before the generation is judged.
        wanted = self.classes(instance)
        self.validate(instance)
        references = reference_set(self.reference_set, self.layout)
        resolved = {label: references.resolve(name) for label, name in wanted.items()}

        clip = response.single_clip(PUBLISHED_SAMPLE_RATE, self.whole_clip_rates)
        audio, rate = clip.samples, clip.rate
        spans = self.spans(instance, audio, rate, list(wanted))
        if self.empty_parts == "fail" and any(end <= start for start, end in spans.values()):
            raise GenerationFault(
                "audio_too_short", f"{len(audio) / rate:.2f} s leaves an empty segment", seconds=round(len(audio) / rate, 4)
            )

        embedder = clap_front_end(models.backend("audio_text"), self.padding)
        index = references.index(embedder, load_rate=PUBLISHED_LOAD_RATE)
        clips = _parts(clip, list(spans.values()), embedder.sample_rate, response.decoder)
        embeddings = embedder.embed_audio(clips)
        sims = {label: index.topk_mean(row, resolved[label], self.top_k) for label, row in zip(spans, embeddings)}
        holds = {label: (sim < self.threshold) if self.absent else (sim > self.threshold) for label, sim in sims.items()}
        return Check(
            score=float(np.mean([float(ok) for ok in holds.values()])),
            passed=all(holds.values()),
            components={f"sim_{label}": sim for label, sim in sims.items()},
            evidence={
                "classes": wanted,
                "holds": holds,
                "segments_s": {label: _seconds(span, rate) for label, span in spans.items()},
                "clip_s": round(len(audio) / rate, 4),
                "threshold": self.threshold,
                "direction": "<" if self.absent else ">",
                "reference_set": {"name": self.reference_set, "layout": self.layout},
                "front_end": {"padding": self.padding, "reference_load_rate": PUBLISHED_LOAD_RATE},
                "references": {resolved[label]: references.size(resolved[label]) for label in spans},
                "backend": embedder.fingerprint,
            },
        )


def _parts(clip: DecodedAudio, spans: list[Span], target_rate: int, decoder: Decoder) -> list[np.ndarray]:
    """Each part at the embedder's rate: an empty part stays empty (the embedder pads it to
    silence), the whole clip is taken as decoding made it, and the other parts are resampled by
    ``decoder`` together (in a decoding process, where items have them)."""
    parts = [clip.samples[start:end] for start, end in spans]
    whole = len(clip.samples)
    cut = [i for i, part in enumerate(parts) if 0 < len(part) < whole]
    made = dict(zip(cut, decoder.resample([parts[i] for i in cut], clip.rate, target_rate), strict=True))
    return [made[i] if i in made else clip.whole_at(target_rate) if len(part) else part for i, part in enumerate(parts)]


class WholeClip(ClapClassTask):
    """Family of the tasks that score the whole clip; catalog rows set the class attributes:

    * a_sound_cot -- ``target`` ESC-50 class (named by a riddle in the instruction);
    * a_music_instrument -- ``instrument`` (rows of a_music_attribute that have one): OpenMIC class;
    * a_music_exclude -- ``instrument`` must be absent; as published, a response without (exactly
      one) audio fails;
    * a_music_genre -- ``genre``: GTZAN class; references are the clips' first, middle and last 10 s
      as published.
    """

    whole_clip_rates = (CLAP_SAMPLE_RATE,)

    def spans(self, instance: Instance, audio: np.ndarray, rate: int, labels: list[str]) -> dict[str, Span]:
        return {label: (0, len(audio)) for label in labels}


class SoundBeginEnd(ClapClassTask):
    """``start`` and/or ``end``: ESC-50 classes heard in the first / last min(4, N // 2) whole seconds."""

    id = "a_sound_begin_end"
    reference_set = "esc50"
    fields = ("start", "end")
    any_field = True
    default_threshold = 0.68

    def __init__(self, *, max_seconds: int = 4, **options: Any) -> None:
        """``options``: the arguments of :class:`ClapClassTask`."""
        super().__init__(**options)
        self.max_seconds = _count("max_seconds", max_seconds)

    def segment_params(self) -> Mapping[str, Any]:
        return {"max_seconds": self.max_seconds}

    def spans(self, instance: Instance, audio: np.ndarray, rate: int, labels: list[str]) -> dict[str, Span]:
        if self.empty_parts == "silence":  # the published slices, short clips included
            return {label: published_edge(len(audio), rate, label, self.max_seconds) for label in labels}
        # Clips under 2 s get empty edges, which score() turns into audio_too_short.
        return {label: edge_bounds(len(audio), rate, label, self.max_seconds) for label in labels}


class SoundInclude(ClapClassTask):
    """``target`` ESC-50 class within the ``range`` fraction [a, b] of the clip."""

    id = "a_sound_include"
    reference_set = "esc50"
    fields = ("target",)
    default_threshold = 0.68

    def _range(self, instance: Instance) -> list[float]:
        span = require_field(instance, "range")
        numbers = isinstance(span, (list, tuple)) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in span)
        if not numbers or len(span) != 2 or not 0.0 <= span[0] < span[1] <= 1.0:
            raise ScoringError(ErrorCode.INVALID_INSTANCE, f"{instance.id}: range must be [a, b] with 0 <= a < b <= 1, got {span!r}")
        return [float(x) for x in span]

    def validate(self, instance: Instance) -> None:
        self._range(instance)

    def spans(self, instance: Instance, audio: np.ndarray, rate: int, labels: list[str]) -> dict[str, Span]:
        return {"target": fraction_bounds(len(audio), self._range(instance))}


class SoundSilence(ClapClassTask):
    """Sound, silence, sound: the silence split must give exactly two segments, ``start`` then ``end``."""

    id = "a_sound_silence"
    reference_set = "esc50"
    fields = ("start", "end")
    default_threshold = 0.68

    def __init__(self, *, top_db: float = 40.0, min_gap_s: float = 1.0, **options: Any) -> None:
        """``options``: the arguments of :class:`ClapClassTask`."""
        super().__init__(**options)
        self.top_db = _finite("top_db", top_db, allow_zero=False)
        self.min_gap_s = _finite("min_gap_s", min_gap_s, allow_zero=True)

    def segment_params(self) -> Mapping[str, Any]:
        return {"top_db": self.top_db, "min_gap_s": self.min_gap_s}

    def spans(self, instance: Instance, audio: np.ndarray, rate: int, labels: list[str]) -> dict[str, Span]:
        segments = split_on_silence(audio, rate, top_db=self.top_db, min_gap_s=self.min_gap_s)
        if len(segments) != 2:
            raise GenerationFault(
                "wrong_segment_count",
                f"expected 2 sounds separated by silence, found {len(segments)}",
                segment_count=len(segments),
                segments_s=[_seconds(span, rate) for span in segments],
            )
        return {"start": segments[0], "end": segments[1]}
