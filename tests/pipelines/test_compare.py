"""`mmverify compare`: pairing rows between runs, paired cluster-bootstrap CIs, table, JSON, CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from mmverify.commands.compare import compare_command
from mmverify.core.types import Check
from mmverify.pipelines.compare import bootstrap_means, compare_loaded, compare_runs
from mmverify.reports.compare_table import render_compare_table
from mmverify.pipelines.runs import LoadedRun
from mmverify.pipelines.results import dumps_row, make_row
from mmverify.pipelines.summary import cluster_bootstrap_ci


def _row(task: str, instance: str, score: float | None, sample: int = 0, model: str | None = None) -> dict[str, Any]:
    check = Check(score=score) if score is not None else None
    return make_row(
        task=task, instance_id=instance, sample=sample, model=model, key=f"{task}|{instance}|{sample}|{model}",
        line=1, verifier=f"{task}@1:mmmg", check=check, error_code=None if check else "timeout", error_message="slow",
    )  # fmt: skip


def _write_run(folder: Path, rows: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True)
    (folder / "results.latest.jsonl").write_text("".join(dumps_row(r) + "\n" for r in rows), encoding="utf-8")
    return folder


def _loaded(rows: list[dict[str, Any]], name: str = "run") -> LoadedRun:
    return LoadedRun(Path(name), Path(name) / "results.latest.jsonl", rows, 0, None)


def test_identical_runs_give_zero_difference_and_an_interval_containing_zero(tmp_path: Path):
    rng = np.random.default_rng(3)
    rows = [_row("i_format_border", f"i_format_border/{i}", float(rng.uniform()), s) for i in range(12) for s in range(2)]
    result = compare_runs([_write_run(tmp_path / "a", rows), _write_run(tmp_path / "b", rows)])
    (comparison,) = result["comparisons"]
    task = comparison["tasks"]["i_format_border"]
    assert task["delta"] == 0.0 and task["ci95"] == [0.0, 0.0] and task["significant"] is False
    assert task["n"] == task["n_matched"] == 24 and task["instructions"] == 12
    assert comparison["overall"]["delta"] == 0.0 and comparison["overall"]["ci95"][0] <= 0.0 <= comparison["overall"]["ci95"][1]
    assert comparison["unmatched"]["only_a"] == comparison["unmatched"]["only_b"] == 0


def test_interval_of_two_instructions_is_their_range(tmp_path: Path):
    """Two instructions, one sample each: a resample is {1,1}, {1,2} or {2,2}, so with 2000
    resamples the 2.5% and 97.5% percentiles are the two single-instruction differences."""
    a = [_row("t", "t/0", 0.5), _row("t", "t/1", 0.5)]
    b = [_row("t", "t/0", 0.6), _row("t", "t/1", 0.9)]
    task = compare_loaded([_loaded(a), _loaded(b)])["comparisons"][0]["tasks"]["t"]
    assert task["delta"] == pytest.approx(0.25)
    assert task["ci95"] == pytest.approx([0.1, 0.4])
    assert task["mean_a"] == pytest.approx(0.5) and task["mean_b"] == pytest.approx(0.75)
    assert task["significant"] is True


def test_one_instruction_gives_no_interval_and_no_significance():
    """Resampling a single instruction only repeats it: [Δ, Δ] would always "exclude 0"."""
    a = [_row("t", "t/0", 0.79, 0), _row("t", "t/0", 0.5, 1), _row("u", "u/0", 0.2), _row("u", "u/1", 0.4)]
    b = [_row("t", "t/0", 0.80, 0), _row("t", "t/0", 0.6, 1), _row("u", "u/0", 0.3), _row("u", "u/1", 0.6)]
    comparison = compare_loaded([_loaded(a), _loaded(b)])["comparisons"][0]
    single = comparison["tasks"]["t"]
    assert single["delta"] == pytest.approx(0.055) and single["ci95"] is None and single["significant"] is False
    assert comparison["tasks"]["u"]["ci95"] == pytest.approx([0.1, 0.2])
    assert comparison["overall"]["tasks"] == 1 and comparison["overall"]["delta"] == pytest.approx(0.15)  # u alone


def test_a_hand_edited_non_number_score_counts_as_an_error_row(tmp_path: Path):
    a = [_row("t", f"t/{i}", 0.5) for i in range(3)]
    b = [_row("t", f"t/{i}", 0.7) for i in range(3)]
    b[0]["score"] = float("nan")
    b[1]["score"] = "0.9"
    task = compare_loaded([_loaded(a), _loaded(b)])["comparisons"][0]["tasks"]["t"]
    assert task["n"] == 1 and task["n_error_b"] == 2 and task["delta"] == pytest.approx(0.2)


def test_samples_of_one_instruction_are_resampled_together():
    """Instruction X has differences 0.2 and 0.4 (two samples), Y has 1.0: the only resamples are
    XX (0.3), XY ((0.2+0.4+1.0)/3) and YY (1.0), so the interval is [0.3, 1.0]; resampling rows
    instead would reach 0.2."""
    a = [_row("t", "x/0", 0.0, 0), _row("t", "x/0", 0.0, 1), _row("t", "y/0", 0.0, 0)]
    b = [_row("t", "x/0", 0.2, 0), _row("t", "x/0", 0.4, 1), _row("t", "y/0", 1.0, 0)]
    task = compare_loaded([_loaded(a), _loaded(b)])["comparisons"][0]["tasks"]["t"]
    assert task["delta"] == pytest.approx(1.6 / 3)
    assert task["ci95"] == pytest.approx([0.3, 1.0])


def test_overall_is_a_macro_mean_with_instructions_resampled_within_tasks():
    """Task p has differences {0, 1} over two instructions, task q {0, 0}: the overall replicate is
    (mean_p + 0) / 2 with mean_p in {0, 0.5, 1}, hence the interval [0, 0.5] around 0.25.  Pooling
    the tasks' instructions instead would allow resamples made only of p/1 (overall 1)."""
    a = [_row(t, f"{t}/{i}", 0.0) for t in ("p", "q") for i in range(2)]
    b = [_row("p", "p/0", 0.0), _row("p", "p/1", 1.0), _row("q", "q/0", 0.0), _row("q", "q/1", 0.0)]
    overall = compare_loaded([_loaded(a), _loaded(b)])["comparisons"][0]["overall"]
    assert overall["tasks"] == 2 and overall["delta"] == pytest.approx(0.25)
    assert overall["ci95"] == pytest.approx([0.0, 0.5])


