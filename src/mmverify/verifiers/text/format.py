"""IFEval ``detectable_content:*`` and ``detectable_format:*`` instructions."""

from __future__ import annotations

import json
import re
from typing import Any

from .base import TextChecker, require_count, require_text

_PLACEHOLDER = re.compile(r"\[[^\[\]\n]*\]")
_STAR_BULLET = re.compile(r"^[^\S\n]*\*[^\*].*$", flags=re.MULTILINE)
_DASH_BULLET = re.compile(r"^[^\S\n]*-.*$", flags=re.MULTILINE)


def titles(text: str) -> list[str]:
    r"""What ``re.findall(r"<<[^\n]+>>", text)`` finds -- on each line, from its first ``<<`` to its
    last ``>>`` with something between -- without trying every ``<`` to the end of its line."""
    found = []
    for line in text.split("\n"):
        start = line.find("<<")
        end = line.rfind(">>") if start >= 0 else -1
        if end >= start + 3:
            found.append(line[start : end + 2])
    return found


class Placeholders(TextChecker):
    """``detectable_content:number_placeholders``: at least N ``[placeholder]`` spans."""

    id = "detectable_content:number_placeholders"

    def __init__(self, *, num_placeholders: Any) -> None:
        super().__init__()
        self.minimum = require_count("num_placeholders", num_placeholders)
        self.kwargs = {"num_placeholders": self.minimum}

    def check(self, text: str) -> bool:
        # IFEval counts r"\[.*?\]"; this counts the same (each "]" with a "[" since the last "]" on
        # its line) without trying every "[" to the end of its line
        return len(_PLACEHOLDER.findall(text)) >= self.minimum

    def describe(self) -> str:
        return f"at least {self.minimum} placeholders in square brackets"


class Postscript(TextChecker):
    """``detectable_content:postscript``: a postscript introduced by the marker (``P.S.``, ``P.P.S``...).

    The two standard markers tolerate a space after each dot and any case (``p. s.``); other markers
    are matched literally, case-insensitively.  The postscript need not start a new line.
    """

    id = "detectable_content:postscript"

    def __init__(self, *, postscript_marker: Any) -> None:
        super().__init__()
        self.marker = require_text("postscript_marker", postscript_marker)
        self.kwargs = {"postscript_marker": self.marker}
        # IFEval's expressions begin with r"\s*" and end with r".*$", which decide nothing about
        # whether there is a match (the marker alone does) but cost quadratic time on long blanks
        if self.marker == "P.P.S":
            self._pattern = re.compile(r"p\.\s?p\.\s?s")
        elif self.marker == "P.S.":
            self._pattern = re.compile(r"p\.\s?s\.")
        else:
            self._pattern = re.compile(re.escape(self.marker.lower()))

    def check(self, text: str) -> bool:
        return self._pattern.search(text.lower()) is not None

    def describe(self) -> str:
        return f"end with a postscript starting with {self.marker!r}"


class BulletLists(TextChecker):
    """``detectable_format:number_bullet_lists``: exactly N markdown bullets (``*`` or ``-`` lines)."""

    id = "detectable_format:number_bullet_lists"

    def __init__(self, *, num_bullets: Any) -> None:
        super().__init__()
        self.expected = require_count("num_bullets", num_bullets)
        self.kwargs = {"num_bullets": self.expected}

    def check(self, text: str) -> bool:
        # IFEval's r"^\s*" may run over blank lines to the bullet; starting at the bullet's own line
        # finds the same bullets without scanning every run of blank lines from each of its lines
        stars = _STAR_BULLET.findall(text)
        dashes = _DASH_BULLET.findall(text)
        return len(stars) + len(dashes) == self.expected

    def describe(self) -> str:
        return f"exactly {self.expected} markdown bullet points"


class ConstrainedResponse(TextChecker):
    """``detectable_format:constrained_response``: contains one of IFEval's three fixed answers."""

    id = "detectable_format:constrained_response"
    OPTIONS = ("My answer is yes.", "My answer is no.", "My answer is maybe.")

    def __init__(self) -> None:
        super().__init__()

    def check(self, text: str) -> bool:
        stripped = text.strip()
        return any(option in stripped for option in self.OPTIONS)

    def describe(self) -> str:
        return "answer with one of: " + " / ".join(repr(o) for o in self.OPTIONS)


class HighlightedSections(TextChecker):
    """``detectable_format:number_highlighted_sections``: at least N ``*highlighted*`` spans.

    Single-star spans and double-star (bold) spans are both counted, as IFEval counts them (a bold span
    is found by both patterns); blank spans never count.
    """

    id = "detectable_format:number_highlighted_sections"

    def __init__(self, *, num_highlights: Any) -> None:
        super().__init__()
        self.minimum = require_count("num_highlights", num_highlights)
        self.kwargs = {"num_highlights": self.minimum}

    def check(self, text: str) -> bool:
        count = sum(1 for h in re.findall(r"\*[^\n\*]*\*", text) if h.strip("*").strip())
        count += sum(1 for h in re.findall(r"\*\*[^\n\*]*\*\*", text) if h[2:-2].strip())
        return count >= self.minimum

    def describe(self) -> str:
        return f"at least {self.minimum} sections highlighted with markdown, e.g. *like this*"


class MultipleSections(TextChecker):
    """``detectable_format:multiple_sections``: at least N sections, each opened by
    ``<section_spliter> <number>`` (e.g. ``SECTION 2``)."""

    id = "detectable_format:multiple_sections"

    def __init__(self, *, section_spliter: Any, num_sections: Any) -> None:
        super().__init__()
        self.splitter = require_text("section_spliter", section_spliter)
        self.minimum = require_count("num_sections", num_sections)
        self.kwargs = {"section_spliter": self.splitter, "num_sections": self.minimum}

    def check(self, text: str) -> bool:
        pieces = re.split(r"\s?" + re.escape(self.splitter) + r"\s?\d+\s?", text)
        return len(pieces) - 1 >= self.minimum

    def describe(self) -> str:
        return f"at least {self.minimum} sections, each starting with '{self.splitter} <n>'"


class JsonFormat(TextChecker):
    """``detectable_format:json_format``: the whole response parses as JSON (code fences allowed)."""

    id = "detectable_format:json_format"

    def __init__(self) -> None:
        super().__init__()

    def check(self, text: str) -> bool:
        body = text.strip()
        for fence in ("```json", "```Json", "```JSON", "```"):  # removed one after another, as in IFEval
            body = body.removeprefix(fence)
        body = body.removesuffix("```")
        try:
            json.loads(body.strip())
        except ValueError:
            return False
        return True

    def describe(self) -> str:
        return "the entire output is JSON (markdown code fences allowed)"


class Title(TextChecker):
    """``detectable_format:title``: a non-blank title in double angular brackets, ``<<like this>>``."""

    id = "detectable_format:title"

    def __init__(self) -> None:
        super().__init__()

    def check(self, text: str) -> bool:
        return any(t.lstrip("<").rstrip(">").strip() for t in titles(text))

    def describe(self) -> str:
        return "include a title wrapped in double angular brackets, e.g. <<title>>"
