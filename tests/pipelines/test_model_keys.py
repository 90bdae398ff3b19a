"""Result keys name the models and reference files behind a row by content, and only those its task
declares: a checkpoint rewritten in place or a reference file added rescores; a setting another
task reads does not."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from mmverify.models.base import pick_device
from mmverify.models.hub import drop_hubs
from mmverify.pipelines.plan import Planner, WorkItem
from mmverify.testing.tiny_models import build_tiny_clap


@pytest.fixture(scope="module")
def tiny_clap(tmp_path_factory) -> Path:
    return build_tiny_clap(tmp_path_factory.mktemp("clap") / "clap")


@pytest.fixture
def settings(monkeypatch, tmp_path):
    """Set ``MMVERIFY_*`` settings from a clean slate (no context installed: read at call time)."""
    for name in ("MMVERIFY_MODELS", "MMVERIFY_DEVICE", "MMVERIFY_PRECISION", "MMVERIFY_REFERENCES", "MMVERIFY_CLAP_HF_SOURCE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MMVERIFY_CACHE_DIR", str(tmp_path / "cache"))

    def apply(**values: str) -> None:
        for name, value in values.items():
            monkeypatch.setenv(f"MMVERIFY_{name.upper()}", value)

    return apply


def _key(tmp_path: Path, task: str, instance: dict) -> str:
    line = {"task": task, "instance": instance, "parts": [{"type": "text", "text": "t"}]}
    entry = Planner(manifest_dir=tmp_path).plan(1, json.dumps(line))
    assert isinstance(entry, WorkItem), entry
    return entry.key


def clap_key(tmp_path: Path) -> str:
    return _key(tmp_path, "a_sound_cot", {"target": "dog"})


def speech_key(tmp_path: Path) -> str:
    return _key(tmp_path, "a_speech_retrieve", {"text": "hello"})


def tempo_key(tmp_path: Path) -> str:
    return _key(tmp_path, "a_music_tempo", {"tempo": 120})


def _copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


def test_a_checkpoint_rewritten_in_place_gives_new_keys(tmp_path, tiny_clap, settings):
    folder = _copy(tiny_clap, tmp_path / "checkpoint")
    settings(models=f"audio_text=clap-hf@{folder}")
    before = clap_key(tmp_path)
    assert clap_key(tmp_path) == before  # the same files, the same key
    config = json.loads((folder / "config.json").read_text())
    config["logit_scale_init_value"] = 1.5
    (folder / "config.json").write_text(json.dumps(config))
    drop_hubs()  # the next run (a process checks its checkpoints once)
    assert clap_key(tmp_path) != before


def test_the_same_checkpoint_in_another_folder_keeps_its_keys(tmp_path, tiny_clap, settings):
    settings(models=f"audio_text=clap-hf@{_copy(tiny_clap, tmp_path / 'a')}")
    here = clap_key(tmp_path)
    settings(models=f"audio_text=clap-hf@{_copy(tiny_clap, tmp_path / 'b')}")
    assert clap_key(tmp_path) == here


def test_a_checkpoint_that_appears_gives_new_keys(tmp_path, tiny_clap, settings):
    """Rows scored while it was missing are ``model_unavailable`` errors: they are rescored once it is there."""
    folder = tmp_path / "later"
    settings(models=f"audio_text=clap-hf@{folder}")
    missing = clap_key(tmp_path)
    _copy(tiny_clap, folder)
    assert clap_key(tmp_path) != missing


def test_backend_options_precision_and_device_type_enter_the_keys_of_the_tasks_that_use_them(tmp_path, tiny_clap, settings):
    settings(models=f"audio_text=clap-hf@{tiny_clap},beat_tracker=librosa-beats")
    plain, tempo = clap_key(tmp_path), tempo_key(tmp_path)
    settings(precision="bf16")  # CLAP has the option; the beat tracker does not
    bf16 = clap_key(tmp_path)
    assert bf16 != plain and tempo_key(tmp_path) == tempo
    settings(precision="fp32", models=f"audio_text=clap-hf@{tiny_clap}?features=numpy")
    assert clap_key(tmp_path) not in (plain, bf16)
    settings(models=f"audio_text=clap-hf@{tiny_clap}?batch_size=3")
    assert clap_key(tmp_path) != plain
    settings(models=f"audio_text=clap-hf@{tiny_clap}", device="cpu")
    # outputs depend on the device type the settings resolve to, not on how it was asked for
    assert (clap_key(tmp_path) == plain) == (pick_device(None) == "cpu")


def test_a_tasks_keys_ignore_the_settings_of_models_it_does_not_use(tmp_path, tiny_clap, settings):
    speech = speech_key(tmp_path)
    settings(models=f"audio_text=clap-hf@{tiny_clap}", references=f"esc50={tmp_path}", clap_hf_source=str(tiny_clap))
    assert speech_key(tmp_path) == speech
    settings(models="transcriber=whisper-hf@/another/whisper")
    assert speech_key(tmp_path) != speech


def _esc50(root: Path, rows: list[tuple[str, str]]) -> Path:
    (root / "meta").mkdir(parents=True, exist_ok=True)
    (root / "audio").mkdir(exist_ok=True)
    with open(root / "meta" / "esc50.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["filename", "category"])
        for filename, category in rows:
            writer.writerow([filename, category])
            sf.write(root / "audio" / filename, np.zeros(800, dtype=np.float32), 16000)
    return root


def test_reference_files_enter_the_keys_of_the_tasks_that_compare_with_them(tmp_path, tiny_clap, settings):
    root = _esc50(tmp_path / "esc50", [("1-dog.wav", "dog"), ("1-cat.wav", "cat")])
    settings(models=f"audio_text=clap-hf@{tiny_clap}", references=f"esc50={root}")
    before, speech = clap_key(tmp_path), speech_key(tmp_path)
    (root / "README.txt").write_text("not read by the layout")
    assert clap_key(tmp_path) == before
    _esc50(root, [("1-dog.wav", "dog"), ("1-cat.wav", "cat"), ("2-dog.wav", "dog")])  # a file added
    added = clap_key(tmp_path)
    assert added != before
    sf.write(root / "audio" / "2-dog.wav", np.ones(1600, dtype=np.float32) * 0.1, 16000)  # a file rewritten
    assert clap_key(tmp_path) not in (before, added)
    assert speech_key(tmp_path) == speech  # no reference set: untouched
    settings(references="")
    assert clap_key(tmp_path) not in (before, added)  # not configured: its rows are errors, rescored once it is


def test_a_model_spec_that_does_not_parse_is_each_model_rows_error_not_a_planning_failure(tmp_path, settings):
    settings(models="transcriber=no-such-backend")
    key = speech_key(tmp_path)  # planned: the key names what was asked for
    settings(models="transcriber=still-no-such-backend")
    assert speech_key(tmp_path) != key
    clip = tmp_path / "clip.wav"
    sf.write(clip, np.zeros(1600, dtype=np.float32), 16000)
    from mmverify.api import score_items

    [row] = score_items([{"task": "a_speech_retrieve", "instance": {"text": "hi"}, "parts": [{"type": "audio", "path": str(clip)}]}])
    assert row["error"]["code"] == "model_unavailable" and "still-no-such-backend" in row["error"]["message"]


def test_malformed_reference_metadata_is_each_rows_error_not_a_planning_failure(tmp_path, tiny_clap, settings):
    root = _esc50(tmp_path / "esc50", [("1-dog.wav", "dog")])
    (root / "meta" / "esc50.csv").write_text("filename,category\n1-dog.wav\n")  # a row without its category
    settings(models=f"audio_text=clap-hf@{tiny_clap}", references=f"esc50={root}")
    clip = tmp_path / "clip.wav"
    sf.write(clip, np.zeros(4800, dtype=np.float32), 48000)
    from mmverify.api import score_items

    [row] = score_items([{"task": "a_sound_cot", "instance": {"target": "dog"}, "parts": [{"type": "audio", "path": str(clip)}]}])
    assert (row["task"], row["error"]["code"]) == ("a_sound_cot", "model_unavailable") and "category" in row["error"]["message"]


def test_what_cannot_be_used_is_looked_at_once_per_planner(tmp_path, settings, monkeypatch):
    from mmverify.pipelines import model_keys

    calls = []
    original = model_keys.reference_identity
    monkeypatch.setattr(model_keys, "reference_identity", lambda *a: calls.append(a) or original(*a))
    planner = Planner(manifest_dir=tmp_path)  # esc50 is not configured
    line = {"task": "a_sound_cot", "instance": {"target": "dog"}, "parts": [{"type": "text", "text": "t"}]}
    keys = {planner.plan(1, json.dumps(line)).key for _ in range(3)}
    assert len(keys) == 1 and len(calls) == 1


def test_installing_a_missing_package_gives_new_keys(tmp_path, settings, monkeypatch):
    from mmverify.models.beats import LibrosaBeatTracker

    settings(models="beat_tracker=librosa-beats")
    installed = tempo_key(tmp_path)
    monkeypatch.setattr(LibrosaBeatTracker, "packages", ("librosa", "mmverify_no_such_package"))
    missing = tempo_key(tmp_path)
    assert missing != installed  # its rows, model_unavailable errors, are rescored once it is installed


def test_a_configuration_no_backend_can_be_built_from_names_its_setting_and_spares_judges(settings):
    from mmverify.models.base import ModelUnavailable
    from mmverify.models.hub import get_hub

    for name, value in (("models", "transcriber=no-such-backend"), ("precision", "fp8")):
        settings(**{name: value})
        hub = get_hub()  # judges are still reachable
        with pytest.raises(ModelUnavailable, match=f"MMVERIFY_{name.upper()}"):
            hub.instance("transcriber")
        settings(models="", precision="fp32")


def test_ray_workers_compute_on_the_device_they_ask_for_and_keys_say_so(tmp_path):
    from mmverify.pipelines.context import ScoringContext
    from mmverify.pipelines.score import ScoreConfig, with_worker_device

    def device(**options) -> str:
        config = ScoreConfig(manifest=tmp_path / "m.jsonl", out=tmp_path / "o", **options)
        return with_worker_device(config).context.settings.get("MMVERIFY_DEVICE", "")

    assert device(executor="ray", workers=2, context=ScoringContext()) == "cpu"
    assert device(executor="ray", workers=2, gpus_per_worker=1, context=ScoringContext()) == "cuda"
    assert device(executor="ray", workers=2, context=ScoringContext(device="cuda:1")) == "cuda:1"  # asked for: kept
    assert device(workers=2, context=ScoringContext()) == ""  # worker processes see what this one sees


def test_precision_enters_the_keys_of_tasks_whose_backend_has_it(tmp_path, settings):
    from mmverify.testing.tiny_models import build_tiny_hf_whisper

    whisper = build_tiny_hf_whisper(tmp_path / "whisper", max_length=24)
    settings(models=f"transcriber=whisper-hf@{whisper}")
    fp32 = speech_key(tmp_path)
    settings(precision="bf16")
    assert speech_key(tmp_path) != fp32
    settings(precision="fp32", models=f"transcriber=whisper-hf@{whisper}?precision=bf16")
    assert speech_key(tmp_path) != fp32


def judged_key(tmp_path: Path) -> str:
    return _key(tmp_path, "i_object_attribute", {"object": "a cat"})


def test_an_in_process_judges_weights_and_device_type_enter_the_keys_and_an_endpoints_model_does(tmp_path, settings, monkeypatch):
    for name in ("MMVERIFY_VLM_MODEL", "MMVERIFY_VLM_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    checkpoint = tmp_path / "vlm"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text('{"model_type": "qwen2_vl"}')
    (checkpoint / "model.safetensors").write_bytes(b"weights, first version")
    settings(vlm_model=f"transformers:{checkpoint}")
    first = judged_key(tmp_path)
    assert judged_key(tmp_path) == first
    (checkpoint / "model.safetensors").write_bytes(b"weights, second version")
    replaced = judged_key(tmp_path)
    assert replaced != first  # the same path, other weights: rescored
    import mmverify.models.base as base_module

    with monkeypatch.context() as gpu:  # a machine whose default device is a GPU
        gpu.setattr(base_module, "pick_device", lambda preferred=None: "cuda")
        assert judged_key(tmp_path) != replaced  # another device type
    assert judged_key(tmp_path) == replaced
    settings(vlm_model="some-vlm", vlm_base_url="http://127.0.0.1:9/v1")
    remote = judged_key(tmp_path)
    settings(vlm_model="another-vlm")
    assert judged_key(tmp_path) != remote  # over HTTP, the model named is what the key holds
