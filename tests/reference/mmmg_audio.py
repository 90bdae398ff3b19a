"""The published MMMG speech and music rules, re-derived from their description for differential tests.

Independent of mmverify's implementation: edit distances are computed here by dynamic programming,
the Whisper normaliser is built the way the published pipeline gets it (transformers'
``EnglishTextNormalizer`` with Whisper's spelling map), relations are parsed here, and every rule is
written out step by step as the published evaluator applies it (eval_audio.py at 0473209, utils.py at
ecf3dfe, eval_interleaved.py's conversation task).  Where the published code would stop with an
exception, the functions return ``None``: such items score 0.

Rules (published):

* transcript term: ``max(1 - WER, 0)`` (English) or ``max(1 - CER, 0)`` (Chinese).  Both texts go
  through the English normaliser; for Chinese the spaces are then removed from the reference only,
  and the CER counts the hypothesis' spaces as characters.
* speaking rate: units x 22050 x 60 / (samples of the silence-trimmed clip); English units are the
  normalised transcript split on single spaces, Chinese units its characters.  Score: clamp into
  the band, then (x - low) / width for "high" and (high - x) / width for "low".
* pitch band of the predicted gender (0 male: 140-182 mel, else 236-278 mel), scored like the rate.
* intensity: trim, window of min(4, len // (2 sr)) whole seconds (``audio[-0:]`` being the whole
  clip), RMS, min-max normalisation, find_peaks(distance=4), edge frames added, linregress.
* tempo: beats x sr x 60 / trimmed samples; pass when |tempo - bpm| < 5.
* constraints: checked on the lower-cased, stripped normalised transcript; keywords are raw
  substrings; counts are non-overlapping occurrences; word counts are Treebank tokens that are
  alphanumeric or contain an apostrophe; every check runs and all must hold.
* conversation: mean of the per-turn checks x product over same-speaker pairs of [cosine > 0.93].
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

SR = 22050
PITCH_BANDS = {0: (140.0, 182.0), 1: (236.0, 278.0)}  # predicted gender index: 0 male, 1 female
RATE_BANDS = {"english": (156.0, 180.0), "chinese": (232.0, 272.0)}
SPEAKER_THRESHOLD = 0.93


# -- text -----------------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def whisper_normalizer() -> Callable[[str], str]:
    """transformers' EnglishTextNormalizer with Whisper's English spelling map, as the published
    pipeline's ``processor.tokenizer._normalize`` builds it."""
    from transformers.models.whisper.english_normalizer import EnglishTextNormalizer

    spec = find_spec("whisper")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the spelling map ships with openai-whisper, which is not installed")
    spelling = json.loads((Path(next(iter(spec.submodule_search_locations))) / "normalizers" / "english.json").read_text())
    return EnglishTextNormalizer(spelling)


def edit_distance(reference: Sequence[Any], hypothesis: Sequence[Any]) -> int:
    """Levenshtein distance (unit substitutions, deletions, insertions)."""
    previous = list(range(len(hypothesis) + 1))
    for i, ref in enumerate(reference, 1):
        current = [i]
        for j, hyp in enumerate(hypothesis, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ref != hyp)))
        previous = current
    return previous[-1]


def transcript_term(reference: str, transcript: str, language: str) -> float | None:
    """The published ``max(1 - WER|CER, 0)``; None where the published code divides by zero."""
    normalize = whisper_normalizer()
    hyp = normalize(transcript)
    ref = normalize(reference)
    if language == "chinese":
        ref = ref.replace(" ", "")
        units_ref, units_hyp = list(ref), list(hyp)
    else:
        units_ref, units_hyp = ref.split(), hyp.split()
    if not units_ref:
        return None
    return max(1.0 - edit_distance(units_ref, units_hyp) / len(units_ref), 0.0)


def band_score(value: float, band: tuple[float, float], level: str) -> float:
    low, high = band
    clamped = max(low, min(high, value))
    return (clamped - low) / (high - low) if level == "high" else (high - clamped) / (high - low)


def speaking_rate(normalized_transcript: str, audio: np.ndarray, language: str) -> float | None:
    import librosa

    units = len(normalized_transcript.split(" ")) if language == "english" else len(normalized_transcript)
    trimmed = librosa.effects.trim(audio)[0]
    return units * SR * 60 / len(trimmed) if len(trimmed) else None


def speed_score(rate: float, language: str, level: str) -> float:
    return band_score(rate, RATE_BANDS[language], level)


def pitch_score(mel: float, predicted_gender: int, level: str) -> float:
    return band_score(mel, PITCH_BANDS[0 if predicted_gender == 0 else 1], level)


def dominant_pitch(audio: np.ndarray, hop: int = 256, floor: float = 80.0, ceiling: float = 600.0, bins: int = 100) -> float | None:
    """Intensity-weighted mel pitch of the loudest of ``bins`` pitch bins."""
    import parselmouth

    sound = parselmouth.Sound(audio, SR)
    pitch = sound.to_pitch(time_step=hop / SR, pitch_floor=floor, pitch_ceiling=ceiling)
    intensity = sound.to_intensity(time_step=hop / SR, minimum_pitch=floor)
    f0, pitch_times = pitch.selected_array["frequency"], pitch.xs()
    weights, intensity_times = intensity.values.flatten(), intensity.xs()
    if len(pitch_times) != len(intensity_times):
        weights = np.interp(pitch_times, intensity_times, weights)
    voiced = f0 > 0.0
    if not voiced.any():
        return None
    mel = 2595 * np.log10(1 + f0[voiced] / 700)
    weights = weights[voiced]
    edges = np.linspace(mel.min() - 0.1, mel.max() + 0.1, num=bins)
    index = np.digitize(mel, edges)
    totals = [0.0] * bins
    for k, w in zip(index, weights):
        totals[k] += w
    best = int(np.argmax(totals))
    chosen = index == best
    return float(np.sum(mel[chosen] * weights[chosen]) / np.sum(weights[chosen]))


