"""Out-of-sample agreement: the threshold is fitted on some instructions and judged on others.

Folds are made of whole instructions, so the samples of one instruction are never split between
training and test (they are correlated; splitting them would leak).  Everything fitted is fitted on
the training folds only: with ``direction="auto"`` the direction too is chosen afresh in every
fold (choosing it once on all the data would let the held-out items pick it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Hashable, Sequence

import numpy as np

from .fit import fit_direction, fit_two_thresholds, predict


@dataclass(frozen=True)
class CrossValidation:
    scheme: str  # "kfold" or "loio" (leave one instruction out)
    folds: int
    agreement: float  # pooled over all held-out predictions
    fold_agreements: list[float]
    thresholds: list[Any]  # per fold: the threshold (binary) or [low, high] (three-way)
    predictions: np.ndarray  # held-out prediction for every item, in input order
    directions: list[str] | None = None  # per fold, binary fits only (differs between folds with "auto")


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


def _fold_loop(
    labels: np.ndarray, groups: Sequence[Hashable], folds: int | None, seed: int,
    fit_predict: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, Any, str | None]],
) -> CrossValidation:
    """Run ``fit_predict(train, test) -> (test predictions, threshold, direction)`` over the folds."""
    predictions = np.full(labels.size, -1, dtype=np.int64)
    fold_agreements: list[float] = []
    thresholds: list[Any] = []
    directions: list[str | None] = []
    for test in grouped_folds(groups, folds, seed):
        train = np.setdiff1d(np.arange(labels.size), test)
        predictions[test], threshold, direction = fit_predict(train, test)
        fold_agreements.append(float(np.mean(predictions[test] == labels[test])))
        thresholds.append(threshold)
        directions.append(direction)
    return CrossValidation(
        scheme="loio" if folds is None else "kfold",
        folds=len(thresholds),
        agreement=float(np.mean(predictions == labels)),
        fold_agreements=fold_agreements,
        thresholds=thresholds,
        predictions=predictions,
        directions=None if directions and directions[0] is None else directions,  # type: ignore[arg-type]
    )


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
    """Held-out agreement of the binary threshold fit; ``direction`` may be ``"auto"`` (chosen on
    each training fold)."""
    scores_arr = np.asarray(scores, dtype=np.float64)
    labels_arr = np.asarray(labels).astype(np.int64)

    def fit_predict(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, float, str]:
        try:
            fit = fit_direction(scores_arr[train], labels_arr[train], direction, objective)
        except ValueError as exc:
            scheme = "leave-one-instruction-out" if folds is None else "k-fold"
            raise ValueError(f"{scheme} cross-validation, a training fold: {exc}") from None
        return predict(scores_arr[test], fit.threshold, fit.direction), fit.threshold, fit.direction

    return _fold_loop(labels_arr, groups, folds, seed, fit_predict)


def cross_validate_three_way(
    scores: Sequence[float], labels: Sequence[int], groups: Sequence[Hashable], *, folds: int | None = 5, seed: int = 0
) -> CrossValidation:
    """Held-out agreement of the two-threshold (labels 0/1/2) fit; thresholds are ``[low, high]``."""
    scores_arr = np.asarray(scores, dtype=np.float64)
    labels_arr = np.asarray(labels).astype(np.int64)

    def fit_predict(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, list[float], None]:
        fit = fit_two_thresholds(scores_arr[train], labels_arr[train])
        return predict_three_way(scores_arr[test], fit.low, fit.high), [fit.low, fit.high], None

    return _fold_loop(labels_arr, groups, folds, seed, fit_predict)


def predict_three_way(scores: np.ndarray, low: float, high: float) -> np.ndarray:
    """0 below ``low``, 2 above ``high`` (as ``score --thresholds`` passes it), 1 between.  The fitted
    cuts split the training scores as :func:`~.fit.fit_two_thresholds` counted them."""
    scores = np.asarray(scores, dtype=np.float64)
    return np.where(scores < low, 0, np.where(scores > high, 2, 1)).astype(np.int64)
