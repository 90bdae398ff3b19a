"""Reward items from framework samples, the same way for every adapter in :mod:`.adapters`.

Frameworks hand over annotations as dicts or JSON strings, and the generated text apart from any
media the rollout produced; these helpers decode the one and put the other into the response's
parts.  Building an item never raises: a sample that cannot become an item is a Refused entry,
so it costs its own row and never the batch.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from ..core.errors import ErrorCode
from .reward_batch import ERROR_POLICIES, Item, Refused
from .reward_json import JsonBudget, TooManyValues, describe_exception, loads_json

RESPONSE_PLACEHOLDER = "response"  # {"type": "response"} in a parts list stands for the generated text


def decode_json(value: Any, budget: JsonBudget | None = None) -> Any:
    """A JSON string decoded (over-long integers become markers the reward refuses); anything
    else, or text that does not decode, as is.  With a ``budget`` (a server request's), the text
    is charged to it first: nested too deeply, it stays text; over the budget, TooManyValues."""
    if isinstance(value, (str, bytes)):
        try:
            if budget is not None:
                budget.take(value)
            return loads_json(value)
        except (ValueError, RecursionError):
            return value
    return value


def guarded_item(task: Any, make: Callable[..., Item], *args: Any) -> Item:
    """``make(*args)``, or -- when building the item fails -- a Refused entry (naming ``task``), so
    a bad sample costs its own row and never the batch.  A spent JSON budget is the request's
    problem, not the sample's: it propagates."""
    try:
        return make(*args)
    except TooManyValues:
        raise
    except Exception as exc:
        context = {"task": task} if isinstance(task, str) else None
        return Refused(ErrorCode.MALFORMED_LINE, f"cannot build this item: {describe_exception(exc)}", context)


def with_response(parts: Any, text: Any) -> list[Any]:
    """``parts`` with each ``{"type": "response"}`` replaced by the generated text; no parts: the text.

    ``parts`` may be a list, a tuple or a one-dimensional array (datasets read from Parquet hand
    lists over as numpy object arrays); anything else, or a text that is not a string, is refused
    rather than scored without the media or with a ``"None"`` response."""
    if not isinstance(text, str):
        raise ValueError(f"the generated text must be a string, got {type(text).__name__}")
    if parts is None:
        return [{"type": "text", "text": text}]
    if isinstance(parts, (list, tuple)):
        parts = list(parts)
    elif getattr(parts, "ndim", None) == 1 and hasattr(parts, "tolist"):
        parts = parts.tolist()
    else:
        raise ValueError(f"'parts' must be a list of response parts, got {type(parts).__name__}")
    return [
        {"type": "text", "text": text} if isinstance(p, Mapping) and p.get("type") == RESPONSE_PLACEHOLDER else p
        for p in parts
    ]


def check_policy(on_error: str, allowed: Sequence[str] = ERROR_POLICIES) -> str:
    """``on_error`` when it is one of ``allowed`` (an adapter's error policies), else ValueError."""
    if on_error not in allowed:
        raise ValueError(f"on_error must be one of {', '.join(allowed)}, got {on_error!r}")
    return on_error
