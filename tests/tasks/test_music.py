"""Music tasks on real MMMG instances with synthetic clips whose answer is known."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import soundfile as sf

from mmverify.api import score_items
from tests.verifiers.audio.test_intensity_tempo import SR, music


def _instances(mmmg_instructions: Path, source: str) -> list[dict]:
    return [json.loads(line) for line in (mmmg_instructions / f"{source}.jsonl").read_text().splitlines()]


def _fade(position: str, trend: str) -> np.ndarray:
    if trend == "fade in":
        gain = (lambda t: np.clip(t / 4.0, 0.02, 1.0)) if position == "start" else (lambda t: np.clip((t - 6.0) / 4.0, 0.02, 1.0))
    else:
        gain = (lambda t: np.clip((4.0 - t) / 4.0, 0.02, 1.0)) if position == "start" else (lambda t: np.clip((10.0 - t) / 4.0, 0.02, 1.0))
    return music(10, gain)


def test_intensity_instances_score_one_for_the_asked_fade_and_zero_for_the_opposite(tmp_path, mmmg_instructions):
    items, expected = [], []
    for index, row in enumerate(_instances(mmmg_instructions, "a_music_intensity")):
        position, trend = row["intensity"]
        opposite = "fade out" if trend == "fade in" else "fade in"
        for name, clip_trend, score in (("right", trend, 1.0), ("wrong", opposite, 0.0)):
            path = tmp_path / f"{index}_{name}.wav"
            sf.write(path, _fade(position, clip_trend), SR)
            items.append({"task": "a_music_intensity", "instance_id": f"a_music_intensity/{index}", "parts": [{"type": "audio", "path": path.name}]})
            expected.append(score)
    rows = score_items(items, base_dir=tmp_path, instructions=mmmg_instructions)
    assert [r["score"] for r in rows] == expected, [r["evidence"] for r in rows]
    assert all(r["passed"] == (r["score"] == 1.0) for r in rows)


def test_intensity_without_audio_scores_zero(tmp_path, mmmg_instructions):
    [row] = score_items(
        [{"task": "a_music_intensity", "instance_id": "a_music_intensity/0", "parts": [{"type": "text", "text": "no audio"}]}],
        base_dir=tmp_path, instructions=mmmg_instructions,
    )  # fmt: skip
    assert row["score"] == 0.0 and row["reason"] == "no_audio" and row["passed"] is False


def test_tempo_with_the_offline_beat_tracker(tmp_path, mmmg_instructions, monkeypatch):
    from mmverify.models import hub
    from tests.conftest import click_track

    monkeypatch.setenv(hub.ENV_VAR, "beat_tracker=librosa-beats")
    monkeypatch.setenv("MMVERIFY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(hub, "_HUB", None)
    rows = _instances(mmmg_instructions, "a_music_attribute")
    index = next(i for i, row in enumerate(rows) if row.get("tempo") == 120)
    items = []
    for name, bpm in (("right", 120.0), ("wrong", 100.0)):
        audio, _ = click_track(bpm, 20.0, SR)
        sf.write(tmp_path / f"{name}.wav", audio, SR)
        items.append({"task": "a_music_tempo", "instance_id": f"a_music_attribute/{index}", "parts": [{"type": "audio", "path": f"{name}.wav"}]})
    right, wrong = score_items(items, base_dir=tmp_path, instructions=mmmg_instructions)
    assert right["score"] == 1.0 and right["evidence"]["tracker"] == "librosa-beats", right
    assert wrong["score"] == 0.0 and abs(wrong["components"]["bpm"] - 100.0) < 5


def test_tempo_without_a_tracker_is_a_model_unavailable_error(tmp_path, mmmg_instructions, monkeypatch):
    from mmverify.models import hub
    from tests.conftest import click_track

    monkeypatch.setenv(hub.ENV_VAR, "beat_tracker=beat-this@/nonexistent/final0.ckpt")
    monkeypatch.setenv("MMVERIFY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(hub, "_HUB", None)
    audio, _ = click_track(120.0, 5.0, SR)
    sf.write(tmp_path / "a.wav", audio, SR)
    [row] = score_items([{"task": "a_music_tempo", "instance_id": "a_music_attribute/10", "parts": [{"type": "audio", "path": "a.wav"}]}], base_dir=tmp_path, instructions=mmmg_instructions)
    assert row["status"] == "error" and row["error"]["code"] == "model_unavailable"
