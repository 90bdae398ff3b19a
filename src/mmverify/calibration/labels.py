"""Human labels: reading, several annotators per item (majority vote), and joining with results.

Labels are CSV or JSON Lines with ``instance_id, sample, label`` and optionally ``annotator``,
``task`` and ``model`` (needed only where an instance id alone is ambiguous, e.g. a_music_attribute
rows feed two tasks, or a run holds several models).  ``label`` is read as written (any category
for multi-class questions); :func:`check_label_values` then holds the values to what a calibration
supports: 0/1 (or true/false) for thresholds, 0/1/2 for the three-way fit.

One generation is one item however its labels name it: :func:`resolve_items` fills a label's
missing ``task``/``model`` from the one results row it names, so an annotator whose file lacks the
task column votes on the same item as one whose file has it.  One annotator votes once per item:
repeated identical labels count once, different labels from the same annotator for one item are
an error (labels without an annotator each count as a vote).
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from .matching import Matching, RowIndex, describe_item, optional_text, parse_sample, read_records
from .stats import krippendorff_alpha_nominal

LABEL_KINDS: dict[str, tuple[int, ...]] = {"binary": (0, 1), "three-way": (0, 1, 2)}
_BOOLEAN_WORDS = {"true": 1, "false": 0}


@dataclass(frozen=True)
class Label:
    instance_id: str
    sample: int
    label: Any
    annotator: str | None = None
    task: str | None = None
    model: str | None = None
    sample_given: bool = field(default=True, compare=False)  # False: no sample written, read as 0

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
    instance_id = raw.get("instance_id")
    if isinstance(instance_id, str):
        instance_id = instance_id.strip()  # as the other text columns: "a, b" in a CSV is "b"
    if instance_id in (None, ""):
        raise ValueError(f"{where}: 'instance_id' is required")
    if not isinstance(instance_id, str):
        raise ValueError(f"{where}: 'instance_id' must be a string, got {instance_id!r}")
    if raw.get("label") in (None, ""):
        raise ValueError(f"{where}: 'label' is required")
    try:
        sample = parse_sample(raw.get("sample"))
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    given = raw.get("sample") not in (None, "")
    text = [optional_text(raw, key) for key in ("annotator", "task", "model")]
    return Label(instance_id, sample, _coerce_label(raw["label"]), *text, sample_given=given)


def check_samples_given(labels: Sequence[Label], rows: Iterable[Mapping[str, Any]], source: str) -> None:
    """A label without a sample reads as sample 0, which is safe only where its instruction has
    no other sample in the run: else ``ValueError``, rather than votes on several generations
    silently merged into sample 0's."""
    unsampled = {label.instance_id for label in labels if not label.sample_given}
    if not unsampled:
        return
    samples: dict[str, set[int]] = defaultdict(set)
    for row in rows:
        if str(row.get("instance_id")) in unsampled:
            samples[str(row.get("instance_id"))].add(int(row.get("sample") or 0))
    several = sorted(name for name, found in samples.items() if len(found) > 1 or found != {0})
    if several:
        shown = ", ".join(f"{name} (samples {', '.join(map(str, sorted(samples[name])))})" for name in several[:3])
        raise ValueError(
            f"{source}: {len(several)} instruction(s) labelled without a sample have other samples than 0 in the "
            f"results: {shown}; give each label its sample"
        )


def load_labels(path: str | Path) -> list[Label]:
    """Read a labels file (``.csv`` or JSON Lines)."""
    path = Path(path)
    labels = [_parse(raw, where) for where, raw in read_records(path)]
    if not labels:
        raise ValueError(f"{path} holds no labels")
    return labels


def _as_allowed(value: Any, kind: str) -> int | None:
    """``value`` as one of the kind's integers, or None when it is not one of them."""
    if isinstance(value, bool):
        return int(value)
    if kind == "binary" and isinstance(value, str) and value.strip().lower() in _BOOLEAN_WORDS:
        return _BOOLEAN_WORDS[value.strip().lower()]
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value in LABEL_KINDS[kind]:
        return int(value)
    return None


def _shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False) if isinstance(value, (str, bool)) else str(value)


def _value_order(value: Any) -> tuple[int, Any]:
    return (0, value) if isinstance(value, (int, float)) and not isinstance(value, bool) else (1, _shown(value))


def _unusable_message(labels: Sequence[Label], converted: Sequence[int | None], kind: str) -> str:
    found = sorted({(_value_order(label.label), _shown(label.label)) for label in labels})
    unusable = [label for label, value in zip(labels, converted) if value is None]
    first = unusable[0]
    allowed = "0/1 (or true/false)" if kind == "binary" else "0/1/2"
    message = (
        f"label values must be {allowed}; found: {', '.join(shown for _, shown in found)} "
        f"(first unusable: {_shown(first.label)} for {describe_item(first.instance_id, first.sample)})"
    )
    if kind == "binary" and all(_as_allowed(label.label, "three-way") is not None for label in unusable):
        message += "; labels 0/1/2 need --label-kind three-way"
    return message


