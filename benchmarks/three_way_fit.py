"""Three-way calibration fit (labels 0/1/2): the linear fit vs the former quadratic table.

The former fit scored every pair of candidate cuts in one (n+1) x (n+1) table; leave-one-instruction-
out repeats a fit per instruction, so a few thousand labels took minutes.  Both are timed here on
the same seeded scores and labels, and must choose the same cuts.

    .venv/bin/python benchmarks/three_way_fit.py [--sizes 250,1000,2000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO)]

from mmverify.calibration import crossval  # noqa: E402
from mmverify.calibration.fit import ThreeWayFit, candidate_thresholds, fit_two_thresholds  # noqa: E402
from tests.reference.three_way_exhaustive import pick_from_table  # noqa: E402  (the tie rules, written once)

QUADRATIC_LIMIT = 4000  # beyond this the table needs gigabytes


def quadratic_fit(scores: np.ndarray, labels: np.ndarray) -> tuple[float, float, float]:
    """The former fit: the whole table of pairs, then the same tie rules."""
    candidates = candidate_thresholds(scores)
    below = np.searchsorted(np.sort(scores), candidates, side="left")
    order = np.argsort(scores, kind="stable")
    c0, c1, c2 = (np.concatenate([[0], np.cumsum(labels[order] == k)])[below] for k in range(3))
    total2 = np.count_nonzero(labels == 2)
    correct = c0[:, None] + (c1[None, :] - c1[:, None]) + (total2 - c2[None, :])
    correct = np.where(np.triu(np.ones_like(correct, dtype=bool)), correct, -1)
    return pick_from_table(candidates, correct, labels.size)


def data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, size=n)
    scores = np.clip(labels / 2 + rng.normal(0, 0.25, size=n), 0, 1)  # distinct but for the clipped ends
    return scores, labels


def leave_one_instruction_out(scores: np.ndarray, labels: np.ndarray, fit) -> list:  # type: ignore[no-untyped-def]
    """Held-out cuts with one fit per instruction (two labels each), as ``calibrate`` runs them."""
    groups = np.arange(labels.size) // 2
    original = crossval.fit_two_thresholds
    crossval.fit_two_thresholds = fit
    try:
        return crossval.cross_validate_three_way(scores, labels, groups, folds=None).thresholds
    finally:
        crossval.fit_two_thresholds = original


def as_fit(scores: np.ndarray, labels: np.ndarray) -> ThreeWayFit:
    return ThreeWayFit(*quadratic_fit(scores, labels))


def best_of(repeats: int, call) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="250,1000,2000,8000")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"{'labels':>8}{'one fit: quadratic s':>22}{'linear s':>10}{'LOIO: quadratic s':>19}{'linear s':>10}  same cuts")
    for n in (int(size) for size in args.sizes.split(",")):
        scores, labels = data(n)
        linear_s, fit = best_of(args.repeats, lambda: fit_two_thresholds(scores, labels))
        linear_loio_s, linear_held_out = best_of(1, lambda: leave_one_instruction_out(scores, labels, fit_two_thresholds))
        linear = (fit.low, fit.high, fit.agreement)  # type: ignore[attr-defined]
        if n > QUADRATIC_LIMIT:
            print(f"{n:>8}{'(skipped)':>22}{linear_s:>10.4f}{'(skipped)':>19}{linear_loio_s:>10.2f}  -")
            continue
        quadratic_s, quadratic = best_of(args.repeats, lambda: quadratic_fit(scores, labels))
        quadratic_loio_s, quadratic_held_out = best_of(1, lambda: leave_one_instruction_out(scores, labels, as_fit))
        same = quadratic == linear and quadratic_held_out == linear_held_out
        print(f"{n:>8}{quadratic_s:>22.4f}{linear_s:>10.4f}{quadratic_loio_s:>19.2f}{linear_loio_s:>10.2f}  {'yes' if same else 'NO'}")
        if not same:
            sys.exit(f"the fits differ at {n} labels")


if __name__ == "__main__":
    main()
