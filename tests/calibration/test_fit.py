"""Threshold fitting: exactness (vs brute force), planted-threshold recovery, ties, three-way."""

from __future__ import annotations

import numpy as np
import pytest

from mmverify.calibration.crossval import cross_validate, grouped_folds
from mmverify.calibration.fit import candidate_thresholds, fit_threshold, fit_two_thresholds, predict


def _lows(scores):
    return candidate_thresholds(scores, "<")


def _highs(scores):
    return candidate_thresholds(scores, ">")


def _brute_force(scores, labels, direction):
    best = -1.0
    for t in candidate_thresholds(scores, direction):
        best = max(best, float(np.mean(predict(scores, t, direction) == labels)))
    return best


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("direction", [">", "<"])
def test_fit_is_exact(seed, direction):
    rng = np.random.default_rng(seed)
    scores = np.round(rng.uniform(0, 1, 80), 2)  # rounded: many ties between scores
    labels = (scores + rng.normal(0, 0.2, 80) > 0.5).astype(int)
    if direction == "<":
        labels = 1 - labels
    fit = fit_threshold(scores, labels, direction)
    assert fit.agreement == pytest.approx(_brute_force(scores, labels, direction))
    assert fit.agreement == pytest.approx(np.mean(predict(scores, fit.threshold, direction) == labels))


def test_a_coarse_grid_can_miss_what_the_exact_sweep_finds():
    scores = np.array([0.5000, 0.5001, 0.5002, 0.5003])
    labels = np.array([0, 1, 0, 1])
    grid = np.linspace(scores.min() - 0.1, scores.max() + 0.1, 100)  # a 100-point grid, step ~0.002
    grid_best = max(np.mean((scores > t) == labels) for t in grid)
    # by hand: only cuts inside (0.5000, 0.5001) or (0.5002, 0.5003) reach 3/4; the grid steps over both
    assert grid_best == 0.5
    assert fit_threshold(scores, labels).agreement == 0.75


def test_planted_threshold_is_recovered_within_one_gap():
    rng = np.random.default_rng(3)
    scores = rng.uniform(0, 1, 400)
    labels = (scores > 0.62).astype(int)
    flip = rng.random(400) < 0.05
    labels[flip] = 1 - labels[flip]
    fit = fit_threshold(scores, labels)
    gaps = np.diff(np.unique(scores))
    assert abs(fit.threshold - 0.62) <= 0.05  # noise can move the optimum, but not far
    clean = (scores > 0.62).astype(int)
    exact = fit_threshold(scores, clean)
    assert abs(exact.threshold - 0.62) <= gaps.max()
    assert exact.agreement == 1.0


def test_ties_break_to_the_central_candidate():
    # perfectly separable with a wide gap: every midpoint in the gap is equally good
    scores = np.array([0.1, 0.2, 0.8, 0.9])
    labels = np.array([0, 0, 1, 1])
    assert fit_threshold(scores, labels).threshold == pytest.approx(0.5)
    # only one optimum here, so direction and objective do not matter
    assert fit_threshold(scores, labels, objective="f1").threshold == pytest.approx(0.5)
    assert fit_threshold(scores, 1 - labels, "<").threshold == pytest.approx(0.5)


def test_objectives_differ_on_imbalanced_data():
    scores = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95])
    labels = np.array([0, 0, 0, 0, 0, 0, 0, 0, 1, 0])
    assert fit_threshold(scores, labels).agreement == 0.9
    balanced = fit_threshold(scores, labels, objective="balanced_accuracy")
    # by hand: cutting between 0.8 and 0.9 catches the positive (TPR 1) and one negative (TNR 8/9)
    assert balanced.value == pytest.approx((1 + 8 / 9) / 2) and balanced.threshold == pytest.approx(0.85)
    with pytest.raises(ValueError):
        fit_threshold(scores, labels, objective="accuracy_at_k")
    with pytest.raises(ValueError):
        fit_threshold(scores, labels + 1)


