"""Reference for the three-way threshold fit: every pair of candidate cuts scored in one
(n+1) x (n+1) table, the best count taken, ties to the narrowest band and then the central pair
in row-major order.  Quadratic, so only for the differential tests."""

from __future__ import annotations

import numpy as np

TIE = 1e-12


def exhaustive_two_thresholds(candidates: np.ndarray, scores: np.ndarray, labels: np.ndarray) -> tuple[float, float, float]:
    """(low, high, agreement) over ``candidates`` (ascending) for labels in {0, 1, 2}."""
    n = len(candidates)
    correct = np.full((n, n), -1, dtype=np.int64)
    for i in range(n):
        for j in range(i, n):
            predicted = np.where(scores < candidates[i], 0, np.where(scores > candidates[j], 2, 1))
            correct[i, j] = int(np.count_nonzero(predicted == labels))
    return pick_from_table(candidates, correct, labels.size)


def pick_from_table(candidates: np.ndarray, correct: np.ndarray, count: int) -> tuple[float, float, float]:
    """The tie rules over a table of correct counts (-1 where low > high)."""
    best = correct.max()
    rows, cols = np.nonzero(correct == best)
    widths = candidates[cols] - candidates[rows]
    narrowest = np.flatnonzero(widths <= widths.min() + TIE)
    pick = narrowest[(len(narrowest) - 1) // 2]
    return float(candidates[rows[pick]]), float(candidates[cols[pick]]), float(best / count)
