"""Agreement statistics against scikit-learn, scipy and the krippendorff package; CI coverage."""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from mmverify.calibration.stats import cluster_bootstrap, cohen_kappa, correlations, krippendorff_alpha_nominal


@pytest.mark.parametrize("seed", range(4))
def test_cohen_kappa_matches_sklearn(seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 3, 60)
    b = np.where(rng.random(60) < 0.7, a, rng.integers(0, 3, 60))
    assert cohen_kappa(a, b) == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_krippendorff_alpha_matches_the_reference_package(seed):
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, 40)
    raters = []
    for _ in range(3):
        noisy = np.where(rng.random(40) < 0.8, truth, 1 - truth).astype(float)
        noisy[rng.random(40) < 0.2] = np.nan  # missing labels
        raters.append(noisy)
    data = np.array(raters)
    expected = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
    units = [[None if np.isnan(v) else int(v) for v in data[:, i]] for i in range(40)]
    assert krippendorff_alpha_nominal(units) == pytest.approx(expected, abs=1e-10)


def test_correlations_match_scipy_and_handle_constants():
    rng = np.random.default_rng(0)
    x = rng.normal(size=50)
    y = (x + rng.normal(size=50) > 0).astype(float)
    result = correlations(x, y)
    assert result["pearson"] == pytest.approx(stats.pearsonr(x, y)[0])
    assert result["spearman"] == pytest.approx(stats.spearmanr(x, y)[0])
    assert result["kendall_tau_b"] == pytest.approx(stats.kendalltau(x, y, variant="b")[0])
    assert correlations(x, np.ones(50))["pearson"] is None


def test_bootstrap_interval_covers_a_known_agreement_about_95_percent_of_the_time():
    """Simulation: 60 instructions x 2 samples, true per-item agreement 0.8 with within-instruction correlation."""
    rng = np.random.default_rng(1)
    covered, trials = 0, 150
    for trial in range(trials):
        instruction_effect = rng.random(60) < 0.8
        correct = np.repeat(instruction_effect, 2).astype(float)
        correct = np.where(rng.random(120) < 0.5, correct, (rng.random(120) < 0.8).astype(float))
        groups = np.repeat(np.arange(60), 2)
        low, high = cluster_bootstrap(lambda idx: float(correct[idx].mean()), groups, resamples=300, seed=trial)
        covered += low <= 0.8 <= high
    assert 0.88 <= covered / trials <= 0.99
