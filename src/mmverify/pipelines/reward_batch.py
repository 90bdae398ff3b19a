"""What a reward call returns -- scores and rows in input order -- and the policy that turns error
rows into scores (see :mod:`.reward`, which re-exports all of it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Mapping, NamedTuple, Sequence, Union

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
