"""Transcript comparison: Whisper-style text normalisation, WER/CER via jiwer, accuracies.

English text is normalised with Whisper's ``EnglishTextNormalizer`` (lower case, brackets and
fillers removed, numbers and currencies written as digits, British spellings made American,
``Mr.`` -> ``mister`` ...).  It is taken, in order of preference, from

1. the ``openai-whisper`` package (``whisper/normalizers``, with its ``english.json`` spelling map);
   its normaliser files are loaded on their own, so this does not import torch;
2. transformers' copy of the same class, without the spelling map (transformers does not ship it);
3. a plain fallback: Unicode NFKC, lower case, punctuation and symbols replaced by spaces
   (apostrophes inside words kept), whitespace collapsed.

:func:`english_normalizer_name` says which one is in use, so results can record it.

Chinese text (:func:`normalize_chinese`) is NFKC-folded (full-width letters and digits become
ASCII), Latin letters lower-cased, and everything that is not a letter, digit or CJK character
(whitespace, punctuation, symbols) is dropped.  Traditional -> simplified conversion and
number-format unification (``2024`` vs ``二零二四``) are out of scope.

The published Chinese score (:func:`published_char_accuracy`) normalises differently: both sides go
through the *English* normaliser, which turns punctuation into spaces; the spaces are then removed
from the reference only, so every punctuation mark inside a perfect transcript counts as an inserted
character (a perfect 15-character reading with one comma scores 1 - 1/15).

Empty text: as in the published MMMG scoring, a side that is empty after normalisation is replaced
by a placeholder that never matches real text -- one word (``<none>``) for WER, one character for
CER.  So two empty texts give 0.0; an empty hypothesis for an n-unit reference gives 1.0 (like
jiwer's all-deletions count); a non-empty hypothesis of m units for an empty reference gives m.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import unicodedata
from functools import lru_cache
from pathlib import Path
from typing import Callable, Sequence

import jiwer

from ..text.brackets import drop_bracketed

EMPTY_WORD = "<none>"
EMPTY_CHAR = "\u2205"  # a math symbol: normalize_chinese removes it from real text

Normalizer = Callable[[str], str]


# -- English -----------------------------------------------------------------------------------
def _whisper_normalizers_module():  # type: ignore[no-untyped-def]
    """``whisper.normalizers`` without executing ``whisper/__init__`` (which imports torch)."""
    if "whisper.normalizers" in sys.modules or "whisper" in sys.modules:
        import whisper.normalizers

        return whisper.normalizers
    spec = importlib.util.find_spec("whisper")  # locating a top-level package runs none of its code
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "normalizers"
    if not (folder / "english.json").is_file() or not (folder / "__init__.py").is_file():
        return None
    name = "_mmverify_whisper_normalizers"
    if name in sys.modules:
        return sys.modules[name]
    package_spec = importlib.util.spec_from_file_location(
        name, folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    if package_spec is None or package_spec.loader is None:
        return None
    module = importlib.util.module_from_spec(package_spec)
    sys.modules[name] = module
    try:
        package_spec.loader.exec_module(module)
    except Exception:
        del sys.modules[name]
        raise
    return module


def _basic_english(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    text = re.sub(r"(?<=\w)['\u2019](?=\w)", "\x00", text)  # protect in-word apostrophes
    text = "".join(" " if unicodedata.category(ch)[0] in "PS" else ch for ch in text)
    return " ".join(text.replace("\x00", "'").split())


@lru_cache(maxsize=1)
def _english() -> tuple[str, Normalizer]:
    try:
        module = _whisper_normalizers_module()
    except ImportError:
        module = None
    if module is not None:
        return "openai-whisper", module.EnglishTextNormalizer()
    try:
        from transformers.models.whisper.english_normalizer import EnglishTextNormalizer
    except ImportError:
        return "basic", _basic_english
    return "transformers-no-spelling-map", EnglishTextNormalizer({})


def english_normalizer_name() -> str:
    """``"openai-whisper"``, ``"transformers-no-spelling-map"`` or ``"basic"``."""
    return _english()[0]


def normalize_english(text: str) -> str:
    """Whisper's English normalisation (see the module docstring for what is used when).  Its
    bracket removal runs here first, in linear time, so that unclosed brackets in a long text
    cannot make Whisper's expressions quadratic (the result is the same)."""
    name, normalize = _english()
    return " ".join(normalize(drop_bracketed(text, disarm=True) if name != "basic" else text).split())


