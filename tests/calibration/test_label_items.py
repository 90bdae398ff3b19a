"""One generation is one labelled item, and one annotator one vote: labels that name a generation
with different optional columns merge; an annotator's repeated vote counts once (a conflicting one
is an error); a fractional sample is refused rather than truncated to another generation."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from mmverify.calibration.labels import Label, adjudicate, check_label_values, load_labels
from mmverify.calibration.pairwise import load_pairs
from mmverify.calibration.run import CalibrationConfig, run_calibration
from mmverify.cli import app
from mmverify.core.types import Check
from mmverify.pipelines.results import dumps_row, make_row

TASK = "i_format_border"


def _results(path: Path, seed: int = 0, instructions: int = 20) -> list[float]:
    rng = np.random.default_rng(seed)
    scores = rng.uniform(0, 1, instructions).tolist()
    rows = [
        make_row(task=TASK, instance_id=f"{TASK}/{i}", sample=0, model="m", key=f"k{i}", line=i + 1,
                 verifier=f"{TASK}@1", check=Check(score=s))
        for i, s in enumerate(scores)
    ]  # fmt: skip
    path.write_text("".join(dumps_row(r) + "\n" for r in rows))
    return scores


def _votes(scores: list[float], seed: int = 1) -> list[dict]:
    """Three annotators per generation, each right 80% of the time about 'score > 0.5'."""
    rng = np.random.default_rng(seed)
    votes = []
    for i, score in enumerate(scores):
        for annotator in ("ann1", "ann2", "ann3"):
            truth = int(score > 0.5)
            votes.append({"task": TASK, "model": "m", "instance_id": f"{TASK}/{i}", "sample": 0,
                          "label": truth if rng.random() < 0.8 else 1 - truth, "annotator": annotator})  # fmt: skip
    return votes


def _write(path: Path, votes: list[dict], drop: dict[str, tuple[str, ...]] | None = None) -> Path:
    """A labels CSV; ``drop`` blanks the named columns for one annotator's rows (a file exported
    without them)."""
    drop = drop or {}
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, ["task", "model", "instance_id", "sample", "label", "annotator"])
        writer.writeheader()
        for vote in votes:
            writer.writerow({k: ("" if k in drop.get(vote["annotator"], ()) else v) for k, v in vote.items()})
    return path


def _calibrate(tmp_path: Path, name: str, labels: Path, results: Path) -> dict:
    return run_calibration(CalibrationConfig(results=results, labels=labels, out=tmp_path / name, min_matched=1))


@pytest.mark.parametrize("drop", [{"ann3": ("task",)}, {"ann3": ("task", "model")}, {"ann1": ("model",), "ann2": ("task",)}])
def test_labels_of_one_generation_are_one_item_whatever_columns_they_carry(tmp_path: Path, drop):
    results = tmp_path / "results.jsonl"
    votes = _votes(_results(results))
    full = _calibrate(tmp_path, "full", _write(tmp_path / "full.csv", votes), results)
    mixed = _calibrate(tmp_path, "mixed", _write(tmp_path / "mixed.csv", votes, drop), results)
    assert full["labels"]["items"] == mixed["labels"]["items"] == 20  # not 40: one item per generation
    assert full["labels"]["matching"] == mixed["labels"]["matching"]
    for key in ("n", "agreement", "agreement_ci95", "fit", "cv"):
        assert mixed["tasks"][TASK][key] == full["tasks"][TASK][key]
    assert mixed["inter_annotator"] == full["inter_annotator"]
    # the majority is over the three annotators of each generation, as a direct count gives
    majority = {}
    for i in range(20):
        ones = sum(v["label"] for v in votes if v["instance_id"] == f"{TASK}/{i}")
        majority[i] = int(ones >= 2)
    assert mixed["tasks"][TASK]["agreement"] == pytest.approx(
        np.mean([(s > mixed["tasks"][TASK]["fit"]["threshold"]) == majority[i] for i, s in enumerate(_results(results))])
    )


def test_an_annotators_repeated_identical_vote_counts_once_and_ties_are_still_dropped():
    labels = [Label("t/0", 0, 1, "ann1"), Label("t/0", 0, 1, "ann1"), Label("t/0", 0, 0, "ann2"),
              Label("t/1", 0, 1, "ann1"), Label("t/1", 0, 1, "ann1"), Label("t/1", 0, 1, "ann2"), Label("t/1", 0, 0, "ann3")]  # fmt: skip
    result = adjudicate(labels)
    assert result.ties == [(None, "t/0", 0, None)]  # 1:1, not 2:1
    assert result.labels == {(None, "t/1", 0, None): 1}  # 2:1
    assert result.annotators_per_item == {(None, "t/0", 0, None): 2, (None, "t/1", 0, None): 3}
    assert result.inter_annotator["pairwise_agreement"] == pytest.approx((0 + 1 / 3) / 2)


def test_labels_without_an_annotator_each_count_as_a_vote():
    result = adjudicate([Label("t/0", 0, 1), Label("t/0", 0, 1), Label("t/0", 0, 0)])
    assert result.labels == {(None, "t/0", 0, None): 1} and result.annotators_per_item[(None, "t/0", 0, None)] == 3


def test_an_annotator_voting_both_ways_on_one_item_is_an_error(tmp_path: Path):
    with pytest.raises(ValueError, match=r"annotator 'ann1' labelled t/0 sample 0 twice with different labels \(1 and 0\)"):
        adjudicate([Label("t/0", 0, 1, "ann1"), Label("t/0", 0, 0, "ann1"), Label("t/0", 0, 0, "ann2")])
    # the same conflict spelled once with and once without the task column is found after merging
    results = tmp_path / "results.jsonl"
    votes = _votes(_results(results))
    votes.append({**votes[0], "task": "", "label": 1 - votes[0]["label"]})
    labels = _write(tmp_path / "l.csv", votes)
    outcome = CliRunner().invoke(app, ["calibrate", str(results), "--labels", str(labels), "--out", str(tmp_path / "cal")])
    assert outcome.exit_code == 2 and "annotator 'ann1' labelled" in " ".join(outcome.output.split())
    assert not (tmp_path / "cal").exists()


def test_resolving_leaves_ambiguous_and_unknown_labels_as_written():
    from mmverify.calibration.labels import resolve_items

    rows = [
        {"task": "a", "instance_id": "x/0", "sample": 0, "model": "m", "status": "scored", "score": 0.1},
        {"task": "b", "instance_id": "x/0", "sample": 0, "model": "m", "status": "scored", "score": 0.2},
    ]
    labels = [Label("x/0", 0, 1), Label("x/0", 0, 1, task="b"), Label("y/0", 0, 1)]
    assert resolve_items(labels, rows) == [Label("x/0", 0, 1), Label("x/0", 0, 1, task="b", model="m"), Label("y/0", 0, 1)]


@pytest.mark.parametrize("sample", [1.7, "1.7", True, "one"])
def test_a_sample_that_is_not_an_integer_is_refused(tmp_path: Path, sample):
    labels = tmp_path / "l.jsonl"
    labels.write_text(json.dumps({"instance_id": "t/0", "sample": sample, "label": 1}) + "\n")
    with pytest.raises(ValueError, match="'sample' must be an integer"):
        load_labels(labels)
    pairs = tmp_path / "p.jsonl"
    pairs.write_text(json.dumps({"instance_id": "t/0", "chosen_sample": 0, "rejected_sample": sample}) + "\n")
    with pytest.raises(ValueError, match="p.jsonl record 1: 'rejected_sample' must be an integer"):
        load_pairs(pairs)


def test_integral_samples_in_any_spelling_are_read(tmp_path: Path):
    labels = tmp_path / "l.jsonl"
    labels.write_text("".join(json.dumps({"instance_id": "t/0", "sample": s, "label": 1}) + "\n" for s in (2, 2.0, "2", " 2 ", "")))
    assert [label.sample for label in check_label_values(load_labels(labels))] == [2, 2, 2, 2, 0]
