"""Count relations as MMMG writes them: ``"== 3"``, ``">= 2"``, ``"< 20"``, ``">= 20 and count <= 35"``.

The published pipeline evaluates ``count <relation>`` as Python code, which is why a range reads
``">= 20 and count <= 35"``.  Nothing is evaluated here: the string is parsed into comparison clauses
that must all hold.  Plain-English spellings (``"less than 2"``, ``"exactly 1"``, ``"at least three"``,
``"between 25 and 40"``) and bare numbers (``3`` means ``== 3``) are accepted too.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from typing import Any, Callable

_OPS: dict[str, Callable[[int, int], bool]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}
_SYMBOL_ALIASES = {"=": "==", "≤": "<=", "≥": ">=", "=<": "<=", "=>": ">=", "≠": "!=", "<>": "!="}
_PHRASES: tuple[tuple[str, str], ...] = (  # longest first, so "no more than" wins over "more than"
    ("no more than", "<="), ("not more than", "<="), ("no less than", ">="), ("not less than", ">="),
    ("no fewer than", ">="), ("not fewer than", ">="), ("greater than or equal to", ">="),
    ("less than or equal to", "<="), ("more than", ">"), ("greater than", ">"), ("less than", "<"),
    ("fewer than", "<"), ("at least", ">="), ("at most", "<="), ("up to", "<="), ("exactly", "=="),
    ("equal to", "=="), ("equals", "=="), ("under", "<"), ("below", "<"), ("over", ">"), ("above", ">"),
    ("minimum of", ">="), ("maximum of", "<="), ("min", ">="), ("max", "<="),
)
_NUMBER_WORDS = {
    "zero": 0, "once": 1, "one": 1, "twice": 2, "two": 2, "thrice": 3, "three": 3, "four": 4, "five": 5,
    "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20,
}
_FILLER = re.compile(r"\b(count|length|words?|times|occurrences?|instances?)\b")
_EXAMPLES = "'== 3', '>= 2', '< 20', 'less than 2', 'exactly 1', '>= 20 and count <= 35'"


@dataclass(frozen=True)
class Relation:
    """A conjunction of ``count <op> n`` clauses."""

    clauses: tuple[tuple[str, int], ...]

    def holds(self, count: int) -> bool:
        return all(_OPS[op](count, n) for op, n in self.clauses)

    def __str__(self) -> str:
        return " and ".join(f"{op} {n}" for op, n in self.clauses)


def _number(token: str, source: str) -> int:
    token = token.strip()
    if re.fullmatch(r"-\s*\d+", token):
        raise ValueError(f"relation {source!r}: counts must be non-negative")
    if token.isdigit():
        return int(token)
    if token in _NUMBER_WORDS:
        return _NUMBER_WORDS[token]
    raise ValueError(f"relation {source!r}: {token!r} is not a count; expected e.g. {_EXAMPLES}")


def _clause(text: str, source: str) -> tuple[str, int]:
    text = _FILLER.sub(" ", text).strip()
    match = re.fullmatch(r"(==|!=|<=|>=|=<|=>|<>|<|>|=|≤|≥|≠)\s*(.+)", text)
    if match:
        op = _SYMBOL_ALIASES.get(match.group(1), match.group(1))
        return op, _number(match.group(2), source)
    for phrase, op in _PHRASES:
        if text.startswith(phrase + " "):
            return op, _number(text[len(phrase) :], source)
    return "==", _number(text, source)  # a bare number


def parse_relation(value: Any) -> Relation:
    """Parse an MMMG count relation; ``ValueError`` with examples when it cannot be read."""
    if isinstance(value, bool):
        raise ValueError(f"relation must be a string or a count, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"relation {value!r}: counts must be non-negative")
        return Relation((("==", value),))
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"relation must be a non-empty string such as {_EXAMPLES}, got {value!r}")
    text = re.sub(r"\s+", " ", value.strip().lower())
    between = re.fullmatch(r"(?:count )?between (\S+) (?:and|to|-) (\S+)", text) or re.fullmatch(
        r"(?:count )?(\d+) ?(?:-|to) ?(\d+)", text
    )
    if between:
        low, high = _number(between.group(1), value), _number(between.group(2), value)
        if low > high:
            raise ValueError(f"relation {value!r}: empty range {low} > {high}")
        return Relation(((">=", low), ("<=", high)))
    if re.search(r"\bor\b|\|\|", text):
        raise ValueError(f"relation {value!r}: alternatives ('or') are not supported; use e.g. {_EXAMPLES}")
    parts = [p for p in re.split(r"\band\b|&&|,", text)]
    if any(not p.strip() for p in parts):
        raise ValueError(f"relation {value!r} is malformed; expected e.g. {_EXAMPLES}")
    return Relation(tuple(_clause(p, value) for p in parts))
