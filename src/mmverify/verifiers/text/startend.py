"""IFEval ``startend:*``, ``combination:*`` and ``punctuation:*`` instructions."""

from __future__ import annotations

from typing import Any

from .base import TextChecker, require_text


class EndPhrase(TextChecker):
    """``startend:end_checker``: the response ends with the phrase (case-insensitive; surrounding
    whitespace and double quotes around the response are ignored)."""

    id = "startend:end_checker"

    def __init__(self, *, end_phrase: Any) -> None:
        super().__init__()
        self.phrase = require_text("end_phrase", end_phrase)
        self.kwargs = {"end_phrase": self.phrase}

    def check(self, text: str) -> bool:
        return text.strip().strip('"').lower().endswith(self.phrase.lower())

    def describe(self) -> str:
        return f"finish with the exact phrase {self.phrase!r}"


class Quotation(TextChecker):
    """``startend:quotation``: the whole response is wrapped in double quotation marks."""

    id = "startend:quotation"

    def __init__(self) -> None:
        super().__init__()

    def check(self, text: str) -> bool:
        body = text.strip()
        return len(body) > 1 and body[0] == '"' and body[-1] == '"'

    def describe(self) -> str:
        return "wrap the entire response in double quotation marks"


class TwoResponses(TextChecker):
    """``combination:two_responses``: exactly two different responses separated by ``******``.

    A separator may open or close the text, but two separators in a row (an empty response between
    them) fail.
    """

    id = "combination:two_responses"

    def __init__(self) -> None:
        super().__init__()

    def check(self, text: str) -> bool:
        pieces = text.split("******")
        kept: list[str] = []
        for index, piece in enumerate(pieces):
            if piece.strip():
                kept.append(piece.strip())
            elif index not in (0, len(pieces) - 1):
                return False
        return len(kept) == 2 and kept[0] != kept[1]

    def describe(self) -> str:
        return "give two different responses separated by six asterisks (******)"


class RepeatPrompt(TextChecker):
    """``combination:repeat_prompt``: the response begins by repeating the request (case-insensitive)."""

    id = "combination:repeat_prompt"

    def __init__(self, *, prompt_to_repeat: Any) -> None:
        super().__init__()
        self.prompt = require_text("prompt_to_repeat", prompt_to_repeat)
        self.kwargs = {"prompt_to_repeat": self.prompt}

    def check(self, text: str) -> bool:
        return text.strip().lower().startswith(self.prompt.lower())

    def describe(self) -> str:
        return f"first repeat the request word for word: {self.prompt!r}"


class NoComma(TextChecker):
    """``punctuation:no_comma``: no ASCII comma anywhere."""

    id = "punctuation:no_comma"

    def __init__(self) -> None:
        super().__init__()

    def check(self, text: str) -> bool:
        return "," not in text

    def describe(self) -> str:
        return "use no commas"