def test_three_way_fit_recovers_two_planted_cuts():
    rng = np.random.default_rng(4)
    scores = rng.uniform(0, 1, 300)
    labels = np.digitize(scores, [0.3, 0.7])
    fit = fit_two_thresholds(scores, labels)
    assert fit.agreement == 1.0
    assert abs(fit.low - 0.3) < 0.02 and abs(fit.high - 0.7) < 0.02


def test_folds_keep_instructions_together_and_cv_is_not_optimistic():
    rng = np.random.default_rng(5)
    groups = [f"task/{i // 4}" for i in range(200)]  # 50 instructions x 4 samples
    scores = rng.uniform(0, 1, 200)
    labels = (scores + rng.normal(0, 0.15, 200) > 0.5).astype(int)
    for test in grouped_folds(groups, 5):
        inside = {groups[i] for i in test}
        outside = {groups[i] for i in set(range(200)) - set(test.tolist())}
        assert not inside & outside
    cv = cross_validate(scores, labels, groups, folds=5)
    in_sample = fit_threshold(scores, labels).agreement
    assert cv.agreement <= in_sample + 1e-12
    assert cv.agreement > in_sample - 0.1  # close to the noise ceiling
    loio = cross_validate(scores, labels, groups, folds=None)
    assert loio.folds == 50 and loio.agreement <= in_sample + 1e-12
    with pytest.raises(ValueError):
        grouped_folds(groups, 51)


@pytest.mark.parametrize("scale", [1.0, 1e6, 1e11, 1e15])
def test_edge_thresholds_lie_beyond_the_scores_at_any_magnitude(scale):
    """Large scores (a raw component near 1e11): 1e-6 above the maximum rounds back to the maximum,
    so "nothing passes" was not a candidate and all-negative labels reached only 2/3 agreement."""
    scores = np.array([1.0, 2.0, 3.0]) * scale
    none_pass = fit_threshold(scores, np.zeros(3, int), ">")
    assert none_pass.threshold > scores.max() and none_pass.agreement == 1.0
    assert np.mean(predict(scores, none_pass.threshold, ">") == 0) == 1.0
    all_pass = fit_threshold(scores, np.ones(3, int), "<")
    assert all_pass.threshold > scores.max() and np.mean(predict(scores, all_pass.threshold, "<") == 1) == 1.0
    below = candidate_thresholds(-scores)
    assert below[0] < -scores.max() and below[-1] > -scores.min()
    if scale == 1.0:  # ordinary scores keep the 1e-6 margin
        assert candidate_thresholds(scores)[-1] == 3.0 + 1e-6 and candidate_thresholds(scores)[0] == 1.0 - 1e-6


def test_f1_without_a_positive_label_is_refused_not_a_middle_threshold():
    scores = np.linspace(0, 1, 21)
    with pytest.raises(ValueError, match="f1 objective is undefined without a label 1"):
        fit_threshold(scores, np.zeros(21, int), ">", "f1")
    for objective in ("agreement", "balanced_accuracy", "youden"):  # defined: nothing passes
        assert fit_threshold(scores, np.zeros(21, int), ">", objective).agreement == 1.0
    assert fit_threshold(scores, np.ones(21, int), ">", "f1").agreement == 1.0  # all positive: F1 is defined


@pytest.mark.parametrize("seed", range(40))
def test_the_three_way_fit_equals_the_exhaustive_search(seed):
    """Ties are the hard part: few distinct scores, skewed labels, and one-class data."""
    from tests.reference.three_way_exhaustive import exhaustive_two_thresholds

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    scores = rng.choice(rng.uniform(0, 1, size=int(rng.integers(1, 8))), size=n)
    labels = rng.choice(3, size=n, p=rng.dirichlet(np.ones(3) * (0.3 if seed % 3 == 0 else 2.0)))
    if seed % 4 == 1:  # no middle labels: empty bands tie at several places, and the central one is picked
        labels = 2 * rng.integers(0, 2, size=n)
    if seed % 5 == 2:  # scores closer than the width tolerance: several bands count as equally narrow
        scores = rng.integers(0, 6, size=n) * 1e-13
    fit = fit_two_thresholds(scores, labels)
    assert (fit.low, fit.high, fit.agreement) == exhaustive_two_thresholds(_lows(scores), _highs(scores), scores, labels)


