"""The command line: tasks table, score/report round trip, import-mmmg, usage errors."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from mmverify.cli import app
from mmverify.tasks.catalog import TASKS
from tests.conftest import save_png, scene, write_manifest

runner = CliRunner()


def test_tasks_lists_the_whole_benchmark():
    result = runner.invoke(app, ["tasks", "--json"])
    assert result.exit_code == 0
    listed = json.loads(result.stdout)
    assert [t["id"] for t in listed] == [t.id for t in TASKS] and len(listed) == 55
    assert {t["id"] for t in listed if t["implemented"]} >= {"i_format_border", "i_structure"}


def test_tasks_of_one_group_and_an_unknown_group():
    audio = json.loads(runner.invoke(app, ["tasks", "--json", "--group", "audio"]).stdout)
    assert audio and {t["group"] for t in audio} == {"audio"} and len(audio) == sum(t.group == "audio" for t in TASKS)
    result = runner.invoke(app, ["tasks", "--group", "audi"])
    assert result.exit_code == 2 and "Did you mean 'audio'?" in result.output


def test_score_then_report(tmp_path: Path, mmmg_instructions: Path):
    save_png(tmp_path / "a.png", scene())
    manifest = write_manifest(
        tmp_path / "m.jsonl",
        [
            {"task": "i_format_border", "instance_id": "i_format_border/0", "parts": [{"type": "image", "path": "a.png"}]},
            "not json",
        ],
    )
    out = tmp_path / "out"
    result = runner.invoke(app, ["score", str(manifest), "--out", str(out), "--instructions", str(mmmg_instructions)])
    assert result.exit_code == 0, result.output  # error rows do not fail the run
    assert len((out / "results.jsonl").read_text().splitlines()) == 2
    report = runner.invoke(app, ["report", str(out)])
    assert report.exit_code == 0 and "| i_format_border | image |" in report.stdout
    assert (out / "report.md").read_text().startswith("# mmverify results")


def test_report_refuses_damaged_runs_with_one_line(tmp_path: Path):
    save_png(tmp_path / "a.png", scene())
    line = {"task": "i_format_border", "instance": {"color": "green"}, "parts": [{"type": "image", "path": "a.png"}]}
    manifest = write_manifest(tmp_path / "m.jsonl", [line, {**line, "sample": 1}])
    out = tmp_path / "out"
    assert runner.invoke(app, ["score", str(manifest), "--out", str(out)]).exit_code == 0
    summary = (out / "summary.json").read_text()
    latest = (out / "results.latest.jsonl").read_text()

    def refused(expected: str, *options: str) -> None:
        result = runner.invoke(app, ["report", str(out), *options])
        assert result.exit_code == 2 and expected in " ".join(result.output.split()), result.output
        assert result.exception is None or isinstance(result.exception, SystemExit)

    (out / "summary.json").write_text('{"tasks": null, "groups": 5}')
    refused("is not a summary `mmverify score` wrote")
    (out / "summary.json").write_text(summary)
    (out / "results.latest.jsonl").write_text(latest[:40] + "\n" + latest)  # a line cut short
    refused("corrupt results line", "--html")
    (out / "results.latest.jsonl").write_text(latest)
    (out / "report.md").unlink(missing_ok=True)
    (out / "report.md").mkdir()
    refused("report.md: Is a directory")


def test_unusable_arguments_exit_non_zero(tmp_path: Path):
    manifest = write_manifest(tmp_path / "m.jsonl", [])
    result = runner.invoke(app, ["score", str(manifest), "--out", str(tmp_path / "o"), "--tasks", "i_format_bordr"])
    assert result.exit_code == 2 and "i_format_border" in result.output
    result = runner.invoke(app, ["score", str(manifest), "--out", str(tmp_path / "o"), "--tasks", ","])
    assert result.exit_code == 2 and "names no task" in result.output  # not a run that silently scores nothing
    result = runner.invoke(app, ["score", str(tmp_path / "absent.jsonl"), "--out", str(tmp_path / "o")])
    assert result.exit_code != 0
    bad = tmp_path / "t.json"
    bad.write_text("[1, 2]")
    result = runner.invoke(app, ["score", str(manifest), "--out", str(tmp_path / "o"), "--thresholds", str(bad)])
    assert result.exit_code == 2
    # a key naming no task would set no row's `passed`, silently
    bad.write_text(json.dumps({"i_format_bordr": {"threshold": 0.5}}))
    result = runner.invoke(app, ["score", str(manifest), "--out", str(tmp_path / "o"), "--thresholds", str(bad)])
    assert result.exit_code == 2 and "unknown task 'i_format_bordr'. Did you mean 'i_format_border'" in " ".join(result.output.split()), result.output
    for options, expected in ((["--workers", "2", "--executor", "ray"], "not Ray actors"), (["--batch-items", "1"], "--batch-items")):
        result = runner.invoke(app, ["score", str(manifest), "--out", str(tmp_path / "o"), "--decode-processes", "2", *options])
        assert result.exit_code == 2 and expected in " ".join(result.output.split()), result.output
    for options in ([], ["--workers", "2", "--executor", "ray"]):
        result = runner.invoke(app, ["score", str(manifest), "--out", str(tmp_path / "o"), "--model-process", *options])
        assert result.exit_code == 2 and "--workers N, N > 1, without Ray" in " ".join(result.output.split()), result.output


def test_import_mmmg_then_score(tmp_path: Path, mmmg_instructions: Path):
    outputs = tmp_path / "MyModel"
    rows = [{"response": "<image_start><image_0><image_end>", "image_list": [i]} for i in range(15)]
    outputs.mkdir()
    write_manifest(outputs / "i_format_border.jsonl", rows)
    for i in range(15):
        save_png(outputs / "image" / f"i_format_border_{i}.png", scene(seed=i))
    manifest = tmp_path / "manifest.jsonl"
    result = runner.invoke(
        app, ["import-mmmg", str(outputs), "--instructions", str(mmmg_instructions), "--output", str(manifest)]
    )
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in manifest.read_text().splitlines()]
    assert len(lines) == 15 and lines[3]["instance_id"] == "i_format_border/3" and lines[3]["model"] == "MyModel"
    assert lines[3]["parts"] == [{"type": "image", "path": "MyModel/image/i_format_border_3.png"}]
    result = runner.invoke(
        app, ["score", str(manifest), "--out", str(tmp_path / "out"), "--instructions", str(mmmg_instructions), "-q"]
    )
    assert result.exit_code == 0
    rows = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 15 and all(r["status"] == "scored" for r in rows)


def test_demo_runs(tmp_path: Path):
    result = runner.invoke(app, ["demo", "--out", str(tmp_path / "demo")])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (tmp_path / "demo" / "run" / "results.jsonl").read_text().splitlines()]
    by_id = {r["instance_id"]: r for r in rows}
    assert by_id["demo/border-clean"]["score"] > 0.99 and by_id["demo/border-wrong-colour"]["score"] == 0.0
    assert by_id["demo/missing-file"]["error"]["code"] == "missing_media"


def test_models_list_check_and_fetch_errors(tmp_path: Path):
    # wide enough that no cell wraps: the table holds paths (this checkout's, the model cache's) of
    # any length; and beat-this pointed at a missing checkpoint, so at least one backend is
    # unavailable on any machine, whatever weights it has fetched
    wide = {"COLUMNS": "2000", "MMVERIFY_BEAT_THIS_SOURCE": str(tmp_path / "missing" / "final0.ckpt")}
    listed = runner.invoke(app, ["models", "list"], env=wide)
    assert listed.exit_code == 0
    for name in ("clap-hf", "dreamsim", "whisper-hf", "wavlm-sv", "resemblyzer", "beat-this", "librosa-beats", "silero-vad"):
        assert name in listed.stdout
    assert "mmverify models fetch beat-this" in listed.stdout  # unavailable backends say how to get them
    checked = runner.invoke(app, ["models", "check", "librosa-beats", "silero-vad"], env=wide)
    assert checked.exit_code == 0 and checked.stdout.count(" yes ") == 2
    wrong = runner.invoke(app, ["models", "fetch", "resemblizer"])
    assert wrong.exit_code == 2 and "resemblyzer" in wrong.output


def test_a_failed_download_says_what_stopped_it(monkeypatch):
    """`models fetch` is the command that downloads: its failure gives the hub client's reason, not
    the "not cached, run `models fetch`" advice that sent the user there."""
    import huggingface_hub

    def unreachable(repo_id: str, local_files_only: bool = False, **_: object) -> str:
        assert not local_files_only
        raise OSError("Cannot reach https://huggingface.co: connection refused")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", unreachable)
    result = runner.invoke(app, ["models", "fetch", "clap-hf"], env={"COLUMNS": "400"})
    text = " ".join(result.output.split())
    assert result.exit_code == 2 and "could not download" in text and "connection refused" in text, result.output
    assert "models fetch" not in text and "not in the local Hugging Face cache" not in text, result.output


def test_score_summarises_errors_whose_strings_hold_unicode_line_breaks(tmp_path: Path):
    """Rows hold U+2028, U+2029 and U+0085 unescaped; only "\\n" ends a row."""
    lines = [
        {"task": "i_structure", "instance": {"order": ["t"]}, "parts": [{"type": "text", "text": "ok"}]},
        {"task": "i_structure", "instance_id": "a\u2028b\u2029c\x85d", "instance": {"order": ["t"]},
         "parts": [{"type": "image", "path": "absent.png"}]},
    ]  # fmt: skip
    manifest = write_manifest(tmp_path / "m.jsonl", lines)
    result = runner.invoke(app, ["score", str(manifest), "--out", str(tmp_path / "out")], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "1 × missing_media: image file not found: absent.png" in result.stdout


def test_an_unusable_output_location_is_one_line_and_exit_2(tmp_path: Path):
    manifest = write_manifest(tmp_path / "m.jsonl", [{"task": "i_structure", "instance": {"order": ["t"]}, "parts": []}])
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    unusable = str(blocker / "out")  # a folder inside a file: NotADirectoryError, as /proc/x is ENOENT
    for args in (["score", str(manifest), "--out", unusable], ["score", str(manifest), "--out", unusable, "-q"]):
        result = runner.invoke(app, args, env={"COLUMNS": "200"})
        assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
        assert result.output == f"error: {unusable}: Not a directory\n"  # one line, no traceback
    runner.invoke(app, ["score", str(manifest), "--out", str(tmp_path / "run"), "-q"])
    compared = runner.invoke(app, ["compare", str(tmp_path / "run"), str(tmp_path / "run"), "--json", str(blocker / "c.json")])
    assert compared.exit_code == 2 and isinstance(compared.exception, SystemExit), compared.output
