"""Human labels: reading, several annotators per item (majority vote), and joining with results.

Labels are CSV or JSON Lines with ``instance_id, sample, label`` and optionally ``annotator``,
``task`` and ``model`` (needed only where an instance id alone is ambiguous, e.g. a_music_attribute
rows feed two tasks).  ``label`` is 0/1, or any category for multi-class questions.
"""

from __future__ import annotations

import csv
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from .stats import krippendorff_alpha_nominal


@dataclass(frozen=True)
class Label:
    instance_id: str
    sample: int
    label: Any
    annotator: str | None = None
    task: str | None = None
    model: str | None = None

    @property
    def item(self) -> tuple[str | None, str, int, str | None]:
        return (self.task, self.instance_id, self.sample, self.model)


def _coerce_label(value: Any) -> Any:
    if isinstance(value, str):
        text = value.strip()
        try:
            number = float(text)
        except ValueError:
            return text
        return int(number) if number.is_integer() else number
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _parse(raw: Mapping[str, Any], where: str) -> Label:
    if not raw.get("instance_id"):
        raise ValueError(f"{where}: 'instance_id' is required")
    if raw.get("label") in (None, ""):
        raise ValueError(f"{where}: 'label' is required")
    try:
        sample = int(raw.get("sample") or 0)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: 'sample' must be an integer") from None
    text = lambda key: (str(raw[key]).strip() or None) if raw.get(key) not in (None, "") else None  # noqa: E731
    return Label(str(raw["instance_id"]), sample, _coerce_label(raw["label"]), text("annotator"), text("task"), text("model"))


def load_labels(path: str | Path) -> list[Label]:
    """Read a labels file (``.csv`` or JSON Lines)."""
    path = Path(path)
    labels = []
    with open(path, encoding="utf-8-sig", newline="") as handle:
        if path.suffix.lower() == ".csv":
            for number, row in enumerate(csv.DictReader(handle), start=2):
                labels.append(_parse(row, f"{path.name}:{number}"))
        else:
            for number, line in enumerate(handle, start=1):
                if line.strip():
                    try:
                        raw = json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise ValueError(f"{path.name}:{number}: invalid JSON ({exc.msg})") from None
                    if not isinstance(raw, dict):
                        raise ValueError(f"{path.name}:{number}: expected an object")
                    labels.append(_parse(raw, f"{path.name}:{number}"))
    if not labels:
        raise ValueError(f"{path} holds no labels")
    return labels


@dataclass
class Adjudication:
    labels: dict[tuple, Any]  # item -> majority label
    ties: list[tuple] = field(default_factory=list)  # items without a majority (left out)
    annotators_per_item: dict[tuple, int] = field(default_factory=dict)
    inter_annotator: dict[str, Any] = field(default_factory=dict)


def adjudicate(labels: Iterable[Label]) -> Adjudication:
    """Majority vote per item; an item whose top labels tie is left out and reported."""
    by_item: dict[tuple, list[Label]] = defaultdict(list)
    for label in labels:
        by_item[label.item].append(label)
    result = Adjudication(labels={})
    units = []
    for item in sorted(by_item, key=lambda t: tuple("" if v is None else str(v) for v in t)):
        votes = Counter(label.label for label in by_item[item])
        ranked = votes.most_common()
        result.annotators_per_item[item] = len(by_item[item])
        units.append([label.label for label in by_item[item]])
        if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
            result.ties.append(item)
            continue
        result.labels[item] = ranked[0][0]
    multi = [unit for unit in units if len(unit) >= 2]
    if multi:
        pair_agreement = [
            sum(a == b for i, a in enumerate(unit) for b in unit[i + 1 :]) / (len(unit) * (len(unit) - 1) / 2) for unit in multi
        ]
        result.inter_annotator = {
            "items": len(multi),
            "pairwise_agreement": sum(pair_agreement) / len(pair_agreement),
            "krippendorff_alpha_nominal": krippendorff_alpha_nominal(multi),
        }
    return result


@dataclass
class Joined:
    """Per task: one entry per labelled, scored generation."""

    values: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    labels: dict[str, list[Any]] = field(default_factory=lambda: defaultdict(list))
    instances: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    unmatched: int = 0
    ambiguous: int = 0
    missing_component: int = 0


def component_value(row: Mapping[str, Any], component: str) -> float | None:
    if component == "score":
        return row.get("score")
    value = (row.get("components") or {}).get(component)
    return float(value) if value is not None else None


def join(rows: Iterable[Mapping[str, Any]], labels: Mapping[tuple, Any], components: Mapping[str, str]) -> Joined:
    """Match adjudicated labels to scored rows; ``components`` maps task -> component (default score)."""
    index: dict[tuple[str, int], list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        if row.get("status") == "scored":
            index[(str(row["instance_id"]), int(row["sample"]))].append(row)
    joined = Joined()
    for (task, instance_id, sample, model), label in labels.items():
        candidates = [
            row for row in index.get((instance_id, sample), [])
            if (task is None or row["task"] == task) and (model is None or row.get("model") == model)
        ]  # fmt: skip
        if not candidates:
            joined.unmatched += 1
            continue
        if len(candidates) > 1:
            joined.ambiguous += 1
            continue
        row = candidates[0]
        value = component_value(row, components.get(row["task"], "score"))
        if value is None:
            joined.missing_component += 1
            continue
        joined.values[row["task"]].append(float(value))
        joined.labels[row["task"]].append(label)
        joined.instances[row["task"]].append(instance_id)
    return joined