def test_the_three_way_fit_equals_the_exhaustive_search_on_every_small_input():
    """Every score pattern over three values and every labelling, up to three items."""
    import itertools

    from tests.reference.three_way_exhaustive import exhaustive_two_thresholds

    for n in (1, 2, 3):
        for pattern in itertools.product((0.0, 0.5, 1.0), repeat=n):
            scores = np.array(pattern)
            lows, highs = _lows(scores), _highs(scores)
            for labelling in itertools.product((0, 1, 2), repeat=n):
                labels = np.array(labelling)
                fit = fit_two_thresholds(scores, labels)
                assert (fit.low, fit.high, fit.agreement) == exhaustive_two_thresholds(lows, highs, scores, labels), (pattern, labelling)


def _adjacent_floats(rng: np.random.Generator, n: int) -> np.ndarray:
    """Scores among a few runs of neighbouring floats (0.1 + 0.2 beside 0.3, say), whose midpoints
    round onto one of the two."""
    bases = rng.uniform(0, 1, size=3)
    steps = rng.integers(0, 3, size=n)
    return np.array([np.nextafter(np.nextafter(b, 2.0), 2.0) if s == 2 else (np.nextafter(b, 2.0) if s == 1 else b) for b, s in zip(rng.choice(bases, n), steps)])


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("direction", [">", "<"])
def test_neighbouring_float_scores_are_split_as_the_fit_counted(seed, direction):
    rng = np.random.default_rng(seed)
    scores = _adjacent_floats(rng, int(rng.integers(2, 30)))
    labels = rng.integers(0, 2, size=scores.size)
    fit = fit_threshold(scores, labels, direction)
    assert fit.agreement == np.mean(predict(scores, fit.threshold, direction) == labels) == _brute_force(scores, labels, direction)
    balanced = fit_threshold(scores, labels, direction, "balanced_accuracy")
    verdicts = predict(scores, balanced.threshold, direction)
    recalls = [np.mean(verdicts[labels == k] == k) for k in (0, 1) if (labels == k).any()]
    assert balanced.value == pytest.approx(np.mean(recalls) if len(recalls) == 2 else recalls[0] / 2)


def test_a_split_between_0_1_plus_0_2_and_0_3_is_made_by_the_threshold_written():
    scores = np.array([0.3, 0.1 + 0.2] * 6)  # 0.30000000000000004: the next float above 0.3
    labels = np.array([0, 1] * 6)
    assert fit_threshold(scores, labels, ">").threshold == 0.3 and fit_threshold(scores, labels, ">").agreement == 1.0
    assert fit_threshold(scores, 1 - labels, "<").threshold == 0.1 + 0.2
    three = fit_two_thresholds(np.array([0.3, 0.1 + 0.2, 0.1 + 0.2]), np.array([0, 2, 2]))
    assert three.agreement == 1.0


@pytest.mark.parametrize("seed", range(30))
def test_the_three_way_fit_on_neighbouring_floats_equals_the_exhaustive_search(seed):
    from mmverify.calibration.crossval import predict_three_way
    from tests.reference.three_way_exhaustive import exhaustive_two_thresholds

    rng = np.random.default_rng(seed)
    scores = _adjacent_floats(rng, int(rng.integers(1, 25)))
    labels = rng.integers(0, 3, size=scores.size)
    fit = fit_two_thresholds(scores, labels)
    assert (fit.low, fit.high, fit.agreement) == exhaustive_two_thresholds(_lows(scores), _highs(scores), scores, labels)
    assert fit.agreement == np.mean(predict_three_way(scores, fit.low, fit.high) == labels)