# -- music ----------------------------------------------------------------------------------------------


def intensity_score(audio: np.ndarray, position: str, trend: str) -> float:
    """1.0 when the published fit reads ``trend`` at ``position``; 0.0 otherwise or where the
    published code would stop with an exception."""
    fit = intensity_fit(audio, position)
    if fit is None:
        return 0.0
    slope, stderr = fit
    measured = "fade in" if slope > 0.18 and stderr < 0.04 else "fade out" if slope < -0.18 and stderr < 0.04 else None
    return float(measured == trend)


def intensity_fit(audio: np.ndarray, position: str) -> tuple[float, float] | None:
    """(slope, stderr) of the published regression; None where the published code would raise."""
    import librosa
    from scipy.signal import find_peaks
    from scipy.stats import linregress

    trimmed = librosa.effects.trim(audio)[0]
    seconds = min(4, len(trimmed) // (SR * 2))
    count = round(seconds * SR)
    window = trimmed[:count] if position == "start" else trimmed[-count:]  # -0: the whole clip
    rms = librosa.feature.rms(y=window)[0]
    if rms.max() == rms.min():
        return None  # 0 / 0: no peak can be found, indexing the empty peak list fails
    norm = (rms - min(rms)) / (max(rms) - min(rms))
    times = librosa.frames_to_time(np.arange(len(norm)), sr=SR)
    peaks = list(find_peaks(norm, distance=4)[0])
    if not peaks:
        return None
    if peaks[0] >= 5:
        peaks = [0, *peaks]
    if peaks[-1] < len(norm) - 5:
        peaks = [*peaks, len(norm) - 1]
    result = linregress(times[peaks], norm[peaks])
    return float(result.slope), float(result.stderr)


def tempo_bpm(n_beats: int, trimmed_samples: int) -> float:
    return n_beats * SR * 60 / trimmed_samples


def tempo_score(target: float, bpm: float) -> float:
    return float(abs(target - bpm) < 5)


# -- constraints ----------------------------------------------------------------------------------------

_CLITICS = ("n't", "'s", "'re", "'ll", "'ve", "'m", "'d")


def counted_words(text: str) -> int:
    """Treebank tokens that are alphanumeric or hold an apostrophe, for normalised text made of
    lower-case words, numbers and words with one English clitic: a clitic is split off as its own
    token (``don't`` -> ``do`` + ``n't``), and both halves count."""
    total = 0
    for word in text.split():
        clitic = next((c for c in _CLITICS if word.endswith(c) and len(word) > len(c)), None)
        if clitic is not None:
            stem = word[: -len(clitic)]
            total += int(stem.isalnum() or "'" in stem) + 1
        else:
            total += int(word.isalnum() or "'" in word)
    return total


_CLAUSE = re.compile(r"^\s*(==|!=|<=|>=|<|>)\s*(\d+)\s*$")
_COMPARE: dict[str, Callable[[int, int], bool]] = {
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<=": lambda a, b: a <= b,
    ">=": lambda a, b: a >= b, "<": lambda a, b: a < b, ">": lambda a, b: a > b,
}  # fmt: skip


def relation_holds(count: int, relation: str) -> bool:
    """``count <relation>`` for relations like ``"== 2"`` or ``">= 20 and count <= 35"``."""
    clauses = [part.replace("count", "", 1) if i else part for i, part in enumerate(relation.split(" and "))]
    result = True
    for clause in clauses:
        match = _CLAUSE.match(clause)
        if match is None:
            raise ValueError(f"unsupported relation {relation!r}")
        result = result and _COMPARE[match.group(1)](count, int(match.group(2)))
    return result


def constraints_hold(transcript: str, constraint: Sequence[Any]) -> float:
    """1.0 when every constraint holds on the (raw) transcript, as published."""
    normalize = whisper_normalizer()
    text = normalize(transcript).lower().strip()
    items = [constraint] if isinstance(constraint[0], str) else list(constraint)
    flag = True
    for kind, *args in items:
        if kind == "exact_match":
            ok = text == normalize(args[0])
        elif kind == "keyword_include":
            ok = all(keyword in text for keyword in args)
        elif kind == "keyword_exclude":
            ok = not any(keyword in text for keyword in args)
        elif kind == "keyword_count":
            ok = relation_holds(len(re.findall(re.escape(args[0]), text)), args[1])
        elif kind == "length_word":
            ok = relation_holds(counted_words(text), args[0])
        elif kind == "start":
            ok = text.startswith(normalize(args[0]))
        elif kind == "end":
            ok = text.endswith(normalize(args[0]))
        else:
            raise ValueError(f"unknown constraint {kind!r}")
        flag = ok and flag
    return float(flag)


def conversation_score(turn_scores: Sequence[float], order: Sequence[Any], similarities: np.ndarray, n_clips: int) -> float:
    """Mean per-turn constraint score x product over same-speaker pairs of [cosine > 0.93]; 0 when the
    number of clips is not ``len(order)``."""
    if n_clips != len(order):
        return 0.0
    pairs = [(i, j) for i in range(len(order)) for j in range(i + 1, len(order)) if order[i] == order[j]]
    same = float(np.prod([similarities[i, j] > SPEAKER_THRESHOLD for i, j in pairs])) if pairs else 1.0
    return float(np.mean(turn_scores)) * same
