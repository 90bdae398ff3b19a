"""Labels, adjudication, pairs, the whole `calibrate` command (thresholds round trip, failing loud on
unmatched or unusable labels, the bundled example, the self-contained report)."""

from __future__ import annotations

import csv
import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from mmverify.calibration.labels import adjudicate, load_labels
from mmverify.calibration.matching import MatchingError
from mmverify.calibration.pairwise import Pair, pair_credit, pairwise_accuracy
from mmverify.calibration.run import CalibrationConfig, run_calibration
from mmverify.cli import app
from mmverify.commands.calibrate import calibrate_command
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
    page = (out / "report.html").read_text()
    assert page.count("<img") == 1 and page.count("src='data:image/png;base64,") == 1  # the figure, embedded
    assert sorted(p.name for p in out.iterdir()) == ["metrics.json", "report.html", "thresholds.json"]

    # the thresholds file is what `score --thresholds` reads
    image = scene(200, 200)
    image[:20], image[-20:], image[:, :20], image[:, -20:] = (0, 128, 0), (0, 128, 0), (0, 128, 0), (0, 128, 0)
    save_png(tmp_path / "g.png", image)
    manifest = write_manifest(tmp_path / "m.jsonl", [{"task": "i_format_border", "instance": {"color": "green"}, "parts": [{"type": "image", "path": "g.png"}]}])
    scored = runner.invoke(app, ["score", str(manifest), "--out", str(tmp_path / "run"), "--thresholds", str(out / "thresholds.json"), "-q"])
    assert scored.exit_code == 0, scored.output
    row = json.loads((tmp_path / "run" / "results.jsonl").read_text())
    assert row["score"] > 0.99 and row["passed"] is True


def _flat(output: str) -> str:
    """Terminal output without the console's line wrapping."""
    return " ".join(output.split())


def _calibrate_app() -> typer.Typer:
    """The calibrate command as `mmverify` registers it, with a second command so that the name is
    required on the command line as it is there."""
    app = typer.Typer()
    app.command("calibrate")(calibrate_command)
    app.command("noop")(lambda: None)
    return app


def _bundled_example(tmp_path: Path) -> Path:
    import runpy

    script = Path(__file__).resolve().parents[2] / "examples" / "calibration" / "make_example.py"
    runpy.run_path(str(script), run_name="not_main")["main"](tmp_path / "data")
    return tmp_path / "data"


def test_bundled_example_exercises_labels_pairs_agreement_thresholds_and_the_report(tmp_path: Path):
    data = _bundled_example(tmp_path)
    out = tmp_path / "cal"
    result = runner.invoke(
        _calibrate_app(),
        ["calibrate", str(data / "run"), "--labels", str(data / "labels.csv"), "--pairs", str(data / "pairs.jsonl"), "--out", str(out)],
    )
    assert result.exit_code == 0, result.output
    assert "labels: 160 of 160 matched, 0 unmatched" in result.output
    assert "pairs: 80 of 80 matched, 0 unmatched" in result.output
    assert "pairwise accuracy" in result.output and "tie policy half" in result.output
    fitted = json.loads((out / "thresholds.json").read_text())
    assert abs(fitted["i_format_border"]["threshold"] - 0.6) < 0.08  # planted cuts in make_example.py
    assert abs(fitted["i_format_background"]["threshold"] - 0.45) < 0.08
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["results"]["read"].endswith("results.latest.jsonl")
    assert metrics["inter_annotator"]["items"] == 160 and 0.7 < metrics["inter_annotator"]["pairwise_agreement"] < 0.95
    assert metrics["pairwise"]["overall"]["pairs"] == 80 and metrics["pairwise"]["overall"]["accuracy"] > 0.6
    for task in ("i_format_border", "i_format_background"):
        assert metrics["tasks"][task]["agreement"] > 0.85 and metrics["tasks"][task]["cv"]["kfold_agreement"] > 0.8
    disagreements = [d for t in metrics["tasks"].values() for d in t["disagreements"]]
    assert disagreements  # the annotators' planted noise leaves some
    page = (out / "report.html").read_text()
    assert "Pairwise accuracy" in page and "half: equal scores earn 0.5" in page
    assert "Where verifier and humans disagree" in page
    # thumbnails come from the manifest the run folder records: one per listed generation, plus two figures
    assert page.count("<img class='thumb' src='data:image/png;base64,") == len(disagreements)
    assert page.count("<img") == len(disagreements) + 2
    assert re.findall(r"src='(?!data:)", page) == []  # nothing is loaded from outside the file
    first = disagreements[0]
    assert f"gen/{first['instance_id'].replace('/', '_')}_{first['sample']}.png" in page


