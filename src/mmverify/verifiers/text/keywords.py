"""IFEval ``keywords:*`` instructions.

IFEval passes keywords to ``re`` unescaped; here they are always matched literally (``re.escape``), so
a keyword such as ``C++`` or ``a.m.`` means exactly those characters.  For the plain words in IFEval's
data this gives identical results.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from .base import TextChecker, compare, require_count, require_relation, require_text, require_words


class KeywordExistence(TextChecker):
    """``keywords:existence``: every keyword occurs somewhere (case-insensitive, substring)."""

    id = "keywords:existence"

    def __init__(self, *, keywords: Any) -> None:
        super().__init__()
        self.keywords = tuple(sorted(require_words("keywords", keywords)))
        self.kwargs = {"keywords": list(self.keywords)}

    def check(self, text: str) -> bool:
        return all(re.search(re.escape(k), text, flags=re.IGNORECASE) for k in self.keywords)

    def describe(self) -> str:
        return "mention each of " + ", ".join(repr(k) for k in self.keywords)


class KeywordFrequency(TextChecker):
    """``keywords:frequency``: how often one keyword occurs (case-insensitive, substring matches)."""

    id = "keywords:frequency"

    def __init__(self, *, keyword: Any, frequency: Any, relation: Any) -> None:
        super().__init__()
        self.keyword = require_text("keyword", keyword)
        self.frequency = require_count("frequency", frequency)
        self.relation = require_relation("relation", relation)
        self.kwargs = {"keyword": self.keyword, "frequency": self.frequency, "relation": self.relation}

    def count(self, text: str) -> int:
        return len(re.findall(re.escape(self.keyword), text, flags=re.IGNORECASE))

    def check(self, text: str) -> bool:
        return compare(self.count(text), self.relation, self.frequency)

    def describe(self) -> str:
        return f"use {self.keyword!r} {self.relation} {self.frequency} times"


class ForbiddenWords(TextChecker):
    """``keywords:forbidden_words``: none of the words occurs as a whole word (case-insensitive)."""

    id = "keywords:forbidden_words"

    def __init__(self, *, forbidden_words: Any) -> None:
        super().__init__()
        self.words = tuple(sorted(set(require_words("forbidden_words", forbidden_words))))
        self.kwargs = {"forbidden_words": list(self.words)}

    def check(self, text: str) -> bool:
        return not any(re.search(rf"\b{re.escape(w)}\b", text, flags=re.IGNORECASE) for w in self.words)

    def describe(self) -> str:
        return "never use the words " + ", ".join(repr(w) for w in self.words)


class LetterFrequency(TextChecker):
    """``keywords:letter_frequency``: how often one character occurs (case-insensitive)."""

    id = "keywords:letter_frequency"

    def __init__(self, *, letter: Any, let_frequency: Any, let_relation: Any) -> None:
        super().__init__()
        # a single visible character; punctuation is allowed, as in IFEval's latest tests
        if not isinstance(letter, str) or len(letter.strip()) != 1:
            raise ValueError(f"letter must be a single non-whitespace character, got {letter!r}")
        self.letter = letter.strip().lower()
        self.frequency = require_count("let_frequency", let_frequency)
        self.relation = require_relation("let_relation", let_relation)
        self.kwargs = {"letter": self.letter, "let_frequency": self.frequency, "let_relation": self.relation}

    def check(self, text: str) -> bool:
        return compare(Counter(text.lower())[self.letter], self.relation, self.frequency)

    def describe(self) -> str:
        return f"the letter {self.letter!r} appears {self.relation} {self.frequency} times"
