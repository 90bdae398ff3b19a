"""Summary statistics: cluster bootstrap, per-source aggregation, macro means, determinism."""

from __future__ import annotations

import numpy as np
import pytest

from mmverify.pipelines.summary import cluster_bootstrap_ci, summarize


def _row(task, instance, score, sample=0, status="scored", model=None):
    return {
        "task": task, "instance_id": instance, "sample": sample, "model": model, "status": status,
        "score": score if status == "scored" else None, "passed": None, "reason": None,
        "error": None if status == "scored" else {"code": "timeout", "message": ""}, "verifier": f"{task}@1",
    }  # fmt: skip


def test_samples_of_one_instruction_move_together():
    """Duplicating every sample must not narrow the interval (clusters, not rows, are resampled)."""
    rng = np.random.default_rng(0)
    values = rng.uniform(0, 1, 30)
    single = {f"t/{i}": [v] for i, v in enumerate(values)}
    quadruple = {f"t/{i}": [v] * 4 for i, v in enumerate(values)}
    a = cluster_bootstrap_ci(single, rng=np.random.default_rng(1))
    b = cluster_bootstrap_ci(quadruple, rng=np.random.default_rng(1))
    assert a == pytest.approx(b)
    rows_as_clusters = {f"t/{i}/{k}": [v] for i, v in enumerate(values) for k in range(4)}
    c = cluster_bootstrap_ci(rows_as_clusters, rng=np.random.default_rng(1))
    assert (c[1] - c[0]) < 0.7 * (a[1] - a[0])  # treating rows as independent would be overconfident


def test_interval_covers_the_true_mean_about_95_percent_of_the_time():
    rng = np.random.default_rng(7)
    covered = 0
    trials = 200
    for _ in range(trials):
        clusters = {f"t/{i}": list(rng.binomial(1, 0.7, size=2).astype(float)) for i in range(60)}
        low, high = cluster_bootstrap_ci(clusters, resamples=400, rng=rng)
        covered += low <= 0.7 <= high
    assert 0.88 <= covered / trials <= 0.99


def test_mean_of_sources_weights_each_source_equally():
    rows = [_row("i_ocr_multi_lingual", f"i_ocr_chinese/{i}", 1.0) for i in range(9)]
    rows.append(_row("i_ocr_multi_lingual", "i_ocr_german/0", 0.0))
    entry = summarize(rows)["tasks"]["i_ocr_multi_lingual"]
    assert entry["mean"] == pytest.approx(0.5)  # (mean 1.0 + mean 0.0) / 2, not 0.9
    assert entry["ci95"] is None  # German has one instruction: resampling it only repeats it
    rows.append(_row("i_ocr_multi_lingual", "i_ocr_german/1", 1.0))
    entry = summarize(rows)["tasks"]["i_ocr_multi_lingual"]
    assert entry["ci95"] == pytest.approx([0.5, 1.0])  # Chinese constant at 1, German's mean 0 .. 1


def test_groups_overall_errors_and_determinism():
    rows = [
        _row("i_format_border", "i_format_border/0", 0.2),
        _row("i_format_border", "i_format_border/1", 0.4),
        _row("i_structure", "i_structure/0", 1.0),
        _row("a_structure", "a_structure/0", 0.0),
        _row("a_structure", "a_structure/1", None, status="error"),
    ]
    summary = summarize(rows)
    assert summary["groups"]["image"]["mean"] == pytest.approx(0.3)
    assert summary["groups"]["image-text"]["mean"] == pytest.approx(1.0)
    assert summary["groups"]["audio"]["mean"] is None
    assert summary["overall"]["mean"] == pytest.approx((0.3 + 1.0 + 0.0) / 3)
    assert summary["overall"]["mean_of_groups"] == pytest.approx((0.3 + 1.0 + 0.0) / 3)
    assert summary["tasks"]["a_structure"]["errors"] == {"timeout": 1} and summary["n_error"] == 1
    assert summarize(rows)["tasks"] == summary["tasks"]  # seeded: identical intervals
    assert "by_model" not in summary


def test_instances_whose_ids_name_no_source_file_share_one_source():
    inline = [_row("i_ocr_multi_lingual", f"chinese-{i}", float(i % 2)) for i in range(6)]
    entry = summarize(inline)["tasks"]["i_ocr_multi_lingual"]
    assert entry["mean"] == 0.5 and entry["ci95"] is not None  # one source: the plain mean, with an interval
    mixed = inline + [_row("i_ocr_multi_lingual", f"i_ocr_german/{i}", 1.0) for i in range(2)]
    assert summarize(mixed)["tasks"]["i_ocr_multi_lingual"]["mean"] == 0.75  # unnamed and German, equal weight


def test_by_model_lists_the_named_models_and_rows_without_one_apart():
    broken = {**_row("?", "?", None, status="error"), "error": {"code": "malformed_line", "message": "not JSON"}}
    one = [_row("i_structure", "i_structure/0", 1.0, model="mA"), broken]
    assert "by_model" not in summarize(one)  # one model: a line too broken to name one is not a second
    two = [*one, _row("i_structure", "i_structure/0", 0.0, model="None"), _row("i_structure", "i_structure/1", 0.5, model="mB")]
    by_model = summarize(two)["by_model"]
    assert list(by_model) == ["mA", "mB", "None"]
    assert by_model["None"]["tasks"]["i_structure"]["n"] == 1 and by_model["None"]["n_error"] == 1  # "None" and the broken row
    assert by_model["mB"]["tasks"]["i_structure"]["mean"] == 0.5


def test_the_markdown_report_counts_in_words():
    from mmverify.pipelines.report import render_markdown

    assert "1 generation, 1 error." in render_markdown({"n": 1, "n_error": 1, "tasks": {}})
    assert "2 generations, 0 errors." in render_markdown({"n": 2, "n_error": 0, "tasks": {}})


def test_a_task_of_one_instruction_has_no_interval():
    """Resampling one instruction only repeats it: a zero-width interval would claim certainty."""
    from mmverify.calibration.stats import cluster_bootstrap
    from mmverify.pipelines.summary import task_summary

    def row(instance: str, score: float) -> dict:
        return {"task": "i_structure", "instance_id": instance, "sample": 0, "status": "scored", "score": score, "passed": None}

    one = task_summary("i_structure", [row("a", 1.0), {**row("a", 0.0), "sample": 1}], seed=0)
    assert one["mean"] == 0.5 and one["ci95"] is None
    two = task_summary("i_structure", [row("a", 1.0), row("b", 0.0)], seed=0)
    assert two["ci95"] == [0.0, 1.0]
    sources = [row("i_ocr_chinese/0", 1.0), row("i_ocr_chinese/1", 0.0), row("i_ocr_german/0", 0.5)]
    assert task_summary("i_ocr_multi_lingual", [{**r, "task": "i_ocr_multi_lingual"} for r in sources], seed=0)["ci95"] is None
    assert cluster_bootstrap(lambda rows: float(len(rows)), ["x", "x"]) is None
    assert cluster_bootstrap(lambda rows: float(len(rows)), ["x", "y"]) is not None
