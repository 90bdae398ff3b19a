"""End-to-end scoring: manifest order, typed errors, resume, determinism, timeouts, thresholds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mmverify.pipelines.score import ScoreConfig, run_score
from mmverify.pipelines.thresholds import Threshold
from tests.conftest import write_manifest


def _config(run_dir: dict, out: Path, **kwargs) -> ScoreConfig:
    return ScoreConfig(
        manifest=run_dir["manifest"],
        out=out,
        instructions=run_dir["instructions"],
        data_root=run_dir["root"],
        **kwargs,
    )


def _rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def test_every_line_gets_one_typed_row_in_manifest_order(run_dir, tmp_path):
    outcome = run_score(_config(run_dir, tmp_path / "out"))
    rows = _rows(tmp_path / "out")
    assert len(rows) == len(run_dir["expected"]) == outcome.written
    assert [r["line"] for r in rows] == list(range(1, len(rows) + 1))
    for row, (status, code, score) in zip(rows, run_dir["expected"]):
        assert row["status"] == status, row
        if status == "error":
            assert row["error"]["code"] == code and row["score"] is None and row["error"]["message"]
        else:
            assert row["reason"] == code
            value = row["score"]
            assert value > 0.99 if score == ">0.99" else value == float(score), row
    assert "Did you mean 'i_format_border'" in rows[6]["error"]["message"]
    assert rows[3]["passed"] is True and rows[0]["passed"] is None  # binary task vs continuous without threshold
    assert rows[0]["verifier"] == "i_format_border@2:mmmg" and len(rows[0]["key"]) == 64


def test_summary_counts_and_cluster_bootstrap(run_dir, tmp_path):
    summary = run_score(_config(run_dir, tmp_path / "out")).summary
    border = summary["tasks"]["i_format_border"]
    # lines 1, 2 (two samples of instruction 0), 12, 13 and 15 are scored; 9, 10, 11, 14 are errors
    assert border["n_scored"] == 5 and border["n_error"] == 4 and border["n_instances"] == 4
    scores = [r["score"] for r in _rows(tmp_path / "out") if r["task"] == "i_format_border" and r["status"] == "scored"]
    assert border["mean"] == pytest.approx(np.mean(scores))
    low, high = border["ci95"]
    assert low <= border["mean"] <= high
    assert summary["groups"]["image-text"]["tasks_scored"] == 1  # i_structure
    assert set(summary["by_model"]) == {"None", "inline-model"}
    assert summary["tasks"]["i_ocr"]["errors"] == {"model_unavailable": 1}


def test_rerun_skips_done_rows_and_resume_after_a_kill_is_identical(run_dir, tmp_path):
    full = tmp_path / "full"
    run_score(_config(run_dir, full))
    reference = (full / "results.jsonl").read_bytes()
    again = run_score(_config(run_dir, full))
    assert again.written == 0 and again.plan.skipped_done == len(run_dir["expected"])
    assert (full / "results.jsonl").read_bytes() == reference

    # a run killed while writing line 7: six complete rows plus half a line
    lines = reference.splitlines(keepends=True)
    killed = tmp_path / "killed"
    killed.mkdir()
    (killed / "results.jsonl").write_bytes(b"".join(lines[:6]) + lines[6][: len(lines[6]) // 2])
    resumed = run_score(_config(run_dir, killed))
    assert resumed.written == len(lines) - 6
    assert (killed / "results.jsonl").read_bytes() == reference


def test_workers_do_not_change_a_single_byte(run_dir, tmp_path):
    run_score(_config(run_dir, tmp_path / "one", workers=1))
    run_score(_config(run_dir, tmp_path / "two", workers=2))
    assert (tmp_path / "one" / "results.jsonl").read_bytes() == (tmp_path / "two" / "results.jsonl").read_bytes()


def test_duplicate_lines_are_scored_once(run_dir, tmp_path):
    first = run_dir["manifest"].read_text().splitlines()[0]
    manifest = write_manifest(tmp_path / "dup.jsonl", [first, first])
    outcome = run_score(ScoreConfig(manifest=manifest, out=tmp_path / "out", instructions=run_dir["instructions"]))
    assert outcome.written == 1 and outcome.plan.skipped_done == 1


@pytest.mark.parametrize("workers", [1, 2])
def test_items_over_the_time_limit_become_timeout_errors(slow_manifest, mmmg_instructions, tmp_path, workers):
    out = tmp_path / f"out{workers}"
    config = ScoreConfig(manifest=slow_manifest, out=out, instructions=mmmg_instructions, workers=workers, timeout=0.001)
    run_score(config)
    rows = _rows(out)
    assert [r["error"]["code"] for r in rows] == ["timeout"] * 3
    # rescoring errors after the cause is fixed replaces them instead of duplicating keys
    retry = ScoreConfig(manifest=slow_manifest, out=out, instructions=mmmg_instructions, timeout=None, retry_errors=True)
    assert run_score(retry).written == 3
    rows = _rows(out)
    assert len(rows) == 3 and all(r["status"] == "scored" for r in rows)


def test_thresholds_decide_passed(run_dir, tmp_path):
    thresholds = {"i_format_border": Threshold(threshold=0.5), "i_format_background": Threshold(0.999999, "ssim", "<")}
    run_score(_config(run_dir, tmp_path / "out", thresholds=thresholds))
    rows = _rows(tmp_path / "out")
    assert rows[0]["passed"] is True and rows[1]["passed"] is False
    assert rows[2]["passed"] is False  # ssim of an exact fill is 1, not < 0.999999
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["config"]["thresholds"]["i_format_border"] == {
        "component": "score", "threshold": 0.5, "direction": ">",
    }  # fmt: skip
    # thresholds are part of the key: changing them rescores instead of reusing rows
    outcome = run_score(_config(run_dir, tmp_path / "out", thresholds={"i_format_border": Threshold(0.9)}))
    assert outcome.written > 0


def test_config_is_validated():
    with pytest.raises(ValueError):
        ScoreConfig(manifest=Path("m"), out=Path("o"), workers=0)
    with pytest.raises(ValueError):
        Threshold(1.0, direction="=")


def test_tasks_without_an_implementation_are_not_implemented_errors(tmp_path, monkeypatch):
    import dataclasses

    from mmverify.api import score_items
    from mmverify.tasks import catalog

    monkeypatch.setitem(catalog.CATALOG, "i_ocr", dataclasses.replace(catalog.CATALOG["i_ocr"], impl=None))
    [row] = score_items([{"task": "i_ocr", "instance": {"text": "x"}, "parts": []}], base_dir=tmp_path)
    assert row["status"] == "error" and row["error"]["code"] == "not_implemented" and row["score"] is None


def test_the_backend_choice_is_part_of_the_key_of_model_based_tasks(tmp_path, monkeypatch):
    from mmverify.pipelines.plan import Planner

    audio = json.dumps({"task": "a_music_tempo", "instance": {"tempo": 120}, "parts": [{"type": "text", "text": "t"}]})
    program = json.dumps({"task": "i_structure", "instance": {"order": ["t"]}, "parts": [{"type": "text", "text": "t"}]})
    keys = {}
    for spec in ("beat_tracker=librosa-beats", "beat_tracker=beat-this@/models/final0.ckpt"):
        monkeypatch.setenv("MMVERIFY_MODELS", spec)
        planner = Planner(manifest_dir=tmp_path)
        keys[spec] = (planner.plan(1, audio).key, planner.plan(2, program).key)
    (tempo_a, order_a), (tempo_b, order_b) = keys.values()
    assert tempo_a != tempo_b and order_a == order_b


def test_tasks_selects_lines_however_they_name_their_task(tmp_path):
    text = {"instance": {"order": ["t"]}, "parts": [{"type": "text", "text": "a"}]}
    music = {"instance_id": "m/0", "instance": {"instrument": "piano", "tempo": 120}, "parts": [{"type": "audio", "path": "none.wav"}]}
    manifest = write_manifest(tmp_path / "m.jsonl", [
        {"task": "task:i_structure", **text}, {"task": "i_structure", **text}, {"task": "t_structure", **text},
        {"task": "a_music_attribute", **music}, {"task": "a_music_tempo", **music},
    ])  # fmt: skip

    def tasks_scored(*selected: str) -> list[str]:
        out = tmp_path / "-".join(selected)
        run_score(ScoreConfig(manifest=manifest, out=out, tasks=frozenset(selected)))
        return [row["task"] for row in _rows(out)]

    assert tasks_scored("i_structure") == ["i_structure", "i_structure"]  # the prefixed line too
    assert tasks_scored("a_music_tempo") == ["a_music_tempo", "a_music_tempo"]  # routed from the file, and named
    assert tasks_scored("a_music_attribute") == ["a_music_instrument", "a_music_tempo", "a_music_tempo"]  # all the file feeds
