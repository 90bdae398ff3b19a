"""Exact threshold fitting.

Candidates are one threshold per split of the distinct scores: the midpoint between each pair of
neighbours, plus one point below the smallest and one above the largest (``1e-6`` beyond them, or
the next representable float where ``1e-6`` is below the scores' resolution, e.g. scores near
``1e11``), so every achievable split is tried (a fixed grid can miss the best one).  Where two
neighbours are adjacent floats their midpoint rounds onto one of them; the candidate is then the
neighbour that the rule ``score <direction> t`` puts on its own side (the lower one for ``>``, the
upper one for ``<``), so every candidate makes exactly the split it is counted for.  Ties between
equally good candidates are broken deterministically: the median of the tied candidates (lower
median), i.e. the most central of the equally good thresholds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

OBJECTIVES = ("agreement", "balanced_accuracy", "youden", "f1")
DIRECTIONS = (">", "<")
_EDGE = 1e-6
_TIE = 1e-12


@dataclass(frozen=True)
class ThresholdFit:
    threshold: float
    direction: str
    objective: str
    value: float  # objective at the threshold
    agreement: float
    candidates: np.ndarray  # every candidate threshold, ascending
    values: np.ndarray  # objective at each candidate


def candidate_thresholds(scores: np.ndarray, direction: str = ">") -> np.ndarray:
    """One threshold per split of the distinct scores, ascending, for the rule ``score <direction> t``."""
    distinct = np.unique(np.asarray(scores, dtype=np.float64))
    if distinct.size == 0:
        raise ValueError("no scores to fit a threshold on")
    lower, upper = distinct[:-1], distinct[1:]
    middle = (lower + upper) / 2.0
    if direction == ">":  # a midpoint that rounded onto a neighbour: the lower one splits as counted
        middle = np.where(middle < upper, middle, lower)
    else:
        middle = np.where(middle > lower, middle, upper)
    low, high = distinct[0] - _EDGE, distinct[-1] + _EDGE
    if not low < distinct[0]:  # 1e-6 is lost in the rounding of large scores: one float step instead
        low = np.nextafter(distinct[0], -np.inf)
    if not high > distinct[-1]:
        high = np.nextafter(distinct[-1], np.inf)
    return np.concatenate([[low], middle, [high]])


def _validate(scores: np.ndarray, labels: np.ndarray, direction: str, objective: str) -> None:
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    if scores.shape != labels.shape or scores.ndim != 1:
        raise ValueError("scores and labels must be 1-D arrays of the same length")
    if not np.all(np.isfinite(scores)):
        raise ValueError("scores must be finite")
    if not np.isin(labels, (0, 1)).all():
        raise ValueError("binary threshold fitting needs labels 0/1")
    if objective == "f1" and not labels.any():
        raise ValueError("the f1 objective is undefined without a label 1 (no positive to find); use another --objective")


def predict(scores: np.ndarray, threshold: float, direction: str) -> np.ndarray:
    scores = np.asarray(scores, dtype=np.float64)
    return (scores > threshold if direction == ">" else scores < threshold).astype(np.int64)


def confusion_at(scores: np.ndarray, labels: np.ndarray, thresholds: np.ndarray, direction: str) -> tuple[np.ndarray, ...]:
    """TP, FP, TN, FN for every threshold at once (sorting + cumulative counts, O(n log n))."""
    order = np.argsort(scores, kind="stable")
    sorted_scores = scores[order]
    positives_sorted = np.cumsum(labels[order])
    # items on the negative side of ">" (score <= t) or the positive side of "<" (score < t)
    below = np.searchsorted(sorted_scores, thresholds, side="right" if direction == ">" else "left")
    pos_below = np.where(below > 0, positives_sorted[np.maximum(below - 1, 0)], 0)
    total_pos = int(labels.sum())
    total = labels.size
    if direction == ">":  # predicted positive: score > t
        tp = total_pos - pos_below
        fp = (total - below) - tp
    else:  # predicted positive: score < t
        tp = pos_below
        fp = below - tp
    fn = total_pos - tp
    tn = (total - total_pos) - fp
    return tp, fp, tn, fn


def objective_values(tp: np.ndarray, fp: np.ndarray, tn: np.ndarray, fn: np.ndarray, objective: str) -> np.ndarray:
    tp, fp, tn, fn = (np.asarray(a, dtype=np.float64) for a in (tp, fp, tn, fn))
    with np.errstate(divide="ignore", invalid="ignore"):
        if objective == "agreement":
            return (tp + tn) / (tp + fp + tn + fn)
        tpr = np.where(tp + fn > 0, tp / (tp + fn), 0.0)
        tnr = np.where(tn + fp > 0, tn / (tn + fp), 0.0)
        if objective == "balanced_accuracy":
            return (tpr + tnr) / 2.0
        if objective == "youden":
            return tpr + tnr - 1.0
        denominator = 2 * tp + fp + fn
        return np.where(denominator > 0, 2 * tp / denominator, 0.0)


def _central_best(values: np.ndarray) -> int:
    best = np.flatnonzero(values >= values.max() - _TIE)
    return int(best[(len(best) - 1) // 2])


def fit_threshold(scores, labels, direction: str = ">", objective: str = "agreement") -> ThresholdFit:
    """The threshold maximising ``objective`` for predictions ``score <direction> threshold``."""
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels).astype(np.int64)
    _validate(scores, labels, direction, objective)
    candidates = candidate_thresholds(scores, direction)
    counts = confusion_at(scores, labels, candidates, direction)
    values = objective_values(*counts, objective)
    best = _central_best(values)
    agreement = objective_values(*counts, "agreement")[best]
    return ThresholdFit(float(candidates[best]), direction, objective, float(values[best]), float(agreement), candidates, values)


def fit_direction(scores, labels, direction: str = ">", objective: str = "agreement") -> ThresholdFit:
    """:func:`fit_threshold`; ``direction="auto"`` fits both directions and keeps the better one
    (``>`` on a tie).  Cross-validation calls this on each training fold, so an automatic direction
    is chosen without the held-out items."""
    directions = DIRECTIONS if direction == "auto" else (direction,)
    fits = [fit_threshold(scores, labels, d, objective) for d in directions]
    return max(fits, key=lambda f: (f.value, f.direction == ">"))


@dataclass(frozen=True)
class ThreeWayFit:
    low: float
    high: float
    agreement: float


def fit_two_thresholds(scores, labels) -> ThreeWayFit:
    """Ordinal labels 0 < 1 < 2: predict 0 below ``low``, 2 above ``high``, else 1.

    The best pair of splits (low's at or below high's) over all pairs; ties prefer the narrowest
    middle band, then the central pair in (low, high) order, so the fit is deterministic.  ``low``
    is its split's candidate for ``<`` and ``high`` its split's for ``>`` (the same value unless the
    neighbouring scores are adjacent floats: then an empty band's ``low`` is one float above its
    ``high``, and the rule still puts every score where it was counted).  The correct count of
    a pair (i, j) splits into ``a[i] + b[j]`` (zeros below i minus ones below i; ones below j plus
    twos from j), so the best count for each j is ``b[j]`` plus the running maximum of ``a``, and
    only optimal pairs are ever listed: time grows with the candidates plus the optimal pairs (all
    pairs only where every pair is optimal), not with every pair as an exhaustive table would.
    """
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels).astype(np.int64)
    if scores.shape != labels.shape or not np.isin(labels, (0, 1, 2)).all():
        raise ValueError("three-way fitting needs equal-length scores and labels in {0, 1, 2}")
    lows, candidates = candidate_thresholds(scores, "<"), candidate_thresholds(scores, ">")  # 0 below low, 2 above high
    below = np.searchsorted(np.sort(scores), lows, side="left")  # split k: the scores under its cut
    order = np.argsort(scores, kind="stable")
    c0, c1, c2 = (np.concatenate([[0], np.cumsum(labels[order] == k)])[below] for k in range(3))
    a = c0 - c1
    b = c1 + (np.count_nonzero(labels == 2) - c2)
    best_a = np.maximum.accumulate(a)
    best_value = int((b + best_a).max())
    optimal_j = np.flatnonzero(b + best_a == best_value)
    where: dict[int, np.ndarray] = {}  # a's value -> its positions, ascending

    def optimal_i(j: int) -> np.ndarray:  # the i <= j completing j to an optimal pair
        target = int(best_a[j])
        if target not in where:
            where[target] = np.flatnonzero(a == target)
        positions = where[target]
        return positions[: np.searchsorted(positions, j, side="right")]

    completions = {int(j): optimal_i(j) for j in optimal_j}
    narrowest_width = min(candidates[j] - candidates[i[-1]] for j, i in completions.items())
    narrowest = sorted(
        (int(i), j) for j, lows in completions.items() for i in lows[candidates[j] - candidates[lows] <= narrowest_width + _TIE]
    )
    low, high = narrowest[(len(narrowest) - 1) // 2]
    return ThreeWayFit(float(lows[low]), float(candidates[high]), float(best_value / labels.size))
