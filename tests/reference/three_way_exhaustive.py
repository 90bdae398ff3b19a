"""Reference for the three-way threshold fit: every pair of candidate cuts scored in one
(n+1) x (n+1) table, the best count taken, ties to the narrowest band and then the central pair
in row-major order.  Quadratic, so only for the differential tests."""

from __future__ import annotations

import numpy as np

TIE = 1e-12


def exhaustive_two_thresholds(
    lows: np.ndarray, highs: np.ndarray, scores: np.ndarray, labels: np.ndarray
) -> tuple[float, float, float]:
    """(low, high, agreement) over split ``i`` of ``lows`` and split ``j >= i`` of ``highs`` (one
    cut per split, ascending) for labels in {0, 1, 2}, each pair counted by applying its rule."""
    n = len(lows)
    correct = np.full((n, n), -1, dtype=np.int64)
    for i in range(n):
        for j in range(i, n):
            predicted = np.where(scores < lows[i], 0, np.where(scores > highs[j], 2, 1))
            correct[i, j] = int(np.count_nonzero(predicted == labels))
    i, j, agreement = pick_from_table(highs, correct, labels.size)
    return float(lows[i]), float(highs[j]), agreement


def pick_from_table(candidates: np.ndarray, correct: np.ndarray, count: int) -> tuple[int, int, float]:
    """The tie rules over a table of correct counts (-1 where low > high): the chosen pair of
    splits and its agreement; band widths are measured on ``candidates``."""
    best = correct.max()
    rows, cols = np.nonzero(correct == best)
    widths = candidates[cols] - candidates[rows]
    narrowest = np.flatnonzero(widths <= widths.min() + TIE)
    pick = narrowest[(len(narrowest) - 1) // 2]
    return int(rows[pick]), int(cols[pick]), float(best / count)
