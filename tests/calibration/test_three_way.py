"""``--label-kind three-way`` (labels 0/1/2): two thresholds in a thresholds.json that
``score --thresholds`` reads (passed = verdict 2), cross-validated like binary fits; never an empty
thresholds.json.  Also: objectives that cannot be computed fail with the task named."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.model_selection import LeaveOneGroupOut
from typer.testing import CliRunner

from mmverify.calibration.fit import fit_two_thresholds
from mmverify.cli import app
from mmverify.core.types import Check
from mmverify.pipelines.results import dumps_row, make_row
from mmverify.pipelines.thresholds import load_thresholds

TASK = "i_format_border"
runner = CliRunner()


def _data(tmp_path: Path, labels_of, instructions: int = 15, samples: int = 2, seed: int = 0) -> tuple[Path, Path, np.ndarray, np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    rows, label_rows, scores, labels, groups = [], [], [], [], []
    for i in range(instructions):
        for sample in range(samples):
            score = float(rng.uniform(0, 1))
            label = labels_of(score, rng)
            rows.append(make_row(task=TASK, instance_id=f"{TASK}/{i}", sample=sample, model=None, key=f"k{i}-{sample}",
                                 line=len(rows) + 1, verifier=f"{TASK}@1", check=Check(score=score)))  # fmt: skip
            label_rows.append([f"{TASK}/{i}", sample, label])
            scores.append(score), labels.append(label), groups.append(f"{TASK}/{i}")
    results = tmp_path / "results.jsonl"
    results.write_text("".join(dumps_row(r) + "\n" for r in rows))
    labels_path = tmp_path / "labels.csv"
    with open(labels_path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["instance_id", "sample", "label"])
        writer.writerows(label_rows)
    return results, labels_path, np.array(scores), np.array(labels), groups


def _noisy_three(score: float, rng: np.random.Generator) -> int:
    label = int(np.digitize(score, [0.3, 0.7]))
    return label if rng.random() < 0.85 else int(rng.integers(0, 3))


def test_three_way_writes_both_thresholds_where_score_reads_them(tmp_path: Path):
    results, labels, scores, truth, groups = _data(tmp_path, _noisy_three)
    out = tmp_path / "cal"
    outcome = runner.invoke(app, ["calibrate", str(results), "--labels", str(labels), "--out", str(out), "--label-kind", "three-way"])
    assert outcome.exit_code == 0, outcome.output
    written = json.loads((out / "thresholds.json").read_text())
    assert list(written) == [TASK]  # not {}
    entry = written[TASK]
    fit = fit_two_thresholds(scores, truth)
    assert (entry["low"], entry["high"]) == (fit.low, fit.high) and entry["label_kind"] == "three-way"
    assert entry["threshold"] == entry["high"] and entry["direction"] == ">"
    # what score --thresholds makes of it: passed = verdict 2 (above high)
    threshold = load_thresholds(out / "thresholds.json")[TASK]
    assert threshold.passes(Check(score=fit.high + 1e-9)) is True and threshold.passes(Check(score=fit.high - 1e-9)) is False
    metrics = json.loads((out / "metrics.json").read_text())["tasks"][TASK]
    verdicts = np.where(scores < fit.low, 0, np.where(scores > fit.high, 2, 1))
    assert metrics["agreement"] == metrics["three_way"]["agreement"] == pytest.approx(np.mean(verdicts == truth))
    # leave-one-instruction-out, folds from scikit-learn: fit on the others, judge the one left out
    held_out = np.empty_like(truth)
    for train, test in LeaveOneGroupOut().split(scores, truth, groups):
        cut = fit_two_thresholds(scores[train], truth[train])
        held_out[test] = np.where(scores[test] < cut.low, 0, np.where(scores[test] > cut.high, 2, 1))
    assert metrics["cv"]["loio_agreement"] == pytest.approx(np.mean(held_out == truth))
    assert entry["fitted_on"]["agreement_cv"] == metrics["cv"]["kfold_agreement"]
    assert all(len(pair) == 2 and pair[0] <= pair[1] for pair in metrics["cv"]["kfold_thresholds"])
    flat = " ".join(outcome.output.split())
    assert f"{fit.low:.3f}/{fit.high:.3f}" in flat  # both cuts in the terminal table


@pytest.mark.parametrize("option", [["--direction", "<"], ["--direction", "auto"], ["--objective", "f1"]])
def test_three_way_refuses_options_it_cannot_honour(tmp_path: Path, option):
    results, labels, *_ = _data(tmp_path, _noisy_three)
    outcome = runner.invoke(app, ["calibrate", str(results), "--labels", str(labels), "--out", str(tmp_path / "cal"), "--label-kind", "three-way", *option])
    assert outcome.exit_code == 2 and "takes neither --direction nor --objective" in " ".join(outcome.output.split())
    assert not (tmp_path / "cal").exists()


def test_f1_on_a_task_without_positive_labels_fails_naming_the_task(tmp_path: Path):
    results, labels, *_ = _data(tmp_path, lambda score, rng: 0)
    out = tmp_path / "cal"
    outcome = runner.invoke(app, ["calibrate", str(results), "--labels", str(labels), "--out", str(out), "--objective", "f1"])
    assert outcome.exit_code == 2
    assert f"task {TASK}: the f1 objective is undefined without a label 1" in " ".join(outcome.output.split())
    assert not out.exists()
