"""The JSON side of reward items: decoding documents whose over-long integers become markers
instead of failing the whole document, finding the first value of an item strict JSON cannot hold
(so only that item is refused), and text that is safe to copy into a row."""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any, Mapping, Union

DESCRIBED_DEPTH = 200  # nesting beyond this is reported as the problem of an unwritable item
MAX_DECODED_DEPTH = 400  # documents nested deeper are refused before decoding, whatever stack decodes them


class UnrepresentableNumber:
    """Stands in for a JSON integer with more digits than Python converts (see
    ``sys.get_int_max_str_digits``), so decoding a document goes on and only the item holding it
    is refused."""

    __slots__ = ("digits",)

    def __init__(self, digits: int) -> None:
        self.digits = digits

    def __repr__(self) -> str:
        return f"UnrepresentableNumber(digits={self.digits})"


def _parse_int(text: str) -> int | UnrepresentableNumber:
    try:
        return int(text)
    except ValueError:
        return UnrepresentableNumber(len(text.lstrip("-")))


def loads_json(text: str | bytes | bytearray) -> Any:
    """``json.loads`` that decodes over-long integers to :class:`UnrepresentableNumber` instead of
    failing the whole document (NaN, Infinity and lone surrogates decode as Python does; items
    holding them are refused by :func:`json_problem`).  Raises ValueError or RecursionError."""
    return json.loads(text, parse_int=_parse_int)


def _patterns(pattern: str) -> dict[type, re.Pattern]:
    """``pattern`` for text and for bytes; its first group is a JSON string (contents skipped).

    A string with no closing quote runs to the end of the text: a match that started at a quote
    never fails, so no quote is scanned from again and a scan stays linear in the text's length
    (an unclosed string would be tried anew at each of its escaped quotes).  Such a document is
    invalid; the decoder refuses it."""
    full = r'("[^"\\]*(?:\\[\s\S][^"\\]*)*(?:"|\\?\Z))|' + pattern
    return {str: re.compile(full), bytes: re.compile(full.encode())}


_COUNTED = _patterns(r"[\[{,]")  # strings, and what starts a value of a container
_NESTING = _patterns(r"([\[{]+)|[\]}]+")  # strings, runs of openers (group 2), runs of closers


def count_json_values(text: str | bytes | bytearray, limit: int) -> int:
    """Containers plus separated elements of a JSON document, counted on its raw text (string
    contents skipped) and only up to just past ``limit``: an upper bound on the objects decoding
    would create, found without creating any.  Strings are always skipped, never counted in a
    cheaper tally of every ``[{,``: a request's JSON strings are charged when they are decoded."""
    count = 1
    for match in _COUNTED[str if isinstance(text, str) else bytes].finditer(text):
        if match.lastindex is None:  # not a string
            count += 1
            if count > limit:
                break
    return count


def json_depth(text: str | bytes | bytearray, limit: int) -> int:
    """How deeply a JSON document nests, found on its raw text (string contents skipped) and only
    up to just past ``limit``; when the brackets alone cannot go past ``limit``, their count.
    Python's decoder recurses once per level, so where its recursion limit strikes depends on the
    stack it runs on: checking depth first makes that one rule."""
    bound = sum(text.count(mark) for mark in (("[", "{") if isinstance(text, str) else (b"[", b"{")))  # type: ignore[arg-type]
    if bound <= limit:
        return bound
    depth = deepest = 0
    for match in _NESTING[str if isinstance(text, str) else bytes].finditer(text):
        run = match.end() - match.start()
        if match.lastindex == 2:
            depth += run
            deepest = max(deepest, depth)
            if deepest > limit:
                break
        elif match.lastindex is None:
            depth -= run
    return deepest


class TooManyValues(Exception):
    """A request whose JSON (its body and the JSON strings decoded from it) holds more values than
    its budget; not a ValueError, so no per-item guard turns it into a row."""


class TooDeep(ValueError):
    """A JSON document nested deeper than :data:`MAX_DECODED_DEPTH`."""


class JsonBudget:
    """The JSON one request may decode: ``values`` values in all, over its body and every JSON
    string decoded from it, and no document nested deeper than ``max_depth`` -- both checked on
    the raw text before anything is decoded."""

    def __init__(self, values: int, max_depth: int = MAX_DECODED_DEPTH) -> None:
        self.limit = self.left = values
        self.max_depth = max_depth

    def take(self, text: str | bytes | bytearray) -> None:
        """Charge ``text`` before it is decoded: TooManyValues once the budget is spent, TooDeep
        for nesting past ``max_depth``."""
        count = count_json_values(text, self.left)
        if count > self.left:
            raise TooManyValues(f"the body holds more than {self.limit} JSON values")
        self.left -= count
        if json_depth(text, self.max_depth) > self.max_depth:
            raise TooDeep(f"nested deeper than {self.max_depth} levels")


