"""Music tasks on real MMMG instances with synthetic clips whose answer is known."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
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
    assert right["evidence"]["estimator"] == "intervals" and abs(right["components"]["bpm"] - 120.0) < 2
    assert wrong["score"] == 0.0 and abs(wrong["components"]["bpm"] - 100.0) < 2
    assert right["verifier"] == "a_music_tempo@2:mmmg"


class EdgeDroppingTracker:
    """Beats every ``period`` seconds from the first click, without the first and last one: what a
    tracker that drops edge beats returns.  Declares the published (count) estimator, like beat_this."""

    name = "beat-this"
    bpm_estimator = "count"

    def __init__(self, period: float) -> None:
        self.period = period

    def ensure_loaded(self) -> None:
        pass

    def beats(self, audio: np.ndarray, sample_rate: int) -> np.ndarray:
        return np.arange(0.0, len(audio) / sample_rate, self.period)[1:-1]


def test_tempo_estimator_per_profile(tmp_path, mmmg_instructions, monkeypatch):
    """mmmg applies the tracker's declared estimator (beat_this: the published count formula, which
    under-counts when edge beats are missed); strict always fits the beat period."""
    import librosa

    from mmverify.models import hub
    from tests.conftest import click_track
    from tests.reference import mmmg_audio as ref

    monkeypatch.setenv("MMVERIFY_CACHE_DIR", str(tmp_path / "cache"))
    rows = _instances(mmmg_instructions, "a_music_attribute")
    index = next(i for i, row in enumerate(rows) if row.get("tempo") == 120)
    audio, _ = click_track(120.0, 10.0, SR)
    sf.write(tmp_path / "clicks.wav", audio, SR)
    item = {"task": "a_music_tempo", "instance_id": f"a_music_attribute/{index}", "parts": [{"type": "audio", "path": "clicks.wav"}]}
    trimmed = len(librosa.effects.trim(audio, top_db=60)[0])
    beats = np.arange(0.0, trimmed / SR, 0.5)[1:-1]
    results = {}
    for profile in ("mmmg", "strict"):
        monkeypatch.setattr(hub, "_HUB", None)
        hub.get_hub()._instances["beat_tracker"] = EdgeDroppingTracker(0.5)
        [results[profile]] = score_items([item], base_dir=tmp_path, instructions=mmmg_instructions, profile=profile)
    published = ref.tempo_bpm(len(beats), trimmed)
    assert abs(published - 120.0) > 5  # two missed beats in 10 s: the published formula fails the test
    assert results["mmmg"]["evidence"]["estimator"] == "count" and results["mmmg"]["score"] == 0.0
    assert results["mmmg"]["components"]["bpm"] == pytest.approx(published)
    assert results["strict"]["evidence"]["estimator"] == "intervals" and results["strict"]["score"] == 1.0
    assert results["strict"]["components"]["bpm"] == pytest.approx(120.0)


def test_a_pure_tone_fade_passes_under_mmmg_only(tmp_path, mmmg_instructions):
    """A steady fade-in of a pure tone gives the published fit two points (stderr 0): accepted by
    mmmg, refused by strict."""
    rows = _instances(mmmg_instructions, "a_music_intensity")
    index = next(i for i, row in enumerate(rows) if row["intensity"] == ["start", "fade in"])
    t = np.arange(3 * SR) / SR
    sf.write(tmp_path / "fade.wav", (0.5 * np.sin(2 * np.pi * 440 * t) * np.clip(0.05 + t / 1.5, 0.05, 1.0)).astype(np.float32), SR)
    item = {"task": "a_music_intensity", "instance_id": f"a_music_intensity/{index}", "parts": [{"type": "audio", "path": "fade.wav"}]}
    [published] = score_items([item], base_dir=tmp_path, instructions=mmmg_instructions)
    [strict] = score_items([item], base_dir=tmp_path, instructions=mmmg_instructions, profile="strict")
    assert (published["score"], published["evidence"]["peaks"], published["components"]["stderr"]) == (1.0, 2, 0.0)
    assert (strict["score"], strict["evidence"]["note"]) == (0.0, "too_few_peaks")
    assert published["verifier"] == "a_music_intensity@2:mmmg" and strict["verifier"] == "a_music_intensity@2:strict"


def test_music_task_parameters():
    from mmverify.tasks.music import MusicIntensity, MusicTempo

    assert MusicTempo.build("mmmg").estimator == "auto" and MusicTempo.build("strict").estimator == "intervals"
    assert MusicIntensity.build("mmmg").intensity_params.min_points == 2
    assert MusicIntensity.build("strict").intensity_params.min_points == 3
    for bad in ({"estimator": "median"}, {"tolerance": 0}):
        with pytest.raises(ValueError):
            MusicTempo(**bad)


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