def check_label_values(labels: Iterable[Label], kind: str = "binary") -> list[Label]:
    """Labels with values normalised to integers; ``ValueError`` naming every distinct value found
    when any value is not allowed for ``kind`` ("binary": 0/1 or true/false; "three-way": 0/1/2)."""
    if kind not in LABEL_KINDS:
        raise ValueError(f"label kind must be one of {', '.join(LABEL_KINDS)}, got {kind!r}")
    labels = list(labels)
    converted = [_as_allowed(label.label, kind) for label in labels]
    if any(value is None for value in converted):
        raise ValueError(_unusable_message(labels, converted, kind))
    return [replace(label, label=value) for label, value in zip(labels, converted)]


@dataclass
class Adjudication:
    labels: dict[tuple, Any]  # item -> majority label
    ties: list[tuple] = field(default_factory=list)  # items without a majority (left out)
    annotators_per_item: dict[tuple, int] = field(default_factory=dict)
    inter_annotator: dict[str, Any] = field(default_factory=dict)


def resolve_items(labels: Iterable[Label], rows: Iterable[Mapping[str, Any]]) -> list[Label]:
    """Labels with a missing ``task``/``model`` filled from the single results row they name, so
    labels of one generation are one item whichever optional columns their file carries.  A label
    naming no row, or several (ambiguous), is kept as written (the join reports why)."""
    index = RowIndex(rows)
    resolved = []
    for label in labels:
        if label.task is None or label.model is None:
            found, reason = index.candidates(label.instance_id, label.sample, label.task, label.model)
            if reason is None and len(found) == 1:
                row = found[0]
                label = replace(label, task=label.task or str(row.get("task")), model=label.model if label.model is not None else row.get("model"))
        resolved.append(label)
    return resolved


def _votes(item: tuple, labels: Sequence[Label]) -> list[Any]:
    """One vote per annotator (an unnamed label is its own vote); ``ValueError`` when one
    annotator gave the item different labels."""
    votes: list[Any] = []
    by_annotator: dict[str, Any] = {}
    for label in labels:
        if label.annotator is None:
            votes.append(label.label)
        elif label.annotator not in by_annotator:
            by_annotator[label.annotator] = label.label
            votes.append(label.label)
        elif by_annotator[label.annotator] != label.label:
            task, instance_id, sample, model = item
            raise ValueError(
                f"annotator {label.annotator!r} labelled {describe_item(instance_id, sample, task, model)} twice with different "
                f"labels ({_shown(by_annotator[label.annotator])} and {_shown(label.label)}); keep one"
            )
    return votes


def adjudicate(labels: Iterable[Label]) -> Adjudication:
    """Majority vote per item (one vote per annotator, see :func:`_votes`); an item whose top
    labels tie is left out and reported."""
    by_item: dict[tuple, list[Label]] = defaultdict(list)
    for label in labels:
        by_item[label.item].append(label)
    result = Adjudication(labels={})
    units = []
    for item in sorted(by_item, key=lambda t: tuple("" if v is None else str(v) for v in t)):
        unit = _votes(item, by_item[item])
        ranked = Counter(unit).most_common()
        result.annotators_per_item[item] = len(unit)
        units.append(unit)
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
    """Per task: one entry per labelled, scored generation (values, labels, instruction ids and the
    generation itself), and how the labels matched."""

    values: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    labels: dict[str, list[Any]] = field(default_factory=lambda: defaultdict(list))
    instances: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    items: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    matching: Matching = field(default_factory=Matching)

    @property
    def unmatched(self) -> int:
        """Labels without a usable row for a reason other than ambiguity or a missing component."""
        return self.matching.unmatched - self.ambiguous - self.missing_component

    @property
    def ambiguous(self) -> int:
        return self.matching.failures["ambiguous"]

    @property
    def missing_component(self) -> int:
        return self.matching.failures["missing_component"]


def component_value(row: Mapping[str, Any], component: str) -> float | None:
    """The row's score or named component as a finite number; None where it has none (or a
    hand-edited row holds something else there)."""
    components = row.get("components")
    value = row.get("score") if component == "score" else components.get(component) if isinstance(components, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _generation(row: Mapping[str, Any]) -> dict[str, Any]:
    return {key: row.get(key) for key in ("instance_id", "sample", "model", "line")}


def join(rows: Iterable[Mapping[str, Any]], labels: Mapping[tuple, Any], components: Mapping[str, str]) -> Joined:
    """Match adjudicated labels to scored rows; ``components`` maps task -> component (default score)."""
    index = RowIndex(rows)
    joined = Joined()
    for (task, instance_id, sample, model), label in labels.items():
        item = describe_item(instance_id, sample, task, model)
        row, reason = index.find(instance_id, sample, task, model)
        if row is None:
            joined.matching.miss(reason or "no_instance", item)
            continue
        value = component_value(row, components.get(row["task"], "score"))
        if value is None:
            joined.matching.miss("missing_component", item)
            continue
        joined.matching.hit()
        joined.values[row["task"]].append(float(value))
        joined.labels[row["task"]].append(label)
        joined.instances[row["task"]].append(instance_id)
        joined.items[row["task"]].append(_generation(row))
    return joined
