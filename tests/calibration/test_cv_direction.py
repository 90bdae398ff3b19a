"""Cross-validated agreement never sees the held-out instructions: with ``--direction auto`` the
direction is chosen inside each fold on that fold's training data (choosing it once on all the data
let the test folds pick it, and null data then looked better than chance)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sklearn.model_selection import LeaveOneGroupOut

import mmverify.calibration.fit as fit_module
from mmverify.calibration.crossval import grouped_folds
from mmverify.calibration.run import CalibrationConfig, _binary


def _config(direction: str = "auto", objective: str = "agreement") -> CalibrationConfig:
    return CalibrationConfig(results=Path("r"), labels=Path("l"), out=Path("o"), direction=direction, objective=objective)


def _null_data(seed: int, instructions: int = 12, per: int = 2) -> tuple[np.ndarray, np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    groups = [f"i{i}" for i in range(instructions) for _ in range(per)]
    return rng.random(instructions * per), rng.integers(0, 2, instructions * per), groups


def _reference_fit(scores: np.ndarray, labels: np.ndarray, directions: tuple[str, ...]) -> tuple[float, str]:
    """Brute force, written apart from fit.py: every midpoint and the two edges; the most central
    of the equally good thresholds; '>' when both directions are equally good."""
    distinct = sorted(set(scores.tolist()))
    candidates = [distinct[0] - 1e-6] + [(a + b) / 2 for a, b in zip(distinct, distinct[1:])] + [distinct[-1] + 1e-6]
    best: list[tuple[float, int, float, str]] = []
    for direction in directions:
        values = [float(np.mean(((scores > t) if direction == ">" else (scores < t)).astype(int) == labels)) for t in candidates]
        top = [t for t, v in zip(candidates, values) if v >= max(values) - 1e-12]
        best.append((max(values), direction == ">", top[(len(top) - 1) // 2], direction))
    value, _, threshold, direction = max(best)
    return threshold, direction


def _reference_cv(scores, labels, splits, directions) -> tuple[float, list[str]]:
    predictions = np.full(labels.size, -1)
    chosen = []
    for train, test in splits:
        threshold, direction = _reference_fit(scores[train], labels[train], directions)
        predictions[test] = (scores[test] > threshold) if direction == ">" else (scores[test] < threshold)
        chosen.append(direction)
    return float(np.mean(predictions == labels)), chosen


def test_every_fit_of_the_cross_validation_sees_training_instructions_only(monkeypatch):
    scores, labels, groups = _null_data(seed=7)
    position = {value: index for index, value in enumerate(scores.tolist())}  # scores are distinct
    fitted: list[tuple[frozenset[int], str]] = []
    original = fit_module.fit_threshold

    def recording(s, y, direction=">", objective="agreement"):
        fitted.append((frozenset(position[v] for v in np.asarray(s).tolist()), direction))
        return original(s, y, direction, objective)

    monkeypatch.setattr(fit_module, "fit_threshold", recording)
    result, _ = _binary(scores, labels, groups, _config("auto"))
    cv = result["cv"]
    everything = frozenset(range(scores.size))
    assert sorted(d for items, d in fitted if items == everything) == ["<", ">"]  # the reported fit: all the data
    group_of = np.asarray(groups)
    instructions = set(groups)
    by_training_set: dict[frozenset[int], set[str]] = {}
    for items, direction in (fit for fit in fitted if fit[0] != everything):
        held_out = set(range(scores.size)) - items
        seen = set(group_of[sorted(items)])
        assert seen.isdisjoint(group_of[sorted(held_out)]), "an instruction straddles training and test"
        assert seen < instructions
        by_training_set.setdefault(items, set()).add(direction)
    # k folds and one fold per instruction; in each, both directions tried on the training data alone
    assert len(by_training_set) == cv["kfold_folds"] + len(instructions)
    assert all(directions == {">", "<"} for directions in by_training_set.values())


@pytest.mark.parametrize("seed", range(12))
def test_auto_direction_cv_equals_an_independent_nested_cross_validation(seed):
    scores, labels, groups = _null_data(seed)
    result, _ = _binary(scores, labels, groups, _config("auto"))
    folds = grouped_folds(groups, 5, seed=0)
    kfold_splits = [(np.setdiff1d(np.arange(labels.size), test), test) for test in folds]
    kfold, directions = _reference_cv(scores, labels, kfold_splits, (">", "<"))
    logo = list(LeaveOneGroupOut().split(scores, labels, groups))
    loio, _ = _reference_cv(scores, labels, logo, (">", "<"))
    assert result["cv"]["kfold_agreement"] == kfold
    assert result["cv"]["kfold_directions"] == directions
    assert result["cv"]["loio_agreement"] == loio


def test_a_fixed_direction_is_kept_in_every_fold():
    scores, labels, groups = _null_data(seed=3)
    result, _ = _binary(scores, labels, groups, _config("<"))
    assert result["cv"]["kfold_directions"] == ["<"] * result["cv"]["kfold_folds"]
    logo = list(LeaveOneGroupOut().split(scores, labels, groups))
    assert result["cv"]["loio_agreement"] == _reference_cv(scores, labels, logo, ("<",))[0]


def test_on_null_data_auto_direction_cv_agreement_is_chance():
    """Random scores and labels: true out-of-sample agreement is 0.5.  Choosing the direction on
    all the data gave 0.538 on average over these 200 seeded trials; nested it is 0.50."""
    means = [_binary(*_null_data(seed, instructions=20), _config("auto"))[0]["cv"]["kfold_agreement"] for seed in range(200)]
    assert abs(float(np.mean(means)) - 0.5) < 0.015