def test_task_interval_uses_the_summary_bootstrap_on_paired_differences():
    rng = np.random.default_rng(11)
    a = [_row("i_ocr", f"i_ocr/{i}", float(rng.uniform()), s) for i in range(25) for s in range(3)]
    b = [{**r, "score": min(1.0, r["score"] + float(rng.normal(0.05, 0.1)))} for r in a]
    result = compare_loaded([_loaded(a), _loaded(b)], seed=5)
    task = result["comparisons"][0]["tasks"]["i_ocr"]
    differences: dict[str, list[float]] = {}
    for ra, rb in zip(a, b):
        differences.setdefault(ra["instance_id"], []).append(rb["score"] - ra["score"])
    import zlib

    expected = cluster_bootstrap_ci(differences, rng=np.random.default_rng([5, zlib.crc32(b"i_ocr")]))
    assert task["ci95"] == pytest.approx(list(expected))
    replicates = bootstrap_means(differences, None, np.random.default_rng([5, zlib.crc32(b"i_ocr")]))
    assert replicates.shape == (2000,)


def _scored(instance: str, score: float, sample: int) -> dict[str, Any]:
    """A bare scored row; simulated scores may leave [0, 1] (only differences matter here)."""
    return {"task": "t", "instance_id": instance, "sample": sample, "model": None, "status": "scored", "score": score}


