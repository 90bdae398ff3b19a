"""IFEval ``length_constraints:*`` instructions: sentences, words, paragraphs."""

from __future__ import annotations

import re
from typing import Any

from .base import TextChecker, compare, require_count, require_relation, require_text
from .tokenize import count_sentences, count_words


class NumberOfSentences(TextChecker):
    """``length_constraints:number_sentences``, counted by the punkt-like splitter in ``tokenize``."""

    id = "length_constraints:number_sentences"

    def __init__(self, *, num_sentences: Any, relation: Any) -> None:
        super().__init__()
        self.threshold = require_count("num_sentences", num_sentences)
        self.relation = require_relation("relation", relation)
        self.kwargs = {"num_sentences": self.threshold, "relation": self.relation}

    def check(self, text: str) -> bool:
        return compare(count_sentences(text), self.relation, self.threshold)

    def describe(self) -> str:
        return f"{self.relation} {self.threshold} sentences"


class NumberOfWords(TextChecker):
    """``length_constraints:number_words``: words are runs of word characters (``\\w+``)."""

    id = "length_constraints:number_words"

    def __init__(self, *, num_words: Any, relation: Any) -> None:
        super().__init__()
        self.threshold = require_count("num_words", num_words)
        self.relation = require_relation("relation", relation)
        self.kwargs = {"num_words": self.threshold, "relation": self.relation}

    def check(self, text: str) -> bool:
        return compare(count_words(text), self.relation, self.threshold)

    def describe(self) -> str:
        return f"{self.relation} {self.threshold} words"


class NumberOfParagraphs(TextChecker):
    """``length_constraints:number_paragraphs``: exactly N paragraphs separated by ``***`` dividers.

    Empty pieces are tolerated only before the first or after the last divider; an empty paragraph in
    the middle (two dividers in a row) fails the instruction, as in IFEval.
    """

    id = "length_constraints:number_paragraphs"

    def __init__(self, *, num_paragraphs: Any) -> None:
        super().__init__()
        self.expected = require_count("num_paragraphs", num_paragraphs)
        self.kwargs = {"num_paragraphs": self.expected}

    def check(self, text: str) -> bool:
        pieces = re.split(r"\s?\*\*\*\s?", text)
        count = len(pieces)
        for index, piece in enumerate(pieces):
            if not piece.strip():
                if index in (0, len(pieces) - 1):
                    count -= 1
                else:
                    return False
        return count == self.expected

    def describe(self) -> str:
        return f"exactly {self.expected} paragraphs separated by '***'"


class NthParagraphFirstWord(TextChecker):
    """``length_constraints:nth_paragraph_first_word``: N paragraphs split by blank lines, and
    paragraph ``nth_paragraph`` (1-based) starts with ``first_word`` (case-insensitive)."""

    id = "length_constraints:nth_paragraph_first_word"
    _STOP_AT = frozenset(".,?!'\"")

    def __init__(self, *, num_paragraphs: Any, nth_paragraph: Any, first_word: Any) -> None:
        super().__init__()
        self.expected = require_count("num_paragraphs", num_paragraphs, minimum=1)
        self.nth = require_count("nth_paragraph", nth_paragraph, minimum=1)
        if self.nth > self.expected:
            raise ValueError(f"nth_paragraph ({self.nth}) exceeds num_paragraphs ({self.expected})")
        self.first_word = require_text("first_word", first_word).lower()
        self.kwargs = {"num_paragraphs": self.expected, "nth_paragraph": self.nth, "first_word": self.first_word}

    def check(self, text: str) -> bool:
        pieces = text.split("\n\n")
        # blank pieces do not count as paragraphs, but (as in IFEval) the index still refers to the
        # raw split, so a blank piece before the target makes the lookup land elsewhere
        count = sum(1 for piece in pieces if piece.strip())
        if self.nth > count:
            return False
        paragraph = pieces[self.nth - 1].strip()
        if not paragraph:
            return False
        word = paragraph.split()[0].strip().lstrip("'").lstrip('"')
        first = ""
        for char in word:
            if char in self._STOP_AT:
                break
            first += char.lower()
        return count == self.expected and first == self.first_word

    def describe(self) -> str:
        return (
            f"{self.expected} paragraphs separated by blank lines; "
            f"paragraph {self.nth} starts with {self.first_word!r}"
        )
