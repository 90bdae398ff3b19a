"""What enters a result key (profile, checkpoints, devices), and how error rows enter the means."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from mmverify.models.hub import ModelHub
from mmverify.pipelines.plan import Planner, WorkItem
from mmverify.pipelines.score import ScoreConfig, run_score
from mmverify.pipelines.summary import aggregate
from mmverify.tasks.base import PROFILES, Task
from mmverify.tasks.catalog import CATALOG, TASK_REGISTRY
from tests.conftest import save_png, write_manifest
from tests.pipelines.conftest import bordered


def _plan(tmp_path: Path, line: dict, **planner_args) -> WorkItem:
    entry = Planner(manifest_dir=tmp_path, **planner_args).plan(1, json.dumps(line))
    assert isinstance(entry, WorkItem), entry
    return entry


@pytest.fixture
def clip_line(tmp_path: Path) -> dict:
    sf.write(tmp_path / "clip.wav", np.zeros(16000, dtype=np.float32), 16000)
    return {"task": "a_sound_cot", "instance": {"target": "dog"}, "parts": [{"type": "audio", "path": "clip.wav"}]}


@pytest.fixture
def border_line(tmp_path: Path) -> dict:
    save_png(tmp_path / "b.png", bordered("green"))
    return {"task": "i_format_border", "instance": {"color": "green"}, "parts": [{"type": "image", "path": "b.png"}]}


def test_a_checkpoint_switch_changes_the_key_of_model_tasks(tmp_path, clip_line, monkeypatch):
    for name in ("MMVERIFY_CLAP_HF_SOURCE", "MMVERIFY_DEVICE", "MMVERIFY_PRECISION", "MMVERIFY_MODELS"):
        monkeypatch.delenv(name, raising=False)  # other tests' Reward objects leave settings in the environment
    before = _plan(tmp_path, clip_line).key
    monkeypatch.setenv("MMVERIFY_CLAP_HF_SOURCE", str(tmp_path / "another-checkpoint"))
    assert _plan(tmp_path, clip_line).key != before  # (tests/pipelines/test_model_keys.py: the rest)


def test_model_settings_leave_program_task_keys_alone(tmp_path, border_line, monkeypatch):
    before = _plan(tmp_path, border_line).key
    monkeypatch.setenv("MMVERIFY_CLAP_HF_SOURCE", "/elsewhere")
    monkeypatch.setenv("MMVERIFY_MODELS", "audio_text=clap-hf@/elsewhere")
    assert _plan(tmp_path, border_line).key == before


def test_program_tasks_never_reach_for_a_model(tmp_path, monkeypatch, border_line):
    """Tasks without declared model needs are keyed without the model settings: prove they use none."""

    def refuse(*args, **kwargs):
        raise AssertionError("a programs-only task asked the model hub for a backend or judge")

    monkeypatch.setattr(ModelHub, "backend", refuse)
    monkeypatch.setattr(ModelHub, "judge", refuse)
    sf.write(tmp_path / "fade.wav", (np.linspace(1, 0, 16000 * 6) * np.sin(np.arange(16000 * 6) * 0.05)).astype(np.float32), 16000)
    save_png(tmp_path / "v.png", bordered("blue"))
    audio = {"type": "audio", "path": "fade.wav"}
    image = {"type": "image", "path": "v.png"}
    lines = {
        "i_format_border": border_line,
        "i_format_background": {"task": "i_format_background", "instance": {"region": "left half", "color": "blue"}, "parts": [image]},
        "i_structure": {"task": "i_structure", "instance": {"order": ["it"]}, "parts": [image, {"type": "text", "text": "x"}]},
        "a_structure": {"task": "a_structure", "instance": {"order": ["at"]}, "parts": [audio, {"type": "text", "text": "x"}]},
        "a_music_intensity": {"task": "a_music_intensity", "instance": {"intensity": "fade out"}, "parts": [audio]},
        "i_consistency_3d_object": {"task": "i_consistency_3d_object", "instance": {"ref_image_list": []}, "parts": [image]},
        "i_consistency_3d_scene": {"task": "i_consistency_3d_scene", "instance": {"ref_image_list": []}, "parts": [image]},
    }
    programs = {info.id for info in CATALOG.values() if not info.needs}
    assert programs == set(lines)  # every programs-only task is exercised here
    from mmverify.pipelines.execute import score_item

    for task, line in lines.items():
        row = score_item(_plan(tmp_path, line))
        assert row["error"] is None or row["error"]["code"] != "internal_error", (task, row)


@pytest.mark.parametrize("profile", PROFILES)
def test_the_profile_is_part_of_the_verifier_id_and_the_key(tmp_path, border_line, profile):
    item = _plan(tmp_path, border_line, profile=profile)
    assert item.verifier == f"i_format_border@{TASK_REGISTRY.get('i_format_border').version}:{profile}"
    other = next(p for p in PROFILES if p != profile)
    assert _plan(tmp_path, border_line, profile=other).key != item.key


def test_every_task_builds_under_every_profile():
    for info in CATALOG.values():
        for profile in PROFILES:
            task = TASK_REGISTRY.get(info.id).build(profile)
            assert isinstance(task, Task) and task.profile == profile and task.strict == (profile == "strict")
    with pytest.raises(ValueError, match="unknown profile"):
        TASK_REGISTRY.get("i_format_border").build("lenient")


def test_summary_records_profile_and_aggregation(tmp_path, border_line):
    manifest = write_manifest(tmp_path / "m.jsonl", [border_line, {"task": "i_format_border", "instance": {"color": "green"}, "parts": [{"type": "image", "path": "missing.png"}]}])
    apart = run_score(ScoreConfig(manifest=manifest, out=tmp_path / "a", profile="strict")).summary
    assert apart["profiles"] == ["strict"] and apart["config"]["profile"] == "strict" and apart["aggregate"] == "apart"
    as_zero = run_score(ScoreConfig(manifest=manifest, out=tmp_path / "z", aggregate="as_zero")).summary
    scored = apart["tasks"]["i_format_border"]["mean"]
    assert as_zero["tasks"]["i_format_border"]["mean"] == pytest.approx(scored / 2)  # the error row counts as 0
    assert as_zero["tasks"]["i_format_border"]["n_error"] == 1


def test_as_zero_matches_a_hand_computed_mean():
    def row(instance: str, score: float | None) -> dict:
        scored = score is not None
        return {"task": "i_structure", "instance_id": instance, "sample": 0, "status": "scored" if scored else "error",
                "score": score, "passed": None, "error": None if scored else {"code": "timeout", "message": ""},
                "verifier": "i_structure@1:mmmg", "reason": None}  # fmt: skip

    rows = [row("a", 1.0), row("b", 0.0), row("c", None), row("d", 1.0)]
    assert aggregate(rows, how="apart")["tasks"]["i_structure"]["mean"] == pytest.approx(2 / 3)
    assert aggregate(rows, how="as_zero")["tasks"]["i_structure"]["mean"] == pytest.approx(2 / 4)
    with pytest.raises(ValueError):
        aggregate(rows, how="drop")
