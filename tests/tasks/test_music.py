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
