"""Strict readers for judge replies: the verdict is taken from the *end* of the reply only.

The questions ask for reasoning first and the verdict last, so a reply mentions "yes", "no" and
option letters all through its reasoning.  Reading any of those as the verdict would turn the
judge's thinking into its answer; these readers look only at the final ``Answer:`` marker (or, for
replies without one, the last non-empty line).  When that is not a valid answer the reply is
refused with ``judge_unparseable`` -- never read as "no", never as some letter.
"""

from __future__ import annotations

import json
import re
from typing import Sequence

from ...core.errors import ErrorCode, ScoringError

_EXCERPT = 200

# "Answer:", "Final answer -", "ANSWER：" (full-width colon from CJK-tuned models); markdown
# emphasis is removed before matching, so "**Answer:** Yes" reads like "Answer: Yes"
_MARKER = re.compile(r"(?:final\s+)?answer\s*[:：\-]", re.IGNORECASE)
_MARKDOWN = str.maketrans("", "", "*`")
# what may wrap a short verdict: brackets, quotes, spaces
_WRAPPING = "\"'“”‘’[]()<>{} \t"


def excerpt(reply: str, limit: int = _EXCERPT) -> str:
    """The end of a reply (where the verdict should be), for error messages and evidence."""
    text = reply.strip()
    return text if len(text) <= limit else "…" + text[-limit:]


def _unparseable(what: str, reply: str) -> ScoringError:
    if not reply.strip():
        return ScoringError(ErrorCode.JUDGE_UNPARSEABLE, f"empty reply where {what} was asked for")
    return ScoringError(
        ErrorCode.JUDGE_UNPARSEABLE, f"reply does not end with {what}; reply ends with: {excerpt(reply)!r}"
    )


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _after_last_marker(text: str) -> str | None:
    """The rest of the line after the last ``Answer:`` marker, or None when there is no marker."""
    last = None
    for last in _MARKER.finditer(text):
        pass
    if last is None:
        return None
    return text[last.end() :].split("\n", 1)[0].strip(_WRAPPING)


# -- yes / no -----------------------------------------------------------------------------------
# a verdict value: "Yes", "No.", "Yes, the balloon is there" -- but not "Yes or No", "Not sure"
_YES_NO_VALUE = re.compile(r"(yes|no)(?:[.,;:!]+.*|\s+[-–—(].*)?", re.IGNORECASE)
# a last line that is nothing but the verdict: "No.", "The answer is yes", "Final verdict: No"
# (the blanks around the separator are one run unless a separator splits them: two optional runs
# side by side would be tried at every split of a long run of blanks)
_YES_NO_LINE = re.compile(
    r"(?:(?:the\s+)?(?:final\s+)?(?:answer|verdict|conclusion)(?:\s+is)?\s*(?:[:：\-]\s*)?)?[\"'(\[]?(yes|no)[\"')\]]?[.!]?",
    re.IGNORECASE,
)


def parse_yes_no(reply: str) -> bool:
    """True for a final Yes, False for a final No; anything else raises ``judge_unparseable``.

    1. A last non-empty line that is only the verdict ("Answer: Yes", "No.", "The answer is yes").
    2. Otherwise the last ``Answer:`` marker, which must be followed by Yes or No (a note after
       that line does not hide it).  An earlier marker never stands in for a malformed last one.
    """
    text = reply.translate(_MARKDOWN)
    match = _YES_NO_LINE.fullmatch(_last_line(text).strip(" \t"))
    if match is None:
        value = _after_last_marker(text)
        match = _YES_NO_VALUE.fullmatch(value) if value is not None else None
    if match is None:
        raise _unparseable("'Answer: Yes' or 'Answer: No'", reply)
    return match.group(1).lower() == "yes"


# -- multiple choice ----------------------------------------------------------------------------
def _letter(value: str, allowed: set[str], alone_only: bool) -> str | None:
    """``"B"``, ``"(b)"``, ``"B."`` -> ``"B"``; unless ``alone_only``, also ``"B. 3"``, ``"B) 3"``.

    A lower-case letter counts only on its own, so "a bottom-left quarter" is not option A."""
    core = value.strip(_WRAPPING).rstrip(".:)").strip(_WRAPPING)
    if len(core) == 1 and core.upper() in allowed:
        return core.upper()
    if not alone_only:
        match = re.match(r"\(?([A-Z])(?:[.):]|\s*[-–—]\s)", value.strip(_WRAPPING))
        if match and match.group(1) in allowed:
            return match.group(1)
    return None


