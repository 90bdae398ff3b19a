"""The one run reader: rows per generation (comparisons) or per manifest line (reports), the summary
when a report needs it, and the recorded manifest found even from another working directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmverify.core.types import Check
from mmverify.pipelines.outdir import manifest_fingerprint
from mmverify.pipelines.results import dumps_row, make_row
from mmverify.pipelines.runs import load_run
from mmverify.reports.rundata import RunData, load_run as load_for_report


def _row(instance: str, line: int, score: float = 1.0) -> dict:
    return make_row(task="i_format_border", instance_id=instance, sample=0, model=None, key=f"k{line}", line=line,
                    verifier="i_format_border@1:mmmg", check=Check(score=score))  # fmt: skip


def _run(folder: Path, rows: list[dict], summary: dict | None = None, name: str = "results.latest.jsonl") -> Path:
    folder.mkdir(parents=True)
    (folder / name).write_text("".join(dumps_row(r) + "\n" for r in rows), encoding="utf-8")
    if summary is not None:
        (folder / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return folder


def test_a_generation_on_two_lines_is_one_pair_but_two_report_items(tmp_path: Path) -> None:
    run = _run(tmp_path / "run", [_row("b/0", 1), _row("b/1", 2), _row("b/0", 3)], {"config": {}})
    paired = load_run(run)
    assert len(paired.rows) == 2 and paired.duplicates == 1 and paired.summary == {"config": {}}
    listed = load_for_report(run)
    assert isinstance(listed, RunData) and [r["line"] for r in listed.rows] == [1, 2, 3] and listed.duplicates == 0


def test_results_jsonl_keeps_the_last_row_per_generation_for_both(tmp_path: Path) -> None:
    run = _run(tmp_path / "run", [_row("b/0", 1, 0.0), _row("b/0", 1, 1.0)], {}, name="results.jsonl")
    for loaded in (load_run(run), load_for_report(run)):
        assert [r["score"] for r in loaded.rows] == [1.0] and loaded.source.name == "results.jsonl"


def test_what_each_caller_may_be_given(tmp_path: Path) -> None:
    bare = _run(tmp_path / "bare", [_row("b/0", 1)])
    assert load_run(bare / "results.latest.jsonl").summary == {} and load_run(bare).run == bare
    with pytest.raises(FileNotFoundError, match="summary.json"):
        load_for_report(bare)
    empty = _run(tmp_path / "empty", [], {"config": {}})
    with pytest.raises(ValueError, match="no results rows"):
        load_run(empty)
    assert load_for_report(empty).rows == []  # a finished run that scored nothing still has a report
    (empty / "summary.json").write_text("{not json")
    with pytest.raises(ValueError, match="unreadable"):
        load_for_report(empty)
    (tmp_path / "nothing").mkdir()
    with pytest.raises(ValueError, match="holds neither"):
        load_run(tmp_path / "nothing")


def test_a_relative_manifest_is_found_from_above_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    manifest = project / "data" / "m.jsonl"
    manifest.write_text(json.dumps({"task": "i_format_border", "instance_id": "b/0", "parts": []}) + "\n")
    run = _run(project / "runs" / "x", [_row("b/0", 1)], {"config": {"manifest": "data/m.jsonl", "data_root": "gone"}})
    monkeypatch.chdir(tmp_path)  # not the folder `score` ran in
    loaded = load_run(run)
    assert loaded.manifest == project / "data" / "m.jsonl" and loaded.base_dir == (project / "data").resolve()
    assert loaded.line_of(loaded.rows[0]) is not None and loaded.data_root == Path("gone")


def test_a_relative_manifest_of_the_same_name_elsewhere_is_not_taken_for_the_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mmverify.pipelines.outdir import claim_for_manifest

    ours, theirs = tmp_path / "a", tmp_path / "b"
    for folder, text in ((ours, "ours"), (theirs, "theirs")):
        folder.mkdir()
        (folder / "m.jsonl").write_text(json.dumps({"task": "i_format_border", "instance_id": "b/0", "parts": [], "note": text}) + "\n")
    run = _run(ours / "run", [_row("b/0", 1)], {"config": {"manifest": "m.jsonl"}})
    claim_for_manifest(run, manifest_fingerprint(ours / "m.jsonl"))  # as `score` records it
    monkeypatch.chdir(theirs)  # the working directory holds another run's m.jsonl
    assert load_run(run).manifest == ours / "m.jsonl"
    (ours / "m.jsonl").unlink()
    assert load_run(run).manifest is None  # theirs is never a stand-in


def test_lines_that_name_a_prefixed_task_or_an_instruction_file_are_their_rows_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manifest = tmp_path / "m.jsonl"
    lines = [{"task": "task:i_format_border", "instance_id": "b/0", "parts": []},
             {"task": "i_ocr_chinese", "instance_id": "i_ocr_chinese/0", "parts": []}]  # fmt: skip
    manifest.write_text("".join(json.dumps(line) + "\n" for line in lines))
    ocr = make_row(task="i_ocr_multi_lingual", instance_id="i_ocr_chinese/0", sample=0, model=None, key="k2", line=2,
                   verifier="i_ocr_multi_lingual@1:mmmg", check=Check(score=1.0))  # fmt: skip
    other = make_row(task="i_structure", instance_id="i_ocr_chinese/0", sample=0, model=None, key="k3", line=2,
                     verifier="i_structure@1:mmmg", check=Check(score=1.0))  # fmt: skip
    run = _run(tmp_path / "run", [_row("b/0", 1), ocr], {"config": {"manifest": str(manifest)}})
    loaded = load_run(run)
    assert [loaded.line_of(row)["task"] for row in loaded.rows] == ["task:i_format_border", "i_ocr_chinese"]
    assert loaded.line_of(other) is None  # a task the file does not feed
    refused = {**_row("b/0", 1), "task": "task:i_format_border"}  # an error row keeps the task as the line wrote it
    assert loaded.line_of(refused)["task"] == "task:i_format_border"


def test_media_are_shown_from_the_manifests_folder_or_the_data_root_only(tmp_path: Path) -> None:
    import dataclasses
    import os

    project, private = tmp_path / "project", tmp_path / "private"
    project.mkdir()
    private.mkdir()
    (project / "in.png").write_bytes(b"png")
    (private / "secret.png").write_bytes(b"png")
    os.mkfifo(project / "pipe.png")  # reading it would wait for ever
    parts = [{"type": "image", "path": "in.png"}, {"type": "image", "path": str(private / "secret.png")},
             {"type": "image", "path": "../private/secret.png"}, {"type": "image", "path": "pipe.png"}]  # fmt: skip
    (project / "m.jsonl").write_text(json.dumps({"task": "i_format_border", "instance_id": "b/0", "parts": parts}) + "\n")
    run = _run(tmp_path / "run", [_row("b/0", 1)], {"config": {"manifest": str(project / "m.jsonl")}})
    loaded = load_run(run)
    shown = loaded.response_media(loaded.rows[0])
    assert shown[0].path == project / "in.png" and shown[0].problem is None
    assert [ref.problem for ref in shown[1:3]] == ["outside the manifest's folder; `mmverify report --media-root DIR` shows media under DIR"] * 2
    assert shown[3].problem == "not a regular file" and shown[3].path is None
    widened = dataclasses.replace(loaded, data_root=tmp_path)  # report --media-root
    assert [ref.path for ref in widened.response_media(loaded.rows[0])[1:3]] == [(private / "secret.png").resolve()] * 2
