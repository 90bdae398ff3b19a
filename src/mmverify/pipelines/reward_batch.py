"""What a reward call returns -- scores and rows in input order --, the policy that turns error
rows into scores, and the rows of items refused before planning (see :mod:`.reward`, which
re-exports the first two)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, Mapping, NamedTuple, Sequence, Union

from ..core.errors import ErrorCode
from .plan import unresolved_key
from .results import RowIdentity, error_row
from .reward_json import DESCRIBED_DEPTH, clean_field, describe_exception, first_json_problem, safe_text

ErrorPolicy = Literal["none", "nan", "zero", "raise"]
ERROR_POLICIES: tuple[str, ...] = ("none", "nan", "zero", "raise")


class RewardError(RuntimeError):
    """Raised under ``on_error="raise"`` when items ended in ``error`` rows; carries every row."""

    def __init__(self, errors: list[tuple[int, str, str]], rows: list[dict[str, Any]]) -> None:
        first = "; ".join(f"item {i}: {code}: {message}" for i, code, message in errors[:3])
        more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
        super().__init__(f"{len(errors)} of {len(rows)} items could not be scored: {first}{more}")
        self.errors = errors
        self.rows = rows


class Refused(NamedTuple):
    """An item refused before planning (task outside the reward's tasks, paths not allowed, bad label)."""

    code: str
    message: str
    item: Any = None


@dataclass(frozen=True)
class RewardBatch:
    """Scores (after the error policy) and the full result rows, both in input order."""

    scores: list[float | None]
    rows: list[dict[str, Any]]

    def __len__(self) -> int:
        return len(self.scores)

    @property
    def errors(self) -> list[tuple[int, str, str]]:
        """``(index, error code, message)`` for every item that ended in an error row."""
        return [(i, r["error"]["code"], r["error"]["message"]) for i, r in enumerate(self.rows) if r["status"] == "error"]

    def component(self, name: str) -> list[float | None]:
        """One component per item (None where the row lacks it)."""
        return [row["components"].get(name) for row in self.rows]


Item = Union[Mapping[str, Any], Refused]


def scores_from_rows(rows: Sequence[Mapping[str, Any]], on_error: str) -> list[float | None]:
    """Apply an error policy: scored rows give their score; error rows give None, NaN, 0 or raise."""
    if on_error not in ERROR_POLICIES:
        raise ValueError(f"on_error must be one of {', '.join(ERROR_POLICIES)}, got {on_error!r}")
    fill = {"none": None, "nan": float("nan"), "zero": 0.0, "raise": None}[on_error]
    scores: list[float | None] = []
    errors: list[tuple[int, str, str]] = []
    for index, row in enumerate(rows):
        if row["status"] == "scored":
            scores.append(float(row["score"]))
        else:
            errors.append((index, row["error"]["code"], row["error"]["message"]))
            scores.append(fill)
    if errors and on_error == "raise":
        raise RewardError(errors, [dict(r) for r in rows])
    return scores


def refusal_row(line: int, item: Any, code: str, message: str) -> dict[str, Any]:
    """An error row for an item refused before planning, shaped like the planner's own.  Never
    raises: fields that are not clean JSON values are left out of the row."""
    raw = item if isinstance(item, Mapping) else {}
    task = clean_field(raw.get("task")) or "?"
    instance_id = clean_field(raw.get("instance_id")) or (f"{task}/line-{line}" if task != "?" else "?")
    sample = raw.get("sample", 0)
    sample = sample if isinstance(sample, int) and not isinstance(sample, bool) and 0 <= sample < 2**63 else 0
    model = clean_field(raw.get("model"))
    message = safe_text(message, 2000)
    try:
        key = unresolved_key(code, line, json.loads(json.dumps(item, sort_keys=True, allow_nan=False)))
    except (TypeError, ValueError, RecursionError):  # not JSON: the refusal itself identifies it
        key = unresolved_key(code, line, ["not-json", type(item).__name__, message])
    return error_row(RowIdentity(task, instance_id, sample, model, key, line, None), code, message)


def unwritable_row(line: int, item: Any, exc: BaseException) -> dict[str, Any]:
    """The row of an item that cannot be written as a manifest line (values outside JSON)."""
    found = first_json_problem(item, max_depth=DESCRIBED_DEPTH)
    if found is None:
        return refusal_row(line, item, ErrorCode.MALFORMED_LINE, f"item is not JSON-serialisable ({describe_exception(exc)})")
    field, problem = found
    code = ErrorCode.INVALID_INSTANCE if field == "instance" else ErrorCode.MALFORMED_LINE
    return refusal_row(line, item, code, f"unusable value at {problem}")
