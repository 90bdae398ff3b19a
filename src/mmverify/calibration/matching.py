"""Finding the results row a human judgement is about, and accounting for what did not match.

Labels and preference pairs name a generation by ``instance_id`` and ``sample``, optionally
narrowed by ``task`` and ``model``.  A missing task or model matches any; when that leaves several
rows (one instance feeding two tasks, or several models in one run) the item is ambiguous rather
than silently joined to one of them.  Every item that does not match gets a reason, so a run can
say *why* nothing matched instead of fitting on nothing.
"""

from __future__ import annotations

import csv
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

Row = Mapping[str, Any]

REASONS: dict[str, str] = {
    "no_instance": "no results row has this instance_id",
    "no_sample": "the instance_id is in the results, but not with this sample",
    "task": "no row of this task for the instance_id and sample",
    "model": "no row of this model for the instance_id and sample",
    "error": "the matching row is an error row (not scored)",
    "ambiguous": "several rows match (different tasks or models): add a task or model column",
    "missing_component": "the matching row has no value for the thresholded component",
    "no_common_task": "the chosen and rejected generations have no task in common",
}
EXAMPLES_PER_REASON = 3


class MatchingError(ValueError):
    """Too few labels or pairs matched a results row to calibrate on."""


class RowIndex:
    """Results rows (scored and error) by ``(instance_id, sample)``."""

    def __init__(self, rows: Iterable[Row]) -> None:
        self._rows: dict[tuple[str, int], list[Row]] = defaultdict(list)
        self._samples: dict[str, set[int]] = defaultdict(set)
        for row in rows:
            instance_id, written = str(row.get("instance_id")), row.get("sample") or 0
            if isinstance(written, bool) or not isinstance(written, int):
                raise ValueError(f"results row {instance_id} (line {row.get('line')}): sample {written!r} is not an integer")
            sample = written
            self._rows[(instance_id, sample)].append(row)
            self._samples[instance_id].add(sample)

    def candidates(self, instance_id: str, sample: int, task: str | None, model: str | None) -> tuple[list[Row], str | None]:
        """Rows of the generation that agree with ``task`` and ``model`` (``None`` matches any), or
        the reason there are none."""
        rows = self._rows.get((instance_id, sample), [])
        if not rows:
            return [], "no_sample" if instance_id in self._samples else "no_instance"
        if task is not None:
            rows = [r for r in rows if r.get("task") == task]
            if not rows:
                return [], "task"
        if model is not None:
            rows = [r for r in rows if r.get("model") == model]
            if not rows:
                return [], "model"
        return rows, None

    def find(self, instance_id: str, sample: int, task: str | None, model: str | None) -> tuple[Row | None, str | None]:
        """The single scored row of the generation, or why there is none."""
        rows, reason = self.candidates(instance_id, sample, task, model)
        if reason is not None:
            return None, reason
        if len(rows) > 1:
            return None, "ambiguous"
        if rows[0].get("status") != "scored":
            return None, "error"
        return rows[0], None


def read_records(path: Path) -> list[tuple[str, Any]]:
    """``(where, record)`` for each record of a ``.csv`` (a dict per row, its column names trimmed)
    or JSON Lines file (any JSON value per line), ``where`` being ``name:line``; ``ValueError`` naming the file and
    line for text that is not UTF-8, invalid JSON, or a JSON line that is not an object."""
    records: list[tuple[str, Any]] = []
    try:
        with open(path, encoding="utf-8-sig", newline="") as handle:
            if path.suffix.lower() == ".csv":
                reader = csv.DictReader(handle)
                if reader.fieldnames is not None:  # "task, instance_id" names the column instance_id
                    reader.fieldnames = [name.strip() for name in reader.fieldnames]
                return [(f"{path.name}:{number}", row) for number, row in enumerate(reader, start=2)]
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    raw = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path.name}:{number}: invalid JSON ({exc.msg})") from None
                if not isinstance(raw, dict):
                    raise ValueError(f"{path.name}:{number}: expected an object")
                records.append((f"{path.name}:{number}", raw))
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return records


