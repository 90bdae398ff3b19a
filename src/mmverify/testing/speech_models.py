"""Random-init WavLM x-vector and wav2vec2 gender checkpoints (narrow, or at the real models'
sizes), and seeded voiced clips, for tests and benchmarks of the speaker and gender backends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

SPEECH_RATE = 16_000
# two narrow transformer layers over a narrow seven-layer conv encoder (its strides are the real ones)
NARROW = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 128, "conv_dim": (64,) * 7}


def save_audio_checkpoint(model: Any, folder: Path, sample_rate: int = SPEECH_RATE) -> Path:
    """``model`` saved with the feature extractor its backend loads beside it."""
    from transformers import Wav2Vec2FeatureExtractor

    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    Wav2Vec2FeatureExtractor(
        feature_size=1, sampling_rate=sample_rate, padding_value=0.0, do_normalize=True, return_attention_mask=True
    ).save_pretrained(folder)
    return folder


def build_wavlm_xvector(folder: Path, full: bool = False) -> Path:
    """wavlm-base-sv's sizes (transformers' WavLMConfig defaults, group-norm feature encoder) when
    ``full``; else a narrow two-layer one."""
    import torch
    from transformers import WavLMConfig, WavLMForXVector

    small = {} if full else {**NARROW, "tdnn_dim": (64, 64, 64, 64, 256)}
    torch.manual_seed(0)
    return save_audio_checkpoint(WavLMForXVector(WavLMConfig(**small)).eval(), folder)


def build_wav2vec2_gender(folder: Path, full: bool = False) -> Path:
    """The large wav2vec2 (XLSR-53) classifier's sizes when ``full``; else a narrow two-layer one."""
    import torch
    from transformers import Wav2Vec2Config, Wav2Vec2ForSequenceClassification

    large = {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 4096}
    config = Wav2Vec2Config(
        **(large if full else NARROW), feat_extract_norm="layer", do_stable_layer_norm=True, conv_bias=True, num_labels=2,
        id2label={0: "female", 1: "male"}, label2id={"female": 0, "male": 1},
    )  # fmt: skip
    torch.manual_seed(0)
    return save_audio_checkpoint(Wav2Vec2ForSequenceClassification(config).eval(), folder)


def voiced_clips(count: int, seconds: float, seed: int = 11) -> list[np.ndarray]:
    """Seeded 16 kHz voice-like clips: five harmonics of a random pitch, amplitude-modulated, in noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * SPEECH_RATE)) / SPEECH_RATE
    clips = []
    for _ in range(count):
        f0 = rng.uniform(90, 260)
        voiced = sum(np.sin(2 * np.pi * f0 * k * t) / k for k in range(1, 6)) * (0.5 + 0.5 * np.sin(2 * np.pi * rng.uniform(2, 5) * t))
        clips.append((0.2 * voiced + 0.01 * rng.standard_normal(t.size)).astype(np.float32))
    return clips
