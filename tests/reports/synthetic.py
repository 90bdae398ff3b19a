"""A small synthetic score run for report tests: two models, judge evidence, edit boxes, audio
evidence, a speech transcript, error rows and a reason that tries to break out of the page."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
from PIL import Image

from mmverify.core.types import Check
from mmverify.pipelines.results import dumps_row, make_row
from mmverify.pipelines.summary import summarize
from mmverify.verifiers.audio.intensity import check_intensity

RATE = 22050
PAYLOAD = "</script><img src=x onerror=\"document.body.setAttribute('data-pwned','1')\">"


def fade_in(seconds: float = 6.0) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    return (0.6 * np.clip(t / 4.0, 0.0, 1.0) * np.sin(2 * np.pi * 330 * t)).astype(np.float32)


def sound_silence_sound() -> np.ndarray:
    t = np.arange(RATE) / RATE
    tone = (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    return np.concatenate([tone, np.zeros(2 * RATE, np.float32), tone])


def _image(path: Path, width: int, height: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([x * 255 // max(width - 1, 1), y * 255 // max(height - 1, 1), np.full_like(x, 128)], axis=-1)
    noisy = np.clip(base + rng.integers(-20, 21, base.shape), 0, 255).astype(np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(noisy).save(path)


def _judge(step: str, reply: str, verdict: Any) -> dict[str, Any]:
    return {"step": step, "template": "existence@1", "role": "default", "judge": "fake-vlm",
            "prompt": f"Is there {step} in the image? Answer Yes or No.", "reply": reply, "verdict": verdict}  # fmt: skip


def _specs(root: Path) -> list[dict[str, Any]]:
    """(manifest line, scoring outcome) for each generation."""
    intensity = check_intensity(fade_in(), RATE, "start", "fade in")
    specs = [
        {"task": "i_object_include", "instance": {"instruction": "Generate a beach with one umbrella.", "object": ["beach", "umbrella"]},
         "parts": [{"type": "image", "path": "gen/beach.png"}],
         "check": Check(score=0.5, components={"scene": 1.0, "objects": 0.5},
                        evidence={"judge": [_judge("scene", "Step 1 ... Yes", True), _judge("umbrella", f"I see {PAYLOAD} No", False)]},
                        reason=None)},
        {"task": "i_object_include", "instance": {"instruction": "Generate a red ball.", "object": ["red ball"]},
         "parts": [{"type": "text", "text": "no image"}], "check": Check(score=0.0, reason=PAYLOAD, evidence={"message": PAYLOAD})},
        {"task": "i_edit_object_add", "instance_id": "i_edit_object_add/0", "parts": [{"type": "image", "path": "gen/edited.png"}],
         "check": Check(score=0.81, components={"ssim_outside": 0.9, "present": 0.9},
                        evidence={"bbox": [100, 80, 300, 240], "widened_box": [68, 48, 332, 272], "compared_size": [640, 480],
                                  "generated_size": [320, 240], "judge": [_judge("object_0", "Yes", True)]})},
        {"task": "a_music_intensity", "instance": {"instruction": "Fade in.", "intensity": ["start", "fade in"]},
         "parts": [{"type": "audio", "path": "gen/fade.wav"}], "check": intensity, "passed": intensity.passed},
        {"task": "a_sound_silence", "instance": {"instruction": "Bell, silence, bell.", "start": "bell", "end": "bell"},
         "parts": [{"type": "audio", "path": "gen/sss.wav"}],
         "check": Check(score=1.0, components={"sim_start": 0.8, "sim_end": 0.75},
                        evidence={"segments_s": {"start": [0.0, 1.0], "end": [3.0, 4.0]}, "clip_s": 4.0})},
        {"task": "a_music_tempo", "instance": {"instruction": "120 BPM.", "tempo": 120},
         "parts": [{"type": "audio", "path": "gen/sss.wav"}],
         "check": Check(score=0.0, passed=False, components={"bpm": 90.0, "bpm_error": 30.0},
                        evidence={"target_bpm": 120, "beats": 3, "estimator": "count", "beat_times": [0.1, 0.6, 3.1]})},
        {"task": "a_speech_retrieve", "instance": {"instruction": "Repeat it.", "text": "the cat sat on the mat"},
         "parts": [{"type": "audio", "path": "gen/sss.wav"}],
         "check": Check(score=0.5, components={"word_accuracy": 0.5}, evidence={"transcript": "The cat sit on mat now."})},
        {"task": "i_object_include", "instance": {"instruction": "Generate a dog.", "object": ["dog"]},
         "parts": [{"type": "image", "path": "gen/beach.png"}], "error": ("judge_failed", "endpoint returned 500 <b>")},
        {"task": "a_speech_retrieve", "instance": {"instruction": "Repeat.", "text": "hello"},
         "parts": [{"type": "audio", "path": "gen/missing.wav"}], "error": ("missing_media", "audio file not found: gen/missing.wav")},
    ]  # fmt: skip
    return specs


def write_synthetic_run(root: Path, models: tuple[str, ...] = ("model-a", "model-b")) -> Path:
    """Write media, an instruction set, a manifest and a scored run under ``root``; returns the run folder."""
    _image(root / "gen" / "beach.png", 300, 200, 1)
    _image(root / "gen" / "edited.png", 320, 240, 2)
    _image(root / "instructions" / "image" / "i_edit_object_add_0.png", 640, 480, 3)
    sf.write(root / "gen" / "fade.wav", fade_in(), RATE)
    sf.write(root / "gen" / "sss.wav", sound_silence_sound(), RATE)
    instruction = {"instruction": "Add a puppy on the suitcase.", "image_list": [0], "bbox": [100, 80, 300, 240], "object": ["a puppy"]}
    (root / "instructions" / "i_edit_object_add.jsonl").write_text(json.dumps(instruction) + "\n", encoding="utf-8")

    lines, rows = [], []
    for model_index, model in enumerate(models):
        for spec in _specs(root):
            number = len(lines) + 1
            instance_id = spec.get("instance_id", f"{spec['task']}/line-{number}")
            line = {"task": spec["task"], "instance_id": instance_id, "model": model, "parts": spec["parts"]}
            if "instance" in spec:
                line["instance"] = spec["instance"]
            lines.append(line)
            check = spec.get("check")
            if check is not None and model_index == 1:  # the second model scores a little higher
                check = Check(score=min(1.0, check.score + 0.25), passed=check.passed, components=check.components, evidence=check.evidence, reason=check.reason)
            error = spec.get("error", (None, None))
            rows.append(make_row(task=spec["task"], instance_id=instance_id, sample=0, model=model, key=f"k{number}", line=number,
                                 verifier=f"{spec['task']}@1:mmmg", check=check, passed=spec.get("passed", check.passed if check else None),
                                 error_code=error[0], error_message=error[1]))  # fmt: skip
    manifest = root / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    run = root / "run"
    run.mkdir(parents=True, exist_ok=True)
    (run / "results.jsonl").write_text("".join(dumps_row(r) + "\n" for r in rows), encoding="utf-8")
    (run / "results.latest.jsonl").write_text("".join(dumps_row(r) + "\n" for r in rows), encoding="utf-8")
    config = {"manifest": str(manifest), "instructions": str(root / "instructions"), "profile": "mmmg", "data_root": None}
    summary = summarize(rows, config=config)
    (run / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return run