def parse_choice(reply: str, letters: Sequence[str]) -> str:
    """The option letter the reply ends with (one of ``letters``).

    1. A last non-empty line that is ``Answer: B`` / ``Answer: (B)`` / ``Answer: B. 3`` or just ``B``.
    2. Otherwise the value after the last ``Answer:`` marker.
    Anything else -- including a letter outside ``letters`` -- raises ``judge_unparseable``.
    """
    allowed = {letter.upper() for letter in letters}
    if not allowed or any(len(letter) != 1 or not letter.isalpha() for letter in allowed):
        raise ValueError(f"letters must be single letters, got {list(letters)!r}")
    text = reply.translate(_MARKDOWN)
    last = _last_line(text)
    value_on_last = _after_last_marker(last)
    letter = (
        _letter(value_on_last, allowed, alone_only=False)
        if value_on_last is not None
        else _letter(last, allowed, alone_only=True)
    )
    if letter is None:
        value = _after_last_marker(text)
        letter = _letter(value, allowed, alone_only=False) if value is not None else None
    if letter is None:
        raise _unparseable(f"'Answer: <letter>' with one of {', '.join(sorted(allowed))}", reply)
    return letter


# -- lists of strings ----------------------------------------------------------------------------
def as_strings(value: object) -> list[str] | None:
    """A JSON list of strings (numbers are read as their text: an OCR reply may write [98105])."""
    if not isinstance(value, list):
        return None
    items: list[str] = []
    for item in value:
        if isinstance(item, str):
            items.append(item)
        elif isinstance(item, (int, float)) and not isinstance(item, bool):
            items.append(json.dumps(item))
        else:
            return None
    return items


def _last_json_list(text: str) -> object | None:
    """The JSON list that ends last in ``text`` (the outermost one when lists nest)."""
    decoder = json.JSONDecoder()
    best: tuple[int, int, object] | None = None  # (end, -start, value)
    for match in re.finditer(r"\[", text):
        try:
            value, end = decoder.raw_decode(text, match.start())
        except (ValueError, RecursionError):  # RecursionError: "[[[[..." nested past the parser's depth
            continue
        if best is None or (end, -match.start()) > best[:2]:
            best = (end, -match.start(), value)
    return None if best is None else best[2]


def parse_text_list(reply: str) -> list[str]:
    """The JSON list of strings that ends last in the reply (inside a fenced block or not).

    If the list that ends last is not a list of strings (nested lists, objects), the reply is
    unparseable rather than falling back to an earlier list; Python-style single-quoted lists are
    not JSON and are refused too.
    """
    items = as_strings(_last_json_list(reply))
    if items is None:
        raise _unparseable('a JSON list of strings such as ["text"]', reply)
    return items


# -- pass / fail verdicts -------------------------------------------------------------------------
# "VERDICT: PASS", "Final verdict - FAIL", "VERDICT：PASS" (markdown emphasis is removed first)
_VERDICT_MARKER = re.compile(r"verdict\s*[:：\-]", re.IGNORECASE)
_VERDICT_VALUE = re.compile(r"(pass|fail)[.!]?", re.IGNORECASE)


def parse_verdict(reply: str) -> bool:
    """True for a final ``VERDICT: PASS``, False for ``VERDICT: FAIL``; anything else raises
    ``judge_unparseable``.

    Only the value after the *last* ``VERDICT:`` marker is read, and it must be PASS or FAIL alone
    ("PASS or FAIL" is refused); the per-criterion PASS/FAIL lines of the reasoning never count.
    """
    text = reply.translate(_MARKDOWN)
    last = None
    for last in _VERDICT_MARKER.finditer(text):
        pass
    value = None if last is None else text[last.end() :].split("\n", 1)[0].strip(_WRAPPING)
    match = _VERDICT_VALUE.fullmatch(value) if value is not None else None
    if match is None:
        raise _unparseable("'VERDICT: PASS' or 'VERDICT: FAIL'", reply)
    return match.group(1).lower() == "pass"
