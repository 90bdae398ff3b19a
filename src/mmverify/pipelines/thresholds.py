"""Thresholds files: ``{task: {"component": ..., "threshold": x, "direction": ">"|"<", ...}}``.

``calibrate`` writes them; ``score --thresholds`` applies them to set each row's ``passed``.
``component`` is ``"score"`` (the row's score) or the name of one of the row's components.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..core.types import Check


@dataclass(frozen=True)
class Threshold:
    threshold: float
    component: str = "score"
    direction: str = ">"

    def __post_init__(self) -> None:
        if self.direction not in (">", "<", ">=", "<="):
            raise ValueError(f"direction must be one of >, <, >=, <=; got {self.direction!r}")
        if not isinstance(self.threshold, (int, float)) or not math.isfinite(self.threshold):
            raise ValueError(f"threshold must be a finite number, got {self.threshold!r}")

    def as_dict(self) -> dict[str, Any]:
        return {"component": self.component, "threshold": self.threshold, "direction": self.direction}

    def passes(self, check: Check) -> bool | None:
        """Apply to a check; None when the component is absent (e.g. a gate failed first)."""
        value = check.score if self.component == "score" else check.components.get(self.component)
        if value is None:
            return None
        return {
            ">": value > self.threshold,
            "<": value < self.threshold,
            ">=": value >= self.threshold,
            "<=": value <= self.threshold,
        }[self.direction]


def by_task_id(thresholds: Mapping[str, Threshold]) -> dict[str, Threshold]:
    """``thresholds`` keyed by catalog task ids (``task:`` prefixes dropped); a key that names no
    task is refused with the nearest ids, where it would have set no row's ``passed``, silently."""
    from ..core.registry import UnknownIdError
    from ..tasks.catalog import task_info

    keyed: dict[str, Threshold] = {}
    for task, threshold in thresholds.items():
        try:
            task_id = task_info(str(task)).id
        except UnknownIdError as exc:
            raise ValueError(f"{exc} (a key of the thresholds)") from None
        if task_id in keyed:
            raise ValueError(f"the thresholds name {task_id} twice (as {task!r} too): keep one")
        keyed[task_id] = threshold
    return keyed


def parse_thresholds(raw: Mapping[str, Any]) -> dict[str, Threshold]:
    """Thresholds keyed by catalog task id, from a mapping of task ids to ``Threshold`` values or
    to objects as a thresholds file holds them (``threshold``, optional ``component`` and
    ``direction``)."""
    if not isinstance(raw, Mapping):
        raise ValueError("a thresholds file must hold a JSON object keyed by task id")
    parsed = {}
    for task, spec in raw.items():
        if isinstance(spec, Threshold):
            parsed[task] = spec
            continue
        if not isinstance(spec, Mapping) or "threshold" not in spec:
            raise ValueError(f"thresholds[{task!r}] must be an object with a 'threshold'")
        parsed[task] = Threshold(
            threshold=float(spec["threshold"]),
            component=str(spec.get("component", "score")),
            direction=str(spec.get("direction", ">")),
        )
    return by_task_id(parsed)


def load_thresholds(path: str | Path) -> dict[str, Threshold]:
    with open(path, encoding="utf-8") as handle:
        return parse_thresholds(json.load(handle))