def test_the_lead_cli_still_calibrates_a_results_file(tmp_path: Path):
    data = _bundled_example(tmp_path)
    out = tmp_path / "cal"
    result = runner.invoke(app, ["calibrate", str(data / "run" / "results.jsonl"), "--labels", str(data / "labels.csv"),
                                 "--pairs", str(data / "pairs.jsonl"), "--out", str(out)])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads((out / "metrics.json").read_text())["pairwise"]["matching"]["matched"] == 80


def _write_rows(path: Path, scores: list[float], model: str | None = "m") -> list[dict]:
    rows = [
        make_row(task="i_format_border", instance_id=f"i_format_border/{i}", sample=0, model=model, key=f"k{i}",
                 line=i + 1, verifier="i_format_border@1", check=Check(score=s))
        for i, s in enumerate(scores)
    ]  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(dumps_row(r) + "\n" for r in rows))
    return rows


def _labels_csv(path: Path, labels: list[tuple[str, int, object]]) -> Path:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["instance_id", "sample", "label"])
        writer.writerows(labels)
    return path


def test_labels_matching_nothing_fail_loud_and_write_nothing(tmp_path: Path):
    results = tmp_path / "results.jsonl"
    _write_rows(results, [0.1, 0.9])
    labels = _labels_csv(tmp_path / "l.csv", [("border/0", 0, 1), ("border/1", 0, 0), ("i_format_border/0", 3, 1)])
    out = tmp_path / "cal"
    result = runner.invoke(app, ["calibrate", str(results), "--labels", str(labels), "--out", str(out)])
    assert result.exit_code == 2
    output = _flat(result.output)
    assert "0 of 3 labelled items matched" in output
    assert "2: no results row has this instance_id (first: border/0 sample 0; border/1 sample 0)" in output
    assert "1: the instance_id is in the results, but not with this sample (first: i_format_border/0 sample 3)" in output
    assert not out.exists()


def test_an_epsilon_without_its_tie_policy_is_refused(tmp_path: Path):
    results = tmp_path / "results.jsonl"
    _write_rows(results, [0.2, 0.8])
    labels = _labels_csv(tmp_path / "labels.csv", [("i_format_border/0", 0, 0), ("i_format_border/1", 0, 1)])
    out = tmp_path / "cal"
    for policy in ([], ["--tie-policy", "strict"]):
        result = runner.invoke(app, ["calibrate", str(results), "--labels", str(labels), "--out", str(out), "--epsilon", "0.02", *policy])
        assert result.exit_code == 2 and "add --tie-policy epsilon" in _flat(result.output)
        assert not out.exists()


def test_mixed_label_values_fail_with_the_values_found(tmp_path: Path):
    results = tmp_path / "results.jsonl"
    _write_rows(results, [0.1, 0.9])
    labels = _labels_csv(tmp_path / "l.csv", [("i_format_border/0", 0, 1), ("i_format_border/1", 0, "yes")])
    result = runner.invoke(app, ["calibrate", str(results), "--labels", str(labels), "--out", str(tmp_path / "cal")])
    assert result.exit_code == 2
    assert 'label values must be 0/1 (or true/false); found: 1, "yes"' in _flat(result.output)


