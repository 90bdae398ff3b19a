"""IFEval ``change_case:*`` instructions."""

from __future__ import annotations

from typing import Any

from .base import TextChecker, compare, require_count, require_relation
from .language import detect_language
from .tokenize import word_tokenize


def _english_or_unknown(text: str) -> bool:
    # IFEval counts a failed language detection as followed; the identifier returns None then
    language = detect_language(text)
    return language is None or language == "en"


class CapitalWordFrequency(TextChecker):
    """``change_case:capital_word_frequency``: how many tokens are entirely upper case.

    Tokens come from the Treebank-style tokenizer, so a hyphenated word is one token.
    """

    id = "change_case:capital_word_frequency"

    def __init__(self, *, capital_frequency: Any, capital_relation: Any) -> None:
        super().__init__()
        self.frequency = require_count("capital_frequency", capital_frequency)
        self.relation = require_relation("capital_relation", capital_relation)
        self.kwargs = {"capital_frequency": self.frequency, "capital_relation": self.relation}

    def count(self, text: str) -> int:
        return sum(1 for token in word_tokenize(text) if token.isupper())

    def check(self, text: str) -> bool:
        return compare(self.count(text), self.relation, self.frequency)

    def describe(self) -> str:
        return f"words in all capital letters appear {self.relation} {self.frequency} times"


class EnglishCapital(TextChecker):
    """``change_case:english_capital``: English, and every cased character is upper case."""

    id = "change_case:english_capital"

    def __init__(self) -> None:
        super().__init__()

    def check(self, text: str) -> bool:
        return text.isupper() and _english_or_unknown(text)

    def describe(self) -> str:
        return "the entire response is English in capital letters"


class EnglishLowercase(TextChecker):
    """``change_case:english_lowercase``: English, and every cased character is lower case."""

    id = "change_case:english_lowercase"

    def __init__(self) -> None:
        super().__init__()

    def check(self, text: str) -> bool:
        return text.islower() and _english_or_unknown(text)

    def describe(self) -> str:
        return "the entire response is English in lowercase letters"
