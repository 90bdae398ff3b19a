"""Transcript normalisation for the MMMG speech constraints.

MMMG normalises Whisper transcripts and constraint phrases with Whisper's English text normaliser
before comparing them.  ``normalize_transcript`` is a dependency-free approximation of its core:
lower case, bracketed annotations and filler words removed, contractions expanded, accents stripped,
punctuation and symbols turned into spaces (a dot between digits is kept), whitespace collapsed.  It
does *not* rewrite spelled-out numbers as digits or British spellings as American ones; pass Whisper's
own normaliser (``whisper_normalizer()``) where exact parity with published scores matters.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Callable

from .brackets import drop_bracketed

_WHOLE_WORD = [
    (r"\bwon't\b", "will not"), (r"\bcan't\b", "can not"), (r"\blet's\b", "let us"), (r"\bain't\b", "aint"),
    (r"\by'all\b", "you all"), (r"\bwanna\b", "want to"), (r"\bgotta\b", "got to"), (r"\bgonna\b", "going to"),
    (r"\bi'ma\b", "i am going to"), (r"\bimma\b", "i am going to"), (r"\bwoulda\b", "would have"),
    (r"\bcoulda\b", "could have"), (r"\bshoulda\b", "should have"), (r"\bma'am\b", "madam"),
]
_SUFFIXES = [
    (r"n't\b", " not"), (r"'re\b", " are"), (r"'s\b", " is"), (r"'d\b", " would"), (r"'ll\b", " will"),
    (r"'t\b", " not"), (r"'ve\b", " have"), (r"'m\b", " am"),
]
_FILLERS = re.compile(r"\b(hmm|mm|mhm|mmm|uh|um)\b")


def normalize_transcript(text: str) -> str:
    """Lower-cased, punctuation-free, contraction-expanded form of ``text`` (idempotent)."""
    s = text.lower().replace("’", "'").replace("‘", "'")
    s = drop_bracketed(s, " ")  # [music], <noise>, (laughs)
    s = _FILLERS.sub(" ", s)
    for pattern, repl in _WHOLE_WORD + _SUFFIXES:
        s = re.sub(pattern, repl, s)
    s = unicodedata.normalize("NFKD", s)
    kept = []
    for i, char in enumerate(s):
        category = unicodedata.category(char)
        if category == "Mn":  # accents: café -> cafe
            continue
        if char == "." and 0 < i < len(s) - 1 and s[i - 1].isdigit() and s[i + 1].isdigit():
            kept.append(char)
        elif category[0] in "PSM" or char in "'":
            kept.append(" ")
        else:
            kept.append(char)
    return re.sub(r"\s+", " ", "".join(kept)).strip()


def whisper_normalizer() -> Callable[[str], str]:
    """Whisper's own English normaliser (needs ``openai-whisper``, part of ``mmverify[models]``)."""
    try:
        from whisper.normalizers import EnglishTextNormalizer  # type: ignore[import-not-found]
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "Whisper's text normaliser needs openai-whisper: pip install \"mmverify[models]\" "
            "and pip install --no-deps openai-whisper"
        ) from exc
    return EnglishTextNormalizer()
