"""Silero VAD with its real bundled weights on espeak-ng speech."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from mmverify.core.media import load_audio
from mmverify.models.base import ModelUnavailable
from mmverify.models.protocols import VoiceActivity

if importlib.util.find_spec("silero_vad") is None:  # not imported here: importing it sets torch's threads to 1
    pytest.skip("silero-vad is not installed", allow_module_level=True)

from mmverify.models.vad import SileroVAD, bundled_model_path  # noqa: E402

SR = 16000


@pytest.fixture(scope="module")
def vad() -> SileroVAD:
    backend = SileroVAD(device="cpu")
    backend.ensure_loaded()
    return backend


def speak(tmp_path: Path, text: str, name: str) -> np.ndarray:
    """espeak-ng speech at 16 kHz, cut to where the waveform is audible."""
    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng is not installed (apt-get install espeak-ng)")
    path = tmp_path / f"{name}.wav"
    subprocess.run(["espeak-ng", "-v", "en-us", "-w", str(path), text], check=True, capture_output=True)
    audio, _ = load_audio(path, sample_rate=SR)
    audible = np.flatnonzero(np.abs(audio) > 0.01)
    return audio[audible[0] : audible[-1] + 1]


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * SR), np.float32)


def test_bundled_weights_and_metadata(vad: SileroVAD) -> None:
    assert isinstance(vad, VoiceActivity)
    path = bundled_model_path()
    assert vad.local_path() == path and path.name == "silero_vad.jit" and path.is_file()
    available = vad.availability()
    assert available.ok and available.location == str(path)
    assert vad.fetch() == path
    assert vad.fingerprint.startswith("silero-vad:")
    assert SileroVAD(min_silence_ms=100).fingerprint != vad.fingerprint


def test_loading_keeps_torch_threads(monkeypatch) -> None:
    import torch

    before = torch.get_num_threads()
    backend = SileroVAD(device="cpu")
    backend.ensure_loaded()
    assert torch.get_num_threads() == before
    changes: list[int] = []
    monkeypatch.setattr(torch, "set_num_threads", changes.append)
    backend.speech_segments(np.random.default_rng(0).normal(0.0, 0.1, SR).astype(np.float32), SR)
    assert changes == []  # process-wide: another thread's computation would change bits meanwhile


def test_one_utterance(vad: SileroVAD, tmp_path: Path) -> None:
    speech = speak(tmp_path, "The quick brown fox jumps over the lazy dog.", "one")
    audio = np.concatenate([silence(2.0), speech, silence(2.0)])
    segments = vad.speech_segments(audio, SR)
    assert len(segments) == 1
    start, end = segments[0]
    assert abs(start - 2.0) <= 0.3 and abs(end - (2.0 + speech.size / SR)) <= 0.3
    assert vad.speech_segments(audio, SR) == segments
    # same answer from a 48 kHz copy (resampled internally)
    from mmverify.core.media import resample

    at_48k = vad.speech_segments(resample(audio, SR, 48000), 48000)
    assert len(at_48k) == 1 and abs(at_48k[0][0] - start) < 0.05 and abs(at_48k[0][1] - end) < 0.05


def test_two_utterances(vad: SileroVAD, tmp_path: Path) -> None:
    first = speak(tmp_path, "Good morning, everyone.", "first")
    second = speak(tmp_path, "See you tomorrow.", "second")
    audio = np.concatenate([silence(1.0), first, silence(3.0), second, silence(1.0)])
    segments = vad.speech_segments(audio, SR)
    assert len(segments) == 2
    gap_start, gap_end = 1.0 + first.size / SR, 4.0 + first.size / SR
    assert segments[0][1] <= gap_start + 0.3 and segments[1][0] >= gap_end - 0.3
    assert segments[0][0] < segments[0][1] < segments[1][0] < segments[1][1]


def test_no_speech(vad: SileroVAD) -> None:
    assert vad.speech_segments(silence(3.0), SR) == []
    noise = np.random.default_rng(0).normal(0.0, 0.005, 3 * SR).astype(np.float32)
    assert vad.speech_segments(noise, SR) == []
    assert vad.speech_segments(np.zeros(0, np.float32), SR) == []
    with pytest.raises(ValueError):
        vad.speech_segments(np.full(100, np.nan, np.float32), SR)


def test_bad_sources_and_parameters(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        SileroVAD(threshold=1.5)
    with pytest.raises(ValueError):
        SileroVAD(threshold=0.5, neg_threshold=0.7)
    missing = SileroVAD(source=str(tmp_path / "nope.jit"))
    assert not missing.availability().ok
    junk = tmp_path / "junk.jit"
    junk.write_bytes(b"not a model")
    with pytest.raises(ModelUnavailable, match="not a loadable"):
        SileroVAD(source=str(junk)).ensure_loaded()
