"""Labels, adjudication, pairs, and the whole `calibrate` command with a thresholds round trip."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from mmverify.calibration.labels import adjudicate, load_labels
from mmverify.calibration.pairwise import Pair, pair_credit, pairwise_accuracy
from mmverify.cli import app
from mmverify.pipelines.results import make_row, dumps_row
from mmverify.core.types import Check
from tests.conftest import save_png, scene, write_manifest

runner = CliRunner()


def test_majority_vote_ties_and_inter_annotator_agreement(tmp_path: Path):
    path = tmp_path / "labels.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["instance_id", "sample", "label", "annotator"])
        writer.writerows([
            ["t/0", 0, 1, "a"], ["t/0", 0, 1, "b"], ["t/0", 0, 0, "c"],  # majority 1
            ["t/1", 0, 1, "a"], ["t/1", 0, 0, "b"],                      # tie: left out
            ["t/2", 1, "0", "a"],                                         # single annotator
        ])  # fmt: skip
    result = adjudicate(load_labels(path))
    assert result.labels == {(None, "t/0", 0, None): 1, (None, "t/2", 1, None): 0}
    assert result.ties == [(None, "t/1", 0, None)]
    # pairwise agreement: t/0 has 1 agreeing pair of 3, t/1 has 0 of 1 -> mean(1/3, 0)
    assert result.inter_annotator["pairwise_agreement"] == pytest.approx(1 / 6)
    assert result.inter_annotator["items"] == 2


def test_bad_label_files_are_refused(tmp_path: Path):
    path = tmp_path / "labels.jsonl"
    path.write_text('{"instance_id": "t/0", "sample": "x", "label": 1}\n')
    with pytest.raises(ValueError, match="sample"):
        load_labels(path)
    path.write_text('{"sample": 0, "label": 1}\n')
    with pytest.raises(ValueError, match="instance_id"):
        load_labels(path)


def test_tie_policies_on_handcrafted_pairs():
    assert pair_credit(0.9, 0.1) == 1.0 and pair_credit(0.1, 0.9) == 0.0
    assert pair_credit(0.5, 0.5, "strict") == 0.0 and pair_credit(0.5, 0.5, "half") == 0.5
    assert pair_credit(0.52, 0.5, "epsilon", 0.05) == 0.5 and pair_credit(0.52, 0.5, "half") == 1.0
    rows = [
        {"task": "x", "instance_id": f"x/{i}", "sample": s, "model": None, "status": "scored", "score": score}
        for i, (a, b) in enumerate([(0.9, 0.1), (0.4, 0.6), (0.5, 0.5)])
        for s, score in ((0, a), (1, b))
    ]
    pairs = [Pair(f"x/{i}", 0, 1) for i in range(3)] + [Pair("x/9", 0, 1)]
    report = pairwise_accuracy(rows, pairs, policy="half")
    assert report["tasks"]["x"]["accuracy"] == pytest.approx((1 + 0 + 0.5) / 3)
    assert report["unmatched"] == 1
    assert pairwise_accuracy(rows, pairs, policy="strict")["tasks"]["x"]["accuracy"] == pytest.approx(1 / 3)


def _synthetic_results(path: Path, rng: np.random.Generator) -> tuple[list[dict], list[list]]:
    """30 instructions x 2 samples; humans say 'good' when the score is above 0.6 (plus 10% noise)."""
    rows, labels = [], []
    for i in range(30):
        for sample in range(2):
            score = float(rng.uniform(0, 1))
            rows.append(
                make_row(task="i_format_border", instance_id=f"i_format_border/{i}", sample=sample, model=None,
                         key=f"k{i}-{sample}", line=len(rows) + 1, verifier="i_format_border@1",
                         check=Check(score=score, components={"ssim": score}))
            )  # fmt: skip
            truth = int(score > 0.6)
            for annotator in ("a", "b", "c"):
                noisy = truth if rng.random() > 0.1 else 1 - truth
                labels.append([f"i_format_border/{i}", sample, noisy, annotator])
    path.write_text("".join(dumps_row(r) + "\n" for r in rows))
    return rows, labels


def test_calibrate_command_end_to_end_and_thresholds_feed_score(tmp_path: Path):
    rng = np.random.default_rng(0)
    results = tmp_path / "results.jsonl"
    rows, labels = _synthetic_results(results, rng)
    labels_path = tmp_path / "labels.csv"
    with open(labels_path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["instance_id", "sample", "label", "annotator"])
        writer.writerows(labels)
    pairs_path = tmp_path / "pairs.jsonl"
    pairs_path.write_text("".join(json.dumps({"instance_id": f"i_format_border/{i}", "chosen_sample": 0, "rejected_sample": 1}) + "\n" for i in range(30)))
    out = tmp_path / "cal"
    result = runner.invoke(app, ["calibrate", str(results), "--labels", str(labels_path), "--out", str(out), "--pairs", str(pairs_path)])
    assert result.exit_code == 0, result.output
    thresholds = json.loads((out / "thresholds.json").read_text())
    fitted = thresholds["i_format_border"]
    assert abs(fitted["threshold"] - 0.6) < 0.1 and fitted["direction"] == ">" and fitted["component"] == "score"
    metrics = json.loads((out / "metrics.json").read_text())
    task = metrics["tasks"]["i_format_border"]
    assert task["n"] == 60 and task["instructions"] == 30
    assert task["cv"]["kfold_agreement"] <= task["agreement"] + 1e-12
    assert task["agreement_ci95"][0] <= task["agreement"] <= task["agreement_ci95"][1]
    assert metrics["inter_annotator"]["items"] == 60 and metrics["pairwise"]["overall"]["pairs"] == 30
    assert (out / "report.html").read_text().count("<img") == 1 and (out / "i_format_border.png").stat().st_size > 1000

    # the thresholds file is what `score --thresholds` reads
    image = scene(200, 200)
    image[:20], image[-20:], image[:, :20], image[:, -20:] = (0, 128, 0), (0, 128, 0), (0, 128, 0), (0, 128, 0)
    save_png(tmp_path / "g.png", image)
    manifest = write_manifest(tmp_path / "m.jsonl", [{"task": "i_format_border", "instance": {"color": "green"}, "parts": [{"type": "image", "path": "g.png"}]}])
    scored = runner.invoke(app, ["score", str(manifest), "--out", str(tmp_path / "run"), "--thresholds", str(out / "thresholds.json"), "-q"])
    assert scored.exit_code == 0, scored.output
    row = json.loads((tmp_path / "run" / "results.jsonl").read_text())
    assert row["score"] > 0.99 and row["passed"] is True


def test_bundled_example_recovers_its_planted_thresholds(tmp_path: Path):
    import runpy

    script = Path(__file__).resolve().parents[2] / "examples" / "calibration" / "make_example.py"
    runpy.run_path(str(script), run_name="not_main")["main"](tmp_path / "data")
    out = tmp_path / "cal"
    result = runner.invoke(app, ["calibrate", str(tmp_path / "data" / "results.jsonl"), "--labels", str(tmp_path / "data" / "labels.csv"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    fitted = json.loads((out / "thresholds.json").read_text())
    assert abs(fitted["i_format_border"]["threshold"] - 0.6) < 0.08  # planted cuts in make_example.py
    assert abs(fitted["i_format_background"]["threshold"] - 0.45) < 0.08
