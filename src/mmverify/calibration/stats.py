"""Agreement statistics: Cohen's kappa, Krippendorff's alpha (nominal), correlations, and a
cluster bootstrap for any statistic (instructions resampled as clusters, percentile intervals)."""

from __future__ import annotations

from typing import Callable, Hashable, Sequence

import numpy as np
from scipy import stats as scipy_stats


def agreement(a: Sequence, b: Sequence) -> float:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.size == 0:
        raise ValueError("agreement needs two non-empty sequences of equal length")
    return float(np.mean(a == b))


def cohen_kappa(a: Sequence, b: Sequence) -> float:
    """(observed - chance agreement) / (1 - chance); 1.0 when both raters are constant and equal."""
    a, b = np.asarray(a), np.asarray(b)
    observed = agreement(a, b)
    categories = np.union1d(a, b)
    chance = float(sum(np.mean(a == c) * np.mean(b == c) for c in categories))
    if chance >= 1.0:
        return 1.0 if observed == 1.0 else 0.0
    return (observed - chance) / (1.0 - chance)


def krippendorff_alpha_nominal(units: Sequence[Sequence[Hashable | None]]) -> float:
    """Krippendorff's alpha for nominal data; ``units[i]`` are the labels item i received (None = missing).

    Items with fewer than two labels carry no pairing information and are ignored.
    """
    values: dict[Hashable, int] = {}
    pairs: list[tuple[list[int], int]] = []
    for unit in units:
        coded = [values.setdefault(v, len(values)) for v in unit if v is not None]
        if len(coded) >= 2:
            pairs.append((coded, len(coded)))
    if not pairs:
        raise ValueError("alpha needs at least one item with two or more labels")
    k = len(values)
    coincidence = np.zeros((k, k))
    for coded, m in pairs:
        counts = np.bincount(coded, minlength=k).astype(np.float64)
        coincidence += (np.outer(counts, counts) - np.diag(counts)) / (m - 1)
    n_c = coincidence.sum(axis=1)
    n = n_c.sum()
    observed_disagreement = coincidence.sum() - np.trace(coincidence)
    expected_disagreement = (n * n - (n_c**2).sum()) / (n - 1)
    if expected_disagreement == 0:
        return 1.0
    return float(1.0 - observed_disagreement / expected_disagreement)


def correlations(x: Sequence[float], y: Sequence[float]) -> dict[str, float | None]:
    """Pearson, Spearman and Kendall's tau-b; None where undefined (a constant input)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.size < 2 or np.all(x == x[0]) or np.all(y == y[0]):
        return {"pearson": None, "spearman": None, "kendall_tau_b": None}
    return {
        "pearson": float(scipy_stats.pearsonr(x, y)[0]),
        "spearman": float(scipy_stats.spearmanr(x, y)[0]),
        "kendall_tau_b": float(scipy_stats.kendalltau(x, y, variant="b")[0]),
    }


def cluster_bootstrap(
    statistic: Callable[[np.ndarray], float],
    clusters: Sequence[Hashable],
    *,
    resamples: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float] | None:
    """Percentile CI of ``statistic(row_indices)`` resampling whole clusters with replacement;
    None for fewer than two clusters, whose resamples would only repeat the one."""
    labels = np.asarray([str(c) for c in clusters])
    names, inverse = np.unique(labels, return_inverse=True)
    if names.size < 2:
        return None
    members = [np.flatnonzero(inverse == i) for i in range(names.size)]
    rng = np.random.default_rng(seed)
    values = np.empty(resamples)
    for r in range(resamples):
        picks = rng.integers(0, names.size, size=names.size)
        values[r] = statistic(np.concatenate([members[p] for p in picks]))
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(values, [alpha, 1.0 - alpha])
    return float(low), float(high)
