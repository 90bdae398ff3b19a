"""Preference pairs: does the verifier score the human-preferred generation higher?

A pairs file (CSV or JSON Lines) has ``instance_id, chosen_sample, rejected_sample`` and optionally
``task``, ``chosen_model``, ``rejected_model``.  Each side is found the way labels are (see
:mod:`.matching`): a missing task or model matches any, and the two sides must share exactly one
task.  Tie policies for equal scores:
``strict`` (a tie is wrong), ``half`` (a tie earns 0.5), ``epsilon`` (differences up to ``epsilon``
count as ties earning 0.5).  "Up to ``epsilon``" is judged without the float noise of the
subtraction (0.4 - 0.3 is 0.10000000000000003): a difference that exceeds ``epsilon`` by at most
``1e-12`` times the largest of the two scores and ``epsilon`` counts as ``epsilon``, so scores on a
decimal grid behave as written (scores far above 1 get a wider allowance: 1e-9 at 1000).

A pair compares two different generations: one with the same sample (and model) on both sides is
refused.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from .matching import Matching, RowIndex, common_rows, optional_text, parse_sample, read_records
from .stats import cluster_bootstrap

TIE_POLICIES = ("strict", "half", "epsilon")


@dataclass(frozen=True)
class Pair:
    instance_id: str
    chosen_sample: int
    rejected_sample: int
    task: str | None = None
    chosen_model: str | None = None
    rejected_model: str | None = None

    def __post_init__(self) -> None:
        if self.chosen_sample == self.rejected_sample and self.chosen_model == self.rejected_model:
            raise ValueError(
                f"{self.instance_id}: chosen and rejected are the same generation (sample {self.chosen_sample}"
                + (f", model {self.chosen_model}" if self.chosen_model is not None else "") + ")"
            )


def load_pairs(path: str | Path) -> list[Pair]:
    path = Path(path)
    pairs = []
    for number, (where, raw) in enumerate(read_records(path), start=1):
        if optional_text(raw, "instance_id") is None or any(raw.get(key) in (None, "") for key in ("chosen_sample", "rejected_sample")):
            raise ValueError(f"{path.name} record {number} ({where}): needs instance_id, chosen_sample, rejected_sample")
        try:
            pairs.append(
                Pair(
                    optional_text(raw, "instance_id"), parse_sample(raw["chosen_sample"], "chosen_sample"),
                    parse_sample(raw["rejected_sample"], "rejected_sample"), optional_text(raw, "task"),
                    optional_text(raw, "chosen_model"), optional_text(raw, "rejected_model"),
                )  # fmt: skip
            )
        except ValueError as exc:
            raise ValueError(f"{path.name} record {number}: {exc}") from None
    return pairs


_RELATIVE = 1e-12  # float noise allowed when comparing a difference with epsilon


def within_epsilon(chosen: float, rejected: float, epsilon: float) -> bool:
    """``|chosen - rejected| <= epsilon`` as the decimal numbers read, not their float difference:
    the subtraction's rounding (relative to the scores' size) and epsilon's own are forgiven."""
    difference = abs(chosen - rejected)
    if difference <= epsilon:
        return True
    return math.isfinite(difference) and difference - epsilon <= _RELATIVE * max(abs(chosen), abs(rejected), epsilon)


def pair_credit(chosen: float, rejected: float, policy: str = "half", epsilon: float = 0.0) -> float:
    if policy not in TIE_POLICIES:
        raise ValueError(f"tie policy must be one of {TIE_POLICIES}")
    if epsilon < 0:
        raise ValueError("epsilon must be >= 0")
    tie = within_epsilon(chosen, rejected, epsilon) if policy == "epsilon" else chosen == rejected
    if tie:
        return 0.0 if policy == "strict" else 0.5
    return 1.0 if chosen > rejected else 0.0


def _match_pair(index: RowIndex, pair: Pair) -> tuple[tuple[Mapping[str, Any], Mapping[str, Any]] | None, str | None]:
    chosen, reason = index.candidates(pair.instance_id, pair.chosen_sample, pair.task, pair.chosen_model)
    if reason is None:
        rejected, reason = index.candidates(pair.instance_id, pair.rejected_sample, pair.task, pair.rejected_model)
    if reason is not None:
        return None, reason
    matched, reason = common_rows(chosen, rejected)
    if matched is not None and matched[0] is matched[1]:  # a side without a model matched the other's row
        raise ValueError(f"pair {_describe_pair(pair)}: chosen and rejected are the same generation")
    return matched, reason


def _describe_pair(pair: Pair) -> str:
    text = f"{pair.instance_id} samples {pair.chosen_sample}>{pair.rejected_sample}"
    has_model = pair.chosen_model is not None or pair.rejected_model is not None
    return text + (f" models {pair.chosen_model}>{pair.rejected_model}" if has_model else "")


def pairwise_accuracy(
    rows: Iterable[Mapping[str, Any]], pairs: Iterable[Pair], *, policy: str = "half", epsilon: float = 0.0, seed: int = 0
) -> dict[str, Any]:
    """Per-task and overall pairwise accuracy with cluster-bootstrap CIs (instructions as clusters)."""
    index = RowIndex(rows)
    matching = Matching()
    by_task: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for pair in pairs:
        matched, reason = _match_pair(index, pair)
        if matched is None:
            matching.miss(reason or "no_instance", _describe_pair(pair))
            continue
        matching.hit()
        chosen, rejected = matched
        credit = pair_credit(float(chosen["score"]), float(rejected["score"]), policy, epsilon)
        by_task[str(chosen["task"])].append((pair.instance_id, credit))
    report: dict[str, Any] = {
        "policy": policy,
        "epsilon": epsilon if policy == "epsilon" else None,
        "unmatched": matching.unmatched,
        "matching": matching.as_dict(),
        "tasks": {},
    }
    everything: list[tuple[str, float]] = []
    for task in sorted(by_task):
        report["tasks"][task] = _accuracy(by_task[task], seed)
        everything += [(f"{task}/{i}", c) for i, c in by_task[task]]
    report["overall"] = _accuracy(everything, seed) if everything else None
    return report


def describe_policy(policy: str, epsilon: float | None) -> str:
    """The tie policy in words, for reports."""
    if policy == "strict":
        return "strict: equal scores count as wrong"
    if policy == "epsilon":
        return f"epsilon: score differences up to {epsilon:g} count as ties earning 0.5"
    return "half: equal scores earn 0.5"


def _accuracy(entries: list[tuple[str, float]], seed: int) -> dict[str, Any]:
    credits = np.array([c for _, c in entries])
    ci = cluster_bootstrap(lambda idx: float(credits[idx].mean()), [i for i, _ in entries], seed=seed)
    return {"accuracy": float(credits.mean()), "ci95": list(ci) if ci else None, "pairs": len(entries)}