# -- Chinese -----------------------------------------------------------------------------------
def normalize_chinese(text: str) -> str:
    """NFKC, lower case, and only letters, digits and CJK characters kept (no spaces)."""
    text = unicodedata.normalize("NFKC", text).lower()
    return "".join(ch for ch in text if unicodedata.category(ch)[0] in "LN")


# -- error rates -------------------------------------------------------------------------------
def _prepare(text: str, normalize: Normalizer | None, empty: str) -> str:
    normalized = normalize(text) if normalize is not None else " ".join(text.split())
    return normalized if normalized.strip() else empty


def wer(reference: str, hypothesis: str, normalize: Normalizer | None = normalize_english) -> float:
    """Word error rate of ``hypothesis`` against ``reference`` after ``normalize`` (None: raw)."""
    ref = _prepare(reference, normalize, EMPTY_WORD)
    hyp = _prepare(hypothesis, normalize, EMPTY_WORD)
    return float(jiwer.wer(ref, hyp))


def corpus_wer(
    references: Sequence[str], hypotheses: Sequence[str], normalize: Normalizer | None = normalize_english
) -> float:
    """Total word edits over total reference words (jiwer's corpus-level WER)."""
    if len(references) != len(hypotheses):
        raise ValueError(f"{len(references)} references but {len(hypotheses)} hypotheses")
    if not references:
        raise ValueError("no sentences to compare")
    refs = [_prepare(text, normalize, EMPTY_WORD) for text in references]
    hyps = [_prepare(text, normalize, EMPTY_WORD) for text in hypotheses]
    return float(jiwer.wer(refs, hyps))


def cer(reference: str, hypothesis: str, normalize: Normalizer | None = normalize_chinese) -> float:
    """Character error rate after ``normalize`` (default: :func:`normalize_chinese`)."""
    ref = _prepare(reference, normalize, EMPTY_CHAR)
    hyp = _prepare(hypothesis, normalize, EMPTY_CHAR)
    return float(jiwer.cer(ref, hyp))


def published_cer(reference: str, hypothesis: str) -> float:
    """CER as the published MMMG pipeline computes it for Chinese: both sides through the English
    normaliser, spaces removed from the reference only, then a character error rate in which the
    hypothesis' spaces are characters."""
    ref = normalize_english(reference).replace(" ", "") or EMPTY_CHAR
    hyp = normalize_english(hypothesis) or EMPTY_CHAR
    return float(jiwer.cer(ref, hyp))


def published_char_accuracy(reference: str, hypothesis: str) -> float:
    """``max(1 - published_cer, 0)``: the published MMMG transcript term for Chinese."""
    return max(1.0 - published_cer(reference, hypothesis), 0.0)


def word_accuracy(reference: str, hypothesis: str, normalize: Normalizer | None = normalize_english) -> float:
    """``max(1 - WER, 0)``: the MMMG transcript term for English."""
    return max(1.0 - wer(reference, hypothesis, normalize), 0.0)


def char_accuracy(reference: str, hypothesis: str, normalize: Normalizer | None = normalize_chinese) -> float:
    """``max(1 - CER, 0)``: the MMMG transcript term for Chinese."""
    return max(1.0 - cer(reference, hypothesis, normalize), 0.0)


def transcript_accuracy(reference: str, hypothesis: str, language: str = "en") -> float:
    """WER-based accuracy for English, CER-based for Chinese (``"zh"``/``"chinese"``)."""
    code = language.strip().lower()
    if code in ("en", "english"):
        return word_accuracy(reference, hypothesis)
    if code in ("zh", "chinese", "mandarin"):
        return char_accuracy(reference, hypothesis)
    raise ValueError(f"no transcript metric for language {language!r} (use 'en' or 'zh')")
