"""Out-of-sample agreement: the threshold is fitted on some instructions and judged on others.

Folds are made of whole instructions, so the samples of one instruction are never split between
training and test (they are correlated; splitting them would leak).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Sequence

import numpy as np

from .fit import fit_threshold, predict


@dataclass(frozen=True)
class CrossValidation:
    scheme: str  # "kfold" or "loio" (leave one instruction out)
    folds: int
    agreement: float  # pooled over all held-out predictions
    fold_agreements: list[float]
    thresholds: list[float]
    predictions: np.ndarray  # held-out prediction for every item, in input order


def grouped_folds(groups: Sequence[Hashable], k: int | None, seed: int = 0) -> list[np.ndarray]:
    """Test-index arrays; ``k=None`` gives one fold per group (leave-one-group-out)."""
    labels = np.asarray([str(g) for g in groups])
    names = np.unique(labels)
    if k is None:
        k = names.size
    if not 2 <= k <= names.size:
        raise ValueError(f"need 2 <= folds <= number of instructions ({names.size}), got {k}")
    order = np.random.default_rng(seed).permutation(names.size)
    assignment = {names[i]: position % k for position, i in enumerate(order)}
    fold_of = np.array([assignment[g] for g in labels])
    return [np.flatnonzero(fold_of == f) for f in range(k)]


def cross_validate(
    scores: Sequence[float],
    labels: Sequence[int],
    groups: Sequence[Hashable],
    *,
    folds: int | None = 5,
    direction: str = ">",
    objective: str = "agreement",
    seed: int = 0,
) -> CrossValidation:
    scores_arr = np.asarray(scores, dtype=np.float64)
    labels_arr = np.asarray(labels).astype(np.int64)
    predictions = np.full(labels_arr.size, -1, dtype=np.int64)
    fold_agreements, thresholds = [], []
    for test in grouped_folds(groups, folds, seed):
        train = np.setdiff1d(np.arange(labels_arr.size), test)
        fit = fit_threshold(scores_arr[train], labels_arr[train], direction, objective)
        predictions[test] = predict(scores_arr[test], fit.threshold, direction)
        fold_agreements.append(float(np.mean(predictions[test] == labels_arr[test])))
        thresholds.append(fit.threshold)
    return CrossValidation(
        scheme="loio" if folds is None else "kfold",
        folds=len(thresholds),
        agreement=float(np.mean(predictions == labels_arr)),
        fold_agreements=fold_agreements,
        thresholds=thresholds,
        predictions=predictions,
    )
