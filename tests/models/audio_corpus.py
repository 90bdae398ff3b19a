"""Clips that stress an audio front-end, shared by the CLAP and Whisper feature parity tests."""

from __future__ import annotations

import numpy as np


def sine(seconds: float, freq: float, rate: int, amplitude: float = 1.0) -> np.ndarray:
    t = np.arange(round(seconds * rate)) / rate
    return (amplitude * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def short_clips(rng: np.random.Generator, rate: int, frame: int) -> dict[str, np.ndarray]:
    """Empty, one sample, one sample under a frame, short noise, a full-scale tone, silence, quiet
    noise, tone plus noise (drawn from ``rng`` in this order)."""
    return {
        "empty": np.zeros(0, dtype=np.float32),
        "one sample": np.array([0.7], dtype=np.float32),
        f"{frame - 1} samples": rng.uniform(-1, 1, frame - 1).astype(np.float32),
        "0.3 s noise": (0.3 * rng.standard_normal(int(0.3 * rate))).astype(np.float32),
        "2.5 s full-scale tone": sine(2.5, 997.0, rate),
        "3 s silence": np.zeros(3 * rate, dtype=np.float32),
        "4 s quiet noise": (1e-6 * rng.standard_normal(4 * rate)).astype(np.float32),
        "6 s tone + noise": sine(6, 220.0, rate, 0.4) + (0.01 * rng.standard_normal(6 * rate)).astype(np.float32),
    }
