"""One scoring context, built the same way by score, serve and the Reward API."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from mmverify.cli import app
from mmverify.models import hub
from mmverify.pipelines.context import JudgeOptions, ScoringContext
from mmverify.pipelines.plan import model_configuration
from mmverify.pipelines.reward import Reward


def test_the_context_names_its_variables_and_validates_before_changing_anything():
    context = ScoringContext(
        models=["audio_text=clap-hf@/ckpt/clap"], references="esc50=/data/esc50", device="cuda:1", precision="bf16",
        offline=True, judge=JudgeOptions(base_url="http://127.0.0.1:9/v1", model="judge-7b", roles=("ocr=reader",)),
    )  # fmt: skip
    variables = context.environment()
    assert variables["MMVERIFY_MODELS"] == "audio_text=clap-hf@/ckpt/clap"
    assert variables["MMVERIFY_REFERENCES"] == "esc50=/data/esc50"
    assert variables["MMVERIFY_DEVICE"] == "cuda:1" and variables["MMVERIFY_PRECISION"] == "bf16"
    assert variables["HF_HUB_OFFLINE"] == "1" and variables["MMVERIFY_VLM_MODEL"] == "judge-7b"
    assert any(name.startswith("MMVERIFY_VLM_") and value == "reader" for name, value in variables.items())
    for bad, message in (
        ({"models": "audio_text=no-such-backend"}, "models:"), ({"references": "nowhere"}, "references:"),
        ({"precision": "fp8"}, "precision"), ({"judge": JudgeOptions(roles=("not a role spec",))}, "ROLE=MODEL"),
    ):  # fmt: skip
        with pytest.raises(ValueError, match=message):
            ScoringContext(**bad)


def test_applying_changes_the_key_and_rebuilds_the_hub(monkeypatch):
    monkeypatch.delenv("MMVERIFY_DEVICE", raising=False)
    before = model_configuration()
    old_hub = hub.get_hub()
    assert ScoringContext(device="cpu").apply() is True
    assert model_configuration() != before and os.environ["MMVERIFY_DEVICE"] == "cpu"
    assert hub.get_hub() is not old_hub  # rebuilt with the new settings
    same = hub.get_hub()
    assert ScoringContext(device="cpu").apply() is False and hub.get_hub() is same  # nothing changed: kept


def test_reward_and_serve_take_the_same_options(monkeypatch):
    monkeypatch.delenv("MMVERIFY_REFERENCES", raising=False)
    Reward("i_format_background", references=["esc50=/data/esc50"], judge=JudgeOptions(model="judge-7b"))
    assert os.environ["MMVERIFY_REFERENCES"] == "esc50=/data/esc50" and os.environ["MMVERIFY_VLM_MODEL"] == "judge-7b"
    with pytest.raises(ValueError, match="models:"):
        Reward("i_format_background", models="audio_text=no-such-backend")
    help_text = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "200"}).output
    for option in ("--references", "--vlm-base-url", "--vlm-model", "--vlm-role", "--model", "--precision"):
        assert option in help_text
    refused = CliRunner().invoke(app, ["serve", "--model", "audio_text=no-such-backend", "--port", "0"])
    assert refused.exit_code == 2 and "no-such-backend" in refused.output
