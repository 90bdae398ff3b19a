"""Values that decode from JSON text but cannot be carried through the pipeline.

Python's decoder accepts a few things that later steps cannot handle: lone UTF-16 surrogate escapes
(``"\\udcff"`` decodes to a string that cannot be encoded as UTF-8), the non-standard constants
``NaN`` / ``Infinity`` / ``-Infinity`` and out-of-range literals such as ``1e999`` (both refused by
the strict JSON writer used for keys and results), and integer literals longer than Python's
int-string conversion limit (which make the decoder itself raise ``ValueError``).

:func:`loads` decodes such integers to an :class:`Unrepresentable` marker instead of raising, and
:func:`first_problem` names the first unusable value of a decoded object, so callers can refuse
exactly the line, row or field that holds it.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

LONE_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


@dataclass(frozen=True)
class Unrepresentable:
    """Stands in for an integer literal too long to convert (``digits`` characters)."""

    digits: int


def parse_int(literal: str) -> int | Unrepresentable:
    """``int(literal)``, or a marker when the literal exceeds the int-string conversion limit."""
    try:
        return int(literal)
    except ValueError:
        return Unrepresentable(len(literal.lstrip("-")))


def loads(text: str | bytes) -> Any:
    """``json.loads`` with over-long integers decoded to :class:`Unrepresentable` markers."""
    return json.loads(text, parse_int=parse_int)


def replace_surrogates(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (a visible replacement character)."""
    return LONE_SURROGATE.sub(REPLACEMENT, text)


def _describe_string(text: str) -> str | None:
    match = LONE_SURROGATE.search(text)
    if match is None:
        return None
    return f"a string with an unpaired surrogate (\\u{ord(match.group()):04x})"


def _describe_scalar(value: Any) -> str | None:
    if isinstance(value, str):
        return _describe_string(value)
    if isinstance(value, float) and not math.isfinite(value):
        return f"a non-finite number ({value!r})"
    if isinstance(value, Unrepresentable):
        return f"an integer of {value.digits} digits (beyond the conversion limit)"
    return None


def _child_path(path: str, key: object) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def first_problem(value: Any, path: str = "") -> str | None:
    """``"<path>: <what>"`` for the first unusable value inside ``value`` (depth first), else None.

    Dictionary keys are checked like string values.  The walk is iterative, so any depth the
    decoder produced is fine."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, dict):
            children: list[tuple[Any, str]] = []
            for key, child in item.items():
                if isinstance(key, str) and _describe_string(key) is not None:
                    return f"{where or '(top level)'}: a key that is {_describe_string(key)}"
                children.append((child, _child_path(where, key)))
            stack.extend(reversed(children))
        elif isinstance(item, (list, tuple)):
            stack.extend(reversed([(child, _child_path(where, i)) for i, child in enumerate(item)]))
        else:
            problem = _describe_scalar(item)
            if problem is not None:
                return f"{where or '(top level)'}: {problem}"
    return None
