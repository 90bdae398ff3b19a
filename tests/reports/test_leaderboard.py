"""Leaderboard numbers against hand-computed means, and the CSV export."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from mmverify.pipelines.summary import summarize
from mmverify.reports import write_leaderboard_csv
from mmverify.reports.leaderboard import build_leaderboard, leaderboard_html, model_summaries, task_groups
from mmverify.reports.rundata import load_run


def _row(task: str, instance: str, model: str | None, score: float | None, line: int) -> dict[str, Any]:
    error = None if score is not None else {"code": "judge_failed", "message": "no reply"}
    return {"task": task, "instance_id": instance, "sample": 0, "model": model, "status": "scored" if score is not None else "error",
            "score": score, "passed": None, "components": {}, "evidence": {}, "reason": None, "error": error,
            "verifier": f"{task}@1:mmmg", "key": f"k{line}", "line": line}  # fmt: skip


ROWS = [
    _row("i_format_border", "b/0", "alpha", 1.0, 1),
    _row("i_format_border", "b/1", "alpha", 0.5, 2),
    _row("i_structure", "s/0", "alpha", 0.0, 3),
    _row("i_structure", "s/1", "alpha", 1.0, 4),
    _row("i_format_border", "b/0", "beta", 0.2, 5),
    _row("i_structure", "s/0", "beta", 1.0, 6),
    _row("i_structure", "s/1", "beta", None, 7),  # an error row: out of the mean
]
# alpha: border 0.75, structure 0.5 -> image 0.75, image-text 0.5, overall 0.625
# beta:  border 0.2,  structure 1.0 -> image 0.2,  image-text 1.0, overall 0.6
EXPECTED = {
    "alpha": {"i_format_border": 0.75, "i_structure": 0.5, "image": 0.75, "image-text": 0.5, "overall": 0.625},
    "beta": {"i_format_border": 0.2, "i_structure": 1.0, "image": 0.2, "image-text": 1.0, "overall": 0.6},
}


def write_run(root: Path, rows: list[dict[str, Any]], drop_by_model: bool = False) -> Path:
    run = root / "run"
    run.mkdir(parents=True)
    (run / "results.latest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    summary = summarize(rows, config={"manifest": None})
    if drop_by_model:
        summary.pop("by_model", None)
    (run / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return run


@pytest.mark.parametrize("drop_by_model", [False, True], ids=["from-summary", "recomputed"])
def test_leaderboard_means_match_hand_computed(tmp_path: Path, drop_by_model: bool) -> None:
    board = build_leaderboard(load_run(write_run(tmp_path, ROWS, drop_by_model)))
    assert list(board.models) == ["alpha", "beta"]
    assert board.groups == [("image", ["i_format_border"]), ("image-text", ["i_structure"])]
    for model, expected in EXPECTED.items():
        assert board.cell(model, "i_format_border")["mean"] == pytest.approx(expected["i_format_border"])
        assert board.cell(model, "i_structure")["mean"] == pytest.approx(expected["i_structure"])
        assert board.group_mean(model, "image") == pytest.approx(expected["image"])
        assert board.group_mean(model, "image-text") == pytest.approx(expected["image-text"])
        assert board.overall(model) == pytest.approx(expected["overall"])
    assert board.cell("beta", "i_structure")["n_error"] == 1


def test_recomputed_intervals_equal_the_summary_ones(tmp_path: Path) -> None:
    with_summary = model_summaries(load_run(write_run(tmp_path / "a", ROWS)))
    recomputed = model_summaries(load_run(write_run(tmp_path / "b", ROWS, drop_by_model=True)))
    for model in ("alpha", "beta"):
        for task in ("i_format_border", "i_structure"):
            assert recomputed[model]["tasks"][task]["ci95"] == with_summary[model]["tasks"][task]["ci95"]


def test_single_model_uses_the_top_level_summary(tmp_path: Path) -> None:
    rows = [r for r in ROWS if r["model"] == "alpha"]
    board = build_leaderboard(load_run(write_run(tmp_path, rows)))
    assert list(board.models) == ["alpha"]
    assert board.overall("alpha") == pytest.approx(0.625)


def test_csv_holds_means_intervals_and_counts(tmp_path: Path) -> None:
    run = write_run(tmp_path, ROWS)
    path = write_leaderboard_csv(run)
    assert path == run / "leaderboard.csv"
    with open(path, newline="", encoding="utf-8") as handle:
        table = {row["model"]: row for row in csv.DictReader(handle)}
    assert set(table) == {"alpha", "beta"}
    for model, expected in EXPECTED.items():
        assert float(table[model]["overall"]) == pytest.approx(expected["overall"], abs=1e-6)
        assert float(table[model]["image"]) == pytest.approx(expected["image"], abs=1e-6)
        assert float(table[model]["i_structure"]) == pytest.approx(expected["i_structure"], abs=1e-6)
    assert table["beta"]["i_structure:n_error"] == "1"
    low, high = float(table["alpha"]["i_format_border:ci_low"]), float(table["alpha"]["i_format_border:ci_high"])
    assert 0.5 <= low <= 0.75 <= high <= 1.0
    assert path.read_bytes() == write_leaderboard_csv(run).read_bytes()


def test_rows_without_a_model_have_an_empty_model_cell(tmp_path: Path) -> None:
    run = write_run(tmp_path, [{**r, "model": None} for r in ROWS if r["model"] == "alpha"])
    with open(write_leaderboard_csv(run), newline="", encoding="utf-8") as handle:
        (row,) = list(csv.DictReader(handle))
    assert row["model"] == "" and float(row["overall"]) == pytest.approx(0.625, abs=1e-6)


def test_html_table_groups_tasks_and_marks_the_best(tmp_path: Path) -> None:
    text = leaderboard_html(build_leaderboard(load_run(write_run(tmp_path, ROWS))))
    top, tasks = text.split("</tr><tr>", 1)  # the group header row, then the task header row
    assert top.index('colspan="2" class="group">image<') < top.index('colspan="2" class="group">image-text<')  # task + avg each
    assert tasks.index("i_format_border") < tasks.index("i_structure")
    assert '<td class="num  best">75.0' in text  # alpha's border mean is the column's best
    assert "62.5" in text and "60.0" in text  # overall x 100


def test_unknown_tasks_go_last_and_outside_the_groups() -> None:
    assert task_groups(["zz_custom", "i_structure", "a_speech_retrieve"]) == [
        ("image-text", ["i_structure"]), ("audio-text", ["a_speech_retrieve"]), ("other", ["zz_custom"]),
    ]  # fmt: skip