_SURROGATE = re.compile("[\ud800-\udfff]")
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")
_Where = Union[tuple[()], tuple[Any, Any]]  # (parent location, key or index) chain, formatted on demand


def _where(location: _Where) -> str:
    steps: list[str] = []
    while location:
        location, step = location
        if isinstance(step, int):
            steps.append(f"[{step}]")
        elif isinstance(step, str) and _PLAIN_KEY.fullmatch(step):
            steps.append(f".{step}")
        else:
            steps.append("[" + json.dumps(str(step)[:40]) + "]")  # escapes surrogates, quotes
    steps.reverse()
    if len(steps) > 12:
        steps = [*steps[:10], f"...({len(steps) - 11} more)", steps[-1]]
    return "".join(steps).lstrip(".") or "the item"


def _int_problem(value: int) -> str | None:
    limit = sys.get_int_max_str_digits()
    if not limit or value.bit_length() < limit * 3.3:  # fewer than `limit` decimal digits
        return None
    try:
        str(value)
    except ValueError:
        return f"an integer of about {int(value.bit_length() * math.log10(2)) + 1} digits (beyond the conversion limit)"
    return None


def _scalar_problem(value: Any) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        match = None if value.isascii() else _SURROGATE.search(value)
        return f"a string with an unpaired surrogate (\\u{ord(match.group()):04x})" if match else None
    if isinstance(value, int):
        return _int_problem(value)
    if isinstance(value, float):
        return None if math.isfinite(value) else f"a non-finite number ({value!r})"
    if isinstance(value, UnrepresentableNumber):
        return f"an integer of {value.digits} digits (beyond the conversion limit)"
    return f"a value of type {type(value).__name__}, which JSON cannot hold"


def _top_field(location: _Where) -> Any:
    while location and location[0]:
        location = location[0]
    return location[1] if location else None


def first_json_problem(value: Any, max_depth: int = DESCRIBED_DEPTH) -> tuple[Any, str] | None:
    """``(top-level key, "<where>: <what>")`` for the first value of ``value`` that strict JSON
    cannot hold (lone surrogates, NaN/Infinity, integers over the digit limit, non-JSON types,
    nesting deeper than ``max_depth``); None if there is none.  Iterative: any depth is fine."""
    stack: list[tuple[Any, _Where, int]] = [(value, (), 0)]
    while stack:
        current, location, depth = stack.pop()
        if isinstance(current, (Mapping, list, tuple)):
            if depth >= max_depth:
                return _top_field(location), f"{_where(location)}: nested deeper than {max_depth} levels"
            if isinstance(current, Mapping):
                for key, child in current.items():
                    if not isinstance(key, (str, int, float)) and key is not None:  # json.dumps converts these
                        return _top_field(location), f"{_where(location)}: key of type {type(key).__name__} (keys must be strings)"
                    problem = _scalar_problem(key)
                    if problem:
                        return _top_field((location, key)), f"{_where(location)}: a key that is {problem}"
                    stack.append((child, (location, key), depth + 1))
            else:
                stack.extend((child, (location, index), depth + 1) for index, child in enumerate(current))
            continue
        problem = _scalar_problem(current)
        if problem:
            return _top_field(location), f"{_where(location)}: {problem}"
    return None


def json_problem(value: Any, max_depth: int = DESCRIBED_DEPTH) -> str | None:
    """``"<where>: <what>"`` for the first value strict JSON cannot hold (see
    :func:`first_json_problem`), else None."""
    found = first_json_problem(value, max_depth)
    return found[1] if found else None


def safe_text(text: str, limit: int = 500) -> str:
    """``text`` cut to ``limit`` characters with lone surrogates escaped, so it can go into a row."""
    text = text if len(text) <= limit else text[: limit - 3] + "..."
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def describe_exception(exc: BaseException) -> str:
    try:
        detail = str(exc)
    except Exception:  # an exception whose message cannot be formatted
        detail = ""
    return safe_text(f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__)


def clean_field(value: Any) -> str | None:
    """A string field of an item as it may be copied into a row: non-empty, short, valid Unicode."""
    if not isinstance(value, str) or not value or len(value) > 1000 or _scalar_problem(value):
        return None
    return value
