"""The uniform checker contract and the kwargs validators every checker uses.

A checker is built once from explicit keyword arguments (validated at build time, ``ValueError`` on
anything wrong) and then answers ``check(text) -> bool`` any number of times.  Unlike IFEval, no
argument is ever drawn at random when missing: a missing required argument is an error, because a
scorer must be deterministic.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Iterable, Mapping

# IFEval compares counts with exactly these two relations.
LESS_THAN = "less than"
AT_LEAST = "at least"
IFEVAL_RELATIONS: tuple[str, str] = (LESS_THAN, AT_LEAST)


class TextChecker(ABC):
    """One instruction about a text response, e.g. ``keywords:existence``."""

    id: ClassVar[str]

    def __init__(self) -> None:
        # Filled by subclasses with the validated, JSON-friendly arguments (used in evidence).
        self.kwargs: dict[str, Any] = {}

    @abstractmethod
    def check(self, text: str) -> bool:
        """True when ``text`` follows the instruction."""

    @abstractmethod
    def describe(self) -> str:
        """A one-line, human-readable statement of the instruction."""

    def __call__(self, text: str) -> bool:
        return self.check(text)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items())
        return f"{type(self).__name__}({args})"


def require_count(name: str, value: Any, *, minimum: int = 0) -> int:
    """An integer >= ``minimum``; integral floats from JSON (``3.0``) are accepted, bools are not."""
    if isinstance(value, bool) or value is None:
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if isinstance(value, float):
        if not (math.isfinite(value) and value.is_integer()):
            raise ValueError(f"{name} must be an integer, got {value!r}")
        value = int(value)
    if not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def require_text(name: str, value: Any, *, strip: bool = True) -> str:
    """A non-blank string (stripped unless ``strip=False``)."""
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, got {type(value).__name__} {value!r}")
    if not value.strip():
        raise ValueError(f"{name} must not be empty")
    return value.strip() if strip else value


def require_words(name: str, value: Any) -> tuple[str, ...]:
    """A non-empty list of non-blank strings; a single string is taken as a one-item list."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, Iterable) or isinstance(value, Mapping):
        raise ValueError(f"{name} must be a list of strings, got {value!r}")
    words = tuple(require_text(f"{name}[{i}]", word) for i, word in enumerate(value))
    if not words:
        raise ValueError(f"{name} must not be empty")
    return words


def require_relation(name: str, value: Any) -> str:
    """One of IFEval's two relations, ``"less than"`` or ``"at least"``."""
    if value not in IFEVAL_RELATIONS:
        raise ValueError(f"{name} must be one of {list(IFEVAL_RELATIONS)}, got {value!r}")
    return str(value)


def compare(count: int, relation: str, threshold: int) -> bool:
    """IFEval's comparison: ``less than`` is ``<``, ``at least`` is ``>=``."""
    return count < threshold if relation == LESS_THAN else count >= threshold