def _simulated(rng: np.random.Generator, shift: float, instructions: int = 40) -> tuple[list, list]:
    """Instruction difficulty shared by both runs (so pairing matters), an instruction-level
    effect of the change, per-sample noise, and a true difference of ``shift`` in mean score."""
    a, b = [], []
    for i in range(instructions):
        level, effect = rng.uniform(0.2, 0.7), shift + rng.normal(0, 0.08)
        for s in range(2):
            base = level + rng.normal(0, 0.05)
            a.append(_scored(f"t/{i}", base, s))
            b.append(_scored(f"t/{i}", base + effect + rng.normal(0, 0.05), s))
    return a, b


def test_interval_covers_a_known_difference_about_95_percent_of_the_time():
    rng = np.random.default_rng(2024)
    trials, covered, detected = 200, 0, 0
    for _ in range(trials):
        a, b = _simulated(rng, 0.1)
        task = compare_loaded([_loaded(a), _loaded(b)])["comparisons"][0]["tasks"]["t"]
        covered += task["ci95"][0] <= 0.1 <= task["ci95"][1]
        detected += task["significant"]
    assert 0.88 <= covered / trials <= 0.99
    assert detected == trials  # a shift of 0.1 with this noise is always clearly seen


def test_no_difference_is_rarely_flagged():
    rng = np.random.default_rng(99)
    flagged = sum(
        compare_loaded([_loaded(a), _loaded(b)])["comparisons"][0]["tasks"]["t"]["significant"]
        for a, b in (_simulated(rng, 0.0) for _ in range(100))
    )
    assert flagged <= 12  # about 5% expected


def test_runs_of_two_models_pair_without_the_model_and_unmatched_rows_are_counted(tmp_path: Path):
    a = [_row("t", f"t/{i}", 0.5, model="alpha") for i in range(4)]
    b = [_row("t", f"t/{i}", 0.7, model="beta") for i in range(1, 5)]
    comparison = compare_loaded([_loaded(a), _loaded(b)])["comparisons"][0]
    assert comparison["match_on"] == ["task", "instance_id", "sample"]
    assert comparison["models_a"] == ["alpha"] and comparison["models_b"] == ["beta"]
    assert comparison["matched"] == 3 and comparison["tasks"]["t"]["delta"] == pytest.approx(0.2)
    assert comparison["unmatched"] == {
        "only_a": 1, "only_b": 1, "examples_only_a": ["t/0 sample 0"], "examples_only_b": ["t/4 sample 0"],
    }  # fmt: skip
    forced = compare_loaded([_loaded(a), _loaded(b)], match="model")["comparisons"][0]
    assert forced["matched"] == 0 and forced["unmatched"]["only_a"] == 4


def test_runs_holding_several_models_pair_by_model():
    a = [_row("t", "t/0", 0.2, model="alpha"), _row("t", "t/0", 0.4, model="beta")]
    b = [_row("t", "t/0", 0.3, model="alpha"), _row("t", "t/0", 0.8, model="beta"), _row("t", "t/0", 1.0, model="gamma")]
    comparison = compare_loaded([_loaded(a), _loaded(b)])["comparisons"][0]
    assert comparison["match_on"][-1] == "model"
    assert comparison["matched"] == 2 and comparison["unmatched"]["only_b"] == 1
    assert comparison["tasks"]["t"]["delta"] == pytest.approx((0.1 + 0.4) / 2)


