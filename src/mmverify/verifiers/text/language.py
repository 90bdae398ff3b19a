"""Deterministic language identification and ``language:response_language``.

IFEval calls ``langdetect``, a probabilistic n-gram model that gives different answers from run to run
unless seeded, and that needs its profile files.  Here the answer comes from two deterministic steps:

1. The writing system.  Letters are counted per script; the script with the most letters wins.  Most
   scripts name one language (Hangul -> ko, Thai -> th, Greek -> el, Bengali -> bn, ...).  Chinese
   characters mixed with kana are Japanese; without kana they are Chinese (``zh``; langdetect says
   ``zh-cn``/``zh-tw``, both accepted as ``zh`` by the checker).
2. Within a shared script (Latin, Cyrillic, Arabic, Devanagari), frequent function words and
   language-specific letters are scored (``langdata``); the best score wins, ties go to the first
   language listed there.  Latin-script text with no evidence at all is taken as English.

Divergence from IFEval: langdetect knows 55 languages and can be fooled by short or mixed text in its
own ways; this identifier knows fewer Latin-script languages (the ones in ``langdata``) and is decided
by function words, so one-word answers or lists of proper nouns may be classified differently.  Text
without any letters cannot be classified; like IFEval (which counts a detection failure as followed),
the checker then passes.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from .base import TextChecker, require_text
from .langdata import LETTER_CUES, STOPWORDS

# (first code point, last code point, script name); scripts absent here are ignored.
_RANGES: tuple[tuple[int, int, str], ...] = (
    (0x0041, 0x005A, "latin"), (0x0061, 0x007A, "latin"), (0x00C0, 0x024F, "latin"),
    (0x1E00, 0x1EFF, "latin"), (0x0370, 0x03FF, "greek"), (0x1F00, 0x1FFF, "greek"),
    (0x0400, 0x052F, "cyrillic"), (0x0530, 0x058F, "armenian"), (0x0590, 0x05FF, "hebrew"),
    (0x0600, 0x06FF, "arabic"), (0x0750, 0x077F, "arabic"), (0xFB50, 0xFDFF, "arabic"),
    (0xFE70, 0xFEFF, "arabic"), (0x0900, 0x097F, "devanagari"), (0x0980, 0x09FF, "bengali"),
    (0x0A00, 0x0A7F, "gurmukhi"), (0x0A80, 0x0AFF, "gujarati"), (0x0B00, 0x0B7F, "oriya"),
    (0x0B80, 0x0BFF, "tamil"), (0x0C00, 0x0C7F, "telugu"), (0x0C80, 0x0CFF, "kannada"),
    (0x0D00, 0x0D7F, "malayalam"), (0x0D80, 0x0DFF, "sinhala"), (0x0E00, 0x0E7F, "thai"),
    (0x0E80, 0x0EFF, "lao"), (0x1000, 0x109F, "myanmar"), (0x10A0, 0x10FF, "georgian"),
    (0x1100, 0x11FF, "hangul"), (0x1200, 0x137F, "ethiopic"), (0x1780, 0x17FF, "khmer"),
    (0x3040, 0x309F, "kana"), (0x30A0, 0x30FF, "kana"), (0x31F0, 0x31FF, "kana"),
    (0x3130, 0x318F, "hangul"), (0x3400, 0x4DBF, "han"), (0x4E00, 0x9FFF, "han"),
    (0xAC00, 0xD7AF, "hangul"), (0xF900, 0xFAFF, "han"), (0xFF66, 0xFF9F, "kana"),
    (0x20000, 0x2FA1F, "han"),
)

_SINGLE_LANGUAGE = {
    "greek": "el", "armenian": "hy", "hebrew": "he", "bengali": "bn", "gurmukhi": "pa",
    "gujarati": "gu", "oriya": "or", "tamil": "ta", "telugu": "te", "kannada": "kn",
    "malayalam": "ml", "sinhala": "si", "thai": "th", "lao": "lo", "myanmar": "my",
    "georgian": "ka", "hangul": "ko", "ethiopic": "am", "khmer": "km",
}
# Languages scored by words and letter cues inside a shared script (first = tie winner).
_SHARED = {
    "latin": ("en", "es", "fr", "de", "it", "pt", "nl", "pl", "fi", "sv", "tr", "id", "sw", "vi"),
    "cyrillic": ("ru", "uk", "bg"),
    "arabic": ("ar", "fa", "ur"),
    "devanagari": ("hi", "mr", "ne"),
}

SUPPORTED_LANGUAGES: frozenset[str] = frozenset(
    set(_SINGLE_LANGUAGE.values()) | {lang for langs in _SHARED.values() for lang in langs} | {"zh", "ja"}
)
# Codes langdetect emits that mean one of ours.
_ALIASES = {"zh-cn": "zh", "zh-tw": "zh", "zh-hans": "zh", "zh-hant": "zh", "iw": "he", "in": "id"}


def _script(char: str) -> str | None:
    code = ord(char)
    if code < 0x80:  # fast path: callers only pass letters, and ASCII letters are Latin
        return "latin"
    for first, last, name in _RANGES:
        if first <= code <= last:
            return name
    return None


def _tokens(text: str) -> list[str]:
    """Lower-case words: apostrophes split words, punctuation and symbols trimmed from both ends."""
    words = []
    for raw in text.lower().replace("'", " ").replace("’", " ").split():
        start, end = 0, len(raw)
        while start < end and unicodedata.category(raw[start])[0] in "PS":
            start += 1
        while end > start and unicodedata.category(raw[end - 1])[0] in "PS":
            end -= 1
        if start < end:
            words.append(raw[start:end])
    return words


def _score(text: str, languages: tuple[str, ...]) -> dict[str, float]:
    scores = dict.fromkeys(languages, 0.0)
    for word in _tokens(text):
        owners = [lang for lang in languages if word in STOPWORDS.get(lang, ())]
        for lang in owners:
            scores[lang] += 1.0 / len(owners)
    for char in text.lower():
        for lang, weight in LETTER_CUES.get(char, {}).items():
            if lang in scores:
                scores[lang] += weight
    return scores


def detect_language(text: str) -> str | None:
    """ISO 639-1 code of the language of ``text``, or None when it has no letters to go by."""
    counts: dict[str, int] = {}
    for char in text:
        if char.isalpha():
            script = _script(char)
            if script is not None:
                counts[script] = counts.get(script, 0) + 1
    if not counts:
        return None
    cjk = counts.get("han", 0) + counts.get("kana", 0)
    groups = {name: n for name, n in counts.items() if name not in ("han", "kana")}
    if cjk:
        groups["cjk"] = cjk
    script = max(groups, key=lambda name: groups[name])  # first-seen wins ties (dict order)
    if script == "cjk":
        # Japanese prose always carries kana; a few stray kana in Chinese text do not make it Japanese
        return "ja" if counts.get("kana", 0) >= max(1, 0.1 * cjk) else "zh"
    if script in _SINGLE_LANGUAGE:
        return _SINGLE_LANGUAGE[script]
    languages = _SHARED[script]
    scores = _score(text, languages)
    best = max(languages, key=lambda lang: scores[lang])
    return best if scores[best] > 0 else languages[0]


def normalize_language_code(code: str) -> str:
    code = code.strip().lower().replace("_", "-")
    return _ALIASES.get(code, code)


class ResponseLanguage(TextChecker):
    """``language:response_language``: the whole response is in ``language`` (ISO 639-1)."""

    id = "language:response_language"

    def __init__(self, *, language: Any) -> None:
        super().__init__()
        code = normalize_language_code(require_text("language", language))
        if code not in SUPPORTED_LANGUAGES:
            raise ValueError(
                f"language {language!r} is not one the identifier can recognise; "
                f"supported: {sorted(SUPPORTED_LANGUAGES)}"
            )
        self.language = code
        self.kwargs = {"language": code}

    def check(self, text: str) -> bool:
        detected = detect_language(text)
        return True if detected is None else detected == self.language

    def describe(self) -> str:
        return f"the entire response is written in language '{self.language}'"
