"""What a new user meets first: MMMG file names as tasks, --limit, --dry-run, doctor, --version,
error messages after a run, and model_unavailable messages that name what would work."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from PIL import Image
from typer.testing import CliRunner

from mmverify import __version__
from mmverify.cli import app
from mmverify.models.base import ModelUnavailable
from mmverify.models.hub import ModelHub
from mmverify.pipelines.plan import Planner, WorkItem
from mmverify.pipelines.readiness import readiness, task_readiness
from mmverify.pipelines.score import ScoreConfig, run_score
from mmverify.data.instructions import InstructionSet
from tests.conftest import save_png, write_manifest
from tests.pipelines.conftest import bordered

runner = CliRunner()


def _flat(output: str) -> str:
    return " ".join(output.split())


def _tasks(entries: list) -> list[str]:
    return [e["task"] if isinstance(e, dict) else e.task for e in entries]


def test_instruction_file_names_route_by_the_row_fields(tmp_path: Path, mmmg_instructions: Path):
    rows = [json.loads(line) for line in (mmmg_instructions / "a_music_attribute.jsonl").read_text().splitlines()]
    both = next(i for i, r in enumerate(rows) if "instrument" in r and "tempo" in r)
    only_tempo = next(i for i, r in enumerate(rows) if "tempo" in r and "instrument" not in r)
    sf.write(tmp_path / "m.wav", np.zeros(8000, dtype=np.float32), 8000)
    planner = Planner(manifest_dir=tmp_path, instructions=InstructionSet(mmmg_instructions))

    def line(index: int) -> str:
        return json.dumps({"task": "a_music_attribute", "instance_id": f"a_music_attribute/{index}",
                           "parts": [{"type": "audio", "path": "m.wav"}]})  # fmt: skip

    assert _tasks(planner.plan_all(1, line(both))) == ["a_music_instrument", "a_music_tempo"]
    assert _tasks(planner.plan_all(2, line(only_tempo))) == ["a_music_tempo"]
    entries = planner.plan_all(1, line(both))
    assert all(isinstance(e, WorkItem) for e in entries) and entries[0].key != entries[1].key
    # the single-entry API refuses to guess which of the two tasks is meant
    refused = planner.plan(1, line(both))
    assert isinstance(refused, dict) and "feeds 2 tasks" in refused["error"]["message"]
    # --tasks keeps only the named task of such a line
    filtered = Planner(manifest_dir=tmp_path, instructions=InstructionSet(mmmg_instructions), tasks=frozenset({"a_music_tempo"}))
    assert _tasks(filtered.plan_all(1, line(both))) == ["a_music_tempo"]


def test_a_line_with_one_unusable_part_keeps_its_task_model_and_sample(tmp_path: Path, mmmg_instructions: Path):
    """Its row counts against the task it names (so `--aggregate as_zero` sees it), never as a task "?"."""
    rows = [json.loads(line) for line in (mmmg_instructions / "a_music_attribute.jsonl").read_text().splitlines()]
    both = next(i for i, r in enumerate(rows) if "instrument" in r and "tempo" in r)
    planner = Planner(manifest_dir=tmp_path, instructions=InstructionSet(mmmg_instructions))
    bad_data = {"type": "image", "data": "not base64!"}
    line = {"task": "i_format_border", "instance": {"color": "green"}, "model": "m1", "sample": 3, "parts": [bad_data]}
    (row,) = planner.plan_all(1, json.dumps(line))
    assert (row["task"], row["model"], row["sample"], row["instance_id"]) == ("i_format_border", "m1", 3, "i_format_border/line-1")
    assert row["error"]["code"] == "malformed_line" and "not valid base64" in row["error"]["message"]
    no_source = {**line, "parts": [{"type": "image"}]}
    assert planner.plan_all(2, json.dumps(no_source))[0]["task"] == "i_format_border"
    # an instruction file's name routes as a scored line would: one row per task the row feeds
    music = {"task": "a_music_attribute", "instance_id": f"a_music_attribute/{both}", "parts": [{"type": "audio"}]}
    assert _tasks(planner.plan_all(3, json.dumps(music))) == ["a_music_instrument", "a_music_tempo"]
    # a run keeps both rows, each under its own key
    write_manifest(tmp_path / "music.jsonl", [music])
    run = run_score(ScoreConfig(tmp_path / "music.jsonl", tmp_path / "out", instructions=mmmg_instructions))
    written = [json.loads(text) for text in run.results_path.read_text().splitlines()]
    latest = [json.loads(text) for text in (tmp_path / "out" / "results.latest.jsonl").read_text().splitlines()]
    assert sorted(r["task"] for r in written) == sorted(r["task"] for r in latest) == ["a_music_instrument", "a_music_tempo"]
    assert len({r["key"] for r in written}) == 2
    # and --tasks filters it like any other line
    filtered = Planner(manifest_dir=tmp_path, tasks=frozenset({"i_structure"}))
    assert filtered.plan_all(1, json.dumps(line)) == [] and filtered.stats.skipped_filtered == 1
    # a line whose sample is unusable still names the task and instance it gave
    assert planner.plan_all(4, json.dumps({**line, "sample": -1}))[0]["task"] == "i_format_border"
    assert planner.plan_all(5, json.dumps({**line, "task": 7, "sample": -1}))[0]["task"] == "?"


def test_a_media_path_that_is_a_folder_says_so(tmp_path: Path):
    (tmp_path / "folder.png").mkdir()
    planner = Planner(manifest_dir=tmp_path)
    for line, name in enumerate(("folder.png", "absent.png"), start=1):
        text = json.dumps({"task": "i_format_border", "instance": {"color": "green"}, "parts": [{"type": "image", "path": name}]})
        (row,) = planner.plan_all(line, text)
        expected = "is not a regular file" if name == "folder.png" else "not found"
        assert row["error"]["code"] == "missing_media" and f"image file {expected}: {name}" == row["error"]["message"]


def test_inline_rows_of_a_file_route_too(tmp_path: Path):
    save_png(tmp_path / "g.png", bordered("green"))
    planner = Planner(manifest_dir=tmp_path)
    german = {"task": "i_ocr_german", "instance": {"text": "Guten Morgen", "object": "a sign"}, "parts": [{"type": "image", "path": "g.png"}]}
    (entry,) = planner.plan_all(1, json.dumps(german))
    assert isinstance(entry, WorkItem) and entry.task == "i_ocr_multi_lingual" and entry.instance.source == "i_ocr_german"
    nothing = {"task": "a_music_attribute", "instance": {"instruction": "music"}, "parts": []}
    (row,) = planner.plan_all(2, json.dumps(nothing))
    assert row["error"]["code"] == "invalid_instance" and "instrument" in row["error"]["message"]
    unknown = {"task": "i_edit_txt", "instance": {}, "parts": []}
    (row,) = planner.plan_all(3, json.dumps(unknown))
    assert row["error"]["code"] == "unknown_task" and "Did you mean" in row["error"]["message"]


def test_limit_scores_the_first_entries_of_each_task(tmp_path: Path):
    save_png(tmp_path / "b.png", bordered("green"))
    border = {"task": "i_format_border", "instance": {"color": "green"}, "parts": [{"type": "image", "path": "b.png"}]}
    order = {"task": "i_structure", "instance": {"order": ["i"]}, "parts": [{"type": "image", "path": "b.png"}]}
    lines = [dict(border, sample=i) for i in range(4)] + [dict(order, sample=i) for i in range(3)]
    manifest = write_manifest(tmp_path / "m.jsonl", lines)
    outcome = run_score(ScoreConfig(manifest=manifest, out=tmp_path / "out", limit=2))
    latest = [json.loads(x) for x in (tmp_path / "out" / "results.latest.jsonl").read_text().splitlines()]
    assert [(r["task"], r["sample"]) for r in latest] == [
        ("i_format_border", 0), ("i_format_border", 1), ("i_structure", 0), ("i_structure", 1),
    ]  # fmt: skip
    assert outcome.plan.skipped_filtered == 3


def test_dry_run_scores_nothing_and_reports_what_is_missing(tmp_path: Path, monkeypatch):
    for name in ("MMVERIFY_VLM_BASE_URL", "MMVERIFY_VLM_MODEL", "MMVERIFY_MODELS"):
        monkeypatch.delenv(name, raising=False)
    save_png(tmp_path / "b.png", bordered("green"))
    lines = [
        {"task": "i_format_border", "instance": {"color": "green"}, "parts": [{"type": "image", "path": "b.png"}]},
        {"task": "i_object_include", "instance": {"object": ["a park", "a dog"]}, "parts": [{"type": "image", "path": "b.png"}]},
        {"task": "i_format_border", "instance": {"color": "green"}, "parts": [{"type": "image", "path": "gone.png"}]},
    ]
    manifest = write_manifest(tmp_path / "m.jsonl", lines)
    result = runner.invoke(app, ["score", str(manifest), "--out", str(tmp_path / "out"), "--dry-run"])
    text = _flat(result.output)
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "out").exists()  # nothing written
    assert "2 rows would be scored (1 of them need something missing here)" in text
    assert "1 missing_media" in text and "--vlm-base-url" in text


def test_dry_run_notes_a_batch_shape_the_items_in_flight_cannot_fill(tmp_path: Path, monkeypatch):
    """A batch holds the requests of the items scored together: batches larger than the items in
    flight, or than the items planned, would mostly run padding -- a GPU user should hear of it
    before scoring, with the fix that applies."""
    monkeypatch.delenv("MMVERIFY_MODELS", raising=False)
    sf.write(tmp_path / "clip.wav", np.zeros(16_000, dtype=np.float32), 16_000)
    line = {"task": "a_sound_cot", "instance": {"target": "dog"}, "parts": [{"type": "audio", "path": "clip.wav"}]}
    manifest = write_manifest(tmp_path / "m.jsonl", [line] * 16)

    def dry_run(batch_size: int, batch_items: int, rows: str = "content") -> str:
        model = f"audio_text=clap-hf@{tmp_path / 'clap'}?batch_size={batch_size}&rows={rows}"
        arguments = ["score", str(manifest), "--out", str(tmp_path / "out"), "--dry-run", "--model", model, "--batch-items", str(batch_items)]
        result = runner.invoke(app, arguments)
        assert result.exit_code == 0, result.output
        return _flat(result.output)

    too_few_in_flight = dry_run(16, 8)
    assert "audio_text (clap-hf) runs batches of 16 rows, but at most 8 items are scored together" in too_few_in_flight
    assert "raise --batch-items to 64 (4x the batch" in too_few_in_flight  # rows by content start at twice a batch
    assert "raise --batch-items to 32 (2x the batch" in dry_run(16, 8, rows="packed")
    assert "runs batches of" not in dry_run(16, 16)
    assert "only 16 planned items use it: lower its batch_size" in dry_run(64, 64)


def test_doctor_lists_every_task_with_its_fix(monkeypatch):
    for name in ("MMVERIFY_VLM_BASE_URL", "MMVERIFY_VLM_MODEL", "MMVERIFY_REFERENCES", "MMVERIFY_MODELS"):
        monkeypatch.delenv(name, raising=False)
    entries = {e.task: e for e in readiness()}
    assert len(entries) == 55
    assert entries["i_format_border"].ready and not entries["i_object_include"].ready
    sound = task_readiness("a_sound_cot")
    assert any("reference set esc50" in fix for fix in sound.fixes())
    result = runner.invoke(app, ["doctor", "--missing"])
    assert result.exit_code == 0 and "i_object_include" in result.output and "i_format_border" not in result.output
    # score's options configure what doctor checks
    judged = runner.invoke(app, ["doctor", "--missing", "--vlm-base-url", "http://127.0.0.1:9/v1", "--vlm-model", "m"])
    assert judged.exit_code == 0 and "i_object_include" not in judged.output, judged.output


def test_doctor_and_dry_run_check_the_judge_of_each_role_and_distinct_readers(monkeypatch, tmp_path: Path):
    """i_ocr_multi_lingual compares two judges' readings: with one judge for both roles, scoring
    refuses it (model_unavailable), so doctor and --dry-run must not call it ready."""
    for name in ("MMVERIFY_VLM_BASE_URL", "MMVERIFY_VLM_MODEL", "MMVERIFY_VLM_OCR_SECOND_MODEL", "MMVERIFY_VLM_OCR_SECOND_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    judge = ["--vlm-base-url", "http://127.0.0.1:9/v1", "--vlm-model", "m", "--vlm-concurrency", "4"]
    one = runner.invoke(app, ["doctor", "--missing", *judge])
    assert one.exit_code == 0 and "i_ocr_multi_lingual" in one.output and "ocr_second" in _flat(one.output), one.output
    two = runner.invoke(app, ["doctor", "--missing", *judge, "--vlm-role", "ocr_second=other@http://127.0.0.1:9/v1"])
    assert two.exit_code == 0 and "i_ocr_multi_lingual" not in two.output, two.output
    # two spellings of one in-process checkpoint, or two copies of it, are one judge, as scoring finds
    local, copy, other = tmp_path / "ckpt", tmp_path / "copy", tmp_path / "other"
    for folder, weights in ((local, "a"), (copy, "a"), (other, "b")):
        folder.mkdir()
        (folder / "model.safetensors").write_text(weights)
    (tmp_path / "x").mkdir()
    for second, alike in ((f"{tmp_path}/x/../ckpt", True), (copy, True), (other, False)):
        doctor = runner.invoke(app, ["doctor", "--missing", "--vlm-model", f"transformers:{local}", "--vlm-role", f"ocr_second=transformers:{second}"])
        assert ("distinct judges (ocr, ocr_second)" in _flat(doctor.output)) == alike, (second, doctor.output)
    # settings no judge can be built from are not ready (scoring would fail on them), and doctor says why
    limits = runner.invoke(app, ["doctor", "--missing", *judge[:4], "--vlm-role", "ocr_second=other@http://127.0.0.1:9/v1"],
                           env={"MMVERIFY_VLM_TIMEOUT": "0"})  # fmt: skip
    assert limits.exit_code == 0 and "i_ocr_multi_lingual" in limits.output and "finite timeout" in _flat(limits.output), limits.output
    # each requirement is listed once, for every task
    for entry in readiness():
        assert len({r.what for r in entry.requirements}) == len(entry.requirements), entry
    # a role's own judge is checked as configured, not only the default one
    bad = runner.invoke(app, ["doctor", "--missing", *judge, "--vlm-role", f"ocr=transformers:{tmp_path / 'absent'}"])
    assert bad.exit_code == 0 and "i_ocr_two" in bad.output and "i_edit_text_add" in bad.output, bad.output

    Image.new("RGB", (8, 8)).save(tmp_path / "x.png")
    item = {"task": "i_ocr_multi_lingual", "instance": {"text": "你好"}, "parts": [{"type": "image", "path": "x.png"}]}
    manifest = write_manifest(tmp_path / "m.jsonl", [item])
    dry = runner.invoke(app, ["score", str(manifest), "--out", str(tmp_path / "out"), "--dry-run", *judge])
    assert "ocr_second" in _flat(dry.output), dry.output


def test_a_judge_is_ready_only_when_usable_as_configured(monkeypatch, tmp_path: Path):
    from mmverify.pipelines.readiness import judge_requirement

    for name in ("MMVERIFY_VLM_BASE_URL", "MMVERIFY_VLM_MODEL", "MMVERIFY_VLM_API_KEY_ENV", "MMVERIFY_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MMVERIFY_VLM_MODEL", f"transformers:{tmp_path / 'no-such-checkpoint'}")
    local = judge_requirement("default")
    assert not local.ok and "does not exist" in local.detail
    monkeypatch.setenv("MMVERIFY_VLM_MODEL", "gpt-4o")
    monkeypatch.setenv("MMVERIFY_VLM_BASE_URL", "notaurl")
    bad_url = judge_requirement("default")
    assert not bad_url.ok and "http(s) URL" in bad_url.detail
    monkeypatch.setenv("MMVERIFY_VLM_BASE_URL", "http://127.0.0.1:8001/v1")
    monkeypatch.setenv("MMVERIFY_VLM_API_KEY_ENV", "MMVERIFY_TEST_UNSET_KEY")
    monkeypatch.delenv("MMVERIFY_TEST_UNSET_KEY", raising=False)
    keyless = judge_requirement("default")
    assert keyless.ok and "no key: MMVERIFY_TEST_UNSET_KEY is not set" in keyless.detail
    monkeypatch.setenv("MMVERIFY_TEST_UNSET_KEY", "secret")
    assert judge_requirement("default").detail == "gpt-4o at http://127.0.0.1:8001/v1"

    # a URL no request could use is refused where the options are read, before anything is scored
    manifest = write_manifest(tmp_path / "m.jsonl", [{"task": "i_structure", "instance": {"order": ["t"]}, "parts": [{"type": "text", "text": "x"}]}])
    for option in (["--vlm-base-url", "localhost:8000/v1", "--vlm-model", "m"], ["--vlm-role", "ocr=m@notaurl"]):
        result = runner.invoke(app, ["score", str(manifest), "--out", str(tmp_path / "out"), *option])
        assert result.exit_code == 2 and "http(s) URL" in _flat(result.output), result.output


def test_a_device_torch_cannot_name_is_refused_before_scoring(monkeypatch, tmp_path: Path):
    from mmverify.models.speaker import ResemblyzerSpeaker

    manifest = write_manifest(tmp_path / "m.jsonl", [{"task": "i_structure", "instance": {"order": ["t"]}, "parts": [{"type": "text", "text": "x"}]}])
    result = runner.invoke(app, ["score", str(manifest), "--out", str(tmp_path / "out"), "--device", "tpu"])
    assert result.exit_code == 2 and "'tpu' is not a torch device" in _flat(result.output), result.output
    # set in the environment instead, it shows in doctor and --dry-run, and a model load says it
    monkeypatch.setenv("MMVERIFY_DEVICE", "tpu")
    state = ResemblyzerSpeaker().availability()  # its weights ship in its wheel: ready but for the device
    assert not state.ok and "'tpu' is not a torch device" in state.reason
    with pytest.raises(ModelUnavailable, match="'tpu' is not a torch device"):
        ResemblyzerSpeaker().ensure_loaded()
    monkeypatch.setenv("MMVERIFY_DEVICE", "cpu")
    assert ResemblyzerSpeaker().availability().ok


def test_model_unavailable_names_a_usable_alternative(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("MMVERIFY_BEAT_THIS_SOURCE", str(tmp_path / "missing.ckpt"))
    monkeypatch.delenv("MMVERIFY_MODELS", raising=False)  # the default beat tracker, whatever earlier tests chose
    hub = ModelHub()
    try:
        hub.backend("beat_tracker")
    except Exception as exc:  # ModelUnavailable
        assert "--model beat_tracker=librosa-beats" in str(exc)
    else:  # pragma: no cover - beat_this weights are never present on a test machine
        raise AssertionError("expected model_unavailable")
    fix = " ".join(task_readiness("a_music_tempo").fixes())
    assert "--model beat_tracker=librosa-beats" in fix


def test_version_and_frequent_errors(tmp_path: Path):
    assert runner.invoke(app, ["--version"]).output.strip() == f"mmverify {__version__}"
    manifest = write_manifest(tmp_path / "m.jsonl", ["{bad", "{bad", {"task": "nope", "instance": {}, "parts": []}])
    result = runner.invoke(app, ["score", str(manifest), "--out", str(tmp_path / "out")])
    text = _flat(result.output)
    assert result.exit_code == 0 and "most frequent errors (3 error rows)" in text
    assert "2 × malformed_line" in text and "1 × unknown_task" in text


def test_readiness_checks_the_backend_as_scoring_builds_it(monkeypatch, tmp_path: Path):
    """Checkpoint, options, device and precision of the configuration in force: fp16 on a CPU is refused
    here, as it would be by every row."""
    from mmverify.testing.tiny_models import build_tiny_clap

    clap = build_tiny_clap(tmp_path / "clap")
    monkeypatch.setenv("MMVERIFY_MODELS", f"audio_text=clap-hf@{clap}")
    monkeypatch.setenv("MMVERIFY_DEVICE", "cpu")
    [ready] = [r for r in task_readiness("a_sound_cot").requirements if r.what.startswith("audio_text")]
    assert ready.ok, ready
    monkeypatch.setenv("MMVERIFY_PRECISION", "fp16")
    [refused] = [r for r in task_readiness("a_sound_cot").requirements if r.what.startswith("audio_text")]
    assert not refused.ok and "fp16 is not supported on the CPU" in refused.detail