def test_match_instance_on_runs_holding_several_models_is_refused_with_the_count(tmp_path: Path):
    """Without the model in the key, m1's and m2's rows of a generation share one key: the last row
    used to win silently (half the rows gone, m1 paired with nothing)."""
    a = [_row("t", f"t/{i}", 0.5, model=m) for m in ("m1", "m2") for i in range(4)]
    b = [_row("t", f"t/{i}", 0.5 if m == "m1" else 1.0, model=m) for m in ("m1", "m2") for i in range(4)]
    with pytest.raises(ValueError) as error:
        compare_loaded([_loaded(a, "ra"), _loaded(b, "rb")], match="instance")
    message = str(error.value)
    assert message.startswith("run A (ra/results.latest.jsonl): it holds 2 models (m1, m2), so 4 rows share their (task, instance_id, sample)")
    assert "--match model" in message
    # the same when only the compared run holds several models
    with pytest.raises(ValueError, match="run B .* 2 models"):
        compare_loaded([_loaded(a[:4], "ra"), _loaded(b, "rb")], match="instance")
    # auto pairs by model and loses nothing: every row of both runs is in a pair
    comparison = compare_loaded([_loaded(a), _loaded(b)])["comparisons"][0]
    assert comparison["matched"] == len(a) == len(b) and comparison["tasks"]["t"]["delta"] == pytest.approx(0.25)
    runs = [str(_write_run(tmp_path / "a", a)), str(_write_run(tmp_path / "b", b))]
    result = CliRunner().invoke(_cli(), ["compare", *runs, "--match", "instance"])
    assert result.exit_code == 2 and "4 rows share their (task, instance_id, sample)" in " ".join(result.output.split())


def test_match_instance_still_pairs_two_single_model_runs():
    a = [_row("t", f"t/{i}", 0.5, model="alpha") for i in range(3)]
    b = [_row("t", f"t/{i}", 0.6, model="beta") for i in range(3)]
    assert compare_loaded([_loaded(a), _loaded(b)], match="instance")["comparisons"][0]["matched"] == 3


def test_a_long_task_id_wraps_and_every_number_still_shows():
    from rich.console import Console

    long = "i_format_border_with_a_rather_long_custom_suffix_v2"
    a = [_row(long, f"x/{i}", 0.25) for i in range(3)]
    b = [_row(long, f"x/{i}", 0.5) for i in range(3)]
    console = Console(width=80, record=True)
    console.print(render_compare_table(compare_loaded([_loaded(a), _loaded(b)])))
    text = console.export_text()
    assert all(value in text for value in ("0.250", "0.500", "+0.250", "[0.250, 0.250]", "0/0"))
    assert long not in text and long[:20] in text  # folded onto several lines


def test_task_ids_with_rich_markup_print_as_written(tmp_path: Path):
    task = "i_fmt[/bold][red]x"
    a = _write_run(tmp_path / "a[/b]", [_row(task, f"{task}/{i}", 0.5) for i in range(3)])
    b = _write_run(tmp_path / "b", [_row(task, f"{task}/{i}", 0.8) for i in range(3)])
    result = CliRunner().invoke(_cli(), ["compare", str(a), str(b)])
    assert result.exit_code == 0, result.output
    assert task in result.output and "a[/b]" in " ".join(result.output.split())


def test_error_rows_are_left_out_and_counted_or_scored_zero():
    a = [_row("t", "t/0", 0.4), _row("t", "t/1", 0.6), _row("t", "t/2", None)]
    b = [_row("t", "t/0", 0.5), _row("t", "t/1", None), _row("t", "t/2", 0.9)]
    apart = compare_loaded([_loaded(a), _loaded(b)])["comparisons"][0]
    task = apart["tasks"]["t"]
    assert task["n_matched"] == 3 and task["n"] == 1 and task["n_excluded"] == 2
    assert task["n_error_a"] == 1 and task["n_error_b"] == 1 and task["delta"] == pytest.approx(0.1)
    assert apart["errors"] == {"a": 1, "b": 1, "pairs_excluded": 2}
    zero = compare_loaded([_loaded(a), _loaded(b)], errors_as_zero=True)["comparisons"][0]["tasks"]["t"]
    assert zero["n"] == 3 and zero["mean_a"] == pytest.approx(1.0 / 3) and zero["mean_b"] == pytest.approx(1.4 / 3)