def optional_text(raw: Mapping[str, Any], key: str) -> str | None:
    """An optional text field of a labels or pairs record, trimmed; None when absent or blank."""
    value = raw.get(key)
    return None if value in (None, "") else (str(value).strip() or None)


def parse_sample(value: Any, what: str = "sample") -> int:
    """A sample index as written in a labels or pairs file: an integer (``3``, ``3.0``, ``"3"``);
    missing or empty means 0.  ``ValueError`` for anything else (``1.7``, ``true``, ``"x"``) rather
    than a truncation that would name another generation."""
    if value is None or value == "":
        return 0
    if isinstance(value, bool):
        raise ValueError(f"'{what}' must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            try:
                value = float(value.strip())
            except ValueError:
                raise ValueError(f"'{what}' must be an integer, got {value!r}") from None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise ValueError(f"'{what}' must be an integer, got {value!r}")


def describe_item(instance_id: str, sample: int, task: str | None = None, model: str | None = None) -> str:
    text = f"{instance_id} sample {sample}"
    if task is not None:
        text += f" task {task}"
    if model is not None:
        text += f" model {model}"
    return text


@dataclass
class Matching:
    """How many items matched a row, and for the others the reasons with a few examples each."""

    total: int = 0
    matched: int = 0
    failures: Counter = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def hit(self) -> None:
        self.total += 1
        self.matched += 1

    def miss(self, reason: str, item: str) -> None:
        self.total += 1
        self.failures[reason] += 1
        if len(self.examples[reason]) < EXAMPLES_PER_REASON:
            self.examples[reason].append(item)

    @property
    def unmatched(self) -> int:
        return self.total - self.matched

    def as_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "matched": self.matched,
            "unmatched": self.unmatched,
            "reasons": {
                reason: {"count": count, "meaning": REASONS[reason], "examples": list(self.examples[reason])}
                for reason, count in sorted(self.failures.items(), key=lambda kv: (-kv[1], kv[0]))
            },
        }


def required_matches(total: int, min_matched: int) -> int:
    """At least ``min_matched`` items, or all of them when there are fewer, and never none."""
    return max(1, min(min_matched, total))


def explain(matching: Mapping[str, Any], what: str) -> str:
    """One paragraph: how many items matched, and for the rest why, with the first ids."""
    lines = [f"{matching['matched']} of {matching['total']} {what} matched a scored results row"]
    for reason, entry in matching["reasons"].items():
        examples = "; ".join(entry["examples"])
        lines.append(f"  {entry['count']}: {entry['meaning']} (first: {examples})")
    return "\n".join(lines)


def require(matching: Mapping[str, Any], *, min_matched: int, what: str, source: str = "", hint: str = "") -> None:
    """Raise :class:`MatchingError` when fewer than the required number of items matched
    ``source`` (the results file, named in the message)."""
    if matching["total"] == 0:
        raise MatchingError(f"no {what} to match")
    needed = required_matches(matching["total"], min_matched)
    if matching["matched"] >= needed:
        return
    results = f"the results in {source}" if source else "the results"
    message = f"too few {what} matched {results} (need {needed}; see --min-matched):\n{explain(matching, what)}"
    raise MatchingError(message + (f"\n{hint}" if hint else ""))


def common_rows(chosen: Sequence[Row], rejected: Sequence[Row]) -> tuple[tuple[Row, Row] | None, str | None]:
    """The one (chosen, rejected) row pair of a shared task, or why there is none."""
    by_task: dict[str, list[list[Row]]] = defaultdict(lambda: [[], []])
    for side, rows in enumerate((chosen, rejected)):
        for row in rows:
            by_task[str(row.get("task"))][side].append(row)
    shared = [task for task, (c, r) in by_task.items() if c and r]
    if not shared:
        return None, "no_common_task"
    if len(shared) > 1 or any(len(side) > 1 for side in by_task[shared[0]]):
        return None, "ambiguous"
    pair = (by_task[shared[0]][0][0], by_task[shared[0]][1][0])
    if any(row.get("status") != "scored" for row in pair):
        return None, "error"
    return pair, None
