"""The output folder: one writer, one manifest, one current row per manifest line, honest summaries."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mmverify.cli import EXIT_ERROR_ROWS, EXIT_USAGE, app
from mmverify.pipelines.outdir import OutputFolderError, OutputLock, current_rows
from mmverify.pipelines.score import ScoreConfig, run_score
from mmverify.pipelines.thresholds import Threshold
from tests.conftest import save_png, write_manifest
from tests.pipelines.conftest import bordered

runner = CliRunner()


def _border_manifest(tmp_path: Path, name: str = "manifest.jsonl", colours: tuple[str, ...] = ("green", "red")) -> Path:
    lines = []
    for index, colour in enumerate(colours):
        save_png(tmp_path / "gen" / f"{colour}.png", bordered(colour, seed=index))
        lines.append({"task": "i_format_border", "instance": {"color": "green"}, "sample": index,
                      "parts": [{"type": "image", "path": f"gen/{colour}.png"}]})  # fmt: skip
    return write_manifest(tmp_path / name, lines)


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_locked_folder_is_refused_naming_the_holder(tmp_path):
    manifest = _border_manifest(tmp_path)
    out = tmp_path / "out"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys; from pathlib import Path; from mmverify.pipelines.outdir import OutputLock\n"
         "with OutputLock(Path(sys.argv[1])):\n    print('locked', flush=True); sys.stdin.read()", str(out)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "locked"
        result = runner.invoke(app, ["score", str(manifest), "--out", str(out), "--quiet"])
        assert result.exit_code == EXIT_USAGE
        message = " ".join(result.output.split())
        assert f"pid {holder.pid}" in message and "being written" in message
        assert not (out / "results.jsonl").exists()
    finally:
        holder.communicate("")
    # the holder has exited, so the kernel released its lock: the folder is usable again
    assert runner.invoke(app, ["score", str(manifest), "--out", str(out), "--quiet"]).exit_code == 0


def test_the_lock_is_exclusive_within_one_process_too(tmp_path):
    with OutputLock(tmp_path):
        with pytest.raises(OutputFolderError, match="being written"):
            with OutputLock(tmp_path):
                pass
    with OutputLock(tmp_path):  # released on exit
        pass


def test_another_manifest_needs_append_or_overwrite(tmp_path):
    first = _border_manifest(tmp_path, "first.jsonl", ("green",))
    second = _border_manifest(tmp_path, "second.jsonl", ("red",))
    out = tmp_path / "out"
    run_score(ScoreConfig(manifest=first, out=out))
    with pytest.raises(OutputFolderError, match="another manifest"):
        run_score(ScoreConfig(manifest=second, out=out))
    assert len(_lines(out / "results.jsonl")) == 1  # nothing was written by the refused run

    appended = run_score(ScoreConfig(manifest=second, out=out, append=True))
    assert len(_lines(out / "results.jsonl")) == 2
    assert appended.summary["tasks"]["i_format_border"]["n"] == 1  # the summary covers this manifest only
    run_score(ScoreConfig(manifest=first, out=out))  # both manifests are now known: a plain resume
    assert len(_lines(out / "results.jsonl")) == 2

    run_score(ScoreConfig(manifest=second, out=out, overwrite=True))
    rows = _lines(out / "results.jsonl")
    assert len(rows) == 1 and rows[0]["score"] == 0.0  # only the red border's row remains
    with pytest.raises(OutputFolderError, match="not both"):
        run_score(ScoreConfig(manifest=second, out=out, append=True, overwrite=True))


def test_the_summary_follows_the_current_configuration_not_the_last_written_rows(tmp_path):
    manifest = _border_manifest(tmp_path)
    out = tmp_path / "out"
    loose = {"i_format_border": Threshold(-0.5)}
    tight = {"i_format_border": Threshold(1.5)}
    assert run_score(ScoreConfig(manifest=manifest, out=out, thresholds=loose)).summary["tasks"]["i_format_border"]["pass_rate"] == 1.0
    assert run_score(ScoreConfig(manifest=manifest, out=out, thresholds=tight)).summary["tasks"]["i_format_border"]["pass_rate"] == 0.0
    again = run_score(ScoreConfig(manifest=manifest, out=out, thresholds=loose))
    assert again.written == 0  # every row was already there ...
    assert again.summary["tasks"]["i_format_border"]["pass_rate"] == 1.0  # ... and the current ones are reported
    latest = _lines(out / "results.latest.jsonl")
    assert [row["line"] for row in latest] == [1, 2] and all(row["passed"] for row in latest)


def test_one_current_row_per_manifest_line(tmp_path):
    save_png(tmp_path / "gen" / "a.png", bordered("green", seed=1))
    save_png(tmp_path / "gen" / "b.png", bordered("green", seed=2))
    same = {"task": "i_format_border", "instance": {"color": "green"}, "instance_id": "x", "parts": [{"type": "image", "path": "gen/a.png"}]}
    other_media = {**same, "parts": [{"type": "image", "path": "gen/b.png"}]}
    manifest = write_manifest(tmp_path / "m.jsonl", [same, same, other_media, "{bad", "[1, 2]"])
    outcome = run_score(ScoreConfig(manifest=manifest, out=tmp_path / "out"))
    latest = _lines(tmp_path / "out" / "results.latest.jsonl")
    assert [row["line"] for row in latest] == [1, 2, 3, 4, 5]
    assert latest[0]["key"] == latest[1]["key"] != latest[2]["key"]  # a repeated line shares its row
    assert outcome.written == 4  # ... which is scored once
    summary = outcome.summary
    assert summary["tasks"]["i_format_border"]["n"] == 3  # distinct lines with one (instance, sample) stay apart
    assert summary["tasks"]["?"]["n"] == 2  # each malformed line counts
    assert outcome.errors == 2


def test_current_rows_prefers_the_newest_row_of_a_key():
    rows = [{"key": "a", "line": 1, "status": "error"}, {"key": "b", "line": 2}, {"key": "a", "line": 1, "status": "scored"}]
    assert current_rows(rows, [(1, "a"), (2, "b"), (3, "c")]) == [
        {"key": "a", "line": 1, "status": "scored"}, {"key": "b", "line": 2},
    ]  # fmt: skip


def test_fail_on_errors_exit_code(tmp_path):
    manifest = write_manifest(tmp_path / "m.jsonl", ["{not json"])
    plain = runner.invoke(app, ["score", str(manifest), "--out", str(tmp_path / "a"), "--quiet"])
    assert plain.exit_code == 0
    strict = runner.invoke(app, ["score", str(manifest), "--out", str(tmp_path / "b"), "--quiet", "--fail-on-errors"])
    assert strict.exit_code == EXIT_ERROR_ROWS and "1 row(s) ended as errors" in strict.output
    good = _border_manifest(tmp_path)
    assert runner.invoke(app, ["score", str(good), "--out", str(tmp_path / "c"), "--quiet", "--fail-on-errors"]).exit_code == 0


@pytest.mark.parametrize(
    "case", ["out_is_file", "results_is_folder", "results_line_not_a_row", "{broken", '{"manifests": null}', '{"manifests": 5}', '{"manifests": [1]}', "[]"]
)
def test_unusable_output_folders_fail_with_one_clear_line(tmp_path, case):
    manifest = _border_manifest(tmp_path)
    out = tmp_path / "out"
    if case == "out_is_file":
        out.write_text("x")
        expected = "is a file"
    elif case == "results_is_folder":
        (out / "results.jsonl").mkdir(parents=True)
        expected = "not a regular file"
    elif case == "results_line_not_a_row":
        out.mkdir()
        (out / "results.jsonl").write_text("[1, 2, 3]\n")
        expected = "not a results row"
    else:
        out.mkdir()
        (out / "results.jsonl").write_text("")
        (out / "run.json").write_text(case)  # a run record that is not one
        expected = "unreadable"
    result = runner.invoke(app, ["score", str(manifest), "--out", str(out), "--quiet"])
    assert result.exit_code == EXIT_USAGE, result.output
    assert expected in " ".join(result.output.split()) and "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    if case not in ("out_is_file", "results_is_folder"):  # what the message advises works
        assert runner.invoke(app, ["score", str(manifest), "--out", str(out), "--quiet", "--overwrite"]).exit_code == 0



def test_cache_problems_met_during_the_run_are_in_the_summary(tmp_path, monkeypatch):
    from mmverify.models.cache import CacheProblem, record_cache_problem
    from mmverify.tasks.format_fill import FormatBorder

    original = FormatBorder.score
    broken = str(tmp_path / "judge.sqlite")

    def score_and_meet_a_broken_cache(self, instance, response):
        record_cache_problem(CacheProblem(broken, "corrupt", "file is not a database", "moved aside", broken + ".corrupt"))
        return original(self, instance, response)

    clean = run_score(ScoreConfig(manifest=_border_manifest(tmp_path), out=tmp_path / "clean"))
    assert clean.summary["cache_problems"] == []
    monkeypatch.setattr(FormatBorder, "score", score_and_meet_a_broken_cache)
    summary = run_score(ScoreConfig(manifest=_border_manifest(tmp_path, "m2.jsonl"), out=tmp_path / "out")).summary
    assert [(p["path"], p["kind"]) for p in summary["cache_problems"]] == [(broken, "corrupt")]


def test_an_empty_out_is_refused_rather_than_read_as_the_working_directory(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    manifest = write_manifest(tmp_path / "m.jsonl", [{"task": "i_structure", "instance": {"order": ["t"]}, "parts": [{"type": "text", "text": "x"}]}])
    commands = (["score", str(manifest)], ["calibrate", str(tmp_path), "--labels", str(manifest)], ["demo"])
    for command in commands:
        result = runner.invoke(app, [*command, "--out", " "])
        assert result.exit_code == EXIT_USAGE and "--out needs a folder" in result.output, (command, result.output)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.jsonl"]  # nothing written


def test_two_lines_naming_one_generation_with_other_content_are_warned_of(tmp_path: Path):
    save_png(tmp_path / "g.png", bordered("green"))
    save_png(tmp_path / "r.png", bordered("red"))
    line = {"task": "i_format_border", "instance_id": "x/0", "instance": {"color": "green"}, "parts": [{"type": "image", "path": "g.png"}]}
    other = {**line, "parts": [{"type": "image", "path": "r.png"}]}
    manifest = write_manifest(tmp_path / "m.jsonl", [line, line, other, {**other, "sample": 1}])
    result = runner.invoke(app, ["score", str(manifest), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    assert "1 manifest entries name the task, instance_id, sample and model of an earlier line" in flat
    assert "(first: line 3 (as line 1))" in flat  # the repeated line 2 is the same generation: no warning
    run = json.loads((tmp_path / "out" / "summary.json").read_text())["run"]
    assert run["shared_names"] == 1 and run["first_shared"] == "line 3 (as line 1)"
    # refused lines name no generation: two unreadable lines, or one unknown task twice, warn of nothing
    refused = write_manifest(tmp_path / "r.jsonl", ["not json", "{oops", {**line, "task": "no_such"}, {**line, "task": "no_such"}])
    result = runner.invoke(app, ["score", str(refused), "--out", str(tmp_path / "out2")])
    assert result.exit_code == 0 and "manifest entries name" not in result.output


def _piped(tmp_path: Path, manifest: Path, name: str) -> tuple[Path, threading.Thread]:
    """A FIFO that serves ``manifest`` once to whoever opens it for reading."""
    fifo = tmp_path / name
    os.mkfifo(fifo)

    def serve() -> None:
        try:
            fifo.write_bytes(manifest.read_bytes())  # opening blocks until a reader comes
        except BrokenPipeError:  # the reader left without reading: the run was refused
            pass

    writer = threading.Thread(target=serve, daemon=True)
    writer.start()
    return fifo, writer


def _unblock(fifo: Path, writer: threading.Thread) -> None:
    """Let a writer still waiting for a reader finish (a refused run never opened the FIFO)."""
    if writer.is_alive():
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        writer.join()
        os.close(reader)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_piped_manifest_joins_a_folder_with_rows_only_with_append_or_overwrite(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a piped manifest's media paths resolve against the working directory
    first = _border_manifest(tmp_path, "first.jsonl", ("green",))
    second = _border_manifest(tmp_path, "second.jsonl", ("red",))
    out = tmp_path / "out"
    run_score(ScoreConfig(manifest=first, out=out))
    fifo, writer = _piped(tmp_path, second, "refused")
    try:
        with pytest.raises(OutputFolderError, match="piped manifest"):
            run_score(ScoreConfig(manifest=fifo, out=out))
        assert len(_lines(out / "results.jsonl")) == 1
    finally:
        _unblock(fifo, writer)
    fifo, writer = _piped(tmp_path, second, "appended")
    run_score(ScoreConfig(manifest=fifo, out=out, append=True))
    writer.join()
    assert [row["score"] > 0.9 for row in _lines(out / "results.jsonl")] == [True, False]  # green's row, then red's
    fifo, writer = _piped(tmp_path, second, "overwritten")
    run_score(ScoreConfig(manifest=fifo, out=out, overwrite=True))
    writer.join()
    assert [row["score"] for row in _lines(out / "results.jsonl")] == [0.0]  # red's alone: started afresh


def test_a_manifest_whose_name_is_not_utf8_still_gets_its_summary(tmp_path):
    manifest = _border_manifest(tmp_path, os.fsdecode(b"m\xff.jsonl"), ("green",))
    run_score(ScoreConfig(manifest=manifest, out=tmp_path / "out"))
    summary = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))
    assert summary["config"]["manifest"].endswith("m\\xff.jsonl") and summary["tasks"]["i_format_border"]["n"] == 1