def test_tasks_present_in_one_run_only_are_listed_but_left_out_of_the_overall():
    a = [_row("p", "p/0", 0.2), _row("p", "p/1", 0.2), _row("q", "q/0", 0.9)]
    b = [_row("p", "p/0", 0.4), _row("p", "p/1", 0.4)]
    comparison = compare_loaded([_loaded(a), _loaded(b)])["comparisons"][0]
    assert comparison["tasks"]["q"]["delta"] is None and comparison["tasks"]["q"]["only_a"] == 1
    assert comparison["overall"]["tasks"] == 1 and comparison["overall"]["delta"] == pytest.approx(0.2)


def test_mean_of_sources_tasks_weight_each_source_equally():
    task = "i_ocr_multi_lingual"
    a = [_row(task, f"i_ocr_chinese/{i}", 0.0) for i in range(3)] + [_row(task, "i_ocr_german/0", 0.0)]
    b = [_row(task, f"i_ocr_chinese/{i}", 0.3) for i in range(3)] + [_row(task, "i_ocr_german/0", 0.9)]
    entry = compare_loaded([_loaded(a), _loaded(b)])["comparisons"][0]["tasks"][task]
    assert entry["delta"] == pytest.approx((0.3 + 0.9) / 2)  # not the pooled (0.9 + 0.9) / 4
    assert entry["ci95"] is None and entry["significant"] is False  # German has one instruction: no spread to resample
    a.append(_row(task, "i_ocr_german/1", 0.0))
    b.append(_row(task, "i_ocr_german/1", 0.5))
    entry = compare_loaded([_loaded(a), _loaded(b)])["comparisons"][0]["tasks"][task]
    assert entry["ci95"] == pytest.approx([(0.3 + 0.5) / 2, (0.3 + 0.9) / 2])  # Chinese constant, German 0.5..0.9


def test_three_runs_compare_with_the_first_and_the_result_is_deterministic_json(tmp_path: Path):
    rng = np.random.default_rng(1)
    base = [_row("t", f"t/{i}", float(rng.uniform(0.1, 0.6))) for i in range(10)]
    runs = [
        _write_run(tmp_path / name, [{**r, "score": r["score"] + shift + float(rng.uniform(-0.02, 0.02))} for r in base])
        for name, shift in (("a", 0.0), ("b", 0.05), ("c", 0.2))
    ]
    first = compare_runs(runs, seed=4)
    assert [(c["a"], c["b"]) for c in first["comparisons"]] == [("A", "B"), ("A", "C")]
    assert [r["label"] for r in first["runs"]] == ["A", "B", "C"]
    assert json.dumps(first) == json.dumps(compare_runs(runs, seed=4))
    assert json.loads(json.dumps(first, allow_nan=False)) == first
    assert compare_runs(runs, seed=5)["comparisons"][0]["tasks"]["t"]["ci95"] != first["comparisons"][0]["tasks"]["t"]["ci95"]
    table = render_compare_table(first)
    assert table.row_count == 6  # a heading, one task and the overall, per comparison


def test_a_run_folder_without_a_latest_file_falls_back_to_the_last_row_written(tmp_path: Path):
    folder = tmp_path / "old"
    folder.mkdir()
    rows = [_row("t", "t/0", 0.1), _row("t", "t/0", 0.3)]  # rescored: the second row is current
    (folder / "results.jsonl").write_text("".join(dumps_row(r) + "\n" for r in rows))
    other = _write_run(tmp_path / "new", [_row("t", "t/0", 0.4)])
    result = compare_runs([folder, other / "results.latest.jsonl"])
    assert result["runs"][0]["source"].endswith("results.jsonl") and result["runs"][0]["duplicates"] == 1
    assert result["comparisons"][0]["tasks"]["t"]["delta"] == pytest.approx(0.1)