def test_min_matched_sets_how_many_labels_must_match(tmp_path: Path):
    results = tmp_path / "results.jsonl"
    _write_rows(results, [i / 20 for i in range(20)])
    labels = _labels_csv(
        tmp_path / "l.csv", [(f"i_format_border/{i}", 0, int(i >= 10)) for i in range(20)] + [("other/0", 0, 1), ("other/1", 0, 0)]
    )
    base = CalibrationConfig(results=results, labels=labels, out=tmp_path / "cal")
    assert run_calibration(base)["labels"]["matching"]["matched"] == 20  # 20 of 22 >= the default 10
    with pytest.raises(MatchingError, match="need 21"):
        run_calibration(replace(base, min_matched=21))
    # with fewer labels than the minimum, every one must match
    few = _labels_csv(tmp_path / "few.csv", [("i_format_border/1", 0, 0), ("i_format_border/2", 0, 1), ("gone/0", 0, 1)])
    with pytest.raises(MatchingError, match="need 3"):
        run_calibration(replace(base, labels=few))
    result = runner.invoke(_calibrate_app(), ["calibrate", str(results), "--labels", str(few), "--out", str(tmp_path / "c2"), "--min-matched", "2"])
    assert result.exit_code == 0, result.output
    assert "labels: 2 of 3 matched, 1 unmatched (1 no results row has this instance_id)" in _flat(result.output)


def test_pairs_that_do_not_match_fail_loud(tmp_path: Path):
    results = tmp_path / "results.jsonl"
    _write_rows(results, [0.1, 0.9])
    labels = _labels_csv(tmp_path / "l.csv", [("i_format_border/0", 0, 0), ("i_format_border/1", 0, 1)])
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"instance_id": "i_format_border/0", "chosen_sample": 0, "rejected_sample": 1, "chosen_model": "x"}) + "\n")
    result = runner.invoke(_calibrate_app(), ["calibrate", str(results), "--labels", str(labels), "--pairs", str(pairs), "--out", str(tmp_path / "cal")])
    assert result.exit_code == 2
    assert "0 of 1 preference pairs matched" in _flat(result.output)


def test_a_run_folder_is_read_from_its_latest_results(tmp_path: Path):
    run = tmp_path / "run"
    _write_rows(run / "results.jsonl", [0.9, 0.9, 0.1, 0.1])  # an earlier configuration's rows
    _write_rows(run / "results.latest.jsonl", [0.1, 0.2, 0.8, 0.9])
    labels = _labels_csv(tmp_path / "l.csv", [(f"i_format_border/{i}", 0, int(i >= 2)) for i in range(4)])
    metrics = run_calibration(CalibrationConfig(results=run, labels=labels, out=tmp_path / "cal"))
    assert metrics["results"]["read"] == str(run / "results.latest.jsonl")
    assert metrics["tasks"]["i_format_border"]["agreement"] == 1.0
    assert json.loads((tmp_path / "cal" / "thresholds.json").read_text())["i_format_border"]["threshold"] == pytest.approx(0.5)


def test_disagreements_are_exactly_the_items_the_threshold_gets_wrong(tmp_path: Path):
    """Scores 0.1 0.2 0.3 0.7 0.8 0.9 labelled 0 0 1 1 1 0: the only cut with 5 of 6 right is
    between 0.2 and 0.3, so the one disagreement is the 0.9 labelled 0."""
    results = tmp_path / "results.jsonl"
    _write_rows(results, [0.1, 0.2, 0.3, 0.7, 0.8, 0.9])
    labels = _labels_csv(tmp_path / "l.csv", [(f"i_format_border/{i}", 0, v) for i, v in enumerate([0, 0, 1, 1, 1, 0])])
    metrics = run_calibration(CalibrationConfig(results=results, labels=labels, out=tmp_path / "cal"))
    task = metrics["tasks"]["i_format_border"]
    assert task["fit"]["threshold"] == pytest.approx(0.25)
    assert task["disagreements"] == [
        {"instance_id": "i_format_border/5", "sample": 0, "model": "m", "line": 6, "value": 0.9, "label": 0, "verdict": 1}
    ]
    page = (tmp_path / "cal" / "report.html").read_text()
    assert "i_format_border: 1 disagreements" in page and "score &gt; 0.250" in page
    assert "--manifest" in page  # no manifest known: the report says how to get thumbnails


