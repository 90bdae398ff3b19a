"""One scoring context, built the same way by score, serve and the Reward API, installed in this
process and handed explicitly to worker processes (the environment carries nothing)."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import soundfile as sf
from typer.testing import CliRunner

from mmverify.cli import app
from mmverify.core.settings import default_cache_dir, installed_context, scoring_settings
from mmverify.models import hub
from mmverify.pipelines import context as context_module
from mmverify.pipelines.context import JudgeOptions, ScoringContext, current, install, install_context
from mmverify.pipelines.plan import Planner
from mmverify.pipelines.reward import Reward
from mmverify.pipelines.score import ScoreConfig, make_executor, run_score
from mmverify.references.sets import configured_root
from tests.conftest import click_track, write_manifest

_SETTINGS = (
    "MMVERIFY_MODELS", "MMVERIFY_REFERENCES", "MMVERIFY_DEVICE", "MMVERIFY_PRECISION", "MMVERIFY_CACHE_DIR",
    "MMVERIFY_OFFLINE", "MMVERIFY_VLM_BASE_URL", "MMVERIFY_VLM_MODEL", "MMVERIFY_CLAP_HF_SOURCE", "MMVERIFY_BEAT_THIS_SOURCE",
)  # fmt: skip


@pytest.fixture(autouse=True)
def _no_settings_in_the_environment(monkeypatch):
    """Nothing installed and no MMVERIFY_* settings: every setting a test sees comes from it."""
    for name in _SETTINGS:
        monkeypatch.delenv(name, raising=False)
    context_module.reset()
    yield
    context_module.reset()


def test_the_context_resolves_its_settings_and_validates_before_changing_anything(monkeypatch):
    monkeypatch.setenv("MMVERIFY_DEVICE", "mps")
    monkeypatch.setenv("MMVERIFY_CLAP_HF_SOURCE", "/from/the/environment")
    context = ScoringContext(
        models=["audio_text=clap-hf@/ckpt/clap"], references="esc50=/data/esc50", device="cuda:1", precision="bf16",
        offline=True, judge=JudgeOptions(base_url="http://127.0.0.1:9/v1", model="judge-7b", roles=("ocr=reader",)),
        env={"MMVERIFY_WAVLM_SV_SOURCE": "/w", "HF_HOME": "/hf"},
    )  # fmt: skip
    settings = context.settings
    assert settings["MMVERIFY_MODELS"] == "audio_text=clap-hf@/ckpt/clap"
    assert settings["MMVERIFY_REFERENCES"] == "esc50=/data/esc50"
    assert settings["MMVERIFY_DEVICE"] == "cuda:1" and settings["MMVERIFY_PRECISION"] == "bf16"  # the option wins
    assert settings["MMVERIFY_CLAP_HF_SOURCE"] == "/from/the/environment"  # what the options leave alone is kept
    assert settings["MMVERIFY_OFFLINE"] == "1" and settings["MMVERIFY_VLM_MODEL"] == "judge-7b"
    assert settings["MMVERIFY_VLM_OCR_MODEL"] == "reader" and settings["MMVERIFY_WAVLM_SV_SOURCE"] == "/w"
    assert all(name.startswith("MMVERIFY_") for name in settings)
    assert context.process_environment() == {"HF_HUB_OFFLINE": "1", "HF_HOME": "/hf"}  # what libraries read themselves
    with pytest.raises(TypeError):
        context.settings["MMVERIFY_DEVICE"] = "cpu"  # type: ignore[index]
    for bad, message in (
        ({"models": "audio_text=no-such-backend"}, "models:"), ({"references": "nowhere"}, "references:"),
        ({"precision": "fp8"}, "precision"), ({"judge": JudgeOptions(roles=("not a role spec",))}, "ROLE=MODEL"),
    ):  # fmt: skip
        with pytest.raises(ValueError, match=message):
            ScoringContext(**bad)
    assert installed_context() is None  # building installs nothing


def test_current_reads_the_environment_until_a_context_is_installed(monkeypatch, tmp_path):
    monkeypatch.setenv("MMVERIFY_DEVICE", "mps")
    assert current().settings["MMVERIFY_DEVICE"] == "mps" and scoring_settings()["MMVERIFY_DEVICE"] == "mps"
    monkeypatch.setenv("MMVERIFY_DEVICE", "cpu")  # read at call time while nothing is installed
    assert current().settings["MMVERIFY_DEVICE"] == "cpu" and hub.ModelHub.from_context().device == "cpu"
    installed = ScoringContext(device="cuda:1", cache_dir=tmp_path / "cache")
    install(installed)
    monkeypatch.setenv("MMVERIFY_DEVICE", "cpu:other")
    monkeypatch.setenv("MMVERIFY_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert current() is installed and scoring_settings()["MMVERIFY_DEVICE"] == "cuda:1"  # the environment no longer counts
    assert default_cache_dir() == tmp_path / "cache"
    context_module.reset()
    assert current().settings["MMVERIFY_DEVICE"] == "cpu:other" and default_cache_dir() == tmp_path / "elsewhere"


def test_the_process_hub_follows_the_environment_while_no_context_is_installed(monkeypatch):
    """Library use configured by variables: the models that score are those the settings (and so the
    result keys) name, also after a variable changed."""
    monkeypatch.setenv("MMVERIFY_DEVICE", "cpu")
    first = hub.get_hub()
    assert first.device == "cpu" and hub.get_hub() is first
    monkeypatch.setenv("MMVERIFY_DEVICE", "cuda:1")
    second = hub.get_hub()
    assert second is not first and second.device == "cuda:1"
    monkeypatch.setenv("MMVERIFY_DEVICE", "cpu")
    assert hub.get_hub() is first  # parked with its models, taken back


def test_installing_rebuilds_the_hub_and_reference_sets_but_leaves_the_environment_alone(tmp_path):
    before = dict(scoring_settings())
    old_hub = hub.get_hub()
    options = {"device": "cpu", "references": f"esc50={tmp_path / 'a'}"}
    assert install(ScoringContext(**options)) is True
    assert "MMVERIFY_DEVICE" not in os.environ and "MMVERIFY_REFERENCES" not in os.environ
    assert dict(scoring_settings()) != before and scoring_settings()["MMVERIFY_DEVICE"] == "cpu"
    new_hub = hub.get_hub()
    assert new_hub is not old_hub and new_hub.device == "cpu"  # rebuilt with the new settings
    assert configured_root("esc50") == tmp_path / "a"
    assert ScoringContext(**options).apply() is False and hub.get_hub() is new_hub  # nothing changed: kept
    assert install(ScoringContext(references=f"esc50={tmp_path / 'b'}")) is True and hub.get_hub() is not new_hub
    # a context is its options over the environment, never over the context installed before it
    assert configured_root("esc50") == tmp_path / "b" and hub.get_hub().device is None


def test_an_offline_context_sets_only_what_libraries_read_themselves(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    assert install(ScoringContext(offline=True)) is True
    assert os.environ["HF_HUB_OFFLINE"] == "1" and "MMVERIFY_OFFLINE" not in os.environ
    assert current().settings["MMVERIFY_OFFLINE"] == "1"


def _keys(tmp_path: Path) -> tuple[str, str, str]:
    """Keys of a model task, a judged task and a program task under the context in force."""
    planner = Planner(manifest_dir=tmp_path)
    lines = (
        {"task": "a_music_tempo", "instance": {"tempo": 120}, "parts": [{"type": "text", "text": "t"}]},
        {"task": "i_object_include", "instance": {"object": ["a park", "a dog"]}, "parts": [{"type": "text", "text": "t"}]},
        {"task": "i_structure", "instance": {"order": ["t"]}, "parts": [{"type": "text", "text": "t"}]},
    )
    model, judged, program = (planner.plan(n, json.dumps(line)).key for n, line in enumerate(lines, start=1))
    return model, judged, program


def test_the_result_key_changes_with_every_setting_of_the_context_its_task_reads(tmp_path):
    read = {  # a_music_tempo's beat tracker: which backend, which checkpoint
        "models": ScoringContext(models="beat_tracker=librosa-beats"),
        "source": ScoringContext(env={"MMVERIFY_BEAT_THIS_SOURCE": str(tmp_path / "final0.ckpt")}),
    }
    unread = {  # a beat tracker has no precision option; the task compares with no reference set
        "precision": ScoringContext(precision="bf16"),
        "references": ScoringContext(references=f"esc50={tmp_path}"),
    }
    plain = _keys(tmp_path)
    keys = {}
    for name, chosen in {**read, **unread}.items():
        context_module.reset()
        install(chosen)
        keys[name] = _keys(tmp_path)
        assert keys[name] == _keys(tmp_path)  # the same context, the same keys
    model_keys = [plain[0]] + [keys[name][0] for name in read]
    assert len(set(model_keys)) == len(model_keys), keys  # every setting it reads gives the model task another key
    assert {keys[name][0] for name in unread} == {plain[0]}
    assert {k[2] for k in keys.values()} == {plain[2]}  # a program task reads no model setting
    context_module.reset()
    install(ScoringContext(judge=JudgeOptions(base_url="http://127.0.0.1:9/v1", model="judge-a")))
    judge_a = _keys(tmp_path)[1]
    install(ScoringContext(judge=JudgeOptions(model="judge-b")))
    assert _keys(tmp_path)[1] != judge_a and judge_a != plain[1]


def test_executors_hand_the_context_to_their_workers(tmp_path):
    chosen = ScoringContext(device="cpu")
    manifest = write_manifest(tmp_path / "m.jsonl", [])
    for executor in ("local", "ray"):
        made = make_executor(ScoreConfig(manifest=manifest, out=tmp_path / "o", workers=2, executor=executor, context=chosen))
        assert made.initializer is install_context and made.initargs == (chosen,)
    install(ScoringContext(device="mps"))  # no context in the config: the one in force here
    made = make_executor(ScoreConfig(manifest=manifest, out=tmp_path / "o", workers=2))
    assert made.initargs == (current(),) and made.initargs[0].settings["MMVERIFY_DEVICE"] == "mps"
    copied = pickle.loads(pickle.dumps(chosen))  # what the spawn pipe does
    assert copied == chosen and copied.settings == chosen.settings


def _tempo_manifest(tmp_path: Path) -> Path:
    lines = []
    for bpm in (120.0, 100.0):
        audio, _ = click_track(bpm, 8.0)
        sf.write(tmp_path / f"{int(bpm)}.wav", audio, 22050)
        lines.append({"task": "a_music_tempo", "instance": {"tempo": 120}, "parts": [{"type": "audio", "path": f"{int(bpm)}.wav"}]})
    return write_manifest(tmp_path / "m.jsonl", lines)


def test_worker_processes_score_under_the_parents_context_not_its_environment(tmp_path):
    """The default beat tracker has no weights here, so only a worker that received the context
    (librosa-beats) can score; the environment never names it."""
    manifest = _tempo_manifest(tmp_path)
    librosa = ScoringContext(models="beat_tracker=librosa-beats", cache_dir=tmp_path / "cache")
    runs = {}
    for workers in (1, 2):
        out = tmp_path / f"workers-{workers}"
        run_score(ScoreConfig(manifest=manifest, out=out, workers=workers, timeout=None, context=librosa))
        assert "MMVERIFY_MODELS" not in os.environ and "MMVERIFY_CACHE_DIR" not in os.environ
        runs[workers] = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    for rows in runs.values():
        assert [row["status"] for row in rows] == ["scored", "scored"], rows
        assert {row["evidence"]["tracker"] for row in rows} == {"librosa-beats"}
    assert [row["key"] for row in runs[1]] == [row["key"] for row in runs[2]]
    assert [row["score"] for row in runs[1]] == [row["score"] for row in runs[2]] == [1.0, 0.0]
    missing = ScoringContext(models=f"beat_tracker=beat-this@{tmp_path / 'missing.ckpt'}", cache_dir=tmp_path / "cache")
    out = tmp_path / "another-checkpoint"
    run_score(ScoreConfig(manifest=manifest, out=out, workers=2, timeout=None, context=missing))
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert {row["key"] for row in rows}.isdisjoint(row["key"] for row in runs[2])  # another checkpoint, other keys
    assert {row["error"]["code"] for row in rows} == {"model_unavailable"}


def test_reward_and_serve_take_the_same_options():
    reward = Reward("i_format_background", references=["esc50=/data/esc50"], judge=JudgeOptions(model="judge-7b"))
    assert current() is reward.context
    assert current().settings["MMVERIFY_REFERENCES"] == "esc50=/data/esc50" and current().settings["MMVERIFY_VLM_MODEL"] == "judge-7b"
    assert "MMVERIFY_REFERENCES" not in os.environ and "MMVERIFY_VLM_MODEL" not in os.environ
    with pytest.raises(ValueError, match="models:"):
        Reward("i_format_background", models="audio_text=no-such-backend")
    help_text = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "200"}).output
    for option in ("--references", "--vlm-base-url", "--vlm-model", "--vlm-role", "--model", "--precision"):
        assert option in help_text
    refused = CliRunner().invoke(app, ["serve", "--model", "audio_text=no-such-backend", "--port", "0"])
    assert refused.exit_code == 2 and "no-such-backend" in refused.output


def test_a_later_context_takes_back_the_variables_an_earlier_one_set(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    install(ScoringContext(offline=True))
    install(ScoringContext(device="cpu"))
    assert "HF_HUB_OFFLINE" not in os.environ and current().settings.get("MMVERIFY_OFFLINE", "") == ""
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # a value of the user's own comes back too
    install(ScoringContext(offline=True))
    context_module.reset()
    assert os.environ["HF_HUB_OFFLINE"] == "0"


def test_a_scoring_run_leaves_the_context_in_force_as_it_found_it(tmp_path):
    manifest = _tempo_manifest(tmp_path)
    mine = ScoringContext(device="cpu")
    install(mine)
    run_score(ScoreConfig(manifest=manifest, out=tmp_path / "out", timeout=None, context=ScoringContext(models="beat_tracker=librosa-beats")))
    assert installed_context() is mine and "MMVERIFY_MODELS" not in current().settings


def test_a_reward_brings_its_settings_to_each_call_and_into_other_processes(tmp_path):
    items = [{"task": "i_structure", "instance": {"order": ["t"]}, "parts": [{"type": "text", "text": "a text"}]}]
    first = Reward(device="cpu", models="beat_tracker=librosa-beats")
    expected = first.rows(items)  # builds a catalog-row task (i_structure), which must pickle too
    assert [row["score"] for row in expected] == [1.0]
    second = Reward(device="cuda:7")
    assert installed_context() is second.context
    assert first.rows(items) == expected and installed_context() is first.context
    context_module.reset()
    code = (
        "import pickle, sys\n"
        "from mmverify.core.settings import setting\n"
        "reward = pickle.loads(sys.stdin.buffer.read())\n"
        "print(setting('MMVERIFY_DEVICE'), setting('MMVERIFY_MODELS'), reward.rows(reward._items)[0]['score'])\n"
    )
    first._items = items  # type: ignore[attr-defined]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MMVERIFY_")}
    done = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(first), capture_output=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().split() == ["cpu", "beat_tracker=librosa-beats", "1.0"]


def test_serve_hands_its_decoding_processes_to_the_reward(monkeypatch):
    from mmverify.core.decoding import DecodePool
    from mmverify.pipelines import server as server_module

    built = []
    monkeypatch.setattr(server_module, "run", lambda config: built.append(server_module.build_reward(config)))
    result = CliRunner().invoke(app, ["serve", "--port", "0", "--tasks", "a_sound_cot", "--decode-processes", "3"])
    assert result.exit_code == 0, result.output
    [reward] = built
    assert reward.decode_processes == 3 and isinstance(reward._decoder, DecodePool) and reward._decoder.processes == 3
    reward.close()
