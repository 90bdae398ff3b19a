"""Speech test media: real synthetic speech from espeak-ng, and simple signals."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from mmverify.core.media import load_audio
from mmverify.testing.speech_models import save_audio_checkpoint as save_audio_model  # noqa: F401  (used by the model tests)

SR = 16_000
ESPEAK = shutil.which("espeak-ng")
requires_espeak = pytest.mark.skipif(ESPEAK is None, reason="espeak-ng is not installed (apt-get install espeak-ng)")

SENTENCES = (
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "Please call Stella and ask her to bring these things from the store.",
)
# Two male variants and a female one: distinct but not trivially different voices.
VOICES = ("en-us+m3", "en-us+f3", "en+m7")


def speak(text: str, voice: str, folder: Path, pitch: int | None = None, speed: int | None = None) -> np.ndarray:
    """espeak-ng speech as mono float32 at 16 kHz."""
    assert ESPEAK is not None
    folder.mkdir(parents=True, exist_ok=True)
    tag = hashlib.sha1(repr((text, voice, pitch, speed)).encode()).hexdigest()[:12]
    out = folder / f"{tag}.wav"
    command = [ESPEAK, "-v", voice, "-w", str(out)]
    if pitch is not None:
        command += ["-p", str(pitch)]
    if speed is not None:
        command += ["-s", str(speed)]
    subprocess.run([*command, text], check=True, capture_output=True, timeout=60)
    return load_audio(out, SR)[0]


def noise(seconds: float, seed: int, amplitude: float = 0.1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (amplitude * rng.standard_normal(int(seconds * SR))).astype(np.float32)


def chirp(seconds: float, f0: float, f1: float, seed: int = 0) -> np.ndarray:
    """A frequency sweep plus a little noise: voiced-like, and different over time."""
    t = np.arange(int(seconds * SR)) / SR
    phase = 2 * np.pi * (f0 * t + (f1 - f0) * t**2 / (2 * max(seconds, 1e-9)))
    return (0.4 * np.sin(phase) + noise(seconds, seed, 0.02)[: t.size]).astype(np.float32)
