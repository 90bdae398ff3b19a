"""Shared by the speech and conversation task tests: scripted stand-ins for models whose output a
test must know exactly, the tiny random-init checkpoints for end-to-end runs, and an instruction
folder made of the published rows plus generated reference speakers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pytest
import soundfile as sf

from mmverify.core.types import Instance
from mmverify.models import hub
from mmverify.tasks.base import Task
from mmverify.tasks.response import ResolvedPart, Response

SPEECH_TASKS = (
    "a_speech_attribute", "a_speech_chinese", "a_speech_imitate", "a_speech_constraint",
    "a_speech_modify", "a_speech_translate", "a_speech_retrieve", "a_consistency_conversation",
)  # fmt: skip
SR = 22050


class _Fake:
    sample_rate = 16_000
    name = "scripted"

    def ensure_loaded(self) -> None:
        pass


class ScriptedTranscriber(_Fake):
    """Returns the given transcripts in order, one per clip, and records the languages, duration
    limits and clip lengths (samples) asked for."""

    def __init__(self, replies: Sequence[str]) -> None:
        self.replies = list(replies)
        self.languages: list[str | None] = []
        self.max_seconds: list[float | None] = []
        self.lengths: list[list[int]] = []

    def transcribe(self, clips: Sequence[np.ndarray], language: str | None = None, max_seconds: float | None = None) -> list[str]:
        assert all(clip.ndim == 1 for clip in clips)
        self.languages.append(language)
        self.max_seconds.append(max_seconds)
        self.lengths.append([clip.size for clip in clips])
        out, self.replies = self.replies[: len(clips)], self.replies[len(clips) :]
        assert len(out) == len(clips), "the test scripted fewer transcripts than clips"
        return out


class ScriptedGender(_Fake):
    """Returns the given probability dicts in order, one per clip."""

    def __init__(self, replies: Sequence[Mapping[str, float]]) -> None:
        self.replies = [dict(r) for r in replies]

    def classify(self, clips: Sequence[np.ndarray]) -> list[dict[str, float]]:
        out, self.replies = self.replies[: len(clips)], self.replies[len(clips) :]
        assert len(out) == len(clips), "the test scripted fewer gender answers than clips"
        return out


def use_models(monkeypatch: pytest.MonkeyPatch, cache: Path, spec: str, **fakes: Any) -> hub.ModelHub:
    """A fresh process hub configured with ``spec``; ``fakes`` replace whole capabilities."""
    monkeypatch.setenv(hub.ENV_VAR, spec)
    monkeypatch.setenv("MMVERIFY_CACHE_DIR", str(cache))
    monkeypatch.setattr(hub, "_HUB", None)
    model_hub = hub.get_hub()
    model_hub._instances.update(fakes)
    return model_hub


# Every capability points somewhere that does not exist unless a test says otherwise: a task that
# asks for a model the test did not provide fails with model_unavailable instead of using another.
NO_MODELS = (
    "transcriber=whisper-hf@/nonexistent/whisper,transcriber_zh=whisper-hf-zh@/nonexistent/whisper,"
    "gender=gender-w2v2@/nonexistent/gender,speaker=wavlm-sv@/nonexistent/wavlm"
)


def rows(instructions: Path, task: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (instructions / f"{task}.jsonl").read_text(encoding="utf-8").splitlines()]


def write_wav(path: Path, audio: np.ndarray, rate: int = SR) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(path, audio, rate)
    return path


def tone(path: Path, seconds: float = 0.5, hz: float = 220.0) -> Path:
    """Any audio: for tests whose transcript is scripted and whose clip is never analysed."""
    t = np.arange(int(seconds * SR)) / SR
    return write_wav(path, (0.3 * np.sin(2 * np.pi * hz * t)).astype(np.float32))


def item(task: str, instance_id: str, *paths: Path, base: Path) -> dict[str, Any]:
    return {"task": task, "instance_id": instance_id, "parts": [{"type": "audio", "path": str(p.relative_to(base))} for p in paths]}


def score_direct(task: Task, data: Mapping[str, Any], paths: Sequence[Path], source: str, media_dir: Path | None = None):  # type: ignore[no-untyped-def]
    """Score with a task object built with non-default parameters (the pipeline builds defaults)."""
    instance = Instance(id=f"{source}/direct", data=data, source=source, media_dir=media_dir)
    parts = [ResolvedPart("audio", media=path, label=path.name) for path in paths]
    return task.score(instance, Response(parts))


_BUILT: dict[str, Path] = {}


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory) -> str:
    """MMVERIFY_MODELS for tiny random-init Whisper (both languages) and gender checkpoints, and
    resemblyzer's real bundled speaker encoder; built once per session."""
    pytest.importorskip("transformers")
    if "root" not in _BUILT:
        from tests.models.test_gender import build_tiny_gender
        from tests.models.test_whisper import build_tiny_hf_whisper

        root = tmp_path_factory.mktemp("tiny-speech-models")
        build_tiny_hf_whisper(root / "whisper", max_length=48)  # short gibberish keeps end-to-end runs quick
        build_tiny_gender(root / "gender")
        _BUILT["root"] = root
    pytest.importorskip("resemblyzer")
    root = _BUILT["root"]
    return (
        f"transcriber=whisper-hf@{root / 'whisper'},transcriber_zh=whisper-hf-zh@{root / 'whisper'},"
        f"gender=gender-w2v2@{root / 'gender'},speaker=resemblyzer"
    )


@pytest.fixture(scope="session")
def speech_instructions(tmp_path_factory, mmmg_instructions: Path) -> Path:
    """The published speech instruction files, plus the reference speaker a_speech_imitate/0 names
    (the official audio files are not redistributed): an espeak-ng voice saying another sentence."""
    from tests.conftest import espeak

    root = tmp_path_factory.mktemp("speech-instructions")
    for task in SPEECH_TASKS:
        shutil.copy(mmmg_instructions / f"{task}.jsonl", root / f"{task}.jsonl")
    (root / "audio").mkdir()
    espeak("Every morning the baker opens the shop before sunrise.", root / "audio" / "a_speech_imitate_0.wav", voice="en+m7")
    return root