def test_manifest_option_adds_thumbnails_and_three_way_labels_are_explicit(tmp_path: Path):
    results = tmp_path / "results.jsonl"
    _write_rows(results, [0.1, 0.2, 0.3, 0.7, 0.8, 0.9])
    lines = []
    for i in range(6):
        save_png(tmp_path / f"g{i}.png", scene(40, 30, seed=i))
        lines.append({"task": "i_format_border", "instance_id": f"i_format_border/{i}", "model": "m", "parts": [{"type": "image", "path": f"g{i}.png"}]})
    manifest = write_manifest(tmp_path / "m.jsonl", lines)
    labels = _labels_csv(tmp_path / "l.csv", [(f"i_format_border/{i}", 0, v) for i, v in enumerate([0, 0, 1, 1, 1, 0])])
    out = tmp_path / "cal"
    result = runner.invoke(_calibrate_app(), ["calibrate", str(results), "--labels", str(labels), "--out", str(out), "--manifest", str(manifest)])
    assert result.exit_code == 0, result.output
    page = (out / "report.html").read_text()
    assert page.count("class='thumb'") == 1 and "g5.png" in page
    three = _labels_csv(tmp_path / "three.csv", [(f"i_format_border/{i}", 0, v) for i, v in enumerate([0, 0, 1, 1, 2, 2])])
    refused = runner.invoke(_calibrate_app(), ["calibrate", str(results), "--labels", str(three), "--out", str(out)])
    assert refused.exit_code == 2 and "--label-kind three-way" in _flat(refused.output)
    accepted = runner.invoke(_calibrate_app(), ["calibrate", str(results), "--labels", str(three), "--out", str(out), "--label-kind", "three-way"])
    assert accepted.exit_code == 0, accepted.output
    assert json.loads((out / "metrics.json").read_text())["tasks"]["i_format_border"]["three_way"]["agreement"] == 1.0


def test_labels_without_samples_are_refused_where_instructions_have_several(tmp_path: Path):
    """Read as sample 0, they would merge votes on other samples into sample 0's."""
    data = _bundled_example(tmp_path)  # two samples of each instruction
    with open(data / "labels.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    unsampled = tmp_path / "unsampled.csv"
    with open(unsampled, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=[name for name in rows[0] if name != "sample"])
        writer.writeheader()
        writer.writerows({key: value for key, value in row.items() if key != "sample"} for row in rows)
    out = tmp_path / "cal"
    result = runner.invoke(_calibrate_app(), ["calibrate", str(data / "run"), "--labels", str(unsampled), "--out", str(out)])
    assert result.exit_code == 2 and "labelled without a sample have other samples than 0" in _flat(result.output)
    assert not out.exists()


def test_a_label_naming_a_lone_surrogate_still_gets_its_report(tmp_path: Path):
    data = _bundled_example(tmp_path)
    labels = (data / "labels.csv").read_text().splitlines()
    jsonl = tmp_path / "labels.jsonl"  # the example's labels, and one whose id no UTF-8 text can hold
    rows = [dict(zip(labels[0].split(","), line.split(","))) for line in labels[1:]]
    jsonl.write_text("".join(json.dumps(row) + "\n" for row in rows) + '{"instance_id": "zz\\ud800<b>", "sample": 0, "label": 1}\n')
    out = tmp_path / "cal"
    result = runner.invoke(_calibrate_app(), ["calibrate", str(data / "run"), "--labels", str(jsonl), "--out", str(out)])
    assert result.exit_code == 0, result.output
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "zz?&lt;b&gt;" in page and "Where verifier and humans disagree" in page