def _cli() -> typer.Typer:
    app = typer.Typer()
    app.command("compare")(compare_command)
    app.command("noop")(lambda: None)  # a second command keeps "compare" as a sub-command name
    return app


def test_command_prints_a_table_and_writes_json(tmp_path: Path):
    a = _write_run(tmp_path / "a", [_row("t", f"t/{i}", 0.5) for i in range(5)])
    b = _write_run(tmp_path / "b", [_row("t", f"t/{i}", 0.8) for i in range(5)])
    out = tmp_path / "cmp.json"
    result = CliRunner().invoke(_cli(), ["compare", str(a), str(b), "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "+0.300" in result.output and "paired on (task, instance_id, sample)" in result.output
    assert json.loads(out.read_text())["comparisons"][0]["tasks"]["t"]["delta"] == pytest.approx(0.3)


@pytest.mark.parametrize(
    "arguments, message",
    [(["one"], "at least two runs"), (["a", "b", "--aggregate", "zero"], "--aggregate"), (["a", "missing"], "does not exist")],
)
def test_command_refuses_unusable_arguments(tmp_path: Path, arguments: list[str], message: str):
    _write_run(tmp_path / "a", [_row("t", "t/0", 0.5)])
    _write_run(tmp_path / "b", [_row("t", "t/0", 0.5)])
    paths = [str(tmp_path / x) if not x.startswith("-") and x not in ("zero",) else x for x in arguments]
    result = CliRunner().invoke(_cli(), ["compare", *paths])
    assert result.exit_code == 2 and message in result.output


def test_result_does_not_depend_on_the_process_hash_seed(tmp_path: Path):
    # (0.1 + 0.2) + 0.3 != (0.3 + 0.2) + 0.1 in floating point: summing in any order but a fixed one
    # would show in the printed numbers
    a = [_row("t", f"t/{i}", 0.0, s) for i in range(15) for s in range(3)]
    b = [_row("t", f"t/{i}", (0.1, 0.2, 0.3)[s], s) for i in range(15) for s in range(3)]
    runs = [str(_write_run(tmp_path / "a", a)), str(_write_run(tmp_path / "b", b))]
    code = "import json, sys; from mmverify.pipelines.compare import compare_runs; print(json.dumps(compare_runs(sys.argv[1:])))"
    outputs = {
        subprocess.run([sys.executable, "-c", code, *runs], capture_output=True, text=True, check=True,
                       env={**os.environ, "PYTHONHASHSEED": seed}).stdout
        for seed in ("1", "2", "3")
    }  # fmt: skip
    assert len(outputs) == 1


def test_an_error_naming_a_long_path_prints_the_path_whole(tmp_path: Path):
    _write_run(tmp_path / "a", [_row("t", "t/0", 0.5)])
    missing = tmp_path / ("deep-" * 30) / "[run]"  # wider than the terminal, with markup brackets
    result = CliRunner().invoke(_cli(), ["compare", str(tmp_path / "a"), str(missing)])
    assert result.exit_code == 2 and f"{missing} does not exist" in result.output, result.output


@pytest.mark.parametrize(
    "field, value, problem",
    [("sample", "x", "sample must be an integer >= 0, got 'x'"), ("score", 5.0, "score must be a number in [0, 1], got 5.0"),
     ("score", -1, "got -1"), ("status", "done", "status must be scored or error"), ("task", None, "must be strings")],
)  # fmt: skip
def test_a_results_row_unlike_any_written_is_refused_with_its_file_and_line(tmp_path: Path, field: str, value: Any, problem: str):
    rows = [_row("i_format_border", f"i_format_border/{i}", 0.5) for i in range(3)]
    rows[1] = {**rows[1], field: value}
    with pytest.raises(ValueError) as caught:
        compare_runs([_write_run(tmp_path / "a", rows), _write_run(tmp_path / "b", rows[:1])])
    assert "results.latest.jsonl:2: not a results row" in str(caught.value) and problem in str(caught.value)
