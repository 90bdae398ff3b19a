"""The published MMMG evaluator's readers of judge replies, for the ``mmmg`` profile.

The strict readers of :mod:`.parse` take the verdict from the *end* of a reply and refuse replies
that do not end in the asked format.  The published evaluator read some replies differently, and
the ``mmmg`` profile reproduces those readers where a task's verdict depends on them (behaviour
re-derived from ``eval_image.py`` / ``eval_interleaved.py`` and ``utils.extract_list``):

* counting (i_object_count): the *first* ``Answer:`` (exact case), optional whitespace, then a
  capital letter A-F; no such marker reads as no option (:func:`first_answer_letter`);
* counting (it_coherence_count): the *first character* of the reply, stripped and lower-cased,
  whatever the reply says after it (:func:`first_character`);
* position options: the first ``nswer: `` (one space, so "answer: B" counts and "**Answer:** B"
  does not) followed by one of the option letters; none reads as no option
  (:func:`first_nswer_letter`);
* OCR lists: the first ``[`` ... ``]`` span that lies on one line, parsed as JSON; a reply without
  one, or whose first span is not JSON, reads as the empty list (:func:`first_line_list`).

Each reader returns what the published code went on to compare; where the published code crashed
(an empty reply for the first-character reader, a list of objects or booleans for the OCR reader)
the reply is ``judge_unparseable`` instead, an error row rather than a score.
"""

from __future__ import annotations

import json
from typing import Callable, Mapping, Sequence

from ...core.errors import ErrorCode, ScoringError
from .parse import as_strings


def _refused(what: str, reply: str) -> ScoringError:
    tail = reply.strip()[-200:]
    return ScoringError(ErrorCode.JUDGE_UNPARSEABLE, f"{what}; reply ends with: {tail!r}")


def _first_after(reply: str, marker: str, read: Callable[[str, int], str | None]) -> str | None:
    """The first ``read(reply, end of marker)`` that is not None, over the occurrences of ``marker``
    in order (the published readers are searches for the first occurrence that fits)."""
    position = reply.find(marker)
    while position >= 0:
        found = read(reply, position + len(marker))
        if found is not None:
            return found
        position = reply.find(marker, position + 1)
    return None


def first_answer_letter(reply: str, letters: Sequence[str] = "ABCDEF") -> str | None:
    """The letter of the first ``Answer:`` marker followed by optional whitespace and a capital A-F
    (None when there is none).  Case matters ("answer: b" is no answer) and the letter need not be
    among ``letters``: the published value is compared, not checked against the options."""

    def letter_after(text: str, start: int) -> str | None:
        while start < len(text) and text[start].isspace():
            start += 1
        return text[start] if start < len(text) and text[start] in "ABCDEF" else None

    return _first_after(reply, "Answer:", letter_after)


def first_nswer_letter(reply: str, letters: Sequence[str]) -> str | None:
    """The letter after the first ``nswer: `` that is followed by one of ``letters`` (None when
    there is none).  Case matters and exactly one space must follow the colon."""
    allowed = "".join(letters)
    if not allowed or not all(len(letter) == 1 and letter.isalpha() for letter in allowed):
        raise ValueError(f"letters must be single letters, got {list(letters)!r}")
    return _first_after(reply, "nswer: ", lambda text, at: text[at] if at < len(text) and text[at] in allowed else None)


def first_character(reply: str) -> str:
    """The first character of the reply once stripped and lower-cased (the published counting rule
    of it_coherence_count compares it with the letter of the claimed count)."""
    text = reply.strip().lower()
    if not text:
        raise ScoringError(ErrorCode.JUDGE_UNPARSEABLE, "empty reply where an option letter was asked for")
    return text[0]


def _one_line_span(text: str) -> str | None:
    """The first ``[`` up to the nearest ``]`` with no line break between them (None when none)."""
    position, end = 0, -1
    while True:
        start = text.find("[", position)
        if start < 0:
            return None
        if end < start:  # else the nearest "]" after the last start is also the nearest after this one
            end = text.find("]", start)
            if end < 0:
                return None
        newline = text.find("\n", start, end)
        if newline < 0:
            return text[start : end + 1]
        position = newline + 1  # every "[" before that line break reaches "]" only across it


def first_line_list(reply: str) -> list[str]:
    """The first one-line ``[...]`` span of the reply as a JSON list of strings; the empty list
    when there is no span or it is not JSON.  Numbers are read as their text (the published code
    crashed on them); any other item (object, boolean, null) is ``judge_unparseable``."""
    span = _one_line_span(reply)
    if span is None:
        return []
    try:
        value = json.loads(span)
    except (ValueError, RecursionError):
        return []
    items = as_strings(value)
    if items is None:
        raise _refused("the first list holds items that are neither text nor numbers", reply)
    return items


# reader name -> function of (reply, option letters)
READERS: Mapping[str, Callable[[str, Sequence[str]], object]] = {
    "first_answer_letter": first_answer_letter,
    "first_nswer_letter": first_nswer_letter,
    "first_character": lambda reply, letters: first_character(reply),
    "first_line_list": lambda reply, letters: first_line_list(reply),
}
